"""Creating arrays: from data, filled, ranges; and saving/loading them without pickle."""
from __future__ import annotations

import os

import numpy

from ..context import Context, current_context
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
    if ctx.is_gpu:
        with ctx.device_scope():
            data = ctx.xp.array(source_array, dtype=dtype)
    else:
        data = numpy.array(source_array, dtype=dtype)
    if data.ndim == 0:
        data = data.reshape(1)
    return _wrap(data, ctx)


def zeros(shape, ctx=None, dtype=None, **kwargs):
    return _alloc(lambda xp, s, d: xp.zeros(s, dtype=d), shape, ctx, dtype)


def ones(shape, ctx=None, dtype=None, **kwargs):
    return _alloc(lambda xp, s, d: xp.ones(s, dtype=d), shape, ctx, dtype)


def full(shape, val, ctx=None, dtype=None, out=None):
    result = _alloc(lambda xp, s, d: xp.full(s, val, dtype=d), shape, ctx, dtype)
    if out is not None:
        out[:] = result
        return out
    return result


def empty(shape, ctx=None, dtype=None):
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
    """Save an NDArray, a list or a str-keyed dict of them as an ``.npz`` file (no pickle)."""
    if isinstance(data, NDArray):
        data = [data]
    if isinstance(data, dict):
        arrays = {"k:" + str(k): v.asnumpy() for k, v in data.items()}
    else:
        arrays = {"i:%08d" % i: v.asnumpy() for i, v in enumerate(data)}
    from .._atomic import atomic_write
    from .._npz import write_npz
    with atomic_write(fname) as f:
        write_npz(f, arrays)


def load(fname, ctx=None):
    """Load what ``save`` wrote: a list or a dict of NDArrays."""
    with numpy.load(os.fspath(fname), allow_pickle=False) as npz:
        keys = list(npz.keys())
        if keys and all(k.startswith("i:") for k in keys):
            return [array(npz[k], ctx=ctx, dtype=npz[k].dtype) for k in sorted(keys)]
        return {k[2:] if k.startswith("k:") else k: array(npz[k], ctx=ctx, dtype=npz[k].dtype) for k in keys}

