"""``nd.im2col`` and ``nd.col2im``: MXNet 1.9.1's unfolding of (N, C, *spatial) data into the
columns a convolution multiplies ((N, C * prod(kernel), L), rows channel-major then kernel
position, L output positions in row-major order), and its adjoint, which adds the columns back
(in kernel order, as MXNet's loop adds them). Each is the other's gradient."""
from __future__ import annotations

import math
import numbers

from ..base import ShapeError
from .ndarray import _result, _xp_of
from .nn import _offsets, _tuple

__all__ = ["im2col", "col2im"]


def _geometry(op, spatial, kernel, stride, dilate, pad):
    kernel = tuple(int(k) for k in ((kernel,) if isinstance(kernel, numbers.Integral)
                                    else kernel))
    dims = len(kernel)
    if len(spatial) != dims:
        raise ShapeError("%s: a kernel of %d dimensions needs data of %d spatial axes, got %d"
                         % (op, dims, dims, len(spatial)))
    stride = _tuple(stride, dims, 1, op + ": stride")
    dilate = _tuple(dilate, dims, 1, op + ": dilate")
    pad = _tuple(pad, dims, 0, op + ": pad")
    out = tuple((n + 2 * p - d * (k - 1) - 1) // s + 1
                for n, k, s, d, p in zip(spatial, kernel, stride, dilate, pad))
    if any(o < 1 for o in out):
        raise ShapeError("%s: the kernel %s (dilated %s) does not fit the padded input %s"
                         % (op, kernel, dilate, tuple(n + 2 * p for n, p in zip(spatial, pad))))
    return kernel, stride, dilate, pad, out


def _windows(kernel, stride, dilate, out):
    """For each kernel position (row-major), the slices of the padded input it reads."""
    for offsets in _offsets(kernel):
        yield tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                    for o, d, s, n in zip(offsets, dilate, stride, out))


def _unfold(d, kernel, stride, dilate, pad, out):
    xp = _xp_of(d)
    padded = xp.pad(d, [(0, 0), (0, 0)] + [(p, p) for p in pad]) if any(pad) else d
    cols = xp.stack([padded[(slice(None), slice(None)) + w]
                     for w in _windows(kernel, stride, dilate, out)], axis=2)
    return cols.reshape(d.shape[0], -1, math.prod(out))


def _fold(cols, channels, spatial, kernel, stride, dilate, pad, out):
    xp = _xp_of(cols)
    n = cols.shape[0]
    k = math.prod(kernel)
    parts = cols.reshape((n, channels, k) + tuple(out))
    padded = xp.zeros((n, channels) + tuple(s + 2 * p for s, p in zip(spatial, pad)),
                      dtype=cols.dtype)
    for i, w in enumerate(_windows(kernel, stride, dilate, out)):
        padded[(slice(None), slice(None)) + w] += parts[:, :, i]
    crop = tuple(slice(p, p + s) for p, s in zip(pad, spatial))
    return padded[(slice(None), slice(None)) + crop]


def im2col(data, kernel=None, stride=(), dilate=(), pad=()):
    """The columns of ``data`` (N, C, *spatial) a convolution of ``kernel`` multiplies:
    (N, C * prod(kernel), number of output positions)."""
    d = data._data
    kernel, stride, dilate, pad, out = _geometry("im2col", d.shape[2:], kernel, stride, dilate,
                                                 pad)
    cols = _unfold(d, kernel, stride, dilate, pad, out)
    channels, spatial = d.shape[1], d.shape[2:]
    return _result(cols, data._ctx, (data,), lambda g, needs: (
        _fold(g, channels, spatial, kernel, stride, dilate, pad, out),))


def col2im(data, output_size=None, kernel=None, stride=(), dilate=(), pad=()):
    """The (N, C, *output_size) array whose ``im2col`` columns ``data`` holds, overlapping
    positions added."""
    cols = data._data
    spatial = tuple(int(s) for s in ((output_size,) if isinstance(output_size, numbers.Integral)
                                     else output_size))
    kernel, stride, dilate, pad, out = _geometry("col2im", spatial, kernel, stride, dilate, pad)
    k = math.prod(kernel)
    if cols.ndim != 3 or cols.shape[1] % k or cols.shape[2] != math.prod(out):
        raise ShapeError("col2im: data must be (N, C * %d, %d) for these sizes, got %s"
                         % (k, math.prod(out), cols.shape))
    channels = cols.shape[1] // k
    image = _fold(cols, channels, spatial, kernel, stride, dilate, pad, out)
    return _result(image, data._ctx, (data,), lambda g, needs: (
        _unfold(g, kernel, stride, dilate, pad, out),))
