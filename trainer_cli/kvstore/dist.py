"""The distributed stores over MPI (mpi4py, imported lazily through :mod:`.mpi`): ``dist_sync``,
``dist_device_sync`` (also spelled ``dist_sync_device``), ``dist_async``, ``dist_device_async``.

Every rank of ``mpiexec -n N`` is one worker; ``rank`` and ``num_workers`` come from
``COMM_WORLD``. ``device`` in the name only says where a worker merges its own devices (on device
0 of the key, as :class:`KVStoreLocal` does); both spellings behave the same.

Sync (:class:`KVStoreDistSync`): no server. Every worker keeps a full copy of each key's value.
    ``init`` takes rank 0's value (MPI broadcast). ``push`` merges the worker's devices
    (uncompressed, as MXNet's dist workers do), then sums over the workers with MPI Allreduce, in
    1 MiB pieces (~0.7x the time of one big Allreduce here: the pieces stay in cache). With an
    optimizer set, every worker runs the same updater on the same sum and the same stored weight;
    the update is deterministic, so the copies stay bitwise equal (the tests check it) and
    ``pull`` is a local copy. Without one the stored value becomes the sum.
    With gradient compression each worker quantizes its merged gradient with its own per-key
    residual, the packed words go round with Allgather (1/16 of the float32 bytes for 2bit),
    and every worker decodes all of them and adds them in rank order, so all hold the same sum.
    This works through ``pushpull`` (MXNet 1.9.1 aborts there: "Compression not supported with
    PushPull"). ``init`` is never compressed.

Async (:class:`KVStoreDistAsync`): a parameter-server thread on rank 0 holds the master copy of
    each key and applies each worker's push as it arrives (``updater(key, grad, weight)``, or a
    plain replace without an optimizer); workers pull fresh weights from it. Rank 0 is a worker
    too, and its own requests are served in-process, without messages. A request from another
    rank is a small header (op, key slot, size, compression) plus a payload, sent point-to-point
    on a private communicator: ``pushpull`` is one round trip, ``push`` returns once sent, and
    ``barrier`` first waits until the server has applied this worker's pushes, so that after it
    every worker's earlier pushes are in. The server's optimizer is rank 0's (the Trainer's
    object): its learning rate, schedule and update counts are the ones that apply, and every
    push from any worker counts as an update, as on MXNet's servers. The server sleeps while idle
    (probes back off to 2 ms, 10 ms after an idle second) and stops when every worker has said
    goodbye at exit. Needs ``MPI_THREAD_MULTIPLE`` (mpi4py asks for it by default). On rank 0, do
    not make blocking mpi4py object calls (``comm.allreduce``, ``comm.bcast``, ...) while other
    ranks may still talk to the server: they hold the GIL while they wait, so the server cannot
    answer (the store's own calls and ``barrier`` poll and are safe).

Optimizer states: MXNet refuses to save them for dist stores; here rank 0 writes them (in sync
mode all ranks hold the same states, in async mode rank 0's server holds the only ones) and the
call does nothing on the other ranks. Every rank can load them.

Compression residuals: each worker's live in its own process, but only rank 0 writes
checkpoints, so ``gather_wire_residuals`` brings every worker's to rank 0 (on a communicator of
its own, so that ranks disagreeing about when to save time out naming it instead of pairing it
with a push); on resume each worker hands its own back to ``set_wire_residuals``.

Collective calls (``init``/``broadcast``, sync ``push``/``pushpull``, ``barrier``,
``gather_wire_residuals``, creating the store) must be made by every rank in the same order, as
with MXNet; ``init`` checks that the ranks agree on the key, shape and dtype. Waits time out
(``TRAINER_DIST_TIMEOUT``) and name the ranks; see :mod:`.mpi` for how failures end the job.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time

import numpy

from ..ndarray import NDArray
from ..ndarray import sparse as _sparse
from ..ndarray.interop import is_sparse as _is_sparse, raw as _raw, transfer as _transfer, wrap as _wrap
from . import mpi
from .base import KVStoreBase
from .gather import gather_arrays
from .local import KVStoreLocal, group_key_values, sparse_compression_error

__all__ = ["create_dist", "KVStoreDistSync", "KVStoreDistAsync"]

# Allreduce piece size: a 10M-value float32 Allreduce in 1 MiB pieces ran ~2x faster than in one
# call (2 ranks, shared memory): each piece's reduction stays in cache.
_CHUNK_BYTES = 1 << 20
# MPI reduces these natively; for others (float16, ...) the sum is formed from an Allgather.
_MPI_SUM_DTYPES = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64),
                   numpy.dtype(numpy.int32), numpy.dtype(numpy.int64))


def create_dist(name: str) -> KVStoreBase:
    """The dist store for a lower-cased type name containing ``dist`` (sync unless ``_async``)."""
    if "_async" in name:
        return KVStoreDistAsync(name)
    return KVStoreDistSync(name)


# --------------------------------------------------------------------------------------------
# Helpers shared by both stores


def _host(raw):
    """A C-contiguous numpy array with ``raw``'s values (no copy for a contiguous numpy array)."""
    if isinstance(raw, numpy.ndarray):
        return numpy.ascontiguousarray(raw)
    return raw.get()


def _key_repr(key):
    return repr(key)


def _single_key_arrays(key, value, out):
    """``(arrays, outs)`` for one int/str key with an NDArray or a list of them, else None."""
    if not isinstance(key, (int, str)) or isinstance(key, bool):
        return None
    arrays = [value] if isinstance(value, NDArray) else value
    if out is None:
        outs = arrays
    else:
        outs = [out] if isinstance(out, NDArray) else out
    if not isinstance(arrays, list) or not isinstance(outs, list) or not arrays or not outs:
        return None
    for a in arrays:
        if not isinstance(a, NDArray):
            return None
    for a in outs:
        if not isinstance(a, NDArray):
            return None
    return arrays, outs


