"""``mx.image`` (also ``mx.img``): MXNet 1.9.1's image functions and augmenters on (H, W, C)
NDArrays, with MXNet's pixels.

Decoding goes through Pillow (the ``vision`` extra) and resizing through the same OpenCV-exact
code as ``gluon.data.vision.transforms``. The random augmenters draw from Python's ``random``
module (and ``LightingAug`` from NumPy's global generator), as MXNet's do, so a program that
seeds those gets MXNet's crops, flips and jitters. As in MXNet, the functions' default
interpolation is 2 (bicubic); 9 picks bicubic to enlarge, area to shrink and bilinear otherwise,
10 a random one of 0-4.
"""
from __future__ import annotations

import json
import numbers
import random

import numpy

from .gluon.data.vision import image_file as _image_file
from .gluon.data.vision._resize import resize as _resize
from .gluon.data.vision._rotate import imrotate, random_rotate
from .gluon.data.vision.transforms import _host, _scale_down, random_size_box as _random_size_box
from .ndarray import NDArray, creation
from . import ndarray as nd

__all__ = ["imread", "imdecode", "imresize", "resize_short", "fixed_crop", "random_crop",
           "center_crop", "color_normalize", "random_size_crop", "scale_down", "Augmenter",
           "SequentialAug", "ResizeAug", "ForceResizeAug", "RandomCropAug",
           "RandomSizedCropAug", "CenterCropAug", "RandomOrderAug", "BrightnessJitterAug",
           "ContrastJitterAug", "SaturationJitterAug", "HueJitterAug", "ColorJitterAug",
           "LightingAug", "ColorNormalizeAug", "RandomGrayAug", "HorizontalFlipAug", "CastAug",
           "CreateAugmenter", "imrotate", "random_rotate", "copyMakeBorder"]


def _back(values, like=None, out=None):
    if out is not None:
        out[:] = values
        return out
    ctx = like.context if isinstance(like, NDArray) else None
    return creation.array(values, ctx=ctx, dtype=values.dtype)


def _colour_order(pixels, to_rgb):
    if not to_rgb and pixels.shape[2] == 3:
        return numpy.ascontiguousarray(pixels[..., ::-1])
    return pixels


def imread(filename, flag=1, to_rgb=True, out=None):
    """The image file ``filename`` decoded into a uint8 NDArray (H, W, 3) RGB, (H, W, 1) gray
    with ``flag=0``, BGR with ``to_rgb=False``."""
    return _back(_colour_order(_image_file.imread(filename, flag), to_rgb), out=out)


def imdecode(buf, flag=1, to_rgb=True, out=None):
    """An encoded image (bytes, bytearray, or a uint8 array of them) decoded as ``imread``."""
    if isinstance(buf, NDArray):
        buf = buf.asnumpy().astype(numpy.uint8).tobytes()
    elif isinstance(buf, numpy.ndarray):
        buf = buf.astype(numpy.uint8, copy=False).tobytes()
    elif not isinstance(buf, (bytes, bytearray)):
        raise ValueError("buf must be of type bytes, bytearray or numpy.ndarray, if you would "
                         "like to input type str, please convert to bytes")
    return _back(_colour_order(_image_file.imdecode(buf, flag), to_rgb), out=out)


def _hwc(src, what):
    if src.ndim != 3:
        raise ValueError("%s expects an image of shape (H, W, C), got shape %s"
                         % (what, tuple(src.shape)))
    return src


def imresize(src, w, h, interp=1, out=None):
    """``src`` (H, W, C) resized to ``h`` x ``w`` with OpenCV's interpolation ``interp``
    (0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos)."""
    pixels = _hwc(_host(src), "imresize")
    return _back(_resize(pixels, w, h, int(interp)), src, out)


# OpenCV's border types (cv2.BORDER_*), as NumPy's padding modes.
_BORDERS = {0: "constant", 1: "edge", 2: "symmetric", 3: "wrap", 4: "reflect"}


