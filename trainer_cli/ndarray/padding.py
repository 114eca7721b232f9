"""``pad`` (MXNet's ``Pad`` operator): constant, edge or reflect padding of 4-D and 5-D arrays."""
from __future__ import annotations

import numpy

from ..base import ShapeError
from .ndarray import _result, _scatter_add, _xp_of

__all__ = ["pad", "Pad"]

_MODES = ("constant", "edge", "reflect")


def _source_index(size, before, after, mode):
    """For each padded position along one axis, the input position it copies (edge/reflect)."""
    pos = numpy.arange(-before, size + after)
    if mode == "edge":
        return numpy.clip(pos, 0, size - 1)
    period = 2 * (size - 1)  # reflect: mirror without repeating the edge, as numpy's 'reflect'
    pos = numpy.abs(pos) % period if period else numpy.zeros_like(pos)
    return numpy.where(pos >= size, period - pos, pos)


def pad(data=None, mode="constant", pad_width=None, constant_value=0.0, out=None, **kwargs):
    """Pad ``data`` by ``pad_width`` ``(before0, after0, before1, after1, ...)``, one pair per
    axis. As MXNet: 4-D or 5-D input, the first two axes unpadded, reflect needs a padding smaller
    than the axis."""
    x = data._data
    xp = _xp_of(x)
    if mode not in _MODES:
        raise ValueError("pad mode must be one of %s, not %r" % (", ".join(_MODES), mode))
    if x.ndim not in (4, 5):
        raise ShapeError("pad supports 4-D and 5-D arrays only, got shape %s" % (x.shape,))
    width = tuple(int(v) for v in pad_width or ())
    if len(width) != 2 * x.ndim or any(v < 0 for v in width):
        raise ValueError("pad_width must hold 2 * ndim = %d non-negative values, got %r"
                         % (2 * x.ndim, pad_width))
    pairs = [(width[2 * i], width[2 * i + 1]) for i in range(x.ndim)]
    if pairs[0] != (0, 0) or pairs[1] != (0, 0):
        raise ValueError("pad: the first two axes (batch and channel) cannot be padded, got "
                         "pad_width %r" % (pad_width,))
    if mode == "reflect" and any(b >= n or a >= n for (b, a), n in zip(pairs[2:], x.shape[2:])):
        raise ShapeError("pad: reflect padding %r must be smaller than each padded axis of %s"
                         % (pad_width, x.shape))
    if mode == "constant":
        result = xp.pad(x, pairs, mode="constant", constant_values=constant_value)
        inner = tuple(slice(b, b + n) for (b, _), n in zip(pairs, x.shape))
        return _finish(result, data, lambda g: g[inner], out)
    index = [xp.asarray(_source_index(n, b, a, mode)) for (b, a), n in zip(pairs, x.shape)]
    grid = xp.ix_(*index)
    result = x[grid]

    def back(g):
        gx = xp.zeros(x.shape, dtype=g.dtype)
        _scatter_add(gx, grid, g)
        return gx
    return _finish(result, data, back, out)


def _finish(result, data, back, out):
    result = _result(result, data._ctx, (data,), lambda g, needs: (back(g),))
    if out is not None:
        out[:] = result
        return out
    return result


Pad = pad
