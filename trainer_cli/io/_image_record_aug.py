"""MXNet 1.9.1's default image record augmenter (``src/io/image_aug_default.cc``) on one decoded
image, and the normalisation its ``ImageRecordIter`` fuses into the copy out.

The image is worked as OpenCV holds it, uint8 (H, W, C) in BGR order, so each step is MXNet's:
resizing is OpenCV's ``cv::resize`` bit for bit (``ndarray._opencv_resize``), crops and pads
are exact; the colour jitters follow OpenCV's ``convertTo`` / ``addWeighted`` (float, rounded
half to even, saturated) and MXNet's contrast gray is ``CV_RGB2GRAY`` of the BGR image, as
MXNet's code has it. Random draws come from the ``numpy.random.RandomState`` handed in (not
MXNet's streams).
"""
from __future__ import annotations

import math

import numpy

from ..gluon.data.vision._resize import resize as _resize
from ..gluon.data.vision.image_file import opencv_gray

__all__ = ["AugmentParams", "augment", "to_output"]

# eigval * eigvec of ImageNet's RGB covariance, as MXNet stores them for pca_noise.
_EIGVEC = numpy.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                       [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                       [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]], dtype=numpy.float32)


class AugmentParams:
    """The augmenter's parameters (MXNet's names and defaults)."""

    def __init__(self, data_shape, resize=-1, rand_crop=False, random_resized_crop=False,
                 max_aspect_ratio=0.0, min_aspect_ratio=None, max_random_area=1.0,
                 min_random_area=1.0, max_crop_size=-1, min_crop_size=-1, brightness=0.0,
                 contrast=0.0, saturation=0.0, pca_noise=0.0, pad=0, fill_value=255,
                 inter_method=1):
        self.height, self.width = int(data_shape[1]), int(data_shape[2])
        self.resize, self.rand_crop = int(resize), bool(rand_crop)
        self.random_resized_crop = bool(random_resized_crop)
        if min_aspect_ratio is None:
            self.max_ratio, self.min_ratio = 1 + max_aspect_ratio, 1 - max_aspect_ratio
        else:
            self.max_ratio, self.min_ratio = float(max_aspect_ratio), float(min_aspect_ratio)
        self.max_area, self.min_area = float(max_random_area), float(min_random_area)
        self.max_crop, self.min_crop = int(max_crop_size), int(min_crop_size)
        self.brightness, self.contrast = float(brightness), float(contrast)
        self.saturation, self.pca_noise = float(saturation), float(pca_noise)
        self.pad, self.fill_value, self.inter_method = int(pad), int(fill_value), int(inter_method)
        self._check()

    def _check(self):
        if self.inter_method not in (0, 1, 2, 3, 4, 9, 10):
            raise ValueError("ImageRecordIter: invalid inter_method %d: valid values are 0, 1, "
                             "2, 3, 4, 9, 10" % self.inter_method)
        if self.random_resized_crop and (self.rand_crop or self.max_crop != -1
                                         or self.min_crop != -1):
            raise ValueError("ImageRecordIter: random_resized_crop conflicts with rand_crop, "
                             "min_crop_size and max_crop_size")
        if not self.random_resized_crop and (self.min_ratio != 1 or self.max_ratio != 1):
            raise NotImplementedError(
                "ImageRecordIter: an aspect ratio range without random_resized_crop is MXNet's "
                "affine warp, which is not provided here")
        if self.random_resized_crop and not (0 < self.min_ratio <= self.max_ratio
                                             and self.min_area <= self.max_area):
            raise ValueError("ImageRecordIter: need 0 < min_aspect_ratio <= max_aspect_ratio "
                             "and min_random_area <= max_random_area")


def _interp(method, old_w, old_h, new_w, new_h, rng):
    if method == 9:
        if new_w > old_w and new_h > old_h:
            return 2
        if new_w < old_w and new_h < old_h:
            return 3
        return 1
    if method == 10:
        return int(rng.randint(0, 5))
    return method


def _resized(img, w, h, method, rng):
    return _resize(img, w, h, _interp(method, img.shape[1], img.shape[0], w, h, rng))


def _saturate(values):
    # OpenCV's saturate_cast<uchar> of a float: rounded half to even, clipped.
    return numpy.clip(numpy.rint(values), 0, 255).astype(numpy.uint8)


def _random_resized_crop(img, p, rng):
    if (p.max_area, p.min_area, p.max_ratio, p.min_ratio) == (1.0, 1.0, 1.0, 1.0):
        return None
    rows, cols = img.shape[:2]
    area = numpy.float32(rows * cols)
    for _ in range(10):
        target = area * numpy.float32(rng.uniform(p.min_area, p.max_area))
        ratio = numpy.float32(rng.uniform(p.min_ratio, p.max_ratio))
        # std::round: halves away from zero (Python's round takes them to even)
        y_area = int(math.floor(math.sqrt(target / ratio) + 0.5))
        x_area = int(math.floor(math.sqrt(target * ratio) + 0.5))
        if rng.uniform() > 0.5:
            y_area, x_area = x_area, y_area
        if y_area <= rows and x_area <= cols:
            y = int(rng.randint(0, rows - y_area + 1))
            x = int(rng.randint(0, cols - x_area + 1))
            return _resized(img[y:y + y_area, x:x + x_area], p.width, p.height, p.inter_method,
                            rng)
    return None


