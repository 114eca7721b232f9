"""``nd.histogram`` and ``nd.khatri_rao`` (MXNet 1.9.1's).

``histogram`` counts the values of ``a`` in ``bins``: given bin edges (an NDArray), or ``bins``
equal bins over ``range``, the edges ``(max * i + (bins - i) * min) / bins`` computed in double
and rounded to the data's dtype, each value placed as MXNet's kernel places it (its first guess
``(x - min) * bins / (max - min)`` corrected against the rounded edges); values outside are
not counted, the last bin is closed. Counts are int64, edges the data's dtype. Without
``range`` MXNet hands the data to NumPy's ``histogram`` (and warns), whose counts it returns as
float32: so here too.
"""
from __future__ import annotations

import warnings

import numpy

from . import ops as _ops
from .creation import array
from .ndarray import NDArray, _wrap, _xp_of

__all__ = ["histogram", "khatri_rao"]


def _indices_of_edges(d, edges):
    """Each value's bin among ``edges`` (ascending), -1 outside: MXNet's search."""
    xp = _xp_of(d)
    inside = (d >= edges[0]) & (d <= edges[-1])
    # The number of edges at or below the value, less one: MXNet's walk up the edges.
    target = xp.searchsorted(edges, d, side="right") - 1
    target = xp.minimum(target, len(edges) - 2)
    return xp.where(inside, target, -1)


def _indices_of_range(d, lo, hi, count, edges):
    """Each value's bin of ``count`` equal bins over [lo, hi], -1 outside: MXNet's first guess,
    corrected against the rounded edges."""
    xp = _xp_of(d)
    inside = (d >= lo) & (d <= hi)
    guess = ((d - d.dtype.type(lo)) * d.dtype.type(count) / d.dtype.type(hi - lo)
             if d.dtype.kind == "f" else (d - lo) * count / (hi - lo))
    target = xp.minimum(xp.where(inside, guess, 0).astype(numpy.int64), count - 1)
    target = target - (d < edges[target])
    target = target + ((d >= edges[xp.minimum(target + 1, count)]) & (target != count - 1))
    return xp.where(inside, target, -1)


def _counts(target, bins, xp):
    kept = target[target >= 0]
    return xp.bincount(kept, minlength=bins).astype(numpy.int64)


def histogram(a, bins=10, range=None):  # noqa: A002 - MXNet's argument name
    """``(counts, edges)`` of the values of ``a`` (flattened) in ``bins``: see the module's
    docstring."""
    d = a._data.reshape(-1)
    xp = _xp_of(d)
    if isinstance(bins, NDArray):
        edges = bins._data.astype(d.dtype, copy=False)
        target = _indices_of_edges(d, edges)
        return [_wrap(_counts(target, edges.size - 1, xp), a._ctx), _wrap(edges.copy(), a._ctx)]
    if not isinstance(bins, (int, numpy.integer)):
        raise ValueError("bins argument should be either an integer or an NDArray")
    bins = int(bins)
    if bins < 1:
        raise ValueError("histogram: bins must be at least 1, got %d" % bins)
    if range is None:
        warnings.warn("range is not specified, using numpy's result to ensure consistency with "
                      "numpy")
        counts, edges = numpy.histogram(a.asnumpy(), bins=bins)
        return array(counts, ctx=a._ctx), array(edges, ctx=a._ctx)
    lo, hi = float(range[0]), float(range[1])
    if not lo < hi:
        raise ValueError("histogram: range must be (min, max) with min < max, got %r"
                         % (range,))
    steps = numpy.arange(bins + 1, dtype=numpy.float64)
    edges = xp.asarray(((hi * steps + (bins - steps) * lo) / bins).astype(d.dtype))
    target = _indices_of_range(d, lo, hi, bins, edges)
    return [_wrap(_counts(target, bins, xp), a._ctx), _wrap(edges, a._ctx)]


def khatri_rao(*args):
    """The column-wise Kronecker product of matrices with the same number of columns: row
    ``(i, j, ...)`` (the first matrix's row index slowest) of column ``c`` is ``a[i, c] * b[j, c]
    * ...``. Differentiable (MXNet's has no gradient)."""
    if not args:
        raise ValueError("khatri_rao takes at least one matrix")
    columns = args[0].shape[-1]
    for m in args:
        if m.ndim != 2 or m.shape[1] != columns:
            raise ValueError("khatri_rao takes matrices of %d columns, got shape %s"
                             % (columns, m.shape))
    out = args[0]
    for m in args[1:]:
        out = _ops.reshape(_ops.multiply(_ops.expand_dims(out, 1), _ops.expand_dims(m, 0)),
                           (-1, columns))
    return out
