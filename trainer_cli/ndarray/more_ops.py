"""The ``nd`` names beyond the core ops that Gluon training code uses: MXNet 1.9.1's aliases,
logical ops, sequence masking, gathering and scattering, moments and finiteness checks.

Most are compositions of the differentiable ops in ``ops``, so their gradients come from those;
the rest compute on the raw array and record their own vector-Jacobian product. The list of
MXNet's ``nd`` names and what happened to each is the table in docs/compat.md.
"""
from __future__ import annotations

import numpy

from ..base import ShapeError
from . import integers as _integers
from . import ops as _ops
from .ndarray import NDArray, _recorded, _recording_for, _scatter_add, _wrap, _xp_of

__all__ = [
    "broadcast_plus", "broadcast_minus", "broadcast_mod", "modulo", "true_divide",
    "broadcast_hypot", "logical_not", "logical_and", "logical_or", "logical_xor",
    "broadcast_logical_and", "broadcast_logical_or", "broadcast_logical_xor", "reverse",
    "moveaxis", "nansum", "nanprod", "cumsum", "slice_like", "shape_array", "size_array",
    "argmax_channel", "batch_take", "gather_nd", "scatter_nd", "SequenceMask", "SequenceLast",
    "SequenceReverse", "L2Normalization", "softmax_cross_entropy", "make_loss", "MakeLoss",
    "moments", "all_finite", "multi_all_finite", "split_v2", "depth_to_space", "space_to_depth",
    "UpSampling", "SoftmaxActivation", "onehot_encode", "diag",
    "ravel_multi_index", "unravel_index", "from_numpy", "reset_arrays", "multi_sum_sq",
    "choose_element_0index", "fill_element_0index",
]

broadcast_plus = _ops.add
broadcast_minus = _ops.subtract
true_divide = _ops.divide
reverse = _ops.flip


def modulo(lhs, rhs):
    """``lhs % rhs`` with MXNet's gradients: 1 for ``lhs``, ``-floor(lhs / rhs)`` for ``rhs``."""
    if not isinstance(lhs, NDArray):
        return _scalar_mod(lhs, rhs)
    a = lhs._data
    b = rhs._data if isinstance(rhs, NDArray) else _scalar_in(rhs, a.dtype)
    xp = _xp_of(a)
    out = xp.mod(a, b).astype(a.dtype, copy=False)
    inputs = (lhs, rhs) if isinstance(rhs, NDArray) else (lhs,)
    if not _recording_for(*inputs):
        return _wrap(out, lhs._ctx)
    from .ndarray import unbroadcast

    def vjp(g, needs):
        ga = unbroadcast(g * xp.ones_like(out), a.shape)
        if len(inputs) == 1:
            return (ga,)
        gb = unbroadcast(-g * xp.floor(a / b), b.shape) if needs[1] else None
        return ga, gb
    return _recorded(out, lhs._ctx, inputs, vjp)


def _scalar_in(value, dtype):
    """A scalar operand in an integer array's dtype as MXNet converts it (-7 is 249 for
    uint8); other scalars as they are."""
    return _integers.scalar(value, dtype) if dtype.kind in "iu" else value


def _scalar_mod(lhs, rhs):
    """``scalar % rhs``; MXNet's gradient for ``rhs`` is ``-floor(scalar / rhs)``."""
    b = rhs._data
    xp = _xp_of(b)
    out = xp.mod(xp.asarray(_scalar_in(lhs, b.dtype), dtype=b.dtype), b).astype(b.dtype,
                                                                                  copy=False)
    if not _recording_for(rhs):
        return _wrap(out, rhs._ctx)
    return _recorded(out, rhs._ctx, (rhs,), lambda g, needs: (-g * xp.floor(lhs / b),))


broadcast_mod = modulo


def broadcast_hypot(lhs, rhs):
    return _ops.sqrt(_ops.square(lhs) + _ops.square(rhs))


def _logical(lhs, rhs, fn):
    a = lhs._data
    b = rhs._data if isinstance(rhs, NDArray) else rhs
    return _wrap(fn(a != 0, b != 0).astype(a.dtype), lhs._ctx)


def logical_not(data):
    return _wrap((data._data == 0).astype(data._data.dtype), data._ctx)


def logical_and(lhs, rhs):
    return _logical(lhs, rhs, lambda x, y: x & y)


