"""Spatial sampling: MXNet 1.9.1's ``BilinearSampler`` (the sampler of spatial transformer
networks, and of ``image.imrotate``), forward and backward, to MXNet's bits on the CPU;
``GridGenerator`` (affine and warp grids) and ``SpatialTransformer`` (an affine grid sampled
bilinearly) on it.

MXNet's C++ loop mixes float and double: for float32 data the top-left corner's term is float
arithmetic, the other three corners' weights ``1.0 - w`` are doubles, so their terms and the sum
are double, rounded to float once at the end; the data gradient adds double terms into float
cells one at a time, in the loop's order (image, row, column, channel, corner). Both are
repeated here term by term (a float add done in double and rounded is the float add).
"""
from __future__ import annotations

import numpy

from ..base import ShapeError
from .ndarray import NDArray, _result, _xp_of

__all__ = ["BilinearSampler", "GridGenerator", "SpatialTransformer"]


def _corners(grid, height, width, xp):
    """For each output position: the top-left source corner (ints), its weights (the data's
    dtype, as MXNet's loop holds them) and each corner's in-bounds mask."""
    dtype = grid.dtype
    x_real = (grid[:, 0] + dtype.type(1)) * dtype.type(width - 1) / dtype.type(2)
    y_real = (grid[:, 1] + dtype.type(1)) * dtype.type(height - 1) / dtype.type(2)
    top = xp.floor(y_real).astype(numpy.int64)
    left = xp.floor(x_real).astype(numpy.int64)
    wy = dtype.type(1) - (y_real - top.astype(dtype))
    wx = dtype.type(1) - (x_real - left.astype(dtype))
    rows_in = ((top >= 0) & (top <= height - 1), (top + 1 >= 0) & (top + 1 <= height - 1))
    cols_in = ((left >= 0) & (left <= width - 1), (left + 1 >= 0) & (left + 1 <= width - 1))
    return top, left, wy, wx, rows_in, cols_in


def _gather(data, top, left, dy, dx, inside, xp):
    """``data[n, :, top + dy, left + dx]`` as (N, C, H, W), zero where ``inside`` is false."""
    n, c = data.shape[:2]
    y = xp.clip(top + dy, 0, data.shape[2] - 1)
    x = xp.clip(left + dx, 0, data.shape[3] - 1)
    batch = xp.arange(n).reshape(n, 1, 1)
    values = data[batch, :, y, x]                      # (N, H, W, C)
    values = xp.moveaxis(values, -1, 1)
    return xp.where(inside[:, None], values, data.dtype.type(0))


def _four(data, top, left, rows_in, cols_in, xp):
    """The top-left, top-right, bottom-left and bottom-right source values."""
    return [_gather(data, top, left, dy, dx, rows_in[dy] & cols_in[dx], xp)
            for dy, dx in ((0, 0), (0, 1), (1, 0), (1, 1))]


def _forward(data, grid, xp):
    top, left, wy, wx, rows_in, cols_in = _corners(grid, data.shape[2], data.shape[3], xp)
    tl, tr, bl, br = _four(data, top, left, rows_in, cols_in, xp)
    wy, wx = wy[:, None], wx[:, None]
    first = tl * wy * wx                                # float arithmetic in MXNet's loop
    wide = numpy.float64
    one_minus_wx = 1.0 - wx.astype(wide)                # ``1.0 - w``: double
    one_minus_wy = 1.0 - wy.astype(wide)
    out = first.astype(wide) + (tr * wy).astype(wide) * one_minus_wx
    out += bl.astype(wide) * one_minus_wy * wx.astype(wide)
    out += br.astype(wide) * one_minus_wy * one_minus_wx
    return out.astype(data.dtype)


