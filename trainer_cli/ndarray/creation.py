"""Creating arrays: from data, filled, ranges; and saving/loading them without pickle."""
from __future__ import annotations

import os

import numpy

from ..context import Context, current_context
from . import sparse as _sparse
from .ndarray import NDArray, _transfer, _wrap

__all__ = ["array", "zeros", "ones", "full", "empty", "arange", "eye", "linspace", "save", "load",
           "waitall"]

_DEFAULT_DTYPE = numpy.float32


def _ctx(ctx):
    return current_context() if ctx is None else Context(ctx)


def _shape(shape):
    return (shape,) if isinstance(shape, (int, numpy.integer)) else tuple(shape)


def _alloc(fill, shape, ctx, dtype):
    ctx = _ctx(ctx)
    dtype = numpy.dtype(_DEFAULT_DTYPE if dtype is None else dtype)
    xp = ctx.xp
    with ctx.device_scope():
        return _wrap(fill(xp, _shape(shape), dtype), ctx)


def array(source_array, ctx=None, dtype=None):
    """An NDArray copied from ``source_array``; float32 unless ``dtype`` says (or it is an NDArray)."""
    ctx = _ctx(ctx)
    if isinstance(source_array, NDArray):
        dtype = source_array.dtype if dtype is None else dtype
        data = _transfer(source_array._data, ctx, copy=True).astype(dtype, copy=False)
        return _wrap(data, ctx)
    dtype = numpy.dtype(_DEFAULT_DTYPE if dtype is None else dtype)
    if dtype.kind in "iu" and not isinstance(source_array, (numpy.ndarray, numpy.generic)):
        # Python ints beyond the dtype wrap, as MXNet's (NumPy 1's) cast does; NumPy 2 refuses
        # them as they are, not as an int64 array cast below.
        wide = numpy.asarray(source_array)
        if wide.dtype.kind in "iu":
            source_array = wide
    if ctx.is_gpu:
        with ctx.device_scope():
            data = ctx.xp.array(source_array, dtype=dtype)
    else:
        data = numpy.array(source_array, dtype=dtype)
    if data.ndim == 0:
        data = data.reshape(1)
    return _wrap(data, ctx)


def zeros(shape, ctx=None, dtype=None, stype=None, **kwargs):
    """Zeros of ``shape``; ``stype='row_sparse'`` or ``'csr'`` gives a sparse array storing
    nothing (MXNet)."""
    if stype not in (None, "default"):
        return _sparse.zeros(stype, shape, ctx=None if ctx is None else _ctx(ctx), dtype=dtype)
    return _alloc(lambda xp, s, d: xp.zeros(s, dtype=d), shape, ctx, dtype)


def ones(shape, ctx=None, dtype=None, **kwargs):
    return _alloc(lambda xp, s, d: xp.ones(s, dtype=d), shape, ctx, dtype)


def full(shape, val, ctx=None, dtype=None, out=None):
    result = _alloc(lambda xp, s, d: xp.full(s, val, dtype=d), shape, ctx, dtype)
    if out is not None:
        out[:] = result
        return out
    return result


def empty(shape, ctx=None, dtype=None, stype=None):
    """An uninitialised array; a sparse ``stype`` stores nothing (MXNet)."""
    if stype not in (None, "default"):
        return _sparse.zeros(stype, shape, ctx=None if ctx is None else _ctx(ctx), dtype=dtype)
    return _alloc(lambda xp, s, d: xp.empty(s, dtype=d), shape, ctx, dtype)


def arange(start, stop=None, step=1.0, repeat=1, infer_range=None, ctx=None, dtype=None):
    def fill(xp, s, d):
        values = xp.arange(start, stop, step, dtype=numpy.float64).astype(d)
        return xp.repeat(values, repeat) if repeat != 1 else values
    return _alloc(fill, (), ctx, dtype)