def copyMakeBorder(src, top, bot, left, right, type=0, value=0.0, values=None,  # noqa: N802
                   out=None):
    """``src`` (H, W, C) with ``top``/``bot`` rows and ``left``/``right`` columns added, as
    OpenCV's ``copyMakeBorder``: ``type`` 0 constant (``value``, or ``values`` one per
    channel), 1 replicate, 2 reflect (edge repeated), 3 wrap, 4 reflect without the edge."""
    pixels = _hwc(_host(src), "copyMakeBorder")
    mode = _BORDERS.get(int(type))
    if mode is None:
        raise ValueError("copyMakeBorder: type must be 0 (constant), 1 (replicate), 2 (reflect), "
                         "3 (wrap) or 4 (reflect 101), got %r" % (type,))
    widths = [(int(w), int(w2)) for w, w2 in ((top, bot), (left, right))]
    if min(min(w) for w in widths) < 0:
        raise ValueError("copyMakeBorder: the border widths must be >= 0, got %s"
                         % ((top, bot, left, right),))
    widths.append((0, 0))
    if mode != "constant":
        return _back(numpy.pad(pixels, widths, mode=mode), src, out)
    channels = pixels.shape[2]
    if values:      # OpenCV's Scalar: a value per channel, 0 for the channels not given
        fill = numpy.zeros(channels)
        given = numpy.asarray(values, dtype=numpy.float64).reshape(-1)[:channels]
        fill[:len(given)] = given
    else:
        fill = numpy.full(channels, float(value))
    if pixels.dtype.kind in "iu":     # OpenCV's saturate_cast: rounded, clipped to the type
        limits = numpy.iinfo(pixels.dtype)
        fill = numpy.clip(numpy.rint(fill), limits.min, limits.max)
    padded = numpy.empty((pixels.shape[0] + sum(widths[0]), pixels.shape[1] + sum(widths[1]),
                          channels), dtype=pixels.dtype)
    padded[...] = fill.astype(pixels.dtype)
    padded[widths[0][0]:widths[0][0] + pixels.shape[0],
           widths[1][0]:widths[1][0] + pixels.shape[1]] = pixels
    return _back(padded, src, out)


def scale_down(src_size, size):
    """The crop ``size`` (width, height) scaled down to fit in ``src_size`` (width, height)."""
    return _scale_down(src_size, size)


def _get_interp_method(interp, sizes=()):
    if interp == 9:
        if sizes:
            oh, ow, nh, nw = sizes
            if nh > oh and nw > ow:
                return 2
            if nh < oh and nw < ow:
                return 3
            return 1
        return 2
    if interp == 10:
        return random.randint(0, 4)
    if interp not in (0, 1, 2, 3, 4):
        raise ValueError("Unknown interp method %d" % interp)
    return interp


def resize_short(src, size, interp=2):
    """Resize so that the shorter side is ``size``, keeping the aspect ratio."""
    h, w, _ = _hwc(src, "resize_short").shape
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    return imresize(src, new_w, new_h, interp=_get_interp_method(interp, (h, w, new_h, new_w)))