def _backward(g, data, grid, need_data, need_grid, xp):
    n, c, height, width = data.shape
    top, left, wy, wx, rows_in, cols_in = _corners(grid, height, width, xp)
    gdata = ggrid = None
    if need_data:
        wide = numpy.float64
        gw = g.astype(wide)
        wy_, wx_ = wy[:, None].astype(wide), wx[:, None].astype(wide)
        # Each corner's term, (N, C, H, W) -> ordered (N, H, W, C, corner) as MXNet adds them.
        terms = [(g * wy[:, None] * wx[:, None]).astype(wide),
                 (g * wy[:, None]).astype(wide) * (1.0 - wx_),
                 gw * (1.0 - wy_) * wx_, gw * (1.0 - wy_) * (1.0 - wx_)]
        offsets = ((0, 0), (0, 1), (1, 0), (1, 1))
        cells, values = [], []
        for (dy, dx), term in zip(offsets, terms):
            inside = rows_in[dy] & cols_in[dx]                        # (N, H, W)
            y, x = top + dy, left + dx
            flat = (xp.arange(n).reshape(n, 1, 1, 1) * c + xp.arange(c).reshape(1, c, 1, 1)) \
                * (height * width) + (y * width + x)[:, None]
            cells.append(xp.where(inside[:, None], flat, -1))
            values.append(term)
        order = (0, 2, 3, 1, 4)                         # n, h, w, c, corner
        cells = xp.stack(cells, axis=-1).transpose(order).reshape(-1)
        values = xp.stack(values, axis=-1).transpose(order).reshape(-1)
        keep = cells >= 0
        flat_grad = _add_in_order(data.size, data.dtype, cells[keep], values[keep], xp)
        gdata = flat_grad.reshape(data.shape)
    if need_grid:
        tl, tr, bl, br = _four(data, top, left, rows_in, cols_in, xp)
        cross = tl - tr - bl + br
        gy = xp.zeros(wy.shape, dtype=data.dtype)
        gx = xp.zeros(wx.shape, dtype=data.dtype)
        for k in range(c):                              # summed over channels in order
            gy -= g[:, k] * (tr[:, k] - br[:, k] + cross[:, k] * wx)
            gx -= g[:, k] * (bl[:, k] - br[:, k] + cross[:, k] * wy)
        t = data.dtype.type
        ggrid = xp.stack([gx * t(width - 1) / t(2), gy * t(height - 1) / t(2)], axis=1)
    return gdata, ggrid


def _add_in_order(size, dtype, cells, values, xp):
    """A ``size``-element array of ``dtype`` with ``values`` (float64) added into ``cells`` one
    at a time in their order, each add done in float64 and rounded to ``dtype``: MXNet's
    ``float += double``. (``add.at`` would round each value to ``dtype`` first.) Contributions
    to one cell go in rounds, the k-th of every cell in round k."""
    out = xp.zeros(size, dtype=dtype)
    if not len(cells):
        return out
    order = xp.argsort(cells, kind="stable")
    cells, values = cells[order], values[order]
    first = xp.concatenate((xp.ones(1, dtype=bool), cells[1:] != cells[:-1]))
    starts = xp.flatnonzero(first)
    rank = xp.arange(len(cells)) - starts[xp.cumsum(first) - 1]
    for k in range(rank.max().item() + 1):     # one wait for the device: the rounds
        pick = rank == k
        at = cells[pick]
        out[at] = (out[at].astype(numpy.float64) + values[pick]).astype(dtype)
    return out


def BilinearSampler(data, grid, cudnn_off=None):  # noqa: N802 (MXNet's name)
    """Sample ``data`` (N, C, H, W) at ``grid`` (N, 2, H', W': x then y of each output position,
    in [-1, 1] across the input), bilinearly; positions outside the input read zeros. Returns
    (N, C, H', W'). Differentiable in ``data`` and ``grid``."""
    if not isinstance(data, NDArray) or not isinstance(grid, NDArray):
        raise TypeError("BilinearSampler takes two NDArrays, data and grid")
    if data.ndim != 4 or grid.ndim != 4 or grid.shape[1] != 2 or grid.shape[0] != data.shape[0]:
        raise ShapeError("BilinearSampler: data must be (N, C, H, W) and grid (N, 2, H', W') with "
                         "the same N; got %s and %s" % (data.shape, grid.shape))
    d, gr = data._data, grid._data
    if d.dtype != gr.dtype or d.dtype.kind != "f":
        raise TypeError("BilinearSampler: data and grid must have one floating dtype, got %s "
                        "and %s" % (d.dtype, gr.dtype))
    xp = _xp_of(d)

    def vjp(g, needs):
        return _backward(g, d, gr, needs[0], needs[1], xp)
    with data._ctx.device_scope():
        out = _forward(d, gr, xp)
    return _result(out, data._ctx, (data, grid), vjp)


def _target(target_shape, name):
    try:
        h, w = (int(v) for v in target_shape)
    except (TypeError, ValueError):
        raise ValueError("%s: target_shape must be (height, width), got %r"
                         % (name, target_shape)) from None
    if h < 2 or w < 2:
        raise ValueError("%s: target_shape must be at least (2, 2), got %r" % (name, target_shape))
    return h, w


