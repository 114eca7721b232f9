"""``nd.image``: MXNet 1.9.1's image operators (``src/operator/image/``): ``to_tensor``,
``normalize``, ``resize``, ``crop``, the flips, and the colour jitters (brightness, contrast,
saturation, hue, their random mix, and AlexNet's PCA lighting).

Images are (H, W, C) or, where MXNet takes batches, (N, H, W, C); ``normalize`` works on the
(C, H, W) / (N, C, H, W) tensors ``to_tensor`` makes. The pixel arithmetic is MXNet's CPU
loops', per dtype (``_image_arith.py``), and resizing is OpenCV's ``cv::resize``
(``_opencv_resize.py``); Gluon's vision transforms call the same two modules. The random
operators draw their factors from trainer_cli's seedable CPU generator (``mx.random.seed``),
as the Gluon transforms do: MXNet's distributions, not its C++ random stream.

``to_tensor``, ``normalize``, ``crop`` and the flips, deterministic or random, run on the
array's module (NumPy or CuPy). ``resize`` and the colour operators are computed on the host in
NumPy (OpenCV's fixed point and MXNet's in-order float sums; MXNet itself has CPU kernels only
for the colour operators) and handed back on the input's device.

Gradients: ``to_tensor``, ``normalize``, ``crop`` and the flips have their true gradients
(MXNet's ``to_tensor`` backward fails on its own shape check, and its flips pass the head
gradient through unflipped: fixed here, docs/compat.md). The colour operators pass the head
gradient through unchanged, as MXNet's ``_copy`` gradient does. ``resize`` has none (MXNet's
``_copy`` fails for any new size); a backward pass through a real resize raises.
"""
from __future__ import annotations

import numbers

import numpy

from .. import random as _random
from . import _image_arith as _arith
from ._opencv_resize import INTERPOLATIONS, resize as _cv_resize
from .ndarray import NDArray, _result, _xp_of

__all__ = ["to_tensor", "normalize", "resize", "crop", "flip_left_right", "flip_top_bottom",
           "random_flip_left_right", "random_flip_top_bottom", "random_brightness",
           "random_contrast", "random_saturation", "random_hue", "random_color_jitter",
           "adjust_lighting", "random_lighting"]

# MXNet's MSHADOW_TYPE_SWITCH: the dtypes its image kernels are compiled for.
_DTYPES = frozenset(numpy.dtype(t) for t in ("float32", "float64", "float16", "uint8", "int8",
                                             "int32", "int64"))
# cv::resize's types in MXNet's table: float16 is refused, int8/int32 fail inside OpenCV and
# int64 reads past the table.
_RESIZE_DTYPES = frozenset(numpy.dtype(t) for t in ("uint8", "float32", "float64"))


# ------------------------------------------------------------------------------- checks
def _image(op, data, ndims, channels=None, layout="HWC"):
    """``data``'s raw array after MXNet's checks of its type, rank and channel count."""
    if not isinstance(data, NDArray):
        raise TypeError("%s: data must be an NDArray, got %s" % (op, type(data).__name__))
    raw = data._data
    if numpy.dtype(raw.dtype) not in _DTYPES:
        raise TypeError("%s: data's dtype must be one of float16, float32, float64, uint8, int8, "
                        "int32 or int64, got %s" % (op, numpy.dtype(raw.dtype).name))
    names = {3: "(H, W, C)", 4: "(N, H, W, C)"} if layout == "HWC" else \
        {3: "(C, H, W)", 4: "(N, C, H, W)"}
    if raw.ndim not in ndims:
        raise ValueError("%s: data must have shape %s, got shape %s"
                         % (op, " or ".join(names[n] for n in ndims), tuple(raw.shape)))
    if channels is not None:
        c = raw.shape[-1] if layout == "HWC" else raw.shape[-3]
        if c not in channels:
            raise ValueError("%s: the image must have 1 or 3 channels (axis %d), got shape %s"
                             % (op, -1 if layout == "HWC" else -3, tuple(raw.shape)))
    return raw


def _floats(op, name, values, count=None):
    """A float or a sequence of floats as a tuple."""
    if isinstance(values, NDArray):
        values = values.asnumpy().ravel().tolist()
    if isinstance(values, numbers.Number):
        values = (values,)
    try:
        out = tuple(float(v) for v in values)
    except (TypeError, ValueError):
        raise TypeError("%s: %s must be a number or a sequence of numbers, got %r"
                        % (op, name, values)) from None
    if count is not None and len(out) != count:
        raise ValueError("%s: %s must have %d values, got %d" % (op, name, count, len(out)))
    return out