def fixed_crop(src, x0, y0, w, h, size=None, interp=2):
    """The ``w`` x ``h`` box at (``x0``, ``y0``) of ``src``, resized to ``size`` (width,
    height) when given."""
    out = src[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        sizes = (h, w, size[1], size[0])
        out = imresize(out, *size, interp=_get_interp_method(interp, sizes))
    return out


def random_crop(src, size, interp=2):
    """A random ``size`` (width, height) crop of ``src`` (upsampled when ``src`` is smaller),
    and its box (x, y, width, height)."""
    h, w, _ = _hwc(src, "random_crop").shape
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def center_crop(src, size, interp=2):
    """The centre ``size`` (width, height) crop of ``src`` (upsampled when ``src`` is smaller),
    and its box (x, y, width, height)."""
    h, w, _ = _hwc(src, "center_crop").shape
    new_w, new_h = scale_down((w, h), size)
    x0 = int((w - new_w) / 2)
    y0 = int((h - new_h) / 2)
    return fixed_crop(src, x0, y0, new_w, new_h, size, interp), (x0, y0, new_w, new_h)


def color_normalize(src, mean, std=None):
    """``(src - mean) / std``, in place as MXNet's."""
    if mean is not None:
        src -= mean
    if std is not None:
        src /= std
    return src


def random_size_crop(src, size, area, ratio, interp=2):
    """A crop of random area (``area``: the smallest fraction, or a (min, max) pair) and
    aspect ``ratio`` (min, max), resized to ``size``; the centre crop after 10 misses."""
    h, w, _ = _hwc(src, "random_size_crop").shape
    box = _random_size_box(h, w, area, ratio)
    if box is None:
        return center_crop(src, size, interp)
    return fixed_crop(src, *box, size, interp), box


# ------------------------------------------------------------------------------- augmenters
def _listed_arrays(kwargs):
    """``kwargs`` with its arrays (NDArray or NumPy) as lists, as ``dumps`` writes them."""
    for key, value in kwargs.items():
        if isinstance(value, NDArray):
            value = value.asnumpy()
        if isinstance(value, numpy.ndarray):
            kwargs[key] = value.tolist()
    return kwargs


class Augmenter:
    """The base of the image augmenters: ``aug(src)`` returns the augmented image."""

    def __init__(self, **kwargs):
        # Each argument is also an attribute of its name, as the augmenters read them.
        for key, value in kwargs.items():
            setattr(self, key, value)
        self._kwargs = _listed_arrays(kwargs)

    def dumps(self):
        """The augmenter as a JSON string: ``[class name in lower case, its arguments]``."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src):
        raise NotImplementedError("Must override implementation.")


class SequentialAug(Augmenter):
    """Apply the augmenters ``ts`` in order."""

    def __init__(self, ts):
        super().__init__()
        self.ts = ts

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.ts]]

    def __call__(self, src):
        for aug in self.ts:
            src = aug(src)
        return src


class ResizeAug(Augmenter):
    """Resize the shorter side to ``size``."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)

    def __call__(self, src):
        return resize_short(src, self.size, self.interp)


class ForceResizeAug(Augmenter):
    """Resize to ``size`` (width, height), whatever the aspect ratio."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)

    def __call__(self, src):
        sizes = (src.shape[0], src.shape[1], self.size[1], self.size[0])
        return imresize(src, *self.size, interp=_get_interp_method(self.interp, sizes))


class RandomCropAug(Augmenter):
    """A random crop of ``size`` (width, height)."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)

    def __call__(self, src):
        return random_crop(src, self.size, self.interp)[0]


class RandomSizedCropAug(Augmenter):
    """A crop of random area and aspect ratio, resized to ``size`` (``random_size_crop``)."""

    def __init__(self, size, area, ratio, interp=2):
        super().__init__(size=size, area=area, ratio=ratio, interp=interp)

    def __call__(self, src):
        return random_size_crop(src, self.size, self.area, self.ratio, self.interp)[0]


class CenterCropAug(Augmenter):
    """The centre crop of ``size`` (width, height)."""

    def __init__(self, size, interp=2):
        super().__init__(size=size, interp=interp)

    def __call__(self, src):
        return center_crop(src, self.size, self.interp)[0]


class RandomOrderAug(Augmenter):
    """Apply the augmenters ``ts`` in a random order (shuffled with Python's ``random``)."""

    def __init__(self, ts):
        super().__init__()
        self.ts = ts

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.ts]]

    def __call__(self, src):
        random.shuffle(self.ts)
        for t in self.ts:
            src = t(src)
        return src


class BrightnessJitterAug(Augmenter):
    """Multiply by ``1 + uniform(-brightness, brightness)`` (in place)."""

    def __init__(self, brightness):
        super().__init__(brightness=brightness)

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self.brightness, self.brightness)
        src *= alpha
        return src


