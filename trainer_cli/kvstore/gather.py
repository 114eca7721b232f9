"""Every rank's named host arrays, gathered on one rank: per-rank state that a checkpoint (written
by rank 0 alone) must hold, such as each worker's compression residuals.

A rank packs its arrays into one byte buffer: an 8-byte length, a JSON list of ``[name, dtype,
shape]`` (names are kvstore keys, int or str, kept as JSON keeps them), then the raw bytes. The
buffers travel with ``Igatherv`` in rounds of at most 1 MiB per rank: as with the stores' other
large transfers, pieces keep :func:`.mpi.wait` driving the transfer instead of sleeping through it,
and MPI's int counts never overflow. Ranks may hold different names and sizes.
"""
from __future__ import annotations

import json
import struct

import numpy

from . import mpi

__all__ = ["gather_arrays", "pack", "unpack"]

_PIECE_BYTES = 1 << 20
_LENGTH = struct.Struct("<Q")
_MISMATCH = "a packed buffer of %d bytes does not match its header"


def pack(arrays: dict) -> numpy.ndarray:
    """``arrays`` (name -> numpy array) as one flat uint8 buffer."""
    header, blobs = [], []
    for name, arr in arrays.items():
        arr = numpy.ascontiguousarray(arr)
        if arr.dtype.hasobject:
            raise TypeError("array %r has dtype object, which is never sent" % (name,))
        header.append([name, arr.dtype.str, list(arr.shape)])
        blobs.append(arr.reshape(-1).view(numpy.uint8))
    head = json.dumps(header).encode("utf-8")
    parts = [numpy.frombuffer(_LENGTH.pack(len(head)), numpy.uint8),
             numpy.frombuffer(head, numpy.uint8)]
    return numpy.concatenate(parts + blobs)


def unpack(buf: numpy.ndarray) -> dict:
    """What :func:`pack` packed (fresh, aligned arrays); ValueError if the sizes do not add up."""
    raw = buf.tobytes() if not isinstance(buf, (bytes, bytearray)) else bytes(buf)
    (n,) = _LENGTH.unpack_from(raw, 0)
    header = json.loads(raw[_LENGTH.size:_LENGTH.size + n].decode("utf-8"))
    at = _LENGTH.size + n
    out = {}
    for name, dtype, shape in header:
        dt = numpy.dtype(dtype)
        count = int(numpy.prod(shape, dtype=numpy.int64))
        end = at + count * dt.itemsize
        if end > len(raw):
            raise ValueError(_MISMATCH % len(raw))
        out[name] = numpy.frombuffer(raw, dtype=dt, count=count, offset=at).reshape(shape).copy()
        at = end
    if at != len(raw):
        raise ValueError(_MISMATCH % len(raw))
    return out


def gather_arrays(comm, job, arrays: dict, root: int, what: str):
    """Collective over ``comm``: on ``root``, every rank's ``arrays`` as a list indexed by rank;
    None on the other ranks. Waits as :func:`.mpi.wait` does (timeout, departed peers)."""
    MPI = mpi.load_mpi()
    mine = pack(arrays)
    rank, size = comm.Get_rank(), comm.Get_size()
    length = numpy.array([mine.size], dtype=numpy.int64)
    lengths = numpy.empty(size, dtype=numpy.int64)
    mpi.wait(comm.Iallgather(length, lengths), "sizes for " + what, job=job)
    if rank == root:
        every = [numpy.empty(int(n), dtype=numpy.uint8) for n in lengths]
    for start in range(0, int(lengths.max()), _PIECE_BYTES):
        counts = numpy.clip(lengths - start, 0, _PIECE_BYTES)
        send = [mine[start:start + int(counts[rank])], MPI.BYTE]
        recv = None
        if rank == root:
            displs = numpy.concatenate([[0], numpy.cumsum(counts)[:-1]])
            piece = numpy.empty(int(counts.sum()), dtype=numpy.uint8)
            recv = [piece, counts.tolist(), displs.tolist(), MPI.BYTE]
        mpi.wait(comm.Igatherv(send, recv, root=root), what, job=job)
        if rank == root:
            for r in range(size):
                n, d = int(counts[r]), int(displs[r])
                every[r][start:start + n] = piece[d:d + n]
    if rank != root:
        return None
    return [unpack(buf) for buf in every]