def _affine_grid(loc, grid_dst, h, w, name):
    """``loc`` (N, 6) as (N, 2, 3) affine maps applied to ``grid_dst`` (3, h * w: x, y, 1 of
    each output position): the (N, 2, h, w) source grid, recorded (its gradient: the grid's
    gradient times ``grid_dst`` transposed)."""
    theta = loc._data
    if theta.ndim != 2 or theta.shape[1] != 6:
        raise ShapeError("%s: the affine parameters must be (N, 6), got %s" % (name, theta.shape))
    xp = _xp_of(theta)
    n = theta.shape[0]
    out = xp.matmul(theta.reshape(n, 2, 3), grid_dst).reshape(n, 2, h, w)

    def vjp(g, needs):
        return (xp.matmul(g.reshape(n, 2, h * w), grid_dst.T).reshape(n, 6),)
    return _result(out, loc._ctx, (loc,), vjp)


def GridGenerator(data, transform_type="affine", target_shape=(0, 0)):  # noqa: N802
    """A sampling grid for ``BilinearSampler``: ``affine`` maps each output position (x, y in
    [-1, 1] over ``target_shape`` (height, width)) through ``data`` (N, 6), giving (N, 2, height,
    width); ``warp`` adds the flow ``data`` (N, 2, H, W, in pixels) to each position and
    normalises to [-1, 1]."""
    if not isinstance(data, NDArray):
        raise TypeError("GridGenerator takes an NDArray")
    d = data._data
    xp = _xp_of(d)
    t = d.dtype.type
    if transform_type == "affine":
        h, w = _target(target_shape, "GridGenerator")
        # MXNet's arithmetic in the data's dtype: column = k - trunc(k / w) * w, then
        # -1 + column * (2 / (w - 1)), the factor rounded to the dtype first.
        k = xp.arange(h * w).astype(d.dtype)
        row = (k / t(w)).astype(numpy.int32).astype(d.dtype)
        grid_dst = xp.stack([t(-1) + (k - row * t(w)) * t(2.0 / (w - 1)),
                             t(-1) + row * t(2.0 / (h - 1)), xp.ones(h * w, dtype=d.dtype)])
        return _affine_grid(data, grid_dst, h, w, "GridGenerator")
    if transform_type != "warp":
        raise ValueError("GridGenerator: transform_type must be 'affine' or 'warp', got %r"
                         % (transform_type,))
    if d.ndim != 4 or d.shape[1] != 2:
        raise ShapeError("GridGenerator: a warp's flow must be (N, 2, H, W), got %s"
                         % (d.shape,))
    h, w = d.shape[2:]
    scale = xp.asarray([t((t(w) - 1.0) / 2.0), t((t(h) - 1.0) / 2.0)]).reshape(1, 2, 1, 1)
    ys, xs = xp.meshgrid(xp.arange(h, dtype=d.dtype), xp.arange(w, dtype=d.dtype), indexing="ij")
    out = (d + xp.stack([xs, ys])[None]) / scale - t(1)

    def vjp(g, needs):
        return (g / scale,)
    return _result(out, data._ctx, (data,), vjp)


def SpatialTransformer(data, loc, target_shape=(0, 0), transform_type="affine",  # noqa: N802
                       sampler_type="bilinear", cudnn_off=None):
    """``data`` (N, C, H, W) sampled bilinearly at the affine grid of ``loc`` (N, 6) over
    ``target_shape`` (height, width): MXNet's ``SpatialTransformer``. Differentiable in both."""
    if transform_type != "affine" or sampler_type != "bilinear":
        raise ValueError("SpatialTransformer: MXNet has only transform_type='affine' and "
                         "sampler_type='bilinear', got %r and %r" % (transform_type, sampler_type))
    if not isinstance(data, NDArray) or not isinstance(loc, NDArray):
        raise TypeError("SpatialTransformer takes two NDArrays, data and loc")
    h, w = _target(target_shape, "SpatialTransformer")
    xp = _xp_of(loc._data)
    dtype = loc._data.dtype
    # This operator's grid of output positions is worked out in double, then rounded.
    k = numpy.arange(h * w)
    grid_dst = numpy.stack([-1.0 + (k % w) * 2.0 / (w - 1), -1.0 + (k // w) * 2.0 / (h - 1),
                            numpy.ones(h * w)]).astype(dtype)
    with loc._ctx.device_scope():
        grid = _affine_grid(loc, xp.asarray(grid_dst), h, w, "SpatialTransformer")
    return BilinearSampler(data, grid)
