"""Region-of-interest pooling, MXNet 1.9.1's: ``ROIPooling`` (Fast R-CNN's max pooling over
bins of a rounded ROI; exported as ``nd.ROIPooling``), ``contrib.ROIAlign`` (Mask R-CNN's
bilinear samples averaged per bin, optionally position-sensitive and half-pixel "aligned") and
``contrib.PSROIPooling`` (R-FCN's position-sensitive average pooling). Values and the data's
gradient are MXNet's CPU bits; the ROIs' gradient is zero, as in MXNet.

Each kernel repeats MXNet's CPU loop arithmetic in the data's dtype (float16 rounded to half after
every operation, as mshadow's ``half_t`` does) and its order: a bin's sum runs over its samples
in the loop's order (a cumulative sum, which adds one term at a time, not a pairwise sum), its
maximum keeps the first of equal values, and the data gradient adds term by term in the loop's
order (``_scatter_add``: ``add.at`` on the CPU, an in-order kernel on a GPU for float32/64;
float16 there adds atomically, in any order). On a GPU, bins of more than ``_DEVICE_LOOP``
samples are summed by CuPy's parallel scan, whose last bits may differ. ROIs are processed in
groups so that memory stays bounded whatever their size.

Where MXNet reads or writes outside the data or aborts the process, these do the safe thing
instead (each function's docstring says what): a batch index outside the batch gives zeros and no
gradient; PSROIPooling refuses data with fewer channels than it reads; ROIAlign(aligned=True)
refuses an empty ROI with a ValueError.
"""
from __future__ import annotations

import operator

import numpy

from ..base import ShapeError
from .ndarray import NDArray, _result, _scatter_add, _xp_of

__all__ = ["ROIPooling", "ROIAlign", "PSROIPooling"]

_GROUP_ELEMENTS = 1 << 22   # elements of the per-group work arrays
_FLOATS = (numpy.float16, numpy.float32, numpy.float64)
_DEVICE_LOOP = 64           # on a GPU, bins of up to this many samples are summed in order


# ----------------------------------------------------------------------------- arguments
def _arrays(name, data, rois):
    if not isinstance(data, NDArray) or not isinstance(rois, NDArray):
        raise TypeError("%s takes two NDArrays, data and rois" % name)
    d, r = data._data, rois._data
    if d.ndim != 4:
        raise ShapeError("%s: data must be 4-D (batch, channel, height, width), got shape %s"
                         % (name, d.shape))
    if r.ndim != 2 or r.shape[1] != 5:
        raise ShapeError("%s: rois must be (num_rois, 5) rows [batch_index, x1, y1, x2, y2], "
                         "got shape %s" % (name, r.shape))
    if d.dtype != r.dtype or d.dtype.type not in _FLOATS:
        raise TypeError("%s: data and rois must share one dtype, float16, float32 or float64; "
                        "got %s and %s" % (name, d.dtype, r.dtype))
    return d, r


def _int(name, arg, value, low):
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError("%s: %s must be an integer, got %r" % (name, arg, value)) from None
    if v < low:
        raise ValueError("%s: %s must be >= %d, got %d" % (name, arg, low, v))
    return v


def _pooled_size(name, pooled_size):
    if pooled_size is None:
        raise ValueError("%s: pooled_size (height, width) is required" % name)
    try:
        ph, pw = pooled_size
    except (TypeError, ValueError):
        raise ValueError("%s: pooled_size must be (height, width), got %r"
                         % (name, pooled_size)) from None
    return _int(name, "pooled_size", ph, 1), _int(name, "pooled_size", pw, 1)


def _spatial_scale(name, spatial_scale):
    """MXNet's float parameter, in [0, 1]."""
    if spatial_scale is None:
        raise ValueError("%s: spatial_scale is required" % name)
    s = float(spatial_scale)
    if not 0.0 <= s <= 1.0:
        raise ValueError("%s: spatial_scale must be in [0, 1], got %r" % (name, spatial_scale))
    return numpy.float32(s)


