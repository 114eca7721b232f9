"""The pixel arithmetic of MXNet 1.9.1's image operators (``src/operator/image/
image_random-inl.h``), shared by ``nd.image`` and Gluon's vision transforms: ``to_tensor`` and
``normalize`` (with its gradient) on any array module, and the colour operators (brightness,
contrast, saturation, hue, lighting) in NumPy on one (H, W, C) image.

MXNet's C++ loops mix the image's dtype with float constants, so the arithmetic depends on the
dtype: ``DType * float`` is a float product for integers and float32, a double one for float64
(rounded to float where it is stored in a float), and for float16 mshadow's ``half_t`` rounds
each operation's result to half precision. Each function repeats that per dtype. A colour
operator's result goes back to the image's dtype as MXNet's ``saturate_cast`` does: clamped to
[0, 255] and truncated for uint8; truncated (and, where MXNet's cast is undefined, clamped) for
the other integers.
"""
from __future__ import annotations

import numpy

__all__ = ["to_tensor", "to_tensor_grad", "normalize", "normalize_grad", "brightness",
           "contrast", "saturation", "hue", "lighting", "jitter"]

_F = numpy.float32
_D = numpy.float64
_H = numpy.float16
_COEF = numpy.array([0.299, 0.587, 0.114], dtype=_F)
# MXNet's table: double products rounded once to float.
_EIG = numpy.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                    [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                    [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]]).astype(_F)
# For each hue sector: which of (p2, p1, falling, rising) is blue, green, red.
_SECTORS = numpy.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])


# ------------------------------------------------------------------------------- tensors
def to_tensor(img, xp=numpy):
    """(..., H, W, C) to float32 (..., C, H, W) divided by 255 as ``in / 255.0f``: a float
    division for integers and float32, a double one for float64, a half one for float16."""
    moved = xp.moveaxis(img, -1, -3)
    if img.dtype == _D:
        return (moved / _D(255)).astype(_F)
    if img.dtype == _H:
        return (moved.astype(_F) / _F(255)).astype(_H).astype(_F)
    out = xp.empty(moved.shape, dtype=_F)
    xp.divide(moved, _F(255), out=out, dtype=_F)     # each value made float32, then divided
    return out


def to_tensor_grad(grad, dtype, xp=numpy):
    """The gradient of ``to_tensor`` (which MXNet 1.9.1 registers as a shape-breaking copy that
    fails): the head gradient moved back to (..., H, W, C) and divided by 255, in ``dtype``."""
    moved = xp.moveaxis(grad, -3, -1)
    if numpy.dtype(dtype) == _D:
        return moved.astype(_D) / _D(255)
    return (moved / _F(255)).astype(dtype)


def _per_channel(values, channels, xp):
    """MXNet's mean/std: float32 values, one for all channels or one per channel, shaped to
    broadcast over (..., C, H, W)."""
    values = numpy.asarray(values, dtype=_F).reshape(-1)
    if values.size == 1 or channels == 1:
        values = values[:1]
    return xp.asarray(values[:channels].reshape(-1, 1, 1))


def _to_int(values, dtype, xp):
    """MXNet's float-to-integer cast of a result: truncated toward zero. Out of the type's range
    the C++ cast is undefined (x86 wraps 8-bit types, -20 becomes 236): clamped here instead,
    and NaN made 0."""
    info = numpy.iinfo(dtype)
    values = xp.nan_to_num(values, nan=0.0, posinf=float(info.max), neginf=float(info.min))
    return xp.clip(xp.trunc(values), info.min, info.max).astype(dtype)


def normalize(img, mean, std, xp=numpy):
    """``(in - mean[c]) / std[c]`` over (..., C, H, W) in MXNet's arithmetic: float32 for
    float32 and integer images (the result truncated to the integer type, and clamped to it
    where MXNet's cast is undefined), double for float64,
    half precision after each operation for float16. The result has the image's dtype."""
    channels = img.shape[-3]
    m, s = _per_channel(mean, channels, xp), _per_channel(std, channels, xp)
    dtype = img.dtype
    with numpy.errstate(divide="ignore", invalid="ignore"):
        if dtype == _D:
            return (img - m.astype(_D)) / s.astype(_D)
        if dtype == _H:
            centred = (img.astype(_F) - m).astype(_H)
            return (centred.astype(_F) / s).astype(_H)
        out = img.astype(_F) - m
        out /= s
    if dtype == _F:
        return out
    return _to_int(out, dtype, xp)


def normalize_grad(grad, std, xp=numpy):
    """``normalize``'s gradient as MXNet's ``out_grad * (1.0 / std[c])``: the reciprocal a
    double, the product double for float32/float64 (rounded to the dtype), half for float16."""
    channels = grad.shape[-3]
    s = _per_channel(std, channels, xp).astype(_D)
    with numpy.errstate(divide="ignore"):
        inv = _D(1) / s
    if grad.dtype == _H:
        return (grad.astype(_F) * inv.astype(_F)).astype(_H)
    return (grad.astype(_D) * inv).astype(grad.dtype)