_GRAY_COEF = [[[0.299, 0.587, 0.114]]]


class ContrastJitterAug(Augmenter):
    """Blend with the image's mean gray level by ``1 + uniform(-contrast, contrast)``."""

    def __init__(self, contrast):
        super().__init__(contrast=contrast)
        self.coef = nd.array(_GRAY_COEF)

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self.contrast, self.contrast)
        gray = src * self.coef
        gray = (3.0 * (1.0 - alpha) / gray.size) * nd.sum(gray)
        src *= alpha
        src += gray
        return src


class SaturationJitterAug(Augmenter):
    """Blend with each pixel's gray level by ``1 + uniform(-saturation, saturation)``."""

    def __init__(self, saturation):
        super().__init__(saturation=saturation)
        self.coef = nd.array(_GRAY_COEF)

    def __call__(self, src):
        alpha = 1.0 + random.uniform(-self.saturation, self.saturation)
        gray = src * self.coef
        gray = nd.sum(gray, axis=2, keepdims=True)
        gray *= (1.0 - alpha)
        src *= alpha
        src += gray
        return src


class HueJitterAug(Augmenter):
    """Turn the hue by ``uniform(-hue, hue)`` half turns, as a linear map in YIQ space."""

    def __init__(self, hue):
        super().__init__(hue=hue)
        self.tyiq = numpy.array([[0.299, 0.587, 0.114],
                                 [0.596, -0.274, -0.321],
                                 [0.211, -0.523, 0.311]])
        self.ityiq = numpy.array([[1.0, 0.956, 0.621],
                                  [1.0, -0.272, -0.647],
                                  [1.0, -1.107, 1.705]])

    def __call__(self, src):
        alpha = random.uniform(-self.hue, self.hue)
        u = numpy.cos(alpha * numpy.pi)
        w = numpy.sin(alpha * numpy.pi)
        bt = numpy.array([[1.0, 0.0, 0.0], [0.0, u, -w], [0.0, w, u]])
        t = numpy.dot(numpy.dot(self.ityiq, bt), self.tyiq).T
        return nd.dot(src, nd.array(t))


class ColorJitterAug(RandomOrderAug):
    """Brightness, contrast and saturation jitter (those above 0), in a random order."""

    def __init__(self, brightness, contrast, saturation):
        ts = []
        if brightness > 0:
            ts.append(BrightnessJitterAug(brightness))
        if contrast > 0:
            ts.append(ContrastJitterAug(contrast))
        if saturation > 0:
            ts.append(SaturationJitterAug(saturation))
        super().__init__(ts)


class LightingAug(Augmenter):
    """AlexNet-style PCA lighting noise: weights from NumPy's global ``normal(0, alphastd)``."""

    def __init__(self, alphastd, eigval, eigvec):
        super().__init__(alphastd=alphastd, eigval=eigval, eigvec=eigvec)

    def __call__(self, src):
        alpha = numpy.random.normal(0, self.alphastd, size=(3,))
        rgb = numpy.dot(self.eigvec * alpha, self.eigval)
        src += nd.array(rgb)
        return src


class ColorNormalizeAug(Augmenter):
    """``(src - mean) / std`` per channel."""

    def __init__(self, mean, std):
        super().__init__(mean=mean, std=std)
        self.mean = mean if mean is None or isinstance(mean, NDArray) else nd.array(mean)
        self.std = std if std is None or isinstance(std, NDArray) else nd.array(std)

    def __call__(self, src):
        return color_normalize(src, self.mean, self.std)


class RandomGrayAug(Augmenter):
    """With probability ``p``, replace every channel by the gray level (0.21, 0.72, 0.07)."""

    def __init__(self, p):
        super().__init__(p=p)
        self.mat = nd.array([[0.21, 0.21, 0.21], [0.72, 0.72, 0.72], [0.07, 0.07, 0.07]])

    def __call__(self, src):
        if random.random() < self.p:
            src = nd.dot(src, self.mat)
        return src