def logical_or(lhs, rhs):
    return _logical(lhs, rhs, lambda x, y: x | y)


def logical_xor(lhs, rhs):
    return _logical(lhs, rhs, lambda x, y: x ^ y)


broadcast_logical_and = logical_and
broadcast_logical_or = logical_or
broadcast_logical_xor = logical_xor


def moveaxis(tensor, source, destination):
    order = [i for i in range(tensor.ndim) if i != source % tensor.ndim]
    order.insert(destination % tensor.ndim, source % tensor.ndim)
    return _ops.transpose(tensor, axes=tuple(order))


def _without_nan(data, fill):
    nan = data != data
    return _ops.where(nan, _ops.full_like(data, fill), data)


def nansum(data, axis=None, keepdims=False, exclude=False):
    """The sum with NaNs counted as 0 (their gradient is 0)."""
    return _ops.sum(_without_nan(data, 0), axis=axis, keepdims=keepdims, exclude=exclude)


def nanprod(data, axis=None, keepdims=False, exclude=False):
    """The product with NaNs counted as 1."""
    return _ops.prod(_without_nan(data, 1), axis=axis, keepdims=keepdims, exclude=exclude)


def cumsum(a, axis=None, dtype=None):
    """Cumulative sum along ``axis`` (flattened when None), in ``dtype``."""
    d = a._data
    xp = _xp_of(d)
    src = d.reshape(-1) if axis is None else d
    ax = 0 if axis is None else axis % d.ndim
    if dtype is None and d.dtype.kind in "iu":
        dtype = d.dtype         # MXNet keeps (and wraps in) an integer dtype
    out = xp.cumsum(src, axis=ax, dtype=None if dtype is None else numpy.dtype(dtype))
    if not _recording_for(a):
        return _wrap(out, a._ctx)

    def vjp(g, needs):
        rev = xp.flip(xp.cumsum(xp.flip(g, axis=ax), axis=ax), axis=ax)
        return (rev.reshape(d.shape).astype(d.dtype, copy=False),)
    return _recorded(out, a._ctx, (a,), vjp)


def slice_like(data, shape_like, axes=()):
    """``data`` cut to the shape of ``shape_like`` from the start of each axis (``axes``: only
    those)."""
    axes = range(shape_like.ndim) if not axes else [ax % data.ndim for ax in axes]
    keys = [slice(None)] * data.ndim
    for ax in axes:
        keys[ax] = slice(0, shape_like.shape[ax])
    return data[tuple(keys)]


def shape_array(data):
    return _wrap(numpy.array(data.shape, dtype=numpy.int64), data._ctx) if data._xp is numpy \
        else _wrap(data._xp.asarray(data.shape, dtype=numpy.int64), data._ctx)


def size_array(data):
    return _wrap(data._xp.asarray([data.size], dtype=numpy.int64), data._ctx)


def argmax_channel(data):
    return _ops.argmax(data, axis=-1)


def batch_take(a, indices):
    """``a[i, indices[i]]`` for each row ``i`` of the 2-D ``a`` (indices clipped)."""
    return _ops.pick(a, indices, axis=-1, mode="clip")


def _gather(data, key):
    """``data[key]`` for an index tuple ``key``; its gradient adds back at the same places."""
    d = data._data
    out = d[key]
    if not _recording_for(data):
        return _wrap(out, data._ctx)

    def vjp(g, needs):
        z = _xp_of(d).zeros(d.shape, dtype=d.dtype)
        _scatter_add(z, key, g)
        return (z,)
    return _recorded(out, data._ctx, (data,), vjp)


def gather_nd(data, indices):
    """``data[indices[0], indices[1], ...]``: the first axis of ``indices`` indexes the leading
    axes of ``data``."""
    return _gather(data, tuple(indices._data.astype(numpy.int64)))


def scatter_nd(data, indices, shape):
    """Zeros of ``shape`` with ``data`` written at ``indices`` (the inverse of ``gather_nd``;
    for a repeated index the last write wins in NumPy, MXNet leaves it unspecified)."""
    d = data._data
    xp = _xp_of(d)
    key = tuple(indices._data.astype(numpy.int64))
    out = xp.zeros(tuple(shape), dtype=d.dtype)
    out[key] = d
    if not _recording_for(data):
        return _wrap(out, data._ctx)
    return _recorded(out, data._ctx, (data,), lambda g, needs: (g[key],))