def _factors(op, min_factor, max_factor):
    for name, value in (("min_factor", min_factor), ("max_factor", max_factor)):
        if not isinstance(value, numbers.Real) or value < 0:
            raise ValueError("%s: %s must be a number >= 0, got %r" % (op, name, value))
    return float(min_factor), float(max_factor)


def _host(raw, xp):
    return raw if xp is numpy else raw.get()


def _device(values, xp):
    return values if xp is numpy else xp.asarray(values)


def _pass_through(g, needs):
    """MXNet's ``_copy`` gradient of its colour operators: the head gradient unchanged."""
    return (g,)


def _on_host(op, data, fn, *args):
    """A colour operator: ``fn`` on the host image, the result back on its device."""
    raw = _image(op, data, (3,), channels=(1, 3))
    xp = _xp_of(raw)
    out = fn(_host(raw, xp), *args)
    return _result(_device(numpy.ascontiguousarray(out), xp), data._ctx, (data,), _pass_through)


# ------------------------------------------------------------------------------- tensors
def to_tensor(data):
    """``to_tensor(data)``: an (H, W, C) or (N, H, W, C) image in [0, 255] as a float32
    (C, H, W) or (N, C, H, W) tensor in [0, 1]: ``in / 255.0f`` (a float division; double for
    float64 images, half precision for float16, as MXNet's kernel). Any number of channels."""
    raw = _image("to_tensor", data, (3, 4))
    xp = _xp_of(raw)
    dtype = raw.dtype

    def vjp(g, needs):
        return (_arith.to_tensor_grad(g, dtype, xp),)

    return _result(xp.ascontiguousarray(_arith.to_tensor(raw, xp)), data._ctx, (data,), vjp)


def normalize(data, mean=0.0, std=1.0):
    """``normalize(data, mean=0.0, std=1.0)``: ``(in - mean[c]) / std[c]`` for each channel of
    a (C, H, W) or (N, C, H, W) tensor with 1 or 3 channels; ``mean`` and ``std`` are one float
    or one per channel (rounded to float32, as MXNet parses them). The result keeps the dtype:
    float arithmetic, double for float64, half precision after each step for float16, and an
    integer image's result truncated to its type (clamped to its range, where MXNet's cast is
    undefined: on x86 it wraps uint8 -20 to 236).
    MXNet's own defaults (four zeros, four ones) fail its own check; here they mean 0 and 1."""
    raw = _image("normalize", data, (3, 4), channels=(1, 3), layout="CHW")
    channels = raw.shape[-3]
    mean = _floats("normalize", "mean", mean)
    std = _floats("normalize", "std", std)
    for name, values in (("mean", mean), ("std", std)):
        if len(values) not in (1, channels):
            raise ValueError("normalize: %s must have 1 or %d values for an input of shape %s, "
                             "got %d" % (name, channels, tuple(raw.shape), len(values)))
    xp = _xp_of(raw)

    def vjp(g, needs):
        return (_arith.normalize_grad(g, std, xp),)

    return _result(_arith.normalize(raw, mean, std, xp), data._ctx, (data,), vjp)


# ------------------------------------------------------------------------------- geometry
def _resized_size(size, keep_ratio, h, w):
    """MXNet's ``GetHeightAndWidth``: (height, width) of the result."""
    if isinstance(size, numbers.Integral):
        size = (size,)
    try:
        size = tuple(int(s) for s in size)
    except TypeError:
        raise TypeError("resize: size must be an int or a (width, height) tuple, got %r"
                        % (size,)) from None
    if len(size) not in (1, 2):
        raise ValueError("resize: size must have 1 or 2 values, (size) or (width, height), "
                         "got %r" % (size,))
    if min(size) <= 0:
        raise ValueError("resize: size must be greater than 0, got %r" % (size,))
    if len(size) == 2:
        return size[1], size[0]
    side = size[0]
    if not keep_ratio:
        return side, side
    if h > w:
        return h * side // w, side
    return side, w * side // h


