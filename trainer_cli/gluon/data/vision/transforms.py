"""``gluon.data.vision.transforms``: image transforms as Blocks, with MXNet 1.9.1's pixels.

Images are NDArrays in MXNet's layout, (H, W, C) or (N, H, W, C), before ``ToTensor`` and
(C, H, W) or (N, C, H, W) after it. The deterministic transforms give MXNet's values exactly
(tests/test_vision_transforms.py compares them with real MXNet's). The random ones draw their
factors from trainer_cli's seedable generator (MXNet's distributions, not its random streams),
except ``RandomResizedCrop``, which draws from Python's ``random`` module as MXNet's does, so a
program seeding ``random`` gets MXNet's crops, and ``RandomRotation``, which draws from
``numpy.random`` as MXNet's does.
"""
from __future__ import annotations

import contextlib
import numbers

import numpy

from .... import random as _random
from ....ndarray import NDArray, creation
from ....ndarray._image_arith import jitter, normalize, to_tensor
from ...block import Block, HybridBlock, HybridSequential, Sequential, _block_call_text
from . import _color
from ._resize import resize as _resize
from ._rotate import imrotate as _imrotate, random_rotate as _random_rotate

__all__ = ["Compose", "Cast", "ToTensor", "Normalize", "Resize", "CenterCrop",
           "RandomResizedCrop", "RandomFlipLeftRight", "RandomFlipTopBottom", "RandomBrightness",
           "RandomContrast", "RandomSaturation", "RandomHue", "RandomColorJitter",
           "RandomLighting", "CropResize", "RandomApply", "Rotate", "RandomRotation", "resize",
           "center_crop", "random_size_crop"]


def _host(x):
    if isinstance(x, NDArray):
        return x.asnumpy().view(numpy.ndarray)
    return numpy.asarray(x)


def _back(values, like):
    ctx = like.context if isinstance(like, NDArray) else None
    return creation.array(values, ctx=ctx, dtype=values.dtype)


def _image(x, what, ndims=(3, 4)):
    if x.ndim not in ndims:
        raise ValueError("%s expects an image of shape %s, got shape %s" % (
            what, " or ".join({3: "(H, W, C)", 4: "(N, H, W, C)"}[n] for n in ndims), x.shape))
    return x


def _uniform(low, high):
    return float(_random.generator(None).uniform(low, high))


# ------------------------------------------------------------------------------- composition
class Compose(Sequential):
    """Apply ``transforms`` in order (consecutive hybrid ones grouped, as MXNet does).

    When every transform works on the NumPy image (``_OnHost``: the geometry, flips,
    ``ToTensor`` and ``Normalize``), none has a hook and none is hybridized, an NDArray goes
    through their NumPy functions in turn and one NDArray is made at the end: the same values
    and random draws as calling each block, without a block call and an NDArray per transform.
    """

    def __init__(self, transforms):
        super().__init__()
        hybrid = []
        for t in list(transforms) + [None]:
            if isinstance(t, HybridBlock):
                hybrid.append(t)
                continue
            if len(hybrid) == 1:
                self.add(hybrid[0])
            elif len(hybrid) > 1:
                group = HybridSequential()
                group.add(*hybrid)
                self.add(group)
            hybrid = []
            if t is not None:
                self.add(t)

    def forward(self, x, *args):
        chain = _host_chain(self) if isinstance(x, NDArray) and not args else None
        if chain is None:
            return super().forward(x, *args)
        return _back(apply_on_host(chain, _host(x), x), x)


def apply_on_host(chain, img, like=None):
    """The NumPy image ``img`` through the ``_OnHost`` transforms ``chain`` in turn; a failing
    transform named on its error as a call of the block itself would name it (see
    Block.__call__), ``like`` (an NDArray or None) giving the context of the input shown."""
    for t in chain:
        try:
            img = t._on_host(img)
        except Exception as exc:
            if getattr(exc, "failed_block", None) is None:
                with contextlib.suppress(Exception):
                    exc.failed_block = _block_call_text(t, (_back(img, like),))
            raise
    return img


def host_chain(compose):
    """The ``_OnHost`` transforms a Compose applies, in order, or None where it holds another
    kind of transform, a hook or a hybridized block (then only calling it gives its result)."""
    return _host_chain(compose)