def _sequence_lengths(data, sequence_length, use_sequence_length, axis):
    steps = data.shape[axis]
    batch = data.shape[1 - axis]
    if not use_sequence_length:
        return numpy.full(batch, steps, numpy.int64)
    lengths = numpy.asarray(sequence_length.asnumpy()).astype(numpy.int64)
    if lengths.shape != (batch,):
        raise ShapeError("sequence_length must have shape (%d,), got %s" % (batch, lengths.shape))
    return lengths


def _time_mask(data, lengths, axis):
    """1 where the step is inside its sequence, shaped to broadcast against ``data``."""
    steps = data.shape[axis]
    inside = numpy.arange(steps)[:, None] < lengths[None, :]            # (T, N)
    if axis == 1:
        inside = inside.T
    shape = inside.shape + (1,) * (data.ndim - 2)
    return _wrap(data._xp.asarray(inside.reshape(shape).astype(data.dtype)), data._ctx)


def SequenceMask(data, sequence_length=None, use_sequence_length=False, value=0.0, axis=0):
    """Steps past each sequence's length set to ``value`` (time on ``axis`` 0 or 1, batch on
    the other)."""
    if axis not in (0, 1):
        raise ValueError("SequenceMask: axis must be 0 or 1, got %r" % (axis,))
    lengths = _sequence_lengths(data, sequence_length, use_sequence_length, axis)
    mask = _time_mask(data, lengths, axis)
    return data * mask + (1 - mask) * value


def SequenceLast(data, sequence_length=None, use_sequence_length=False, axis=0):
    """Each sequence's last step (time on ``axis``): shape ``data.shape`` without ``axis``."""
    if axis not in (0, 1):
        raise ValueError("SequenceLast: axis must be 0 or 1, got %r" % (axis,))
    lengths = _sequence_lengths(data, sequence_length, use_sequence_length, axis)
    index = _wrap(data._xp.asarray(lengths - 1), data._ctx)
    moved = data if axis == 0 else _ops.swapaxes(data, 0, 1)         # (T, N, ...)
    batch_first = _ops.swapaxes(moved, 0, 1)                           # (N, T, ...)
    rest = batch_first.shape[2:]
    flat = _ops.reshape(batch_first, (batch_first.shape[0], batch_first.shape[1], -1))
    picked = _ops.pick(flat, _ops.broadcast_to(_ops.reshape(index, (-1, 1)),
                                               (flat.shape[0], flat.shape[2])), axis=1)
    return _ops.reshape(picked, (flat.shape[0],) + rest)


def SequenceReverse(data, sequence_length=None, use_sequence_length=False, axis=0):
    """Each sequence's first ``length`` steps reversed, the padding left in place (time on
    axis 0, as MXNet requires)."""
    if axis != 0:
        raise ValueError("SequenceReverse: only axis=0 is supported (as in MXNet), got %r" % (axis,))
    lengths = _sequence_lengths(data, sequence_length, use_sequence_length, 0)
    steps = data.shape[0]
    t = numpy.arange(steps)[:, None]
    src = numpy.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)   # (T, N)
    batch = numpy.arange(data.shape[1])[None, :]
    xp = data._xp
    return _gather(data, (xp.asarray(src), xp.asarray(numpy.broadcast_to(batch, src.shape))))


def L2Normalization(data, eps=1e-10, mode="instance"):
    """``data / sqrt(sum(data^2) + eps)`` over every axis but the first (``instance``), the
    channel axis 1 (``channel``) or the axes after it (``spatial``)."""
    if mode == "instance":
        axes = tuple(range(1, data.ndim))
    elif mode == "channel":
        axes = (1,)
    elif mode == "spatial":
        axes = tuple(range(2, data.ndim))
    else:
        raise ValueError("L2Normalization: mode must be instance, channel or spatial, got %r" % (mode,))
    norm = _ops.sqrt(_ops.sum(_ops.square(data), axis=axes, keepdims=True) + eps)
    return data / norm


def softmax_cross_entropy(data, label):
    """The summed cross-entropy of softmax(data) against class indices: shape (1,)."""
    return _ops.reshape(-_ops.sum(_ops.pick(_ops.log_softmax(data, axis=-1), label, axis=-1)), (1,))