# ----------------------------------------------------------------------------- helpers
def _round_away(v, xp):
    """C's ``round``: halves away from zero (NumPy's ``round`` goes to even), exactly."""
    whole = xp.trunc(v)
    return whole + xp.where(xp.abs(v - whole) >= 0.5, xp.sign(v), 0).astype(v.dtype)


def _batch(r, n, xp):
    """``static_cast<int>(rois[:, 0])`` (toward zero) and whether it names an image."""
    b = r[:, 0].astype(numpy.int64)
    return b, (b >= 0) & (b < n)


def _groups(rois, per_roi):
    """Slices over the ROIs, each group's work arrays about ``_GROUP_ELEMENTS`` elements."""
    step = max(1, _GROUP_ELEMENTS // max(1, per_roi))
    return [slice(i, min(i + step, rois)) for i in range(0, rois, step)]


def _in_order_sum(terms, xp):
    """Sum along the last axis one term at a time in order (MXNet's ``acc += term`` loop):
    NumPy's cumulative sum does that; CuPy's is a parallel scan, so there a loop of adds for up
    to ``_DEVICE_LOOP`` terms."""
    count = terms.shape[-1]
    if count == 0:
        return xp.zeros(terms.shape[:-1], dtype=terms.dtype)
    if xp is numpy or count > _DEVICE_LOOP:
        return xp.cumsum(terms, axis=-1)[..., -1]
    total = terms[..., 0]
    for k in range(1, count):
        total = total + terms[..., k]
    return total


def _bins(lo, hi, extent, xp):
    """Positions ``lo + k`` for k below the widest bin, clipped to the axis, and which of them
    lie inside ``[lo, hi)``: (..., K) each."""
    k = xp.arange(extent)
    pos = lo[..., None] + k
    return xp.maximum(pos, 0), pos < hi[..., None]


def _region(d, b, rows, rows_in, cols, cols_in, planes, xp):
    """``d`` at each bin's rows x cols: (G, P, PH, PW, KH * KW), the cells outside the bin
    masked; ``rows`` (G, PH, KH), ``cols`` (G, PW, KW), ``planes`` (P, PH, PW) channel numbers.
    Also the flat cells (into ``d``) and the mask."""
    n, c, h, w = d.shape
    rows = xp.minimum(rows, h - 1)
    cols = xp.minimum(cols, w - 1)
    plane = b[:, None, None, None] * c + planes[None]                    # (G, P, PH, PW)
    spot = rows[:, :, None, :, None] * w + cols[:, None, :, None, :]      # (G, PH, PW, KH, KW)
    g, ph, pw, kh, kw = spot.shape
    spot = spot.reshape(g, 1, ph, pw, kh * kw)
    cells = plane[..., None] * (h * w) + spot
    inside = (rows_in[:, :, None, :, None] & cols_in[:, None, :, None, :]).reshape(
        g, 1, ph, pw, kh * kw)
    return d.reshape(-1)[cells], cells, inside


# ----------------------------------------------------------------------------- ROIPooling
def _float_scale_product(v, scale, xp):
    """``rois * spatial_scale`` as MXNet's ``DType * float``: float arithmetic for float16 (then
    rounded to half), the dtype's otherwise."""
    if v.dtype == numpy.float16:
        return (v.astype(numpy.float32) * scale).astype(numpy.float16)
    return v * v.dtype.type(scale)


def _roi_pool_bins(r, h, w, ph, pw, scale, xp):
    """Each ROI's bins: start (included) and end (excluded) rows (R, PH) and columns (R, PW)."""
    t = r.dtype.type
    corner = _round_away(_float_scale_product(r[:, 1:5], scale, xp), xp).astype(numpy.int64)
    x1, y1, x2, y2 = (corner[:, i] for i in range(4))
    bounds = []
    for start, end, pooled, size in ((y1, y2, ph, h), (x1, x2, pw, w)):
        extent = xp.maximum(end - start + 1, 1)                   # malformed ROIs: 1 x 1
        bin_size = extent.astype(r.dtype) / t(pooled)
        k = xp.arange(pooled + 1).astype(r.dtype)
        lo = xp.floor(k[None, :-1] * bin_size[:, None]).astype(numpy.int64)
        hi = xp.ceil(k[None, 1:] * bin_size[:, None]).astype(numpy.int64)
        bounds.append(xp.clip(lo + start[:, None], 0, size))
        bounds.append(xp.clip(hi + start[:, None], 0, size))
    return bounds


def _roi_pool(d, r, ph, pw, scale, xp):
    n, c, h, w = d.shape
    dt = d.dtype
    rois = r.shape[0]
    out = xp.zeros((rois, c, ph, pw), dtype=dt)
    argmax = xp.full((rois, c, ph, pw), -1, dtype=numpy.int64)
    if rois == 0 or d.size == 0:
        return out, argmax
    b, valid = _batch(r, n, xp)
    hs, he, ws, we = _roi_pool_bins(r, h, w, ph, pw, scale, xp)
    kh = max((he - hs).max().item(), 0)          # the widest bin: one wait for a device
    kw = max((we - ws).max().item(), 0)
    if kh == 0 or kw == 0:
        return out, argmax
    with numpy.errstate(over="ignore"):
        floor_value = numpy.array(-numpy.finfo(numpy.float32).max, numpy.float32).astype(dt)[()]
    planes = xp.broadcast_to(xp.arange(c)[:, None, None], (c, ph, pw))
    for grp in _groups(rois, c * ph * pw * kh * kw):
        bg = xp.where(valid[grp], b[grp], 0)
        rows, rows_in = _bins(hs[grp], he[grp], kh, xp)
        cols, cols_in = _bins(ws[grp], we[grp], kw, xp)
        values, cells, inside = _region(d, bg, rows, rows_in, cols, cols_in, planes, xp)
        # MXNet starts each bin at -FLT_MAX and keeps a value only if strictly greater: NaN
        # and anything <= -FLT_MAX never win, and the first of equal maxima stays.
        keep = inside & (values > floor_value)
        values = xp.where(keep, values, dt.type(-numpy.inf))
        first = xp.argmax(values, axis=-1)[..., None]
        best = xp.take_along_axis(values, first, axis=-1)[..., 0]
        won = xp.take_along_axis(keep, first, axis=-1)[..., 0]
        cell = xp.take_along_axis(cells, first, axis=-1)[..., 0]
        empty = ((he[grp] <= hs[grp])[:, :, None] | (we[grp] <= ws[grp])[:, None, :])[:, None]
        zero = empty | ~valid[grp][:, None, None, None]
        out[grp] = xp.where(zero, dt.type(0), xp.where(won, best, floor_value))
        argmax[grp] = xp.where(zero | ~won, -1, cell)
    return out, argmax


def ROIPooling(data, rois, pooled_size=None, spatial_scale=None):  # noqa: N802 (MXNet's name)
    """Max-pool ``data`` (N, C, H, W) over each ROI of ``rois`` (R, 5: batch index, x1, y1, x2,
    y2 in input pixels) into ``pooled_size`` (PH, PW) bins: (R, C, PH, PW). MXNet's rules: the
    corners are ``round(coordinate * spatial_scale)`` (halves away from zero), the ROI spans
    x1..x2 inclusive (at least 1 x 1), bin i covers ``floor(i * size / PH)`` to ``ceil((i + 1) *
    size / PH)`` (clipped to the image), the first maximum of a bin wins, NaN never does (a bin
    of NaN or -inf only gives -FLT_MAX, -inf in float16). An empty bin, or a batch index outside
    the batch, gives 0. The gradient goes to each bin's maximum."""
    d, r = _arrays("ROIPooling", data, rois)
    ph, pw = _pooled_size("ROIPooling", pooled_size)
    scale = _spatial_scale("ROIPooling", spatial_scale)
    xp = _xp_of(d)
    with data._ctx.device_scope():
        out, argmax = _roi_pool(d, r, ph, pw, scale, xp)

    def vjp(g, needs):
        gd = gr = None
        if needs[0]:
            gd = xp.zeros(d.size, dtype=d.dtype)
            won = argmax >= 0
            _scatter_add(gd, argmax[won], g[won])       # in the output's order, as MXNet
            gd = gd.reshape(d.shape)
        if needs[1]:
            gr = xp.zeros_like(r)
        return gd, gr
    return _result(out, data._ctx, (data, rois), vjp)


# ----------------------------------------------------------------------------- ROIAlign
def _align_axis(coord, size, dt):
    """One axis of MXNet's bilinear weights at sample positions ``coord``: the low and high
    cells, the low and high weights, and whether the sample is outside (then it reads nothing)."""
    xp = _xp_of(coord)
    t = dt.type
    outside = (coord < -1.0) | (coord > size)
    coord = xp.where(coord <= 0, t(0), coord)
    low = coord.astype(numpy.int64)
    edge = low >= size - 1
    low = xp.where(edge, size - 1, low)
    high = xp.where(edge, size - 1, low + 1)
    coord = xp.where(edge, low.astype(dt), coord)
    frac = coord - low.astype(dt)
    return low, high, t(1) - frac, frac, outside


class _AlignGrid:
    """ROIAlign's per-ROI geometry (MXNet's arithmetic, in the dtype): the scaled corners, the
    bin sizes, each ROI's sample grid (``sample_ratio``, or ``ceil(bin size)`` per axis) and
    the largest grid (kh, kw); ``samples(grp)`` gives a group of ROIs' sample table."""

    def __init__(self, r, h, w, ph, pw, scale, sample_ratio, aligned, xp):
        dt = r.dtype
        t = dt.type
        offset = t(0.5) if aligned else t(0)
        s = t(scale)
        start_w, start_h, end_w, end_h = (r[:, i] * s - offset for i in range(1, 5))
        self.roi_w, self.roi_h = end_w - start_w, end_h - start_h
        roi_w, roi_h = self.roi_w, self.roi_h
        if not aligned:                                   # malformed ROIs: 1 x 1
            roi_w, roi_h = xp.maximum(roi_w, t(1)), xp.maximum(roi_h, t(1))
        bin_h, bin_w = roi_h / t(ph), roi_w / t(pw)
        if sample_ratio > 0:
            grid_h = grid_w = xp.full(r.shape[0], sample_ratio, dtype=numpy.int64)
        else:                                             # adaptive: ceil(roi size / bins)
            grid_h = xp.ceil(bin_h).astype(numpy.int64)
            grid_w = xp.ceil(bin_w).astype(numpy.int64)
        self.kh = max(grid_h.max().item(), 0)             # one wait for a device
        self.kw = max(grid_w.max().item(), 0)
        self.count = (grid_h * grid_w).astype(dt)
        self.axes = ((start_h, bin_h, grid_h, ph, self.kh, h),
                     (start_w, bin_w, grid_w, pw, self.kw, w))
        self.dt, self.w, self.xp = dt, w, xp

    def samples(self, grp):
        """For the ROIs ``grp``, per (ROI, bin, sample) as MXNet's ``pre_calc`` holds them: the
        four cells and weights (lists of (G, PH, PW, K), K = kh * kw in row-major order), whether
        the sample is outside (it reads cell 0 with weight 0, so a NaN there still spreads, as in
        MXNet) and whether it is in the ROI's own grid (the rest are padding)."""
        xp, dt = self.xp, self.dt
        t = dt.type
        axes = []
        for start, bin_size, grid, pooled, k, size in self.axes:
            start, bin_size, grid = start[grp], bin_size[grp], grid[grp]
            # start + p * bin + (i + .5) * bin / grid, each operation in the dtype
            p = xp.arange(pooled).astype(dt)
            i = (xp.arange(k) + 0.5).astype(dt)
            base = start[:, None, None] + p[None, :, None] * bin_size[:, None, None]
            step = i[None, None, :] * bin_size[:, None, None] / grid.astype(dt)[:, None, None]
            axes.append(_align_axis(base + step, size, dt)
                        + ((xp.arange(k)[None, :] < grid[:, None])[:, None, :],))
        (y_lo, y_hi, hy, ly, y_out, y_in), (x_lo, x_hi, hx, lx, x_out, x_in) = axes

        def outer(a, b, op):     # (G, PH, KH) with (G, PW, KW) -> (G, PH, PW, KH * KW)
            both = op(a[:, :, None, :, None], b[:, None, :, None, :])
            return both.reshape(both.shape[:3] + (-1,))
        outside = outer(y_out, x_out, xp.logical_or)
        w = self.w
        cells = [xp.where(outside, 0, outer(yy * w, xx, xp.add))
                 for yy, xx in ((y_lo, x_lo), (y_lo, x_hi), (y_hi, x_lo), (y_hi, x_hi))]
        weights = [xp.where(outside, t(0), outer(a, b, xp.multiply))
                   for a, b in ((hy, hx), (hy, lx), (ly, hx), (ly, lx))]
        return cells, weights, outside, outer(y_in, x_in, xp.logical_and)


def _align_planes(b, c_out, c_in, ph, pw, position_sensitive, xp):
    """Each output (G, C', PH, PW)'s source plane in the flattened (N * C) data."""
    if position_sensitive:
        ch = (xp.arange(c_out)[:, None, None] * (ph * pw) + xp.arange(ph)[None, :, None] * pw
              + xp.arange(pw)[None, None, :])
    else:
        ch = xp.broadcast_to(xp.arange(c_out)[:, None, None], (c_out, ph, pw))
    return b[:, None, None, None] * c_in + ch[None]


def _align_forward(d, grid, b, valid, c_out, ph, pw, position_sensitive, xp):
    """Each bin's samples, ``((w1 * v1 + w2 * v2) + w3 * v3) + w4 * v4``, summed in order and
    divided by the grid's count: (R, C', PH, PW)."""
    n, c, h, w = d.shape
    dt = d.dtype
    out = xp.zeros((b.shape[0], c_out, ph, pw), dtype=dt)
    flat = d.reshape(-1)
    samples = grid.kh * grid.kw
    for grp in _groups(b.shape[0], (c_out + 12) * ph * pw * samples):
        cells, weights, _, in_grid = grid.samples(grp)
        base = _align_planes(b[grp], c_out, c, ph, pw, position_sensitive, xp)[..., None] * (
            h * w)                                                    # (G, C', PH, PW, 1)
        term = None
        for cl, wt in zip(cells, weights):
            part = wt[:, None] * flat[base + cl[:, None]]
            term = part if term is None else term + part
        term = xp.where(in_grid[:, None], term, dt.type(0))
        total = _in_order_sum(term, xp) / grid.count[grp][:, None, None, None]
        out[grp] = xp.where(valid[grp][:, None, None, None], total, dt.type(0))
    return out


def _align_backward(g, shape, grid, b, valid, ph, pw, position_sensitive, xp):
    """ROIAlign's data gradient: ``g * w / count`` added to each sample's four cells in MXNet's
    order (ROI, channel, bin, sample, corner). The adds of one channel never meet another's, so
    here a row of all channels is added per (ROI, bin, sample, corner), into the gradient laid
    out (image[, bin], cell, channel): the same adds in the same order per cell, far fewer of
    them. A position-sensitive ROI's bin (i, j) reads channels ``k * PH * PW + i * PW + j``."""
    n, c, h, w = shape
    bins = ph * pw if position_sensitive else 1
    c_out = c // bins
    dt = grid.dt
    rows = xp.zeros((n * bins * h * w, c_out), dtype=dt)
    if g.size:
        if position_sensitive:
            first = (b[:, None, None] * bins + xp.arange(bins).reshape(1, ph, pw)) * (h * w)
        else:
            first = xp.broadcast_to((b * (h * w))[:, None, None], (b.shape[0], ph, pw))
        samples = grid.kh * grid.kw
        for grp in _groups(b.shape[0], ph * pw * samples * 4 * (c_out + 4)):
            cells, weights, outside, in_grid = grid.samples(grp)
            take = in_grid & ~outside & valid[grp][:, None, None, None]      # (G, PH, PW, K)
            top = xp.moveaxis(g[grp], 1, -1)[:, :, :, None, None, :]    # (G, PH, PW, 1, 1, C')
            val = top * xp.stack(weights, axis=-1)[..., None] / grid.count[grp].reshape(
                -1, 1, 1, 1, 1, 1)
            at = xp.stack(cells, axis=-1) + first[grp][..., None, None]  # (G, PH, PW, K, 4)
            pick = xp.broadcast_to(take[..., None], at.shape)
            _scatter_add(rows, at[pick], val[pick])
    if position_sensitive:       # (n, bin, cell, k) -> (n, k, bin, cell) = (n, c, h, w)
        grad = rows.reshape(n, bins, h * w, c_out).transpose(0, 3, 1, 2)
    else:                        # (n, cell, c) -> (n, c, cell)
        grad = rows.reshape(n, h * w, c_out).transpose(0, 2, 1)
    return xp.ascontiguousarray(grad).reshape(shape)


def _check_aligned(r, b, roi_w, roi_h, xp):
    """MXNet aborts the process on an empty ROI when aligned: refuse it instead."""
    bad = (b >= 0) & ~((roi_w > 0) & (roi_h > 0))
    if bad.any().item():
        i = xp.flatnonzero(bad)[0].item()
        raise ValueError("ROIAlign: with aligned=True every ROI must have x2 > x1 and y2 > y1 "
                         "after scaling; roi %d is %s" % (i, [r[i, k].item() for k in range(5)]))


def ROIAlign(data, rois, pooled_size=None, spatial_scale=None, sample_ratio=-1,  # noqa: N802
             position_sensitive=False, aligned=False):
    """Average bilinear samples of ``data`` (N, C, H, W) over ``pooled_size`` (PH, PW) bins of
    each ROI of ``rois`` (R, 5: batch index, x1, y1, x2, y2; corners scaled by
    ``spatial_scale``, not rounded): (R, C, PH, PW), or (R, C / (PH * PW), PH, PW) when
    ``position_sensitive`` (bin (i, j) of output channel k reads input channel
    ``k * PH * PW + i * PW + j``). Each bin averages ``sample_ratio`` x ``sample_ratio`` samples
    (``sample_ratio <= 0``: ``ceil(bin size)`` per axis); ``aligned`` shifts the corners by half
    a pixel (Detectron2) and then requires non-empty ROIs, otherwise ROIs are at least 1 x 1.
    A sample more than a pixel outside the map adds ``0 * data[..., 0, 0]`` (so a NaN or inf
    there spreads, as in MXNet); one within a pixel reads the edge. A negative batch index gives
    0 (MXNet zeroes one element and leaves the rest unwritten), as does one past the batch
    (MXNet reads outside the data); neither gets a gradient."""
    d, r = _arrays("ROIAlign", data, rois)
    ph, pw = _pooled_size("ROIAlign", pooled_size)
    scale = _spatial_scale("ROIAlign", spatial_scale)
    try:
        sample_ratio = operator.index(sample_ratio)
    except TypeError:
        raise TypeError("ROIAlign: sample_ratio must be an integer, got %r"
                        % (sample_ratio,)) from None
    n, c, h, w = d.shape
    if position_sensitive and c % (ph * pw):
        raise ShapeError("ROIAlign: with position_sensitive=True the channels (%d) must be a "
                         "multiple of pooled_size[0] * pooled_size[1] (%d)" % (c, ph * pw))
    c_out = c // (ph * pw) if position_sensitive else c
    xp = _xp_of(d)
    dt = d.dtype
    rois_n = r.shape[0]
    with data._ctx.device_scope():
        b, valid = _batch(r, n, xp)
        bg = xp.where(valid, b, 0)
        grid = None
        if rois_n and d.size and c_out:
            with numpy.errstate(all="ignore"):
                grid = _AlignGrid(r, h, w, ph, pw, scale, sample_ratio, aligned, xp)
            if aligned:
                _check_aligned(r, b, grid.roi_w, grid.roi_h, xp)
            with numpy.errstate(all="ignore"):
                out = _align_forward(d, grid, bg, valid, c_out, ph, pw, position_sensitive, xp)
        else:
            out = xp.zeros((rois_n, c_out, ph, pw), dtype=dt)

    def vjp(g, needs):
        gd = gr = None
        if needs[0]:
            if grid is None:
                gd = xp.zeros(d.shape, dtype=dt)
            else:
                with numpy.errstate(all="ignore"):
                    gd = _align_backward(g, d.shape, grid, bg, valid, ph, pw,
                                         position_sensitive, xp)
        if needs[1]:
            gr = xp.zeros_like(r)
        return gd, gr
    return _result(out, data._ctx, (data, rois), vjp)


# ----------------------------------------------------------------------------- PSROIPooling
def _psroi_bins(r, h, w, pooled, scale, xp):
    """Each ROI's bins as MXNet's PSROIPooling computes them: rounded corners, the end one
    past, times ``spatial_scale``, at least 0.1 wide; floor/ceil bin edges clipped to the map."""
    dt = r.dtype
    t = dt.type
    s = t(scale)
    corner = _round_away(r[:, 1:5], xp)
    start_w, start_h = corner[:, 0] * s, corner[:, 1] * s
    end_w, end_h = (corner[:, 2] + t(1)) * s, (corner[:, 3] + t(1)) * s
    k = xp.arange(pooled + 1).astype(dt)
    bounds = []
    for start, end, size in ((start_h, end_h, h), (start_w, end_w, w)):
        bin_size = xp.maximum(end - start, t(0.1)) / t(pooled)
        lo = xp.floor(k[None, :-1] * bin_size[:, None] + start[:, None]).astype(numpy.int64)
        hi = xp.ceil(k[None, 1:] * bin_size[:, None] + start[:, None]).astype(numpy.int64)
        bounds += [xp.clip(lo, 0, size), xp.clip(hi, 0, size)]
    return bounds


def _psroi_planes(output_dim, pooled, group_size, dt, xp):
    """Input channel of output channel k, bin (i, j): (k * gs + gi) * gs + gj, with gi =
    floor(i * gs / pooled) in the dtype, clipped to the groups."""
    t = dt.type
    p = xp.arange(pooled).astype(dt)
    grp = xp.clip(xp.floor(p * t(group_size) / t(pooled)).astype(numpy.int64), 0,
                  group_size - 1)
    ctop = xp.arange(output_dim)
    return (ctop[:, None, None] * group_size + grp[None, :, None]) * group_size + \
        grp[None, None, :]


def PSROIPooling(data, rois, spatial_scale=None, output_dim=None, pooled_size=None,  # noqa: N802
                 group_size=0):
    """Position-sensitive average pooling (R-FCN): for each ROI of ``rois`` (R, 5: batch index,
    x1, y1, x2, y2, corners rounded then scaled by ``spatial_scale``, x2/y2 inclusive) and each
    of ``pooled_size`` x ``pooled_size`` bins, output channel k averages input channel
    ``(k * group_size + gi) * group_size + gj`` of ``data`` (N, C, H, W) over the bin, (gi, gj)
    the bin's group (``group_size`` 0: ``pooled_size``): (R, output_dim, pooled_size,
    pooled_size). Empty bins give 0. Where MXNet would read outside the data, this refuses data
    with fewer than output_dim * group_size**2 channels and gives 0 (no gradient) for a batch
    index outside the batch."""
    d, r = _arrays("PSROIPooling", data, rois)
    scale = _spatial_scale("PSROIPooling", spatial_scale)
    if output_dim is None or pooled_size is None:
        raise ValueError("PSROIPooling: output_dim and pooled_size are required")
    output_dim = _int("PSROIPooling", "output_dim", output_dim, 1)
    pooled = _int("PSROIPooling", "pooled_size", pooled_size, 1)
    group_size = _int("PSROIPooling", "group_size", group_size, 0) or pooled
    n, c, h, w = d.shape
    if c < output_dim * group_size ** 2:
        raise ShapeError("PSROIPooling: data needs at least output_dim * group_size**2 = %d "
                         "channels, got %d" % (output_dim * group_size ** 2, c))
    xp = _xp_of(d)
    dt = d.dtype
    rois_n = r.shape[0]
    with data._ctx.device_scope():
        out = xp.zeros((rois_n, output_dim, pooled, pooled), dtype=dt)
        b, valid = _batch(r, n, xp)
        kh = kw = 0
        if rois_n and d.size:
            with numpy.errstate(all="ignore"):
                hs, he, ws, we = _psroi_bins(r, h, w, pooled, scale, xp)
            kh = max((he - hs).max().item(), 0)
            kw = max((we - ws).max().item(), 0)
        if kh and kw:
            planes = _psroi_planes(output_dim, pooled, group_size, dt, xp)
            bg = xp.where(valid, b, 0)
            area = ((he - hs)[:, :, None] * (we - ws)[:, None, :])          # (R, P, P)
            empty = (he <= hs)[:, :, None] | (we <= ws)[:, None, :]
            area = xp.where(empty, 1, area).astype(dt)[:, None]
            zero = (empty[:, None] | ~valid[:, None, None, None])
            for grp in _groups(rois_n, output_dim * pooled * pooled * kh * kw):
                rows, rows_in = _bins(hs[grp], he[grp], kh, xp)
                cols, cols_in = _bins(ws[grp], we[grp], kw, xp)
                values, _, inside = _region(d, bg[grp], rows, rows_in, cols, cols_in, planes,
                                            xp)
                total = _in_order_sum(xp.where(inside, values, dt.type(0)), xp)
                out[grp] = xp.where(zero[grp], dt.type(0), total / area[grp])

    def vjp(g, needs):
        gd = gr = None
        if needs[0]:
            gd = xp.zeros(d.size, dtype=dt)
            if kh and kw:
                for grp in _groups(rois_n, 2 * output_dim * pooled * pooled * kh * kw):
                    rows, rows_in = _bins(hs[grp], he[grp], kh, xp)
                    cols, cols_in = _bins(ws[grp], we[grp], kw, xp)
                    _, cells, inside = _region(d, bg[grp], rows, rows_in, cols, cols_in,
                                               planes, xp)
                    diff = xp.where(zero[grp], dt.type(0), g[grp] / area[grp])
                    take = inside & ~zero[grp][..., None]
                    take = xp.broadcast_to(take, cells.shape)
                    vals = xp.broadcast_to(diff[..., None], cells.shape)
                    _scatter_add(gd, cells[take], vals[take])
            gd = gd.reshape(d.shape)
        if needs[1]:
            gr = xp.zeros_like(r)
        return gd, gr
    return _result(out, data._ctx, (data, rois), vjp)