def eye(N, M=0, k=0, ctx=None, dtype=None):
    return _alloc(lambda xp, s, d: xp.eye(N, M or None, k, dtype=d), (), ctx, dtype)


def linspace(start, stop, num, endpoint=True, ctx=None, dtype=None):
    return _alloc(lambda xp, s, d: xp.linspace(start, stop, num, endpoint=endpoint, dtype=d), (), ctx, dtype)


def waitall():
    """Block until every device's work is done (NumPy work is always done)."""
    from ..context import _cupy
    if _cupy is not None:
        _cupy.cuda.Device().synchronize()


def save(fname, data):
    """Save an NDArray, a list or a str-keyed dict of them in MXNet's binary format, as
    ``mx.nd.save`` does (real MXNet loads the file), atomically."""
    if isinstance(data, NDArray):
        data = [data]
    if isinstance(data, dict):
        if any(not isinstance(k, str) for k in data) or \
                any(not isinstance(v, NDArray) for v in data.values()):
            raise TypeError("save only accept dict str->NDArray or list of NDArray")
        names, arrays = list(data), list(data.values())
    elif isinstance(data, (list, tuple)):
        if any(not isinstance(v, NDArray) for v in data):
            raise TypeError("save only accept dict str->NDArray or list of NDArray")
        names, arrays = None, list(data)
    else:
        raise ValueError("data needs to either be a NDArray, dict of str, NDArray pairs "
                         "or a list of NDarrays.")
    from .._atomic import atomic_write
    from .mxnet_format import write_mxnet_file
    with atomic_write(fname) as f:
        write_mxnet_file(f, [_sparse.to_record(a) if a._sparse else a.asnumpy() for a in arrays],
                         names, [(a.context.device_typeid, a.context.device_id) for a in arrays])


def load(fname, ctx=None):
    """Load a list or a dict of NDArrays from a file in MXNet's binary format (written by MXNet or
    by ``save``), or from the ``.npz`` that earlier trainer_cli versions wrote.

    A truncated, corrupted or foreign file raises ``MXNetFileError`` (a ``ValueError``).
    """
    from .mxnet_format import MXNetFileError, SparseRecord, is_mxnet_file, read_mxnet_file
    path = os.fspath(fname)
    from .._bounded import open_regular
    try:
        with open_regular(path) as f:  # a FIFO would block open() forever, /dev/zero never end
            head = f.read(8)
    except OSError as exc:
        raise MXNetFileError("%s: cannot open (%s)" % (path, exc.strerror or exc)) from None
    if head.startswith(b"PK\x03\x04"):
        return _load_npz(path, ctx)
    if not is_mxnet_file(head):
        raise MXNetFileError("%s: not an array file (neither MXNet's binary format nor an .npz)"
                             % path)
    arrays, names = read_mxnet_file(path, sparse=True)
    loaded = [_sparse.from_record(a, ctx) if isinstance(a, SparseRecord)
              else array(a, ctx=ctx, dtype=a.dtype) for a in arrays]
    return loaded if names is None else dict(zip(names, loaded))


def _load_npz(path, ctx):
    from .._bounded import open_regular
    from .._npz import read_npz

    try:
        # read_npz, not numpy.load: headers checked against the bytes, sizes before inflating
        with open_regular(path) as f:
            npz = read_npz(f)
        keys = list(npz)
        if keys and all(k.startswith("i:") for k in keys):
            return [array(npz[k], ctx=ctx, dtype=npz[k].dtype) for k in sorted(keys)]
        return {k[2:] if k.startswith("k:") else k: array(npz[k], ctx=ctx, dtype=npz[k].dtype)
                for k in keys}
    except Exception as exc:  # noqa: BLE001 - any failure to parse the archive means a bad file
        from .mxnet_format import MXNetFileError
        raise MXNetFileError("%s: cannot read the .npz archive (%s: %s)"
                             % (path, type(exc).__name__, exc)) from None