def make_loss(data, grad_scale=1.0, valid_thresh=0.0, normalization="null"):
    """``data`` unchanged, whose gradient is ``grad_scale`` (the head gradient is ignored, as
    MXNet's loss-output operator does; ``normalization`` 'batch' divides it by the batch size,
    'valid' by the number of elements above ``valid_thresh``)."""
    d = data._data
    out = d.copy()
    if not _recording_for(data):
        return _wrap(out, data._ctx)
    xp = _xp_of(d)

    def vjp(g, needs):
        scale = grad_scale
        if normalization == "batch":
            scale = scale / d.shape[0]
        elif normalization == "valid":
            scale = scale / max(int((d > valid_thresh).sum()), 1)
        return (xp.full(d.shape, scale, dtype=d.dtype),)
    return _recorded(out, data._ctx, (data,), vjp)


MakeLoss = make_loss


def moments(data, axes=None, keepdims=False):
    """``[mean, variance]`` over ``axes`` (the biased variance)."""
    mean = _ops.mean(data, axis=axes, keepdims=True)
    var = _ops.mean(_ops.square(data - mean), axis=axes, keepdims=keepdims)
    if not keepdims:
        mean = _ops.mean(data, axis=axes, keepdims=False)
    return [mean, var]


def all_finite(data, init_output=True):
    """``[1.]`` when every value of ``data`` is finite, else ``[0.]`` (float32)."""
    ok = bool(data._xp.isfinite(data._data).all())
    return _wrap(data._xp.asarray([1.0 if ok else 0.0], dtype=numpy.float32), data._ctx)


def multi_all_finite(*arrays, num_arrays=None, init_output=True):
    ok = all(bool(a._xp.isfinite(a._data).all()) for a in arrays)
    return _wrap(arrays[0]._xp.asarray([1.0 if ok else 0.0], dtype=numpy.float32), arrays[0]._ctx)


def split_v2(ary, indices_or_sections, axis=0, squeeze_axis=False):
    """NumPy's ``split``: into equal sections, or at the given indices."""
    size = ary.shape[axis]
    if isinstance(indices_or_sections, int):
        if size % indices_or_sections:
            raise ShapeError("split_v2: axis of length %d does not split into %d equal sections"
                             % (size, indices_or_sections))
        step = size // indices_or_sections
        bounds = [i * step for i in range(indices_or_sections)] + [size]
    else:
        bounds = [0] + list(indices_or_sections) + [size]
    parts = []
    for begin, end in zip(bounds[:-1], bounds[1:]):
        part = _ops.slice_axis(ary, axis, begin, end)
        if squeeze_axis and end - begin == 1:
            part = _ops.squeeze(part, axis=axis)
        parts.append(part)
    return parts