class HorizontalFlipAug(Augmenter):
    """Flip left to right with probability ``p``."""

    def __init__(self, p):
        super().__init__(p=p)

    def __call__(self, src):
        if random.random() < self.p:
            src = nd.flip(src, axis=1)
        return src


class CastAug(Augmenter):
    """Cast to ``typ`` (float32 by default)."""

    def __init__(self, typ="float32"):
        super().__init__(type=typ)
        self.typ = typ

    def __call__(self, src):
        return src.astype(self.typ)


def CreateAugmenter(data_shape, resize=0, rand_crop=False, rand_resize=False, rand_mirror=False,
                    mean=None, std=None, brightness=0, contrast=0, saturation=0, hue=0,
                    pca_noise=0, rand_gray=0, inter_method=2):
    """MXNet's standard augmenter list for images of ``data_shape`` (C, H, W): resize, crop,
    flip, cast to float32, colour jitter, hue, PCA noise, gray, normalisation (``mean=True`` /
    ``std=True``: ImageNet's values)."""
    auglist = []
    if resize > 0:
        auglist.append(ResizeAug(resize, inter_method))
    crop_size = (data_shape[2], data_shape[1])
    if rand_resize:
        if not rand_crop:
            raise ValueError("CreateAugmenter: rand_resize needs rand_crop=True")
        auglist.append(RandomSizedCropAug(crop_size, 0.08, (3.0 / 4.0, 4.0 / 3.0), inter_method))
    elif rand_crop:
        auglist.append(RandomCropAug(crop_size, inter_method))
    else:
        auglist.append(CenterCropAug(crop_size, inter_method))
    if rand_mirror:
        auglist.append(HorizontalFlipAug(0.5))
    auglist.append(CastAug())
    if brightness or contrast or saturation:
        auglist.append(ColorJitterAug(brightness, contrast, saturation))
    if hue:
        auglist.append(HueJitterAug(hue))
    if pca_noise > 0:
        eigval = numpy.array([55.46, 4.794, 1.148])
        eigvec = numpy.array([[-0.5675, 0.7192, 0.4009],
                              [-0.5808, -0.0045, -0.8140],
                              [-0.5836, -0.6948, 0.4203]])
        auglist.append(LightingAug(pca_noise, eigval, eigvec))
    if rand_gray > 0:
        auglist.append(RandomGrayAug(rand_gray))
    if mean is True:
        mean = nd.array([123.68, 116.28, 103.53])
    elif mean is not None and (not isinstance(mean, (numpy.ndarray, NDArray))
                               or mean.shape[0] not in (1, 3)):
        raise ValueError("CreateAugmenter: mean must be True or an array of 1 or 3 values")
    if std is True:
        std = nd.array([58.395, 57.12, 57.375])
    elif std is not None and (not isinstance(std, (numpy.ndarray, NDArray))
                              or std.shape[0] not in (1, 3)):
        raise ValueError("CreateAugmenter: std must be True or an array of 1 or 3 values")
    if mean is not None or std is not None:
        auglist.append(ColorNormalizeAug(mean, std))
    return auglist


_DETECTION = ("DetAugmenter", "DetBorrowAug", "DetRandomSelectAug", "DetHorizontalFlipAug",
              "DetRandomCropAug", "DetRandomPadAug", "CreateMultiRandCropAugmenter",
              "CreateDetAugmenter", "ImageDetIter")


def __getattr__(name):
    # The iterators have their own modules, which build on this one's augmenters.
    if name == "ImageIter":
        from .image_iter import ImageIter
        globals()["ImageIter"] = ImageIter
        return ImageIter
    if name in _DETECTION or name in ("det", "detection"):     # MXNet's mx.image.det
        from . import image_det
        value = image_det if name in ("det", "detection") else getattr(image_det, name)
        globals()[name] = value
        return value
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
