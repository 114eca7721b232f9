"""``contrib.BilinearResize2D``: MXNet 1.9.1's bilinear resizing of (N, C, H, W) arrays to a
size, a scale, another array's size (``like``) or the nearest even/odd size, with or without
``align_corners``; values and gradient are MXNet's CPU bits.

MXNet's CPU kernel mixes precisions: the source position of each output row/column is float
arithmetic (the half-pixel form ``scale * (i + 0.5) - 0.5`` in double, rounded to float once),
its fractional part is then rounded to the data's dtype, and the interpolation
``h0 * (w0 * a + w1 * b) + h1 * (w0 * c + w1 * d)`` is the data's dtype (float16 rounded after
each operation). The gradient adds ``h * w * g`` into the four source cells output position by
output position, corner by corner (``_scatter_add``: ``add.at`` on the CPU, an in-order kernel
on a GPU for float32/64, atomic adds for float16); MXNet's own threads may interleave those adds
differently, so its multi-threaded runs can differ from its one-thread run in the last bit.
"""
from __future__ import annotations

import operator

import numpy

from ..base import ShapeError
from .ndarray import NDArray, _result, _scatter_add, _xp_of

__all__ = ["BilinearResize2D"]

_MODES = ("size", "odd_scale", "like", "to_even_down", "to_even_up", "to_odd_down", "to_odd_up")


def _scaled(size, scale, arg):
    """``static_cast<int>(scale * size)``: a float product, truncated."""
    try:
        product = numpy.float32(scale) * numpy.float32(size)
    except (TypeError, ValueError):
        raise TypeError("BilinearResize2D: %s must be a number, got %r" % (arg, scale)) from None
    if not numpy.isfinite(product):
        raise ValueError("BilinearResize2D: %s must be finite, got %r" % (arg, scale))
    return int(product)


def _output_size(h, w, like, height, width, scale_height, scale_width, mode):
    name = "BilinearResize2D"
    if mode == "size":
        # MXNet decides both sides by whether scale_height is given: scale_width alone is
        # ignored, scale_height alone is an error ("bad optional access").
        if scale_height is None:
            return height, width
        if scale_width is None:
            raise ValueError("%s: scale_height needs scale_width too" % name)
        return _scaled(h, scale_height, "scale_height"), _scaled(w, scale_width, "scale_width")
    if mode == "odd_scale":
        if scale_height is None or scale_width is None:
            raise ValueError("%s: mode 'odd_scale' needs scale_height and scale_width" % name)
        return tuple(_scaled(n, s, arg) if n % 2 == 0 else _scaled(n - 1, s, arg) + 1
                     for n, s, arg in ((h, scale_height, "scale_height"),
                                       (w, scale_width, "scale_width")))
    if mode == "like":
        return like.shape[2], like.shape[3]
    even, up = mode.startswith("to_even"), mode.endswith("_up")
    return tuple(n if (n % 2 == 0) == even else (n + 1 if up else n - 1) for n in (h, w))


def _source(in_size, out_size, align_corners, xp):
    """For each output row (or column): the source cell, whether it has a next one (0/1), and
    the fractional position as float32 (MXNet's ``area_pixel_compute_*``, float arithmetic)."""
    f32 = numpy.float32
    i = numpy.arange(out_size)
    if out_size > 1:
        scale = f32(in_size - 1) / f32(out_size - 1) if align_corners \
            else f32(in_size) / f32(out_size)
    else:
        scale = f32(0)
    if align_corners:
        src = scale * i.astype(f32)
    else:
        src = (numpy.float64(scale) * (i + 0.5) - 0.5).astype(f32)
        src = numpy.where(src < 0, f32(0), src)
    low = src.astype(numpy.int64)
    step = (low < in_size - 1).astype(numpy.int64)
    frac = src - low.astype(f32)
    return xp.asarray(low), xp.asarray(step), xp.asarray(frac)


def _weights(frac, dt):
    """The (low, high) weights in the data's dtype: ``lambda1 = frac``, ``lambda0 = 1 - it``."""
    one = frac.astype(dt)
    return dt.type(1) - one, one