def depth_to_space(data, block_size):
    """(N, C*b*b, H, W) to (N, C, H*b, W*b), MXNet's (DCR) order."""
    n, c, h, w = data.shape
    b = block_size
    x = _ops.reshape(data, (n, b, b, c // (b * b), h, w))
    x = _ops.transpose(x, axes=(0, 3, 4, 1, 5, 2))
    return _ops.reshape(x, (n, c // (b * b), h * b, w * b))


def space_to_depth(data, block_size):
    """(N, C, H*b, W*b) to (N, C*b*b, H, W), the inverse of ``depth_to_space``."""
    n, c, h, w = data.shape
    b = block_size
    x = _ops.reshape(data, (n, c, h // b, b, w // b, b))
    x = _ops.transpose(x, axes=(0, 3, 5, 1, 2, 4))
    return _ops.reshape(x, (n, c * b * b, h // b, w // b))


def UpSampling(*data, scale=1, sample_type="nearest", num_args=1, num_filter=0,
               multi_input_mode="concat", workspace=512):
    """Nearest-neighbour upsampling of (N, C, H, W) by ``scale`` (several inputs are each
    upsampled to the first one's size times ``scale`` and concatenated on channels)."""
    if sample_type != "nearest":
        raise NotImplementedError("UpSampling: only sample_type='nearest' is implemented; "
                                  "'bilinear' (a Deconvolution with a fixed kernel) is not")
    target_h = data[0].shape[2] * scale
    outs = []
    for x in data:
        s = target_h // x.shape[2]
        outs.append(_ops.repeat(_ops.repeat(x, s, axis=2), s, axis=3))
    if len(outs) == 1:
        return outs[0]
    if multi_input_mode == "sum":
        return _ops.add_n(*outs)
    return _ops.concat(*outs, dim=1)


def SoftmaxActivation(data, mode="instance"):
    """Softmax over the last axis (``instance``: MXNet views the array as rows of its last
    axis) or over axis 1 (``channel``)."""
    if mode == "channel":
        return _ops.softmax(data, axis=1)
    if mode != "instance":
        raise ValueError("SoftmaxActivation: mode must be instance or channel, got %r" % (mode,))
    return _ops.softmax(data, axis=-1)


def onehot_encode(indices, out):
    """The legacy one-hot writer: ``out`` (batch, classes) gets 1 at each row's index."""
    out[:] = _ops.one_hot(indices, out.shape[1], dtype=out.dtype)
    return out


def diag(data, k=0, axis1=0, axis2=1):
    """The ``k``-th diagonal of a 2-D (or ``axis1``/``axis2`` of an N-D) array, or the 2-D
    array with a 1-D ``data`` on its ``k``-th diagonal."""
    d = data._data
    xp = _xp_of(d)
    if d.ndim == 1:
        out = xp.diag(d, k)
        n = d.shape[0]
        rows = xp.arange(n) + max(-k, 0)
        cols = xp.arange(n) + max(k, 0)
        if not _recording_for(data):
            return _wrap(out, data._ctx)
        return _recorded(out, data._ctx, (data,), lambda g, needs: (g[rows, cols],))
    out = xp.diagonal(d, k, axis1, axis2).copy()
    if not _recording_for(data):
        return _wrap(out, data._ctx)

    def vjp(g, needs):
        z = xp.zeros(d.shape, dtype=d.dtype)
        # diagonal() is a read-only view in NumPy: write through index arrays on a moved view.
        n = out.shape[-1]
        moved = xp.moveaxis(z, (axis1 % d.ndim, axis2 % d.ndim), (-2, -1))
        i = xp.arange(n) + max(-k, 0)
        j = xp.arange(n) + max(k, 0)
        moved[..., i, j] = g
        return (z,)
    return _recorded(out, data._ctx, (data,), vjp)


def ravel_multi_index(data, shape):
    """Flat indices from the (ndim, n) coordinate rows of ``data`` (float, as MXNet)."""
    d = data.asnumpy().astype(numpy.int64)
    flat = numpy.ravel_multi_index(tuple(d), tuple(shape), mode="wrap")
    return _wrap(data._xp.asarray(flat.astype(data.dtype)), data._ctx)


def unravel_index(data, shape):
    """The (ndim, n) coordinates of the flat indices in ``data``."""
    d = data.asnumpy().astype(numpy.int64)
    coords = numpy.stack(numpy.unravel_index(d % int(numpy.prod(shape)), tuple(shape)))
    return _wrap(data._xp.asarray(coords.astype(data.dtype)), data._ctx)


def from_numpy(ndarray, zero_copy=True):
    """An NDArray over a NumPy array: sharing its memory with ``zero_copy`` where it is
    C-contiguous (as MXNet; writes through either are seen by both), else a copy."""
    from ..context import cpu
    arr = numpy.asarray(ndarray)
    if not (zero_copy and arr.flags.c_contiguous and arr.flags.writeable):
        arr = numpy.array(arr, order="C")
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return _wrap(arr, cpu())


def reset_arrays(*arrays, num_arrays=None):
    """Sets every array to zero, in place."""
    for a in arrays:
        a._data[...] = 0


def multi_sum_sq(*arrays, num_arrays=None):
    """The sum of squares of each array, as one float32 array of ``len(arrays)`` values."""
    xp = arrays[0]._xp
    sums = [xp.square(a._data.astype(numpy.float32)).sum() for a in arrays]
    return _wrap(xp.stack(sums).astype(numpy.float32), arrays[0]._ctx)


choose_element_0index = batch_take


def fill_element_0index(lhs, mhs, rhs):
    """A copy of the 2-D ``lhs`` with ``lhs[i, rhs[i]] = mhs[i]`` for each row ``i``."""
    out = lhs._data.copy()
    rows = _xp_of(out).arange(out.shape[0])
    out[rows, rhs._data.astype(numpy.int64)] = mhs._data
    return _wrap(out, lhs._ctx)
