"""The in-process store (types ``local``, ``device`` and any other non-dist name).

``push`` sums the values of one key over the devices (through 2-bit/1-bit compression with one
error-feedback residual per source when compression is set) and then either replaces the stored
value or hands the sum to the updater; ``pull`` broadcasts the stored value to every output.

row_sparse values (MXNet's rules): pushed row_sparse values sum to a row_sparse value (the union
of their rows); without an updater it replaces the stored value, so a dense key pushed row_sparse
values becomes row_sparse. ``row_sparse_pull`` copies only the requested rows (sorted, unique;
rows the store lacks come as zeros) into row_sparse outputs; ``pull`` skips row_sparse outputs
unless ``ignore_sparse=False``. Nothing here makes a dense copy of a row_sparse value.
"""
from __future__ import annotations

import re
import warnings

import numpy

from ..ndarray import NDArray
from ..ndarray import sparse as _sparse
from ..ndarray.interop import array_module as _array_module, is_sparse as _is_sparse, raw as _raw
from ..ndarray.interop import transfer as _transfer, wrap as _wrap
from .base import KVStoreBase

__all__ = ["KVStoreLocal", "group_key_values"]

_RESIDUAL = re.compile(r"^r(\d+)_(\d+)$", re.ASCII)


def _host_copy(arr):
    return arr.get() if hasattr(arr, "get") else numpy.array(arr)


def group_key_values(key, value, what="value"):
    """``(key, value)`` in any of MXNet's forms as ``[(key, [arrays...])]``.

    A single key takes an NDArray or a list (one per device); a list of keys takes a list of those.
    Repeated keys are merged into one entry and keys come out in sorted order, as MXNet does.
    """
    if isinstance(key, (list, tuple)):
        if not isinstance(value, (list, tuple)) or len(key) != len(value):
            raise ValueError("%s must be a list with one entry per key (%d keys)" % (what, len(key)))
        pairs = list(zip(key, value))
    else:
        pairs = [(key, value)]
    grouped = {}
    for k, v in pairs:
        if not isinstance(k, (int, numpy.integer, str)):
            raise TypeError("kvstore keys must be int or str, got %r" % (k,))
        arrays = [v] if isinstance(v, NDArray) else list(v)
        if not arrays or not all(isinstance(a, NDArray) for a in arrays):
            raise TypeError("%s for key %r must be an NDArray or a list of NDArrays" % (what, k))
        grouped.setdefault(int(k) if isinstance(k, numpy.integer) else k, []).extend(arrays)
    kinds = {type(k) for k in grouped}
    if len(kinds) > 1:
        raise TypeError("kvstore keys must all be int or all be str, not a mix")
    return sorted(grouped.items()) if len(grouped) > 1 else list(grouped.items())


def _rows_per_out(key, out, row_ids):
    """``[(key, outs, ids per out)]`` for ``row_sparse_pull``'s forms: one key with an out (or a
    list of outs) and one row-id array (or one per out), or lists of those per key."""
    keys = key if isinstance(key, (list, tuple)) else [key]
    outs = out if isinstance(key, (list, tuple)) else [out]
    ids = row_ids if isinstance(key, (list, tuple)) else [row_ids]
    if len(outs) != len(keys) or len(ids) != len(keys):
        raise ValueError("row_sparse_pull: give one out and one row_ids entry per key")
    groups = []
    for k, o, r in zip(keys, outs, ids):
        o = [o] if isinstance(o, NDArray) else list(o)
        r = [r] * len(o) if isinstance(r, NDArray) else list(r)
        if len(r) != len(o) or not all(isinstance(x, NDArray) for x in o + r):
            raise ValueError("row_sparse_pull of key %r: row_ids must be one NDArray or one per "
                             "out (%d outs, %d row_ids)" % (k, len(o), len(r)))
        groups.append((k, o, r))
    return groups


def sparse_compression_error(key) -> ValueError:
    """What every store raises for a row_sparse value when gradient compression is set."""
    return ValueError("kvstore key %r: gradient compression of row_sparse values is not "
                      "supported (MXNet's 2-bit compression garbles their rows); create the "
                      "Trainer without compression_params for sparse gradients" % (key,))