def _agree(comm, job, key, value, what):
    """Check (one Allgather of a digest) that every rank is at the same key, shape and dtype."""
    arr = _raw(value)
    desc = json.dumps([key if isinstance(key, str) else int(key), list(arr.shape), arr.dtype.str])
    mine = numpy.frombuffer(hashlib.blake2b(desc.encode(), digest_size=16).digest(), numpy.uint8)
    every = numpy.empty((comm.Get_size(), mine.size), dtype=numpy.uint8)
    mpi.wait(comm.Iallgather(mine, every), "%s of key %s" % (what, _key_repr(key)), job=job)
    differ = [r for r in range(len(every)) if not numpy.array_equal(every[r], every[0])]
    if differ:
        raise mpi.DistributedError(
            "%s: ranks disagree at %s of key %s (here shape %s, %s): %s gave a different key, "
            "shape or dtype than rank 0. Every rank must create the same parameters and init "
            "them in the same order." % (job.describe(), what, _key_repr(key), tuple(arr.shape),
                                         arr.dtype, mpi._ranks(differ)))


def _gc_code(gc):
    """(type code, threshold bits) of a compression setting for the async request header."""
    if gc is None:
        return 0, 0
    return (1 if gc.type == "2bit" else 2), int(numpy.float32(gc.threshold).view(numpy.uint32))


def _gc_from_code(code, bits):
    from .compression import GradientCompression
    thr = float(numpy.array(bits, dtype=numpy.uint32).view(numpy.float32)[()])
    return GradientCompression({"type": "2bit" if code == 1 else "1bit", "threshold": thr})


# --------------------------------------------------------------------------------------------
# What both stores share

_WIRE = re.compile(r"^r(\d+)_w(\d+)$", re.ASCII)


def wire_entries(state: dict) -> dict:
    """The dist entries (``r<key>_w<rank>``) of a compression state as ``{rank: {key: array}}``."""
    out: dict = {}
    for name, value in state.items():
        match = _WIRE.match(name)
        if match is not None:
            out.setdefault(int(match.group(2)), {})[int(match.group(1))] = value
    return out



class _DistStore(KVStoreLocal):
    """A worker of an MPI job: keys, the optimizer and the merge of the worker's own devices are
    :class:`KVStoreLocal`'s; gradient compression applies to what the worker sends to others.

    The local merge stays uncompressed (``_compression`` is never set): compression has one
    residual per key and worker, in ``_wire_residuals``.
    """

    def __init__(self, name):
        super().__init__(name)
        MPI = mpi.load_mpi()
        self._job = mpi.job()
        self._comm = self._job.dup(MPI.COMM_WORLD, "creating kvstore %r" % name)
        self._gc = None
        self._wire_residuals: dict = {}
        self._state_comm = None  # for gather_wire_residuals, made on first use
        self.wire_bytes = 0  # payload bytes this rank handed to MPI for pushes (benchmarks read it)

    @property
    def rank(self) -> int:
        return self._job.rank

    @property
    def num_workers(self) -> int:
        return self._job.size

    def barrier(self):
        mpi.wait(self._comm.Ibarrier(), "barrier of kvstore %r" % self._type, job=self._job)

    def set_gradient_compression(self, compression_params):
        """Compress what each worker sends (``{'type': '2bit', 'threshold': 0.5}``)."""
        from .compression import GradientCompression
        self._gc = GradientCompression(compression_params)
        self._wire_residuals.clear()

    @property
    def gradient_compression(self):
        return self._gc

    def _quantize_for_wire(self, key, grad, ctx):
        """The packed words (host memory) of ``grad``, a raw array on ``ctx``, quantized with this
        worker's residual for ``key``."""
        if grad.dtype != numpy.float32:
            raise TypeError("gradient compression supports float32 gradients only; key %s is %s"
                            % (_key_repr(key), grad.dtype))
        residual = self._wire_residuals.get(key)
        if residual is None:
            with ctx.device_scope():
                residual = ctx.xp.zeros(grad.size, dtype=numpy.float32)
            self._wire_residuals[key] = residual
        return _host(self._gc.quantize(grad.reshape(-1), residual))

    def wire_residuals(self) -> dict:
        """This worker's compression residuals, ``{key: flat float32 array}`` (the live arrays):
        what an exact resume must restore. Empty without compression or before the first push."""
        return dict(self._wire_residuals)

    def gather_wire_residuals(self, root=0):
        """Collective: every worker's residuals as host copies, on ``root`` a list indexed by
        rank, None on the other ranks."""
        if self._state_comm is None:
            self._state_comm = self._job.dup(mpi.load_mpi().COMM_WORLD,
                                             "gathering the compression residuals")
        mine = {key: _host(arr) for key, arr in self._wire_residuals.items()}
        return gather_arrays(self._state_comm, self._job, mine, root,
                             "gathering the compression residuals of kvstore %r on rank %d"
                             % (self._type, root))

    def set_wire_residuals(self, residuals: dict) -> None:
        """Adopt residuals saved from ``wire_residuals`` (after compression is set up, which
        starts them at zero), each copied to its key's device; the keys must be initialized."""
        if self._gc is None:
            raise ValueError("set_wire_residuals: this store has no gradient compression")
        placed = {}
        for key, value in residuals.items():
            shape, ctx = self._placement(key)
            size = int(numpy.prod(shape, dtype=numpy.int64))
            if value.size != size:
                raise ValueError("a compression residual of %d values for key %s, which holds %d"
                                 % (value.size, _key_repr(key), size))
            with ctx.device_scope():
                placed[key] = ctx.xp.array(value, dtype=numpy.float32).reshape(-1)
        self._wire_residuals.update(placed)

    def compression_state(self) -> dict:
        """``{"r<key>_w<rank>": host array}`` of every worker on rank 0, ``{}`` elsewhere: a
        collective (see ``KVStoreBase``)."""
        if self._gc is None:
            return {}
        every = self.gather_wire_residuals(root=0)
        if every is None:
            return {}
        return {"r%d_w%d" % (key, rank): arr
                for rank, mine in enumerate(every) for key, arr in sorted(mine.items())}

    def load_compression_state(self, state: dict, contexts=None, where="the saved state"):
        """Take this rank's ``r<key>_w<rank>`` entries. A state saved by another number of ranks
        (a residual belongs to the shard of batches its rank trained on), or saved before
        residuals were kept, cannot be used: the residuals restart at zero and the note says so."""
        if self._gc is None:
            return None
        by_rank = wire_entries(state)
        restart = ("so they start again from zero on every rank. The run continues, but not "
                   "bitwise as it would have %s.")
        if not by_rank:
            return ("%s holds no gradient-compression residuals of the workers (it was saved "
                    "before trainer-cli kept them), %s"
                    % (where, restart % "without the interruption"))
        ranks = sorted(by_rank)
        if ranks != list(range(self.num_workers)):
            saved = "%d rank%s" % (len(ranks), "" if len(ranks) == 1 else "s")
            return ("%s holds the gradient-compression residuals of %s, but this job has %d: each "
                    "belongs to the shard of the batches its rank trained on, %s"
                    % (where, saved, self.num_workers, restart % ("with " + saved)))
        self.set_wire_residuals(by_rank[self.rank])
        return None

    def _placement(self, key):
        """``(shape, context)`` of an initialized key: where its residual lives."""
        raise NotImplementedError

    def save_optimizer_states(self, fname, dump_optimizer=False, param_names=None):
        """Rank 0 writes them (see the module notes); a no-op on the other ranks."""
        if self._updater is None:
            raise RuntimeError("Cannot save optimizer states: no optimizer is set on this kvstore")
        if self._job.rank == 0:
            super().save_optimizer_states(fname, dump_optimizer, param_names)