def resize(data, size=(), keep_ratio=False, interp=1):
    """``resize(data, size=(), keep_ratio=False, interp=1)``: an (H, W, C) or (N, H, W, C)
    image resized by OpenCV's ``cv::resize`` to ``size``: ``(width, height)``, or one int for a
    square, or with ``keep_ratio`` the new short side (the long one ``long * size // short``).
    ``interp``: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos. uint8, float32 and
    float64 images (MXNet refuses float16 and OpenCV fails on the others). Computed on the host
    as OpenCV does on MXNet's CPU (MXNet's GPU kernel is bilinear only and rounds otherwise).
    No gradient: a backward pass through a resize to a new size raises."""
    raw = _image("resize", data, (3, 4))
    if numpy.dtype(raw.dtype) not in _RESIZE_DTYPES:
        raise TypeError("resize: data's dtype must be uint8, float32 or float64 (OpenCV's "
                        "resize types), got %s" % numpy.dtype(raw.dtype).name)
    if interp not in INTERPOLATIONS:
        raise ValueError("resize: interp must be 0 (nearest), 1 (bilinear), 2 (bicubic), "
                         "3 (area) or 4 (Lanczos), got %r" % (interp,))
    h, w = raw.shape[-3], raw.shape[-2]
    if h == 0 or w == 0:
        raise ValueError("resize: cannot resize an empty image of shape %s" % (tuple(raw.shape),))
    height, width = _resized_size(size, keep_ratio, h, w)
    xp = _xp_of(raw)
    host = _host(raw, xp)
    if host.ndim == 4:
        out = numpy.stack([_cv_resize(img, width, height, interp) for img in host]) \
            if host.shape[0] else numpy.empty((0, height, width, host.shape[3]), host.dtype)
    else:
        out = _cv_resize(host, width, height, interp)
    same = (height, width) == (h, w)

    def vjp(g, needs):
        if same:
            return (g,)
        raise ValueError("resize: no gradient flows through an image resize from %dx%d to "
                         "%dx%d (MXNet 1.9.1 defines none that works)" % (w, h, width, height))

    return _result(_device(numpy.ascontiguousarray(out), xp), data._ctx, (data,), vjp)


def crop(data, x, y, width, height):
    """``crop(data, x, y, width, height)``: the ``width`` x ``height`` box at column ``x``, row
    ``y`` of an (H, W, C) or (N, H, W, C) image with 1 or 3 channels. Its gradient is the head
    gradient in the box and 0 elsewhere. MXNet does not check ``x, y >= 0`` (it reads outside
    the image); here a box that does not lie inside the image is an error."""
    raw = _image("crop", data, (3, 4), channels=(1, 3))
    x, y, width, height = (int(v) for v in (x, y, width, height))
    h, w = raw.shape[-3], raw.shape[-2]
    if width <= 0 or height <= 0:
        raise ValueError("crop: width and height must be greater than 0, got width=%d, "
                         "height=%d" % (width, height))
    if x < 0 or y < 0 or x + width > w or y + height > h:
        raise ValueError("crop: the box x=%d, y=%d, width=%d, height=%d must lie inside the "
                         "image of width %d and height %d" % (x, y, width, height, w, h))
    xp = _xp_of(raw)
    box = (Ellipsis, slice(y, y + height), slice(x, x + width), slice(None))

    def vjp(g, needs):
        grad = xp.zeros(raw.shape, dtype=g.dtype)
        grad[box] = g
        return (grad,)

    return _result(xp.ascontiguousarray(raw[box]), data._ctx, (data,), vjp)


def _flip(op, data, axis, flipped=True):
    """``data`` flipped along ``axis`` (-2 columns, -3 rows), or copied when not ``flipped``;
    its gradient is the head gradient flipped back."""
    raw = _image(op, data, (3, 4))
    xp = _xp_of(raw)
    if not flipped:
        return _result(raw.copy(), data._ctx, (data,), _pass_through)

    def vjp(g, needs):
        return (xp.ascontiguousarray(xp.flip(g, axis=axis)),)

    return _result(xp.ascontiguousarray(xp.flip(raw, axis=axis)), data._ctx, (data,), vjp)


def flip_left_right(data):
    """``flip_left_right(data)``: the image mirrored left to right (its columns reversed).
    (H, W, C), and here (N, H, W, C) too (MXNet takes one image)."""
    return _flip("flip_left_right", data, -2)


def flip_top_bottom(data):
    """``flip_top_bottom(data)``: the image upside down (its rows reversed). (H, W, C), and
    here (N, H, W, C) too (MXNet takes one image)."""
    return _flip("flip_top_bottom", data, -3)


def _coin():
    # MXNet keeps the image when its Bernoulli(0.5) draw is true and flips it otherwise.
    return _random.generator(None).random() >= 0.5


