"""MXNet 1.9.1's image colour operators (``nd.image.adjust_lighting``, the brightness, contrast,
saturation and hue of ``random_color_jitter``) in NumPy on one (H, W, C) image, computed in
float32 in MXNet's order of operations so that the pixels are MXNet's.

Each takes its factor already drawn (the transforms draw them). A result goes back to the
image's dtype as MXNet's ``saturate_cast`` does: truncated toward zero and clamped for integers.
"""
from __future__ import annotations

import numpy

__all__ = ["brightness", "contrast", "saturation", "hue", "lighting"]

_F = numpy.float32
_COEF = (_F(0.299), _F(0.587), _F(0.114))
# MXNet's table: double products rounded once to float.
_EIG = numpy.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                    [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                    [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]]).astype(_F)
# For each hue sector: which of (p2, p1, falling, rising) is blue, green, red.
_SECTORS = numpy.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])


def _cast(values, dtype):
    dtype = numpy.dtype(dtype)
    if dtype.kind in "ui":
        info = numpy.iinfo(dtype)
        return numpy.clip(numpy.trunc(values), info.min, info.max).astype(dtype)
    return values.astype(dtype, copy=False)


def brightness(x, alpha):
    return _cast(x.astype(_F) * _F(alpha), x.dtype)


def contrast(x, alpha):
    xf = x.astype(_F)
    alpha = _F(alpha)
    pixels = xf.shape[0] * xf.shape[1]
    if xf.shape[2] > 1:
        terms = (xf[..., :3] * numpy.array(_COEF, dtype=_F)).ravel()
    else:
        terms = xf.ravel()
    total = numpy.cumsum(terms, dtype=_F)[-1] if terms.size else _F(0)   # MXNet adds in order
    beta = (_F(1) - alpha) * (total / _F(pixels))
    return _cast(xf * alpha + beta, x.dtype)


def saturation(x, alpha):
    if x.shape[2] == 1:
        return x.copy()
    xf = x.astype(_F)
    alpha = _F(alpha)
    # MXNet 1.9.1 assigns each channel's term to its gray value instead of adding it up, so
    # its "gray" is 0.114 * blue alone; its numbers are kept (docs/compat.md).
    gray = xf[..., 2:3] * _COEF[2] * (_F(1) - alpha)
    return _cast(gray + xf * alpha, x.dtype)


def _rgb_to_hls(r, g, b):
    vmax = numpy.fmax(numpy.fmax(r, g), b)
    vmin = numpy.fmin(numpy.fmin(r, g), b)
    diff = vmax - vmin
    light = (vmax + vmin) * _F(0.5)
    coloured = diff > numpy.finfo(_F).eps
    safe_diff = numpy.where(coloured, diff, _F(1))
    with numpy.errstate(divide="ignore", invalid="ignore"):
        sat = numpy.where(light < _F(0.5), safe_diff / (vmax + vmin),
                          safe_diff / (_F(2) - vmax - vmin))
    step = _F(60) / safe_diff
    h = numpy.where(vmax == r, (g - b) * step,
                    numpy.where(vmax == g, (b - r) * step + _F(120), (r - g) * step + _F(240)))
    h = numpy.where(h < 0, h + _F(360), h)
    zero = _F(0)
    return (numpy.where(coloured, h, zero).astype(_F), light,
            numpy.where(coloured, sat, zero).astype(_F))


def _hls_to_rgb(h, light, sat):
    p2 = numpy.where(light <= _F(0.5), light * (_F(1) + sat), light + sat - light * sat)
    p1 = _F(2) * light - p2
    h = (h * (_F(1) / _F(60))).astype(_F)
    while True:                                  # MXNet steps by 6 until 0 <= h < 6
        low, high = h < 0, h >= 6
        if not (low.any() or high.any()):
            break
        h = numpy.where(low, h + _F(6), numpy.where(high, h - _F(6), h)).astype(_F)
    sector = h.astype(numpy.int64)
    h = h - sector.astype(_F)
    tab = numpy.stack([p2, p1, p1 + (p2 - p1) * (_F(1) - h), p1 + (p2 - p1) * h], axis=-1)
    pick = _SECTORS[sector]
    b = numpy.take_along_axis(tab, pick[..., 0:1], axis=-1)[..., 0]
    g = numpy.take_along_axis(tab, pick[..., 1:2], axis=-1)[..., 0]
    r = numpy.take_along_axis(tab, pick[..., 2:3], axis=-1)[..., 0]
    grey = sat == 0
    return (numpy.where(grey, light, r), numpy.where(grey, light, g), numpy.where(grey, light, b))


def hue(x, alpha):
    """Hue turned by ``alpha`` * 360 degrees in HLS space (MXNet's rule: its RandomHue(h) draws
    ``alpha`` from [1 - h, 1 + h], so 1.0 is a full turn; RandomColorJitter from [-h, h])."""
    if x.shape[2] == 1:
        return x.copy()
    xf = x.astype(_F)
    h, light, sat = _rgb_to_hls(xf[..., 0] / _F(255), xf[..., 1] / _F(255), xf[..., 2] / _F(255))
    h = h + _F(alpha) * _F(360)
    r, g, b = _hls_to_rgb(h, light, sat)
    return _cast(numpy.stack([r * _F(255), g * _F(255), b * _F(255)], axis=-1), x.dtype)


def lighting(x, alpha):
    if x.shape[2] == 1:
        return x.copy()
    a = [_F(v) for v in alpha]
    pca = numpy.array([_EIG[i, 0] * a[0] + _EIG[i, 1] * a[1] + _EIG[i, 2] * a[2]
                       for i in range(3)], dtype=_F)
    return _cast(x.astype(_F) + pca, x.dtype)