# --------------------------------------------------------------------------------------------
# Sync


class KVStoreDistSync(_DistStore):
    """Data-parallel sync store: every worker sums over every device of every worker."""

    def __init__(self, name="dist_sync"):
        super().__init__(name)
        self._sum_buffers: dict = {}
        self._host_buffers: dict = {}

    # ----------------------------------------------------------------- init: rank 0's value
    def init(self, key, value):
        for k, arrays in group_key_values(key, value):
            self._check_new_key(k, self._store)
            src = arrays[0]
            _agree(self._comm, self._job, k, src, "init")
            stored = _wrap(_raw(src).copy(), src.context)
            if self._job.size > 1 and stored.size:
                host = self._recv_target(k, stored)
                if host is not _raw(stored) and self._job.rank == 0:
                    host[...] = _host(_raw(stored))  # a GPU value goes out through host memory
                what = "broadcast from rank 0 of key %s" % _key_repr(k)
                mpi.wait(self._comm.Ibcast(host, root=0), what, job=self._job)
                if host is not _raw(stored):
                    _raw(stored)[...] = _transfer(host, stored.context)
            self._store[k] = stored

    # ----------------------------------------------------------------- push: sum over workers
    def push(self, key, value, priority=0):
        groups = group_key_values(key, value)
        if len(groups) == 1:
            self._push_one(*groups[0])
        else:
            self._push_many(groups)

    def pushpull(self, key, value, out=None, priority=0):
        single = _single_key_arrays(key, value, out)
        if single is None or any(_is_sparse(a) for a in single[0]):
            self.push(key, value, priority)
            self.pull(key, value if out is None else out, priority)
            return
        # The Trainer's call, once per parameter and step: skip the generic grouping.
        arrays, outs = single
        stored = self._push_one(key, arrays)
        src = _raw(stored)
        for target in outs:
            _raw(target)[...] = src if target.context == stored.context else _transfer(src, target.context)

    def _push_one(self, k, arrays):
        stored = self._stored(k)
        merged = self._merge(k, arrays, stored)
        if _is_sparse(merged):
            return self._push_sparse(k, merged, stored)
        if self._updater is None:
            # No optimizer: the sum replaces the stored value, so it can be written there.
            if self._gc is not None:
                self._exchange_compressed(k, merged, stored)
            else:
                self._allreduce_into(k, merged, stored, stored)
            return stored
        total = self._sum_buffer(k, stored)
        if self._gc is not None:
            self._exchange_compressed(k, merged, total)
        else:
            self._allreduce_into(k, merged, total, stored)
        self._updater(k, total, stored)
        return stored

    def _push_sparse(self, k, merged, stored):
        """A row_sparse sum crosses workers as (rows, values), never as the dense table: the
        workers' row counts, then their rows and values (Allgatherv), added up in rank order,
        so every worker holds the same bits. Without an optimizer it replaces the stored value,
        storage type included (MXNet); with one, the store updates its value with it."""
        if self._gc is not None:
            raise sparse_compression_error(k)
        total = self._allgather_rows(k, merged.as_in_context(stored.context))
        if self._updater is None:
            self._store[k] = total
            return total
        self._updater(k, total, stored)
        return stored

    def _allgather_rows(self, k, local):
        job = self._job
        if job.size == 1:
            return local
        rows = _host(_raw(local.indices)).astype(numpy.int64, copy=False)
        values = _host(_raw(local.data))
        width = int(numpy.prod(local.shape[1:], dtype=numpy.int64))
        what = "row_sparse push of key %s" % _key_repr(k)
        counts = numpy.empty(job.size, dtype=numpy.int64)
        mpi.wait(self._comm.Iallgather(numpy.array([len(rows)], dtype=numpy.int64), counts),
                 what + " (row counts)", job=job)
        all_rows = numpy.empty(int(counts.sum()), dtype=numpy.int64)
        all_values = numpy.empty((int(counts.sum()), width), dtype=values.dtype)
        mpi.wait(self._comm.Iallgatherv(rows, (all_rows, counts)), what + " (rows)", job=job)
        mpi.wait(self._comm.Iallgatherv(values.reshape(-1), (all_values, counts * width)),
                 what + " (values)", job=job)
        self.wire_bytes += rows.nbytes + values.nbytes
        total, start = None, 0
        for n in counts.tolist():
            part = _sparse.row_sparse_array(
                (all_values[start:start + n].reshape((n,) + tuple(local.shape[1:])),
                 all_rows[start:start + n]), shape=local.shape, ctx=local.context,
                dtype=values.dtype)
            total = part if total is None else _sparse.add(total, part)
            start += n
        return total

    def _push_many(self, groups):
        """Several keys in one call: small dense host keys share Allreduces (buckets of 1 MiB).

        One Allreduce per key costs ~20 us of latency each, which dominates for many small
        tensors; the sums are the same element by element, so the results do not change.
        """
        if self._gc is not None or self._job.size == 1 or any(
                _is_sparse(a) for _, arrays in groups for a in arrays):
            for k, arrays in groups:
                self._push_one(k, arrays)
            return
        bucket, bucket_bytes, bucket_dtype = [], 0, None
        for k, arrays in groups:
            stored = self._stored(k)
            raw = _raw(stored)
            fusable = (type(raw) is numpy.ndarray and raw.dtype in _MPI_SUM_DTYPES
                       and raw.nbytes < _CHUNK_BYTES)
            if not fusable:
                self._push_one(k, arrays)
                continue
            if bucket and (raw.dtype != bucket_dtype or bucket_bytes + raw.nbytes > _CHUNK_BYTES):
                self._push_bucket(bucket, bucket_dtype)
                bucket, bucket_bytes = [], 0
            bucket.append((k, stored, self._merge(k, arrays, stored)))
            bucket_bytes += raw.nbytes
            bucket_dtype = raw.dtype
        if bucket:
            self._push_bucket(bucket, bucket_dtype)

    def _push_bucket(self, bucket, dtype):
        sizes = [stored.size for _, stored, _ in bucket]
        total = sum(sizes)
        send = self._fusion_buffer("send", dtype, total)
        recv = self._fusion_buffer("recv", dtype, total)
        start = 0
        for (_, _, merged), n in zip(bucket, sizes):
            send[start:start + n] = _host(_raw(merged)).reshape(-1)
            start += n
        self.wire_bytes += send.nbytes
        keys = ", ".join(_key_repr(k) for k, _, _ in bucket[:3])
        keys += ", ..." if len(bucket) > 3 else ""
        mpi.wait(self._comm.Iallreduce(send, recv, op=mpi.load_mpi().SUM),
                 "allreduce of keys %s" % keys, job=self._job)
        start = 0
        for (k, stored, _), n in zip(bucket, sizes):
            total_k = recv[start:start + n].reshape(stored.shape)
            start += n
            if self._updater is not None:
                self._updater(k, _wrap(total_k, stored.context), stored)
            else:
                _raw(stored)[...] = total_k

    def _placement(self, key):
        stored = self._stored(key)
        return stored.shape, stored.context

    def _fusion_buffer(self, which, dtype, size):
        buf = self._host_buffers.get((which, dtype))
        if buf is None or buf.size < size:
            buf = numpy.empty(max(size, _CHUNK_BYTES // dtype.itemsize), dtype=dtype)
            self._host_buffers[(which, dtype)] = buf
        return buf[:size]

    def _sum_buffer(self, key, stored):
        buf = self._sum_buffers.get(key)
        if buf is None:
            ctx = stored.context
            with ctx.device_scope():
                buf = _wrap(ctx.xp.empty(stored.shape, dtype=_raw(stored).dtype), ctx)
            self._sum_buffers[key] = buf
        return buf

    def _recv_target(self, key, target):
        """Where MPI may write ``target``'s values: itself if it is a contiguous host array."""
        raw = _raw(target)
        if isinstance(raw, numpy.ndarray) and raw.flags.c_contiguous:
            return raw
        buf = self._host_buffers.get(key)
        if buf is None or buf.shape != raw.shape or buf.dtype != raw.dtype:
            buf = numpy.empty(raw.shape, dtype=raw.dtype)
            self._host_buffers[key] = buf
        return buf

    def _allreduce_into(self, key, merged, out, stored):
        """``out`` = the sum of every worker's ``merged`` (same on every worker)."""
        send = _raw(merged)
        if type(send) is not numpy.ndarray or not send.flags.c_contiguous:
            send = _host(_transfer(send, stored.context))
        if send.dtype != _raw(stored).dtype:
            send = send.astype(_raw(stored).dtype)
        recv = self._recv_target(key, out)
        self.wire_bytes += send.nbytes
        what = "allreduce of key %s" % _key_repr(key)
        if self._job.size == 1:
            recv[...] = send
        elif send.dtype in _MPI_SUM_DTYPES:
            _chunked_allreduce(self._comm, self._job, send, recv, what)
        else:
            _allgather_sum(self._comm, self._job, send, recv, what)
        if recv is not _raw(out):
            _raw(out)[...] = _transfer(recv, out.context)

    def _exchange_compressed(self, key, merged, out):
        """``out`` = Σ over ranks (in rank order) of each rank's decoded quantized gradient."""
        comp = self._gc
        ctx = out.context
        grad = _transfer(_raw(merged), ctx)
        packed = self._quantize_for_wire(key, grad, ctx)
        n = grad.size
        size = self._job.size
        gathered = numpy.empty((size, packed.size), dtype=numpy.float32)
        self.wire_bytes += packed.nbytes
        if size == 1:
            gathered[0] = packed
        else:
            # Bytes, not floats: the words are bit patterns (NaNs among them).
            mpi.wait(self._comm.Iallgather(packed.view(numpy.uint8), gathered.view(numpy.uint8)),
                     "compressed allgather of key %s" % _key_repr(key), job=self._job)
        words = _transfer(gathered, ctx)
        flat = _raw(out).reshape(-1)
        comp.dequantize(words[0], n, out=flat)
        if size > 1:
            with ctx.device_scope():
                scratch = ctx.xp.empty(n, dtype=numpy.float32)
            for r in range(1, size):
                flat += comp.dequantize(words[r], n, out=scratch)


def _chunked_allreduce(comm, job, send, recv, what):
    SUM = mpi.load_mpi().SUM
    if send.nbytes <= _CHUNK_BYTES:
        mpi.wait(comm.Iallreduce(send, recv, op=SUM), what, job=job)
        return
    s = send.reshape(-1)
    r = recv.reshape(-1)
    step = _CHUNK_BYTES // s.itemsize
    for start in range(0, s.size, step):
        stop = start + step
        mpi.wait(comm.Iallreduce(s[start:stop], r[start:stop], op=SUM), what, job=job)


def _allgather_sum(comm, job, send, recv, what):
    """Sum in rank order from an Allgather, for dtypes MPI cannot add (float16, ...)."""
    size = comm.Get_size()
    every = numpy.empty((size,) + send.shape, dtype=send.dtype)
    mpi.wait(comm.Iallgather(send.view(numpy.uint8), every.view(numpy.uint8)), what, job=job)
    recv[...] = every[0]
    for r in range(1, size):
        recv += every[r]


# --------------------------------------------------------------------------------------------
# Async


_OP_PUSH, _OP_PULL, _OP_PUSHPULL, _OP_STOP, _OP_FLUSH = 1, 2, 3, 4, 5
# Row_sparse requests move (rows, values), never the table: a push of rows, and a pull of the
# rows asked for (``n`` ids follow; -1: the rows the server stores, as a full pull into a
# row_sparse out takes them).
_OP_PUSH_ROWS, _OP_PULL_ROWS = 6, 7
_OP_NAMES = {_OP_PUSH: "push", _OP_PULL: "pull", _OP_PUSHPULL: "pushpull", _OP_STOP: "stop",
             _OP_FLUSH: "flush", _OP_PUSH_ROWS: "row_sparse push",
             _OP_PULL_ROWS: "row_sparse pull"}
_TAG_REQ, _TAG_DATA, _TAG_REPLY = 11, 12, 13
_HEADER = 6  # op, slot, values, compression type, threshold bits, spare
_SERVER_MAX_NAP_S = 2e-3


def _dense_raw(value):
    """A stored value's dense backend array (a row_sparse value, after a replace, densified)."""
    return _raw(value.tostype("default")) if _is_sparse(value) else _raw(value)


def _pieces(post, array, peer, tag):
    """Post a transfer of ``array``'s bytes in pieces of at most 1 MiB (one request each).

    MPI keeps the order of messages between two ranks on one tag, so the pieces arrive in order.
    In pieces, :func:`mpi.wait` sees progress and keeps spinning; one 40 MB request would let it
    fall asleep between polls and crawl (a large message moves only while both sides poll).
    """
    flat = array.reshape(-1).view(numpy.uint8)
    if flat.size <= _CHUNK_BYTES:
        return [post(flat, peer, tag)]
    return [post(flat[i:i + _CHUNK_BYTES], peer, tag) for i in range(0, flat.size, _CHUNK_BYTES)]


class _Server:
    """Rank 0's parameter-server thread: applies pushes as they arrive, answers pulls."""

    def __init__(self, comm, job):
        self.comm = comm
        self.job = job
        self.lock = threading.RLock()
        self.keys: dict = {}     # slot -> key
        self.store: dict = {}    # slot -> NDArray (the master copy)
        self.recv: dict = {}     # (slot, kind) -> host receive buffer
        self.updater = None
        self.open_workers = set(range(job.size))
        self.last_activity = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="trainer-cli-parameter-server",
                                       daemon=True)
        self.thread.start()

    def add(self, slot, key, value):
        with self.lock:
            self.keys[slot] = key
            self.store[slot] = value

    def _run(self):
        MPI = mpi.load_mpi()
        header = numpy.empty(_HEADER, dtype=numpy.int64)
        nap = mpi._MIN_NAP_S
        while self.open_workers:
            status = MPI.Status()
            msg = self.comm.Improbe(MPI.ANY_SOURCE, _TAG_REQ, status)
            if msg is None:
                time.sleep(nap)
                idle = time.monotonic() - self.last_activity
                nap = min(nap * 2, _SERVER_MAX_NAP_S if idle < 1.0 else mpi._LONG_NAP_S)
                continue
            nap = mpi._MIN_NAP_S
            src = status.Get_source()
            mpi.wait(msg.Irecv(header), "a request header from rank %d" % src, peers=(),
                     job=self.job)
            self.last_activity = time.monotonic()
            op, slot, n, ctype, bits = (int(v) for v in header[:5])
            if op == _OP_STOP:
                self.open_workers.discard(src)
                continue
            if op == _OP_FLUSH:
                # Requests from one rank are served in order: this reply says all its earlier
                # pushes have been applied.
                mpi.wait(self.comm.Isend(header, dest=src, tag=_TAG_REPLY), "flush reply to rank "
                         "%d" % src, peers=(), job=self.job)
                continue
            with self.lock:
                self._serve(src, op, slot, n, ctype, bits)
            self.last_activity = time.monotonic()

    def _apply(self, slot, grad):
        key, stored = self.keys[slot], self.store[slot]
        if self.updater is not None:
            self.updater(key, grad, stored)
        elif _is_sparse(grad) or _is_sparse(stored):
            # MXNet's replace-on-push: the pushed value, storage type included.
            self.store[slot] = grad.as_in_context(stored.context).copy()
        else:
            _raw(stored)[...] = _transfer(_raw(grad), stored.context)

    def rows_of(self, slot, ids):
        """The stored rows ``ids`` (sorted unique, absent ones zero) as a row_sparse array; with
        ``ids`` None, the rows the stored value holds (a dense value: its nonzero rows)."""
        stored = self.store[slot]
        if ids is None:
            return stored if stored.stype == "row_sparse" else stored.tostype("row_sparse")
        wanted = _transfer(ids, stored.context)
        if stored.stype == "row_sparse":
            return _sparse.retain(stored, _wrap(wanted, stored.context))
        # A dense value: gather the rows asked for, never a copy of the table.
        return _sparse.row_sparse_array((_raw(stored)[wanted], wanted), shape=stored.shape,
                                        ctx=stored.context)

    def serve_local(self, slot, grad, outs):
        """A push (``grad`` not None) and/or pull (``outs``) from rank 0's own worker."""
        with self.lock:
            if grad is not None:
                self._apply(slot, grad)
            if outs is not None:
                dense = _dense_raw(self.store[slot])
                for target in outs:
                    _raw(target)[...] = _transfer(dense, target.context)
            self.last_activity = time.monotonic()

    def serve_local_rows(self, slot, ids):
        """Rank 0's own row_sparse pull (host arrays: the caller places them)."""
        with self.lock:
            rows = self.rows_of(slot, ids)
            self.last_activity = time.monotonic()
            return _host(_raw(rows.indices)), _host(_raw(rows.data))

    def _serve(self, src, op, slot, n, ctype, bits):
        key = self.keys[slot]
        stored = self.store[slot]
        what = "%s of key %s from rank %d" % (_OP_NAMES[op], _key_repr(key), src)
        if op == _OP_PUSH_ROWS:
            self._apply(slot, self._receive_rows(src, n, stored, what))
            return
        if op == _OP_PULL_ROWS:
            ids = None
            if n >= 0:
                ids = numpy.empty(n, dtype=numpy.int64)
                mpi.wait(_pieces(self.comm.Irecv, ids, src, _TAG_DATA), what, peers=(),
                         job=self.job)
            rows = self.rows_of(slot, ids)
            rows_host, values = _host(_raw(rows.indices)), _host(_raw(rows.data))
            count = numpy.array([len(rows_host)], dtype=numpy.int64)
            mpi.wait([self.comm.Isend(count, dest=src, tag=_TAG_REPLY)]
                     + _pieces(self.comm.Isend, rows_host.astype(numpy.int64, copy=False), src,
                               _TAG_REPLY)
                     + _pieces(self.comm.Isend, numpy.ascontiguousarray(values), src, _TAG_REPLY),
                     "reply to " + what, peers=(), job=self.job)
            return
        if op in (_OP_PUSH, _OP_PUSHPULL):
            self._apply(slot, self._receive(src, slot, stored, ctype, bits, what))
        if op in (_OP_PULL, _OP_PUSHPULL):
            host = _host(_dense_raw(self.store[slot]))
            mpi.wait(_pieces(self.comm.Isend, host, src, _TAG_REPLY), "reply to " + what,
                     peers=(), job=self.job)

    def _receive_rows(self, src, n, stored, what):
        shape = tuple(stored.shape)
        rows = numpy.empty(n, dtype=numpy.int64)
        values = numpy.empty((n,) + shape[1:], dtype=_raw(stored).dtype)
        mpi.wait(_pieces(self.comm.Irecv, rows, src, _TAG_DATA)
                 + _pieces(self.comm.Irecv, values, src, _TAG_DATA), what, peers=(), job=self.job)
        if n and (rows.min() < 0 or rows.max() >= shape[0]):
            raise mpi.DistributedError("%s: row ids outside 0..%d" % (what, shape[0] - 1))
        return _sparse.row_sparse_array((values, rows), shape=shape, ctx=stored.context)

    def _receive(self, src, slot, stored, ctype, bits, what):
        ctx = stored.context
        if ctype:
            gc = _gc_from_code(ctype, bits)
            shape, dtype = (gc.compressed_size(stored.size),), numpy.dtype(numpy.float32)
        else:
            shape, dtype = stored.shape, _raw(stored).dtype
        buf = self.recv.get((slot, ctype))
        if buf is None or buf.shape != shape:
            buf = numpy.empty(shape, dtype=dtype)
            self.recv[(slot, ctype)] = buf
        mpi.wait(_pieces(self.comm.Irecv, buf, src, _TAG_DATA), what, peers=(), job=self.job)
        if ctype:
            words = _transfer(buf, ctx)
            raw = gc.dequantize(words, stored.size).reshape(stored.shape)
        else:
            raw = _transfer(buf, ctx)
        return _wrap(raw, ctx)

    def finish(self):
        """Wait (idle-timed) until every worker has said goodbye and the thread has ended."""
        limit = mpi.timeout()
        while self.thread.is_alive():
            self.thread.join(0.05)
            if self.thread.is_alive() and time.monotonic() - self.last_activity > limit:
                waiting = mpi._ranks(sorted(self.open_workers))
                mpi.abort("the parameter server on rank 0 heard nothing for %g s at exit while "
                          "still waiting for %s to finish" % (limit, waiting))


class KVStoreDistAsync(_DistStore):
    """Asynchronous store: rank 0 hosts a parameter server; every push is applied on arrival.

    The values live on the server (``_slots`` and ``_meta`` describe them here), not in
    :class:`KVStoreLocal`'s ``_store``, which stays empty.
    """

    def __init__(self, name="dist_async"):
        MPI = mpi.load_mpi()
        if MPI.Query_thread() < MPI.THREAD_MULTIPLE:
            raise mpi.DistributedError(
                "kvstore %r runs a parameter-server thread on rank 0 and needs MPI initialized "
                "with MPI_THREAD_MULTIPLE (mpi4py's default; do not lower mpi4py.rc.thread_level)"
                % name)
        super().__init__(name)
        self._ps = self._job.dup(MPI.COMM_WORLD, "creating kvstore %r" % name)
        self._slots: dict = {}
        self._meta: dict = {}
        self._reply_buffers: dict = {}
        self._closed = False
        self._server = _Server(self._ps, self._job) if self._job.rank == 0 else None
        self._job.on_exit(self.close)

    def barrier(self):
        """Wait for every worker; every push made before it has then been applied by the server."""
        if self._server is None and not self._closed:
            header = numpy.array([_OP_FLUSH, 0, 0, 0, 0, 0], dtype=numpy.int64)
            reply = numpy.empty_like(header)
            mpi.wait([self._ps.Irecv(reply, source=0, tag=_TAG_REPLY),
                      self._ps.Isend(header, dest=0, tag=_TAG_REQ)],
                     "flushing pushes to the parameter server on rank 0", peers=(), job=self._job)
        super().barrier()

    # ----------------------------------------------------------------- keys
    def _slot(self, key):
        slot = self._slots.get(key)
        if slot is None:
            raise KeyError("kvstore key %r has not been initialized (call init first)" % (key,))
        return slot

    def _placement(self, key):
        self._slot(key)
        shape, _, ctx = self._meta[key]
        return shape, ctx

    def init(self, key, value):
        for k, arrays in group_key_values(key, value):
            self._check_new_key(k, self._slots)
            src = arrays[0]
            _agree(self._comm, self._job, k, src, "init")
            slot = len(self._slots)
            self._slots[k] = slot
            self._meta[k] = (src.shape, _raw(src).dtype, src.context)
            if self._server is not None:
                self._server.add(slot, k, src.copy() if _is_sparse(src)
                                 else _wrap(_raw(src).copy(), src.context))
        # Nobody may push or pull a key before rank 0's server holds it.
        self.barrier()

    def push(self, key, value, priority=0):
        for k, arrays in group_key_values(key, value):
            if any(_is_sparse(a) for a in arrays):
                self._push_rows(k, arrays)
            else:
                self._request(_OP_PUSH, k, arrays)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        if out is None:
            raise ValueError("pull needs out=")
        for k, outs in group_key_values(key, out, what="out"):
            dense = [t for t in outs if not _is_sparse(t)]
            sparse_outs = [t for t in outs if _is_sparse(t)]
            if dense:
                self._request(_OP_PULL, k, None, dense)
            if sparse_outs and ignore_sparse:
                self._warn_sparse_pull_skipped(k)
            elif sparse_outs:
                rows = self._pull_rows(k, None)
                for target in sparse_outs:
                    (rows if target.stype == "row_sparse" else rows.tostype(target.stype)) \
                        .copyto(target)

    def pushpull(self, key, value, out=None, priority=0):
        outs_by_key = dict(group_key_values(key, value if out is None else out, what="out"))
        for k, arrays in group_key_values(key, value):
            outs = outs_by_key[k]
            if any(_is_sparse(a) for a in list(arrays) + list(outs)):
                self.push(k, arrays)
                self.pull(k, outs, ignore_sparse=False)
            else:
                self._request(_OP_PUSHPULL, k, arrays, outs)

    def _row_source(self, key):
        """``row_sparse_pull``'s rows come from the server: only the rows asked for cross."""
        self._slot(key)
        limit = self._meta[key][0][0]

        def rows_of(ids):
            wanted = numpy.unique(_host(_raw(ids)).astype(numpy.int64).reshape(-1))
            if len(wanted) and (wanted[0] < 0 or wanted[-1] >= limit):
                raise ValueError("row_sparse_pull of key %r: row ids must lie in 0..%d"
                                 % (key, limit - 1))
            return self._pull_rows(key, wanted)
        return rows_of

    def _push_rows(self, key, arrays):
        """A row_sparse push: the worker's devices merged, then its rows and values to the server
        (rank 0's straight in). Compression is refused, as on the other stores."""
        if self._closed:
            raise mpi.DistributedError("kvstore %r is closed" % self._type)
        if self._gc is not None:
            raise sparse_compression_error(key)
        slot = self._slot(key)
        shape, dtype, ctx = self._meta[key]
        merged = self._merge_sparse(key, arrays, _wrap(ctx.xp.empty(0, dtype), ctx))
        if tuple(merged.shape) != tuple(shape):
            raise ValueError("kvstore key %r holds shape %s, got %s"
                             % (key, tuple(shape), tuple(merged.shape)))
        if merged.stype != "row_sparse":
            merged = merged.tostype("row_sparse")
        if self._server is not None:
            self._server.serve_local(slot, merged.as_in_context(ctx), None)
            return
        rows = _host(_raw(merged.indices)).astype(numpy.int64, copy=False)
        values = numpy.ascontiguousarray(_host(_raw(merged.data)).astype(dtype, copy=False))
        self.wire_bytes += rows.nbytes + values.nbytes
        header = numpy.array([_OP_PUSH_ROWS, slot, len(rows), 0, 0, 0], dtype=numpy.int64)
        mpi.wait([self._ps.Isend(header, dest=0, tag=_TAG_REQ)]
                 + _pieces(self._ps.Isend, rows, 0, _TAG_DATA)
                 + _pieces(self._ps.Isend, values, 0, _TAG_DATA),
                 "row_sparse push of key %s to the parameter server on rank 0" % _key_repr(key),
                 peers=(), job=self._job)

    def _pull_rows(self, key, ids):
        """The server's rows ``ids`` (sorted unique int64; None: the rows it stores) of ``key``
        as a row_sparse array on the key's device."""
        if self._closed:
            raise mpi.DistributedError("kvstore %r is closed" % self._type)
        slot = self._slot(key)
        shape, dtype, ctx = self._meta[key]
        if self._server is not None:
            rows, values = self._server.serve_local_rows(slot, ids)
        else:
            what = "row_sparse pull of key %s from the parameter server on rank 0" % _key_repr(key)
            n = -1 if ids is None else len(ids)
            header = numpy.array([_OP_PULL_ROWS, slot, n, 0, 0, 0], dtype=numpy.int64)
            count = numpy.empty(1, dtype=numpy.int64)
            reqs = [self._ps.Irecv(count, source=0, tag=_TAG_REPLY),
                    self._ps.Isend(header, dest=0, tag=_TAG_REQ)]
            if ids is not None:
                reqs += _pieces(self._ps.Isend, ids, 0, _TAG_DATA)
            mpi.wait(reqs, what, peers=(), job=self._job)
            m = int(count[0])
            rows = numpy.empty(m, dtype=numpy.int64)
            values = numpy.empty((m,) + tuple(shape[1:]), dtype=dtype)
            mpi.wait(_pieces(self._ps.Irecv, rows, 0, _TAG_REPLY)
                     + _pieces(self._ps.Irecv, values, 0, _TAG_REPLY), what, peers=(),
                     job=self._job)
        return _sparse.row_sparse_array((values, rows), shape=tuple(shape), ctx=ctx, dtype=dtype)

    def _request(self, op, key, arrays, outs=None):
        """One round trip with the server: header, payload (push), reply (pull)."""
        if self._closed:
            raise mpi.DistributedError("kvstore %r is closed" % self._type)
        slot = self._slot(key)
        shape, dtype, _ = self._meta[key]
        n = int(numpy.prod(shape, dtype=numpy.int64))
        payload, ctype, bits = None, 0, 0
        merged = None
        if arrays is not None:
            merged = self._merge(key, arrays, arrays[0])
            if tuple(merged.shape) != tuple(shape):
                raise ValueError("kvstore key %r holds shape %s, got %s"
                                 % (key, tuple(shape), tuple(merged.shape)))
        if self._server is not None:
            # Rank 0's own requests go straight to its server: messages to itself would only
            # make its two threads fight over the GIL and MPI's lock.
            self._server.serve_local(slot, self._local_grad(key, merged), outs)
            return
        if merged is not None:
            if self._gc is not None:
                payload = self._quantize_for_wire(key, _raw(merged), merged.context)
                ctype, bits = _gc_code(self._gc)
            else:
                payload = _host(_raw(merged))
                if payload.dtype != dtype:
                    payload = payload.astype(dtype)
            self.wire_bytes += payload.nbytes
        header = numpy.array([op, slot, n, ctype, bits, 0], dtype=numpy.int64)
        reqs = []
        reply = None
        if outs is not None:
            reply = self._reply_buffers.get(key)
            if reply is None:
                reply = self._reply_buffers[key] = numpy.empty(shape, dtype=dtype)
            reqs += _pieces(self._ps.Irecv, reply, 0, _TAG_REPLY)
        reqs.append(self._ps.Isend(header, dest=0, tag=_TAG_REQ))
        if payload is not None:
            reqs += _pieces(self._ps.Isend, payload, 0, _TAG_DATA)
        # The server outlives every worker (rank 0 waits for all at exit), so no departure watch.
        mpi.wait(reqs, "%s of key %s with the parameter server on rank 0"
                 % (_OP_NAMES[op], _key_repr(key)), peers=(), job=self._job)
        if outs is not None:
            for target in outs:
                _raw(target)[...] = _transfer(reply, target.context)

    def _local_grad(self, key, merged):
        """What the server applies for rank 0's push: through the codec too, when one is set."""
        if merged is None or self._gc is None:
            return merged
        words = self._quantize_for_wire(key, _raw(merged), merged.context)
        raw = self._gc.dequantize(_transfer(words, merged.context), merged.size)
        return _wrap(raw.reshape(merged.shape), merged.context)

    # ----------------------------------------------------------------- settings and states
    def _set_updater(self, updater):
        self._updater = updater
        if self._server is not None:
            with self._server.lock:
                self._server.updater = updater

    def save_optimizer_states(self, fname, dump_optimizer=False, param_names=None):
        # The server thread may be applying a push: the states are read under its lock.
        with self._server.lock if self._server is not None else contextlib.nullcontext():
            super().save_optimizer_states(fname, dump_optimizer, param_names)

    # ----------------------------------------------------------------- the end
    def close(self):
        """Tell the server this worker is done; on rank 0, wait until every worker is."""
        if self._closed:
            return
        self._closed = True
        if self._server is not None:
            self._server.open_workers.discard(0)
            self._server.finish()
            return
        header = numpy.array([_OP_STOP, 0, 0, 0, 0, 0], dtype=numpy.int64)
        mpi.wait(self._ps.Isend(header, dest=0, tag=_TAG_REQ), "saying goodbye to the parameter "
                 "server on rank 0", peers=(), job=self._job)