def random_flip_left_right(data):
    """``random_flip_left_right(data)``: ``flip_left_right`` with probability 0.5, else a copy
    (one draw for a whole (N, H, W, C) batch)."""
    _image("random_flip_left_right", data, (3, 4))
    return _flip("random_flip_left_right", data, -2, _coin())


def random_flip_top_bottom(data):
    """``random_flip_top_bottom(data)``: ``flip_top_bottom`` with probability 0.5, else a copy
    (one draw for a whole (N, H, W, C) batch)."""
    _image("random_flip_top_bottom", data, (3, 4))
    return _flip("random_flip_top_bottom", data, -3, _coin())


# ------------------------------------------------------------------------------- colour
def _uniform(low, high):
    return float(_random.generator(None).uniform(low, high))


def random_brightness(data, min_factor, max_factor):
    """``random_brightness(data, min_factor, max_factor)``: an (H, W, C) image (1 or 3
    channels) times a factor drawn uniformly from [min_factor, max_factor] (both >= 0); the
    result in the image's dtype (uint8 clamped to [0, 255], integers truncated)."""
    low, high = _factors("random_brightness", min_factor, max_factor)
    _image("random_brightness", data, (3,), channels=(1, 3))
    return _on_host("random_brightness", data, _arith.brightness, _uniform(low, high))


def random_contrast(data, min_factor, max_factor):
    """``random_contrast(data, min_factor, max_factor)``: ``in * a + (1 - a) * gray_mean`` with
    ``a`` drawn from [min_factor, max_factor], ``gray_mean`` the mean of
    ``0.299 r + 0.587 g + 0.114 b`` (of the values, for one channel), summed in MXNet's order."""
    low, high = _factors("random_contrast", min_factor, max_factor)
    _image("random_contrast", data, (3,), channels=(1, 3))
    return _on_host("random_contrast", data, _arith.contrast, _uniform(low, high))


def random_saturation(data, min_factor, max_factor):
    """``random_saturation(data, min_factor, max_factor)``: ``gray * (1 - a) + in * a`` with
    ``a`` from [min_factor, max_factor]. MXNet 1.9.1's ``gray`` is ``0.114 * blue`` alone (its
    loop assigns instead of adding); its numbers are kept. One channel: a copy."""
    low, high = _factors("random_saturation", min_factor, max_factor)
    _image("random_saturation", data, (3,), channels=(1, 3))
    return _on_host("random_saturation", data, _arith.saturation, _uniform(low, high))


def random_hue(data, min_factor, max_factor):
    """``random_hue(data, min_factor, max_factor)``: the hue turned by ``a`` * 360 degrees in
    HLS space, ``a`` from [min_factor, max_factor] (so 1.0 is a whole turn). One channel: a copy
    (MXNet leaves its output unwritten)."""
    low, high = _factors("random_hue", min_factor, max_factor)
    _image("random_hue", data, (3,), channels=(1, 3))
    return _on_host("random_hue", data, _arith.hue, _uniform(low, high))


def random_color_jitter(data, brightness, contrast, saturation, hue):
    """``random_color_jitter(data, brightness, contrast, saturation, hue)``: the brightness,
    contrast and saturation factors ``1 + U(-v, v)`` and the hue turn ``U(-hue, hue)`` applied
    in a random order, each only when its value is > 0. When none is, a copy (MXNet leaves its
    output unwritten)."""
    values = _floats("random_color_jitter", "(brightness, contrast, saturation, hue)",
                     (brightness, contrast, saturation, hue), 4)
    return _on_host("random_color_jitter", data, _arith.jitter, *values,
                    _random.generator(None))


def adjust_lighting(data, alpha):
    """``adjust_lighting(data, alpha)``: AlexNet's PCA lighting: each of R, G, B plus
    ``eig[c] . alpha`` for the three ``alpha`` weights. One channel: a copy (MXNet leaves its
    output unwritten)."""
    alpha = _floats("adjust_lighting", "alpha", alpha, 3)
    return _on_host("adjust_lighting", data, _arith.lighting, alpha)


def random_lighting(data, alpha_std=0.05):
    """``random_lighting(data, alpha_std=0.05)``: ``adjust_lighting`` with the three weights
    drawn from N(0, alpha_std)."""
    if not isinstance(alpha_std, numbers.Real) or alpha_std < 0:
        raise ValueError("random_lighting: alpha_std must be a number >= 0, got %r"
                         % (alpha_std,))
    _image("random_lighting", data, (3,), channels=(1, 3))
    weights = _random.generator(None).normal(0, alpha_std, size=3)
    return _on_host("random_lighting", data, _arith.lighting, weights)