# ------------------------------------------------------------------------------- colour
def _cast(values, dtype):
    dtype = numpy.dtype(dtype)
    if dtype.kind in "ui":
        info = numpy.iinfo(dtype)
        return numpy.clip(numpy.trunc(values), info.min, info.max).astype(dtype)
    return values.astype(dtype, copy=False)


def _times(x, factor):
    """``x * factor`` for a DType array and a float (array) as C++ evaluates it, as the dtype
    the product has there: float64 for double images, float16 for half, float32 otherwise."""
    if x.dtype == _D:
        return x * numpy.asarray(factor, dtype=_F).astype(_D)
    product = x.astype(_F) * numpy.asarray(factor, dtype=_F)
    return product.astype(_H) if x.dtype == _H else product


def _plus_float(a, b):
    """``a + b`` where one side is a float and the other the product ``_times`` gave, stored
    in a float: double addition for a double operand, half for a half, float otherwise."""
    if a.dtype == _D or getattr(b, "dtype", None) == _D:
        return (numpy.asarray(a, dtype=_D) + numpy.asarray(b, dtype=_D)).astype(_F)
    if a.dtype == _H or getattr(b, "dtype", None) == _H:
        return (numpy.asarray(a, dtype=_F) + numpy.asarray(b, dtype=_F)).astype(_H).astype(_F)
    return numpy.asarray(a, dtype=_F) + numpy.asarray(b, dtype=_F)


def brightness(x, alpha):
    """Every value times ``alpha`` (``static_cast<float>(in) * alpha``)."""
    return _cast(x.astype(_F) * _F(alpha), x.dtype)


def _float_sum(terms):
    """MXNet's ``float sum += term`` over ``terms`` in order: for double terms each addition
    is a double one rounded to float."""
    if terms.size == 0:
        return _F(0)
    if terms.dtype != _D:
        return numpy.cumsum(terms.astype(_F).ravel(), dtype=_F)[-1]
    total = 0.0
    for t in terms.ravel().tolist():
        total = float(_F(total + t))
    return _F(total)


def contrast(x, alpha):
    """Blend with the mean gray level: ``in * alpha + (1 - alpha) * mean``, the mean of
    ``0.299 r + 0.587 g + 0.114 b`` (of the values, for one channel) added in order."""
    alpha = _F(alpha)
    pixels = x.shape[0] * x.shape[1]
    terms = _times(x[..., :3], _COEF) if x.shape[2] > 1 else x
    beta = (_F(1) - alpha) * (_float_sum(terms) / _F(pixels))
    return _cast(_plus_float(_times(x, alpha), beta), x.dtype)


def saturation(x, alpha):
    """Blend with a gray level: ``gray * (1 - alpha) + in * alpha``."""
    if x.shape[2] == 1:
        return x.copy()
    alpha = _F(alpha)
    # MXNet 1.9.1 assigns each channel's term to its gray value instead of adding it up, so
    # its "gray" is 0.114 * blue alone; its numbers are kept (docs/compat.md).
    gray = numpy.asarray(_times(x[..., 2:3], _COEF[2]), dtype=_F) * (_F(1) - alpha)
    return _cast(_plus_float(gray, _times(x, alpha)), x.dtype)


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
    """AlexNet's PCA lighting: each channel plus ``eig[c] . alpha`` (float arithmetic)."""
    if x.shape[2] == 1:
        return x.copy()
    a = [_F(v) for v in alpha]
    pca = numpy.array([_EIG[i, 0] * a[0] + _EIG[i, 1] * a[1] + _EIG[i, 2] * a[2]
                       for i in range(3)], dtype=_F)
    return _cast(x.astype(_F) + pca, x.dtype)


def jitter(x, jitter_brightness, jitter_contrast, jitter_saturation, jitter_hue, rng):
    """MXNet's ``random_color_jitter``: the four operators in the order of a random permutation
    (``rng``'s), each enabled one (value > 0) with its factor drawn from ``rng`` when its turn
    comes: ``1 + U(-v, v)`` for the first three, a hue turn ``U(-v, v)``; a copy when none is
    enabled."""
    out = x
    for op in rng.permutation(4).tolist():
        if op == 0 and jitter_brightness > 0:
            out = brightness(out, 1.0 + rng.uniform(-jitter_brightness, jitter_brightness))
        elif op == 1 and jitter_contrast > 0:
            out = contrast(out, 1.0 + rng.uniform(-jitter_contrast, jitter_contrast))
        elif op == 2 and jitter_saturation > 0:
            out = saturation(out, 1.0 + rng.uniform(-jitter_saturation, jitter_saturation))
        elif op == 3 and jitter_hue > 0:
            out = hue(out, rng.uniform(-jitter_hue, jitter_hue))
    return x.copy() if out is x else numpy.ascontiguousarray(out)