def _host_chain(block):
    """The ``_OnHost`` transforms ``block`` (a Compose or a group of it) applies, in order; None
    when one is not such a transform, or a block on the way has a hook or is hybridized."""
    chain = []
    for child in block._children.values():
        if child._forward_pre_hooks or child._forward_hooks or getattr(child, "_active", False):
            return None
        if isinstance(child, _OnHost):
            chain.append(child)
        elif type(child) is HybridSequential:
            inner = _host_chain(child)
            if inner is None:
                return None
            chain.extend(inner)
        else:
            return None
    return chain


class Cast(HybridBlock):
    """Cast to ``dtype``."""

    def __init__(self, dtype="float32"):
        super().__init__()
        self._dtype = dtype

    def hybrid_forward(self, F, x):
        return x.astype(self._dtype)


class _OnHost:
    """A transform whose work is a NumPy function of the image, ``_on_host``: called on its own
    it takes and gives NDArrays; a Compose of such transforms runs their functions one after
    the other on the NumPy image and makes one NDArray at the end."""

    def _on_host(self, img):
        raise NotImplementedError


class ToTensor(_OnHost, HybridBlock):
    """(H, W, C) or (N, H, W, C) in [0, 255] to float32 (C, H, W) or (N, C, H, W) in [0, 1]."""

    def hybrid_forward(self, F, x):
        return _back(self._on_host(_host(x)), x)

    def _on_host(self, img):
        return to_tensor(_image(img, "ToTensor"))


class Normalize(_OnHost, HybridBlock):
    """``(x - mean[c]) / std[c]`` per channel of a (C, H, W) or (N, C, H, W) tensor."""

    def __init__(self, mean=0.0, std=1.0):
        super().__init__()
        self._mean = mean
        self._std = std
        self._per_channel = None     # (mean, std) as float32 columns, made at the first call

    def hybrid_forward(self, F, x):
        return _back(self._on_host(_host(x)), x)

    def _on_host(self, img):
        if img.ndim not in (3, 4):
            raise ValueError("Normalize expects a tensor of shape (C, H, W) or (N, C, H, W), "
                             "got shape %s" % (img.shape,))
        channels = img.shape[-3]
        if self._per_channel is None:
            self._per_channel = tuple(numpy.asarray(v, dtype=numpy.float32).reshape(-1)
                                      for v in (self._mean, self._std))
        mean, std = self._per_channel
        for name, values in (("mean", mean), ("std", std)):
            if values.size not in (1, channels):
                raise ValueError("Normalize: %s has %d values for an input of %d channels"
                                 % (name, values.size, channels))
        return normalize(img, mean, std)


# ------------------------------------------------------------------------------- geometry
def _resize_any(img, width, height, interpolation):
    if img.ndim == 4:
        return numpy.stack([_resize(i, width, height, interpolation) for i in img])
    return _resize(img, width, height, interpolation)


def resize(img, size, keep_ratio=False, interpolation=1):
    """MXNet's ``nd.image.resize`` on a NumPy (H, W, C) or (N, H, W, C) image: ``size`` is
    ``(width, height)``, or one number for a square, or with ``keep_ratio`` the new short side."""
    _image(img, "Resize")
    h, w = img.shape[-3], img.shape[-2]
    if isinstance(size, numbers.Number) or len(size) == 1:
        side = int(size if isinstance(size, numbers.Number) else size[0])
        if keep_ratio:
            if h > w:
                width, height = side, h * side // w
            else:
                width, height = w * side // h, side
        else:
            width = height = side
    else:
        width, height = int(size[0]), int(size[1])
    return _resize_any(img, width, height, interpolation)


class Resize(_OnHost, HybridBlock):
    """Resize an (H, W, C) or (N, H, W, C) image to ``size`` (``(width, height)`` or one
    number), with OpenCV's interpolation as MXNet (bilinear by default)."""

    def __init__(self, size, keep_ratio=False, interpolation=1):
        super().__init__()
        self._size = size
        self._keep = keep_ratio
        self._interpolation = interpolation

    def hybrid_forward(self, F, x):
        return _back(self._on_host(_host(x)), x)

    def _on_host(self, img):
        return resize(img, self._size, self._keep, self._interpolation)