class KVStoreLocal(KVStoreBase):
    """Keys and values inside one process; ``device`` in the type enables gradient compression."""

    def __init__(self, name="local"):
        self._type = name
        self._store: dict = {}
        self._updater = None
        self._compression = None
        self._residuals: dict = {}
        self._merge_buffers: dict = {}
        self._key_kind = None
        self._warned_sparse_pull = False

    @property
    def type(self) -> str:
        return self._type

    def is_capable(self, capability) -> bool:
        if capability.lower() == KVStoreBase.OPTIMIZER:
            return True
        raise ValueError("Unknown capability: %s" % capability)

    # ----------------------------------------------------------------- keys and values
    def _check_new_key(self, key, known):
        """What ``init`` asks of a key: the kind (int or str) of this store's keys, and not in
        ``known`` (the keys initialized so far)."""
        kind = type(key)
        if self._key_kind is None:
            self._key_kind = kind
        elif kind is not self._key_kind:
            raise TypeError("kvstore keys must all be int or all be str; this store uses %s keys"
                            % self._key_kind.__name__)
        if key in known:
            raise ValueError("duplicate init of key %r" % (key,))

    def _stored(self, key):
        stored = self._store.get(key)
        if stored is None:
            raise KeyError("kvstore key %r has not been initialized (call init first)" % (key,))
        return stored

    def init(self, key, value):
        for k, arrays in group_key_values(key, value):
            self._check_new_key(k, self._store)
            src = arrays[0]
            self._store[k] = src.copy() if _is_sparse(src) else \
                _wrap(_raw(src).copy(), src.context)

    def push(self, key, value, priority=0):
        for k, arrays in group_key_values(key, value):
            stored = self._stored(k)
            merged = self._merge(k, arrays, stored)
            if self._updater is not None:
                self._updater(k, merged, stored)
            elif _is_sparse(merged) or _is_sparse(stored):
                # The sum replaces the stored value, storage type included (MXNet).
                self._store[k] = merged.copyto(stored.context)
            else:
                _raw(stored)[...] = _transfer(_raw(merged), stored.context)

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the stored value into every ``out``; row_sparse outs only with
        ``ignore_sparse=False`` (they are skipped otherwise, as MXNet does)."""
        if out is None:
            raise ValueError("pull needs out=")
        for k, outs in group_key_values(key, out, what="out"):
            stored = self._stored(k)
            for target in outs:
                if not _is_sparse(target):
                    if not _is_sparse(stored):
                        _raw(target)[...] = _transfer(_raw(stored), target.context)
                    else:
                        _raw(target)[...] = _transfer(_raw(stored.tostype("default")),
                                                      target.context)
                elif ignore_sparse:
                    self._warn_sparse_pull_skipped(k)
                else:
                    source = stored if stored.stype == target.stype else stored.tostype(target.stype)
                    source.copyto(target)

    def _warn_sparse_pull_skipped(self, key):
        if not self._warned_sparse_pull:
            self._warned_sparse_pull = True
            warnings.warn("kvstore pull of key %r into a row_sparse output was skipped "
                          "(ignore_sparse=True); use row_sparse_pull, or pull with "
                          "ignore_sparse=False" % (key,), stacklevel=3)

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Copy the rows ``row_ids`` of a row_sparse key into row_sparse ``out`` (one array or a
        list): exactly the sorted unique ids, rows the store lacks as zeros. ``row_ids`` is one
        array (used for every out) or one per out."""
        if out is None or row_ids is None:
            raise ValueError("row_sparse_pull needs out= and row_ids=")
        for k, outs, ids in _rows_per_out(key, out, row_ids):
            rows_of = self._row_source(k)
            pulled = {}
            for target, target_ids in zip(outs, ids):
                if target.stype != "row_sparse":
                    raise ValueError("row_sparse_pull of key %r: expected row_sparse outputs, got "
                                     "storage type %s" % (k, target.stype))
                # The same ids object for several outs: retained once, copied to each.
                rows = pulled.get(id(target_ids))
                if rows is None:
                    rows = pulled[id(target_ids)] = rows_of(target_ids)
                rows.copyto(target)

    def _row_source(self, key):
        """For ``row_sparse_pull``: a function from row ids to ``key``'s rows (row_sparse)."""
        stored = self._stored(key)
        if stored.stype != "row_sparse":
            raise ValueError("row_sparse_pull of key %r: the stored value has storage type %s; "
                             "row_sparse_pull expects a row_sparse value" % (key, stored.stype))
        return lambda ids: _sparse.retain(stored, ids.as_in_context(stored.context))

    def pushpull(self, key, value, out=None, priority=0):
        self.push(key, value, priority)
        self.pull(key, value if out is None else out, priority, ignore_sparse=False)

    def broadcast(self, key, value, out, priority=0):
        self.init(key, value)
        self.pull(key, out, priority)

    # ----------------------------------------------------------------- reduction
    def _merge_buffer(self, key, like: NDArray, ctx):
        buf = self._merge_buffers.get(key)
        if buf is None or buf.shape != like.shape or buf.dtype != like.dtype or buf.context != ctx:
            with ctx.device_scope():
                buf = _wrap(ctx.xp.empty(like.shape, dtype=_raw(like).dtype), ctx)
            self._merge_buffers[key] = buf
        return buf

    def _merge(self, key, arrays, stored):
        """The sum over sources, on the stored value's device (row_sparse when they all are)."""
        for arr in arrays:
            if _is_sparse(arr):
                return self._merge_sparse(key, arrays, stored)
        if self._compression is not None:
            return self._merge_compressed(key, arrays, stored)
        if len(arrays) == 1:
            return arrays[0]
        ctx = stored.context
        buf = self._merge_buffer(key, arrays[0], ctx)
        out = _raw(buf)
        out[...] = _transfer(_raw(arrays[0]), ctx)
        for arr in arrays[1:]:
            out += _transfer(_raw(arr), ctx)
        return buf

    def _merge_sparse(self, key, arrays, stored):
        """Sources summed in order; row_sparse ones give the union of their rows, a dense one
        makes the sum dense (MXNet's ElementwiseSum)."""
        if self._compression is not None:
            raise sparse_compression_error(key)
        if len(arrays) == 1:
            return arrays[0]
        ctx = stored.context
        total = arrays[0].as_in_context(ctx)
        for arr in arrays[1:]:
            total = _sparse.add(total, arr.as_in_context(ctx))
        return total

    def _merge_compressed(self, key, arrays, stored):
        """Quantize each source with its own residual, decode on the merge device, then sum."""
        comp = self._compression
        ctx = stored.context
        buf = self._merge_buffer(key, arrays[0], ctx)
        out = _raw(buf).reshape(-1)
        n = out.size
        for pos, arr in enumerate(arrays):
            if _raw(arr).dtype != numpy.float32:
                raise TypeError("gradient compression supports float32 gradients only; key %r is %s"
                                % (key, _raw(arr).dtype))
            residual = self._residuals.get((key, pos))
            if residual is None:
                residual = _array_module(arr).zeros(n, dtype=numpy.float32)
                self._residuals[(key, pos)] = residual
            packed = comp.quantize(_raw(arr).reshape(-1), residual)
            packed = _transfer(packed, ctx)
            if pos == 0:
                comp.dequantize(packed, n, out=out)
            else:
                out += comp.dequantize(packed, n)
        return buf

    # ----------------------------------------------------------------- optimizer on the store
    def set_optimizer(self, optimizer):
        from ..optimizer import get_updater
        self._set_updater(get_updater(optimizer))

    def _set_updater(self, updater):
        """Every way of setting the updater goes through here (dist_async hands it to its server)."""
        self._updater = updater

    def set_gradient_compression(self, compression_params):
        """Compress pushes (``{'type': '2bit', 'threshold': 0.5}``); only ``device`` stores can."""
        if "device" not in self._type and "dist" not in self._type:
            raise ValueError(
                "Gradient compression is not supported for kvstore type %r: it applies when "
                "gradients are merged across devices, so use kvstore 'device' (or a dist_* type)."
                % self._type)
        from .compression import GradientCompression
        self._compression = GradientCompression(compression_params)
        self._residuals.clear()

    @property
    def gradient_compression(self):
        return self._compression

    def compression_residuals(self) -> dict:
        """Compression's error-feedback residuals, ``{(key, source position): flat float32
        array}`` (the live arrays): what an exact resume must restore. Empty without compression."""
        return dict(self._residuals)

    def set_compression_residuals(self, residuals: dict) -> None:
        """Adopt residuals saved from ``compression_residuals`` (after compression is set up,
        which starts them at zero); each must be a flat float32 array on its source's device."""
        if self._compression is None:
            raise ValueError("set_compression_residuals: this store has no gradient compression")
        self._residuals.update(residuals)

    def compression_state(self) -> dict:
        """``{"r<key>_<source position>": host array}`` (see ``KVStoreBase``)."""
        if self._compression is None:
            return {}
        return {"r%d_%d" % (key, pos): _host_copy(arr)
                for (key, pos), arr in sorted(self._residuals.items())}

    def load_compression_state(self, state: dict, contexts=None, where="the saved state"):
        """Take the ``r<key>_<position>`` entries of ``state``, each onto ``contexts[position]``
        (the first context for a position past the list; without ``contexts``, the key's)."""
        if self._compression is None or not state:
            return None
        residuals = {}
        for name, value in state.items():
            match = _RESIDUAL.match(name)
            if match is None:
                continue
            key, pos = int(match.group(1)), int(match.group(2))
            if contexts:
                ctx = contexts[pos] if pos < len(contexts) else contexts[0]
            else:
                ctx = self._stored(key).context
            with ctx.device_scope():
                residuals[(key, pos)] = ctx.xp.array(value, dtype=numpy.float32).reshape(-1)
        self.set_compression_residuals(residuals)
        return None

    def save_optimizer_states(self, fname, dump_optimizer=False, param_names=None):
        if self._updater is None:
            raise RuntimeError("Cannot save optimizer states: no optimizer is set on this kvstore")
        from ..optimizer.state_file import save_states_file
        # Without dump_optimizer the file holds the states alone, and loading it keeps the
        # optimizer this store has then (MXNet's Updater.set_states).
        save_states_file(fname, {0: self._updater.states},
                         self._updater.optimizer if dump_optimizer else None, param_names)

    def load_optimizer_states(self, fname):
        if self._updater is None:
            raise RuntimeError("Cannot load optimizer states: no optimizer is set on this kvstore")
        from ..optimizer import get_updater
        from ..optimizer.state_file import load_states_file
        states_by_device, optimizer = load_states_file(fname)
        updater = get_updater(self._updater.optimizer if optimizer is None else optimizer)
        updater.set_states_dict(next(iter(states_by_device.values())) if states_by_device else {})
        self._set_updater(updater)