def _crop_size_crop(img, p, rng):
    rows, cols = img.shape[:2]
    if not (cols >= p.max_crop and rows >= p.max_crop and p.max_crop >= p.min_crop):
        raise ValueError("ImageRecordIter: an image of %dx%d is smaller than max_crop_size %d "
                         "(or max_crop_size < min_crop_size)" % (cols, rows, p.max_crop))
    size = int(rng.randint(p.min_crop, p.max_crop + 1))
    y, x = rows - size, cols - size
    if p.rand_crop:
        y, x = int(rng.randint(0, y + 1)), int(rng.randint(0, x + 1))
    else:
        y, x = y // 2, x // 2
    return _resized(img[y:y + size, x:x + size], p.width, p.height, p.inter_method, rng)


def _center_crop(img, p, rng):
    method = _interp(p.inter_method, img.shape[1], img.shape[0], p.width, p.height, rng)
    rows, cols = img.shape[:2]
    if rows < p.height:
        cols = int(numpy.float32(p.height) / numpy.float32(rows) * numpy.float32(cols))
        img = _resize(img, cols, p.height, method)
        rows = p.height
    if cols < p.width:
        rows = int(numpy.float32(p.width) / numpy.float32(cols) * numpy.float32(rows))
        img = _resize(img, p.width, rows, method)
        cols = p.width
    if rows < p.height or cols < p.width:
        raise ValueError("ImageRecordIter: input image size smaller than input shape")
    y, x = rows - p.height, cols - p.width
    if p.rand_crop:
        y, x = int(rng.randint(0, y + 1)), int(rng.randint(0, x + 1))
    else:
        y, x = y // 2, x // 2
    return img[y:y + p.height, x:x + p.width]


def _colour_jitter(img, p, rng):
    alphas = [1.0 + numpy.float32(rng.uniform(-v, v)) if v > 0 else 1.0
              for v in (p.brightness, p.contrast, p.saturation)]
    # MXNet's gray is CV_RGB2GRAY of the BGR image as stored (blue weighted as red).
    for which in rng.permutation(3):
        alpha = numpy.float32(alphas[which])
        pixels = img.astype(numpy.float32)
        if which == 0:
            img = _saturate(pixels * alpha)
        elif which == 1:
            mean = numpy.float32(opencv_gray(img).mean())
            img = _saturate(pixels * alpha + numpy.float32((1 - alpha) * mean))
        else:
            gray = opencv_gray(img).astype(numpy.float32)[..., None]
            img = _saturate(pixels * alpha + gray * numpy.float32(1 - alpha))
    return img


def _pca_noise(img, p, rng):
    alpha = rng.normal(0, p.pca_noise, size=3).astype(numpy.float32)
    r, g, b = _EIGVEC @ alpha
    shift = numpy.array([b, g, r], dtype=numpy.float32)    # the image is BGR
    # MXNet adds to an int, which truncates toward zero, then clamps
    return numpy.clip(numpy.trunc(img.astype(numpy.float32) + shift), 0, 255).astype(numpy.uint8)


def augment(img, p, rng):
    """The default augmenter's ``Process`` on ``img`` (uint8, H x W x C, BGR)."""
    if p.resize != -1:
        rows, cols = img.shape[:2]
        if rows > cols:
            new_h, new_w = p.resize * rows // cols, p.resize
        else:
            new_h, new_w = p.resize, p.resize * cols // rows
        img = _resized(img, new_w, new_h, p.inter_method, rng)
    if p.pad > 0:
        img = numpy.pad(img, ((p.pad, p.pad), (p.pad, p.pad), (0, 0)),
                        constant_values=min(max(p.fill_value, 0), 255))
    cropped = None
    if p.random_resized_crop:
        cropped = _random_resized_crop(img, p, rng)
    elif p.max_crop != -1 or p.min_crop != -1:
        cropped = _crop_size_crop(img, p, rng)
    img = cropped if cropped is not None else _center_crop(img, p, rng)
    if p.brightness > 0 or p.contrast > 0 or p.saturation > 0:
        img = _colour_jitter(img, p, rng)
    if p.pca_noise > 0:
        img = _pca_noise(img, p, rng)
    return img


def to_output(img, mirrored, mean, mult, bias, dtype):
    """``img`` (H, W, C BGR uint8) as MXNet's parser copies it out: channels first in RGB
    order, ``(pixel - mean) * mult + bias`` in float32 per channel (uint8 output: the pixels),
    columns reversed when ``mirrored``."""
    chw = numpy.ascontiguousarray(img[..., ::-1].transpose(2, 0, 1)) if img.shape[2] > 1 \
        else img.transpose(2, 0, 1)
    if dtype == numpy.uint8:
        out = chw.copy()
    else:
        out = (chw.astype(numpy.float32) - mean[:, None, None]) * mult[:, None, None] \
            + bias[:, None, None]
    return out[..., ::-1] if mirrored else out