def BilinearResize2D(data, like=None, height=1, width=1, scale_height=None,  # noqa: N802
                     scale_width=None, mode="size", align_corners=True):
    """Resize ``data`` (N, C, H, W) bilinearly to (N, C, H', W'). ``mode``: ``"size"`` gives
    (``height``, ``width``), or ``int(scale_height * H)`` x ``int(scale_width * W)`` when
    ``scale_height`` is given (MXNet then needs ``scale_width`` too, and ignores
    ``scale_width`` without ``scale_height``); ``"odd_scale"``: an even side n becomes
    ``int(n * scale)``, an odd one ``int((n - 1) * scale) + 1``; ``"like"``: the height and width
    of ``like`` (which gets a zero gradient); ``"to_even_down"``/``"to_even_up"``/
    ``"to_odd_down"``/``"to_odd_up"``: an odd (even) side one smaller or larger. With
    ``align_corners`` (the default) the corner pixels' centres map onto each other, without it
    the pixel areas scale (positions below 0 clamp to 0); a side of size 1 samples row/column 0.
    A side may come out 0 (an empty result). Differentiable in ``data``."""
    name = "BilinearResize2D"
    if not isinstance(data, NDArray):
        raise TypeError("%s: data must be an NDArray, got %s" % (name, type(data).__name__))
    if mode not in _MODES:
        raise ValueError("%s: mode must be one of %s, got %r" % (name, ", ".join(_MODES), mode))
    if (mode == "like") != (like is not None):
        raise ValueError("%s: mode 'like' takes the second input like, and only it does "
                         "(mode %r, like %s)" % (name, mode, "given" if like is not None
                                                  else "missing"))
    d = data._data
    if d.ndim != 4:
        raise ShapeError("%s: data must be 4-D (N, C, H, W), got shape %s" % (name, d.shape))
    if d.dtype.type not in (numpy.float16, numpy.float32, numpy.float64):
        raise TypeError("%s: data must be float16, float32 or float64, got %s"
                        % (name, d.dtype))
    if like is not None:
        if not isinstance(like, NDArray):
            raise TypeError("%s: like must be an NDArray, got %s" % (name, type(like).__name__))
        if like.ndim != 4:
            raise ShapeError("%s: like must be 4-D (N, C, H, W), got shape %s"
                             % (name, like.shape))
    for arg, value in (("height", height), ("width", width)):
        try:
            value = operator.index(value)
        except TypeError:
            raise TypeError("%s: %s must be an integer, got %r" % (name, arg, value)) from None
        if value < 1:
            raise ValueError("%s: %s must be >= 1, got %d" % (name, arg, value))
    n, c, h, w = d.shape
    out_h, out_w = _output_size(h, w, like, int(height), int(width), scale_height, scale_width,
                                mode)
    if out_h < 0 or out_w < 0:
        raise ValueError("%s: the output size (%d, %d) is negative (scale_height=%r, "
                         "scale_width=%r)" % (name, out_h, out_w, scale_height, scale_width))
    if (h == 0 or w == 0) and out_h * out_w and n * c:
        raise ShapeError("%s: cannot resize an empty image (%d x %d) to %d x %d"
                         % (name, h, w, out_h, out_w))
    xp = _xp_of(d)
    dt = d.dtype
    same = (h, w) == (out_h, out_w)
    with data._ctx.device_scope():
        if same:
            out = d.copy()
        else:
            rows, row_step, row_frac = _source(h, out_h, align_corners, xp)
            cols, col_step, col_frac = _source(w, out_w, align_corners, xp)
            h0, h1 = (v[:, None] for v in _weights(row_frac, dt))
            w0, w1 = _weights(col_frac, dt)
            top, bottom = rows[:, None], (rows + row_step)[:, None]
            left, right = cols[None, :], (cols + col_step)[None, :]
            out = h0 * (w0 * d[:, :, top, left] + w1 * d[:, :, top, right]) \
                + h1 * (w0 * d[:, :, bottom, left] + w1 * d[:, :, bottom, right])
    inputs = (data,) if like is None else (data, like)

    def vjp(g, needs):
        gd = gl = None
        if needs[0]:
            if same:
                gd = g.copy()
            else:
                # MXNet adds output position by output position, corner by corner, in each
                # plane; planes never meet, so here a row of all planes is added at a time,
                # into the gradient laid out (cell, plane): the same adds in the same order.
                rows = xp.zeros((h * w, n * c), dtype=dt)
                if g.size:
                    at = xp.stack([top * w + left, top * w + right, bottom * w + left,
                                   bottom * w + right], axis=-1)           # (H', W', 4)
                    weight = xp.stack([h0 * w0, h0 * w1, h1 * w0, h1 * w1], axis=-1)
                    planes = xp.moveaxis(g.reshape(n * c, out_h, out_w), 0, -1)
                    val = weight[..., None] * planes[:, :, None, :]       # (H', W', 4, NC)
                    _scatter_add(rows, at.reshape(-1), val.reshape(-1, n * c))
                gd = xp.ascontiguousarray(rows.T).reshape(d.shape)
        if len(needs) > 1 and needs[1]:
            gl = xp.zeros(like.shape, dtype=like.dtype)
        return (gd,) if like is None else (gd, gl)
    return _result(out, data._ctx, inputs, vjp)