def _scale_down(src_size, size):
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def _fixed_crop(img, x0, y0, w, h, size, interpolation):
    out = img[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        out = _resize(out, size[0], size[1], interpolation)
    return numpy.ascontiguousarray(out)


def center_crop(img, size, interpolation=1):
    """MXNet's ``image.center_crop`` on a NumPy (H, W, C) image: the crop and its box."""
    h, w = _image(img, "CenterCrop", (3,)).shape[:2]
    new_w, new_h = _scale_down((w, h), size)
    x0, y0 = int((w - new_w) / 2), int((h - new_h) / 2)
    return _fixed_crop(img, x0, y0, new_w, new_h, size, interpolation), (x0, y0, new_w, new_h)


def random_size_box(h, w, area, ratio):
    """MXNet's draw of ``image.random_size_crop``'s box (x, y, width, height) in an image of
    ``h`` x ``w``, from Python's ``random`` as MXNet draws it: ``area`` the smallest fraction of
    the image or a (min, max) pair, ``ratio`` the (min, max) aspect; None after 10 misses (the
    caller then takes the centre crop). ``mx.image.random_size_crop`` shares it."""
    src_area = h * w
    draws = _random.py_random()
    if isinstance(area, numbers.Number):
        area = (area, 1.0)
    for _ in range(10):
        target_area = draws.uniform(area[0], area[1]) * src_area
        log_ratio = (numpy.log(ratio[0]), numpy.log(ratio[1]))
        new_ratio = numpy.exp(draws.uniform(*log_ratio))
        new_w = int(round(numpy.sqrt(target_area * new_ratio)))
        new_h = int(round(numpy.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = draws.randint(0, w - new_w)
            y0 = draws.randint(0, h - new_h)
            return x0, y0, new_w, new_h
    return None


def random_size_crop(img, size, area, ratio, interpolation=1):
    """MXNet's ``image.random_size_crop``, drawing from Python's ``random`` as MXNet does."""
    h, w = _image(img, "RandomResizedCrop", (3,)).shape[:2]
    box = random_size_box(h, w, area, ratio)
    if box is None:
        return center_crop(img, size, interpolation)
    return _fixed_crop(img, *box, size, interpolation), box


def _pair(size):
    return (size, size) if isinstance(size, numbers.Number) else tuple(size)


class CenterCrop(_OnHost, Block):
    """Crop the centre ``size`` (``(width, height)`` or one number) of an (H, W, C) image,
    resizing when the image is smaller."""

    def __init__(self, size, interpolation=1):
        super().__init__()
        self._size = _pair(size)
        self._interpolation = interpolation

    def forward(self, x):
        return _back(self._on_host(_host(x)), x)

    def _on_host(self, img):
        return center_crop(img, self._size, self._interpolation)[0]


class RandomResizedCrop(_OnHost, Block):
    """Crop a random area (``scale`` of the image) and aspect ``ratio``, resized to ``size``."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0), interpolation=1):
        super().__init__()
        self._args = (_pair(size), scale, ratio, interpolation)

    def forward(self, x):
        return _back(self._on_host(_host(x)), x)

    def _on_host(self, img):
        return random_size_crop(img, *self._args)[0]


class CropResize(HybridBlock):
    """Crop the box at (``x``, ``y``) of ``width`` x ``height`` from an (H, W, C) or
    (N, H, W, C) image, then resize it to ``size`` when given."""

    def __init__(self, x, y, width, height, size=None, interpolation=None):
        super().__init__()
        self._box = (int(x), int(y), int(width), int(height))
        self._size = size
        self._interpolation = 1 if interpolation is None else interpolation

    def hybrid_forward(self, F, x):
        img = _image(_host(x), "CropResize")
        x0, y0, w, h = self._box
        height, width = img.shape[-3], img.shape[-2]
        if x0 < 0 or y0 < 0 or w <= 0 or h <= 0 or x0 + w > width or y0 + h > height:
            raise ValueError("CropResize: the box x=%d, y=%d, width=%d, height=%d does not fit "
                             "in an image of width %d and height %d" % (x0, y0, w, h, width, height))
        out = numpy.ascontiguousarray(img[..., y0:y0 + h, x0:x0 + w, :])
        if self._size:
            out = resize(out, self._size, False, self._interpolation)
        return _back(out, x)


class RandomApply(Sequential):
    """Apply ``transforms`` with probability ``p`` (drawn from Python's ``random``, as MXNet)."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        self.transforms = transforms
        self.p = p

    def forward(self, x):
        if self.p < _random.py_random().random():
            return x
        return self.transforms(x)


class _RandomFlip(_OnHost, HybridBlock):
    _axis = None

    def hybrid_forward(self, F, x):
        return _back(self._on_host(_host(x)), x)

    def _on_host(self, img):
        img = _image(img, type(self).__name__)
        # MXNet keeps the image when its Bernoulli(0.5) draw is true and flips it otherwise.
        if _random.generator(None).random() < 0.5:
            return img.copy()
        return numpy.ascontiguousarray(numpy.flip(img, axis=self._axis))


class RandomFlipLeftRight(_RandomFlip):
    """Flip the image left to right with probability 0.5."""
    _axis = -2


class RandomFlipTopBottom(_RandomFlip):
    """Flip the image top to bottom with probability 0.5."""
    _axis = -3


# ------------------------------------------------------------------------------- colour
class _ColorBlock(HybridBlock):
    def _apply(self, x, fn, *args):
        img = _image(_host(x), type(self).__name__, (3,))
        return _back(fn(img, *args), x)


class RandomBrightness(_ColorBlock):
    """Multiply by a factor drawn from [max(0, 1 - brightness), 1 + brightness]."""

    def __init__(self, brightness):
        super().__init__()
        self._args = (max(0, 1 - brightness), 1 + brightness)

    def hybrid_forward(self, F, x):
        return self._apply(x, _color.brightness, _uniform(*self._args))


class RandomContrast(_ColorBlock):
    """Blend with the mean gray level by a factor from [max(0, 1 - contrast), 1 + contrast]."""

    def __init__(self, contrast):
        super().__init__()
        self._args = (max(0, 1 - contrast), 1 + contrast)

    def hybrid_forward(self, F, x):
        return self._apply(x, _color.contrast, _uniform(*self._args))


class RandomSaturation(_ColorBlock):
    """Blend with a gray level by a factor from [max(0, 1 - saturation), 1 + saturation]."""

    def __init__(self, saturation):
        super().__init__()
        self._args = (max(0, 1 - saturation), 1 + saturation)

    def hybrid_forward(self, F, x):
        return self._apply(x, _color.saturation, _uniform(*self._args))


class RandomHue(_ColorBlock):
    """Turn the hue by ``alpha`` turns, ``alpha`` from [max(0, 1 - hue), 1 + hue] (MXNet's
    range: 1 is a whole turn)."""

    def __init__(self, hue):
        super().__init__()
        self._args = (max(0, 1 - hue), 1 + hue)

    def hybrid_forward(self, F, x):
        return self._apply(x, _color.hue, _uniform(*self._args))


class RandomColorJitter(_ColorBlock):
    """Brightness, contrast, saturation and hue jitter, the enabled ones in a random order."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self._args = (brightness, contrast, saturation, hue)

    def hybrid_forward(self, F, x):
        img = _image(_host(x), "RandomColorJitter", (3,))
        return _back(jitter(img, *self._args, _random.generator(None)), x)


class RandomLighting(_ColorBlock):
    """AlexNet-style PCA lighting noise with per-channel weights drawn from N(0, alpha)."""

    def __init__(self, alpha):
        super().__init__()
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        weights = _random.generator(None).normal(0, self._alpha, size=3)
        return self._apply(x, _color.lighting, weights)


# ------------------------------------------------------------------------------- rotation
class Rotate(Block):
    """Rotate float32 (C, H, W) or (N, C, H, W) images by ``rotation_degrees`` about their
    centre, keeping their shape (``image.imrotate``; ``zoom_in``: no empty corners,
    ``zoom_out``: the whole image kept). After ``ToTensor``."""

    def __init__(self, rotation_degrees, zoom_in=False, zoom_out=False):
        super().__init__()
        self._args = (rotation_degrees, zoom_in, zoom_out)

    def forward(self, x):
        if x.dtype is not numpy.float32:
            raise TypeError("This transformation only supports float32. Consider calling it "
                            "after ToTensor")
        return _imrotate(x, *self._args)


class RandomRotation(Block):
    """With probability ``rotate_with_proba``, rotate by an angle drawn uniformly from
    ``angle_limits`` (degrees, lower first; one angle per image of a batch), drawn from
    ``numpy.random`` as MXNet draws it. After ``ToTensor``."""

    def __init__(self, angle_limits, zoom_in=False, zoom_out=False, rotate_with_proba=1.0):
        super().__init__()
        lower, upper = angle_limits
        if lower >= upper:
            raise ValueError("`angle_limits` must be an ordered tuple")
        if rotate_with_proba < 0 or rotate_with_proba > 1:
            raise ValueError("Probability of rotating the image should be between 0 and 1")
        self._args = (angle_limits, zoom_in, zoom_out)
        self._rotate_with_proba = rotate_with_proba

    def forward(self, x):
        if numpy.random.random() > self._rotate_with_proba:
            return x
        if x.dtype is not numpy.float32:
            raise TypeError("This transformation only supports float32. Consider calling it "
                            "after ToTensor")
        return _random_rotate(x, *self._args)
