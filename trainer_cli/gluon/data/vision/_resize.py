"""OpenCV's ``cv::resize`` (which MXNet's image operators call) for nearest and bilinear
interpolation, in NumPy, so that ``Resize``, ``CenterCrop`` and ``RandomResizedCrop`` give
MXNet's pixels.

Bilinear follows OpenCV's rules: pixel centres at ``(d + 0.5) * scale - 0.5``, clamped at the
borders; 8-bit images in OpenCV's fixed point (coefficients in units of 1/2048) with its
vectorised vertical pass's rounding; an exact halving in both directions is OpenCV's 2x2
average. Float images are computed in float32 as OpenCV does.
"""
from __future__ import annotations

import numpy

__all__ = ["resize", "INTERPOLATIONS"]

INTERPOLATIONS = {0: "nearest", 1: "bilinear"}
_COEF_SCALE = 2048


def _linear_taps(src_size, dst_size, clamp_weights):
    """Per output position: the two source indices and the weight of each (float32, as
    OpenCV's ``cbuf``). Past a border OpenCV moves a column onto the edge with weight 1
    (``clamp_weights``, the horizontal pass) but keeps a row's weights and only clamps the rows
    it reads (the vertical pass): both give the edge value, rounded differently."""
    # OpenCV's scale is 1 / (dst / src), which is not always src / dst to the last bit.
    scale = 1.0 / (dst_size / src_size)
    d = numpy.arange(dst_size, dtype=numpy.float64)
    f = ((d + 0.5) * scale - 0.5).astype(numpy.float32)
    s = numpy.floor(f).astype(numpy.int64)
    frac = (f - s.astype(numpy.float32)).astype(numpy.float32)
    if clamp_weights:
        low = s < 0
        frac[low] = 0
        s[low] = 0
        high = s >= src_size - 1
        frac[high] = 0
        s[high] = src_size - 1
    right = numpy.clip(s + 1, 0, src_size - 1)
    s = numpy.clip(s, 0, src_size - 1)
    w0 = (numpy.float32(1) - frac).astype(numpy.float32)
    return s, right, w0, frac


def _fixed(weights):
    # saturate_cast<short>(w * 2048): round half to even, as cvRound does
    return numpy.rint(weights.astype(numpy.float32) * numpy.float32(_COEF_SCALE)).astype(numpy.int64)


def _bilinear_u8(src, dh, dw):
    h, w = src.shape[:2]
    x0, x1, ax0, ax1 = _linear_taps(w, dw, True)
    y0, y1, by0, by1 = _linear_taps(h, dh, False)
    ax0, ax1, by0, by1 = _fixed(ax0), _fixed(ax1), _fixed(by0), _fixed(by1)
    s = src.astype(numpy.int64)
    # horizontal pass: ints in units of 1/2048
    rows = s[:, x0] * ax0[None, :, None] + s[:, x1] * ax1[None, :, None]
    r0, r1 = rows[y0], rows[y1]
    b0, b1 = by0[:, None, None], by1[:, None, None]
    # OpenCV's vectorised vertical pass: ((r0 >> 4) * b0 >> 16) + ((r1 >> 4) * b1 >> 16), + 2 >> 2
    out = (((r0 >> 4) * b0) >> 16) + (((r1 >> 4) * b1) >> 16)
    out = (out + 2) >> 2
    return numpy.clip(out, 0, 255).astype(numpy.uint8)


def _bilinear_float(src, dh, dw):
    h, w = src.shape[:2]
    x0, x1, ax0, ax1 = _linear_taps(w, dw, True)
    y0, y1, by0, by1 = _linear_taps(h, dh, False)
    s = src.astype(numpy.float32)
    rows = s[:, x0] * ax0[None, :, None] + s[:, x1] * ax1[None, :, None]
    out = rows[y0] * by0[:, None, None] + rows[y1] * by1[:, None, None]
    return out.astype(src.dtype, copy=False)


def _half(src):
    h, w = src.shape[:2]
    s = src[: h // 2 * 2, : w // 2 * 2]
    if src.dtype == numpy.uint8:
        total = (s[0::2, 0::2].astype(numpy.int32) + s[0::2, 1::2] + s[1::2, 0::2] + s[1::2, 1::2])
        return ((total + 2) >> 2).astype(numpy.uint8)
    s = s.astype(numpy.float32)
    return ((s[0::2, 0::2] + s[0::2, 1::2] + s[1::2, 0::2] + s[1::2, 1::2])
            * numpy.float32(0.25)).astype(src.dtype, copy=False)


def _nearest(src, dh, dw):
    h, w = src.shape[:2]
    xs = numpy.minimum(numpy.floor(numpy.arange(dw) * (w / dw)).astype(numpy.int64), w - 1)
    ys = numpy.minimum(numpy.floor(numpy.arange(dh) * (h / dh)).astype(numpy.int64), h - 1)
    return src[ys][:, xs]


def resize(src: numpy.ndarray, width: int, height: int, interpolation: int = 1) -> numpy.ndarray:
    """``src`` (H, W, C) resized to (height, width, C), as OpenCV's ``cv::resize``."""
    if interpolation not in INTERPOLATIONS:
        raise NotImplementedError(
            "interpolation=%r is not available here: 0 (nearest) and 1 (bilinear, the default "
            "of every transform) are (docs/porting.md)" % (interpolation,))
    width, height = int(width), int(height)
    if width <= 0 or height <= 0:
        raise ValueError("cannot resize to %dx%d" % (width, height))
    if src.shape[0] == 0 or src.shape[1] == 0:
        raise ValueError("cannot resize an empty image of shape %s" % (src.shape,))
    h, w = src.shape[:2]
    if (h, w) == (height, width):
        return src.copy()
    if interpolation == 0:
        return _nearest(src, height, width)
    if w == 2 * width and h == 2 * height:
        return _half(src)
    if src.dtype == numpy.uint8:
        return _bilinear_u8(src, height, width)
    return _bilinear_float(src, height, width)
