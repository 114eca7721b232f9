"""``mx.image.ImageDetIter`` and the detection augmenters (also ``mx.image.det``): MXNet
1.9.1's ``image/detection.py``.

A detection label is MXNet's flat float32 row ``[n, k, header..., obj_0..., obj_1..., ...]``:
``n`` (>= 2) is the header's width (``n`` and ``k`` included), ``k`` (>= 5) each object's width,
and an object is ``[class id, xmin, ymin, xmax, ymax, extra...]`` with the corners as fractions
of the image's width and height. ``ImageDetIter`` reads images as ``ImageIter`` does (RecordIO
file with or without an index, image list file, Python list), parses their labels into (objects,
``k``) arrays (objects with an empty box dropped), puts image and label through the detection
augmenters (``DetAugmenter``: ``aug(src, label) -> (src, label)``) and batches the labels as
(batch, most objects of any image, ``k``), padded with -1. The random augmenters draw from
Python's ``random`` (and NumPy's global generator where they borrow ``LightingAug``) in MXNet's
order, so a seeded program gets MXNet's crops, pads, flips and batches bit for bit.
"""
from __future__ import annotations

import json
import logging
import math
import numbers
import random
import warnings

import numpy

from . import image as _image
from . import ndarray as nd
from .image import (Augmenter, CastAug, ColorJitterAug, ColorNormalizeAug, ForceResizeAug,
                    HueJitterAug, LightingAug, RandomGrayAug, ResizeAug, fixed_crop)
from .image_iter import ImageIter
from .ndarray import NDArray

__all__ = ["DetAugmenter", "DetBorrowAug", "DetRandomSelectAug", "DetHorizontalFlipAug",
           "DetRandomCropAug", "DetRandomPadAug", "CreateMultiRandCropAugmenter",
           "CreateDetAugmenter", "ImageDetIter"]


class DetLabelError(RuntimeError, ValueError):
    """A detection label that cannot be parsed. A RuntimeError, as MXNet raises, and a
    ValueError, as bad data is elsewhere here."""


def _is_number(value):
    return isinstance(value, numbers.Number) and not isinstance(value, bool)


def _pair(value, what, name):
    """``value`` as a (low, high) pair; a single number stands for (value, value)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2 or not all(_is_number(v) for v in value):
            raise ValueError("%s: %s must be a number or a (low, high) pair of numbers, got %r"
                             % (what, name, value))
        return value
    if not _is_number(value):
        raise TypeError("%s: %s must be a number or a (low, high) pair, got %r"
                        % (what, name, value))
    logging.info("Using fixed %s: %s in %s", name, value, what)
    return (value, value)


# ------------------------------------------------------------------------------- augmenters
class DetAugmenter:
    """The base of the detection augmenters: ``aug(src, label)`` returns the augmented image
    and its (objects, k) label array."""

    def __init__(self, **kwargs):
        self._kwargs = _image._listed_arrays(kwargs)

    def dumps(self):
        """The augmenter as a JSON string: ``[class name in lower case, its arguments]``."""
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, src, label):
        raise NotImplementedError("Must override implementation.")


class DetBorrowAug(DetAugmenter):
    """A classification ``Augmenter`` (one that leaves the boxes where they are, such as colour
    jitter or a cast) applied to the image; the label passes through."""

    def __init__(self, augmenter):
        if not isinstance(augmenter, Augmenter):
            raise TypeError("DetBorrowAug: augmenter must be an mx.image.Augmenter, got %s"
                            % type(augmenter).__name__)
        super().__init__(augmenter=augmenter.dumps())
        self.augmenter = augmenter

    def dumps(self):
        return [self.__class__.__name__.lower(), self.augmenter.dumps()]

    def __call__(self, src, label):
        return self.augmenter(src), label


class DetRandomSelectAug(DetAugmenter):
    """With probability ``skip_prob`` nothing; otherwise one of ``aug_list``, picked by
    shuffling the list in place with Python's ``random`` (as MXNet does) and taking the first."""

    def __init__(self, aug_list, skip_prob=0):
        super().__init__(skip_prob=skip_prob)
        if not isinstance(aug_list, (list, tuple)):
            aug_list = [aug_list]
        for aug in aug_list:
            if not isinstance(aug, DetAugmenter):
                raise ValueError("DetRandomSelectAug: aug_list may hold DetAugmenters only, "
                                 "got %s" % type(aug).__name__)
        if not aug_list:
            skip_prob = 1
        self.aug_list = aug_list
        self.skip_prob = skip_prob

    def dumps(self):
        return [self.__class__.__name__.lower(), [x.dumps() for x in self.aug_list]]

    def __call__(self, src, label):
        if random.random() < self.skip_prob:
            return src, label
        random.shuffle(self.aug_list)
        return self.aug_list[0](src, label)


class DetHorizontalFlipAug(DetAugmenter):
    """Flip image and boxes left to right with probability ``p``."""

    def __init__(self, p):
        super().__init__(p=p)
        self.p = p

    def __call__(self, src, label):
        if random.random() < self.p:
            src = nd.flip(src, axis=1)
            self._flip_label(label)
        return src, label

    def _flip_label(self, label):
        tmp = 1.0 - label[:, 1]
        label[:, 1] = 1.0 - label[:, 3]
        label[:, 3] = tmp


def _areas(boxes):
    """Areas of (xmin, ymin, xmax, ymax) rows, 0 for empty boxes."""
    heights = numpy.maximum(0, boxes[:, 3] - boxes[:, 1])
    widths = numpy.maximum(0, boxes[:, 2] - boxes[:, 0])
    return heights * widths


class DetRandomCropAug(DetAugmenter):
    """A random crop (up to ``max_attempts`` proposals) of aspect ratio in
    ``aspect_ratio_range`` and area in ``area_range`` (fractions of the image) whose every
    overlapped object keeps more than ``min_object_covered`` of its area; objects left with at
    most ``min_eject_coverage`` of theirs are dropped, the others clipped and renormalised.
    The image is unchanged when no proposal fits. Invalid ranges disable it with a warning."""

    def __init__(self, min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                 area_range=(0.05, 1.0), min_eject_coverage=0.3, max_attempts=50):
        aspect_ratio_range = _pair(aspect_ratio_range, "DetRandomCropAug", "aspect_ratio_range")
        area_range = _pair(area_range, "DetRandomCropAug", "area_range")
        super().__init__(min_object_covered=min_object_covered,
                         aspect_ratio_range=aspect_ratio_range, area_range=area_range,
                         min_eject_coverage=min_eject_coverage, max_attempts=max_attempts)
        self.min_object_covered = min_object_covered
        self.min_eject_coverage = min_eject_coverage
        self.max_attempts = max_attempts
        self.aspect_ratio_range = aspect_ratio_range
        self.area_range = area_range
        self.enabled = False
        # MXNet passes the range to warnings.warn as its category, a TypeError; we warn.
        if area_range[1] <= 0 or area_range[0] > area_range[1]:
            warnings.warn("Skip DetRandomCropAug due to invalid area_range: %s" % (area_range,))
        elif aspect_ratio_range[0] > aspect_ratio_range[1] or aspect_ratio_range[0] <= 0:
            warnings.warn("Skip DetRandomCropAug due to invalid aspect_ratio_range: %s"
                          % (aspect_ratio_range,))
        else:
            self.enabled = True

    def __call__(self, src, label):
        crop = self._random_crop_proposal(label, src.shape[0], src.shape[1])
        if crop:
            x, y, w, h, label = crop
            src = fixed_crop(src, x, y, w, h, None)
        return src, label

    def _calculate_areas(self, label):
        return _areas(label)

    def _intersect(self, label, xmin, ymin, xmax, ymax):
        """The boxes ``label`` cut to the (normalised) window, all-zero rows where empty."""
        left = numpy.maximum(label[:, 0], xmin)
        right = numpy.minimum(label[:, 2], xmax)
        top = numpy.maximum(label[:, 1], ymin)
        bot = numpy.minimum(label[:, 3], ymax)
        invalid = numpy.where(numpy.logical_or(left >= right, top >= bot))[0]
        out = label.copy()
        out[:, 0] = left
        out[:, 1] = top
        out[:, 2] = right
        out[:, 3] = bot
        out[invalid, :] = 0
        return out

    def _check_satisfy_constraints(self, label, xmin, ymin, xmax, ymax, width, height):
        if (xmax - xmin) * (ymax - ymin) < 2:
            return False
        x1 = float(xmin) / width
        y1 = float(ymin) / height
        x2 = float(xmax) / width
        y2 = float(ymax) / height
        object_areas = _areas(label[:, 1:])
        valid_objects = numpy.where(object_areas * width * height > 2)[0]
        if valid_objects.size < 1:
            return False
        intersects = self._intersect(label[valid_objects, 1:], x1, y1, x2, y2)
        coverages = _areas(intersects) / object_areas[valid_objects]
        coverages = coverages[numpy.where(coverages > 0)[0]]
        return coverages.size > 0 and numpy.amin(coverages) > self.min_object_covered

    def _update_labels(self, label, crop_box, height, width):
        """The label in the crop's coordinates; None when no object stays."""
        xmin = float(crop_box[0]) / width
        ymin = float(crop_box[1]) / height
        w = float(crop_box[2]) / width
        h = float(crop_box[3]) / height
        out = label.copy()
        out[:, (1, 3)] -= xmin
        out[:, (2, 4)] -= ymin
        out[:, (1, 3)] /= w
        out[:, (2, 4)] /= h
        out[:, 1:5] = numpy.maximum(0, out[:, 1:5])
        out[:, 1:5] = numpy.minimum(1, out[:, 1:5])
        coverage = _areas(out[:, 1:]) * w * h / _areas(label[:, 1:])
        valid = numpy.logical_and(out[:, 3] > out[:, 1], out[:, 4] > out[:, 2])
        valid = numpy.logical_and(valid, coverage > self.min_eject_coverage)
        valid = numpy.where(valid)[0]
        if valid.size < 1:
            return None
        return out[valid, :]

    def _random_crop_proposal(self, label, height, width):
        """``(x, y, w, h, new label)`` of a crop meeting the constraints, or ``()``; the draws
        (``uniform`` for the ratio, ``randint`` for the height, y and x) are MXNet's."""
        if not self.enabled or height <= 0 or width <= 0:
            return ()
        min_area = self.area_range[0] * height * width
        max_area = self.area_range[1] * height * width
        for _ in range(self.max_attempts):
            ratio = random.uniform(*self.aspect_ratio_range)
            if ratio <= 0:
                continue
            h = int(round(math.sqrt(min_area / ratio)))
            max_h = int(round(math.sqrt(max_area / ratio)))
            if round(max_h * ratio) > width:
                # the largest max_h with round(max_h * ratio) <= width
                max_h = int((width + 0.4999999) / ratio)
            if max_h > height:
                max_h = height
            if h > max_h:
                h = max_h
            if h < max_h:
                h = random.randint(h, max_h)
            w = int(round(h * ratio))
            # rounding can leave the area just outside its range
            area = w * h
            if area < min_area:
                h += 1
                w = int(round(h * ratio))
                area = w * h
            if area > max_area:
                h -= 1
                w = int(round(h * ratio))
                area = w * h
            if not (min_area <= area <= max_area and 0 <= w <= width and 0 <= h <= height):
                continue
            y = random.randint(0, max(0, height - h))
            x = random.randint(0, max(0, width - w))
            if self._check_satisfy_constraints(label, x, y, x + w, y + h, width, height):
                new_label = self._update_labels(label, (x, y, w, h), height, width)
                if new_label is not None:
                    return (x, y, w, h, new_label)
        return ()


class DetRandomPadAug(DetAugmenter):
    """Place the image at a random spot of a larger canvas (aspect ratio in
    ``aspect_ratio_range``, area ``area_range`` times the image's) filled with ``pad_val`` (a
    value per channel, or one for all), the boxes moved to match; unchanged after
    ``max_attempts`` proposals that pad less than 2 pixels a side. Invalid ranges disable it
    with a warning."""

    def __init__(self, aspect_ratio_range=(0.75, 1.33), area_range=(1.0, 3.0),
                 max_attempts=50, pad_val=(128, 128, 128)):
        if not isinstance(pad_val, (list, tuple)) and not _is_number(pad_val):
            raise TypeError("DetRandomPadAug: pad_val must be a number or a tuple of numbers, "
                            "got %r" % (pad_val,))
        aspect_ratio_range = _pair(aspect_ratio_range, "DetRandomPadAug", "aspect_ratio_range")
        area_range = _pair(area_range, "DetRandomPadAug", "area_range")
        super().__init__(aspect_ratio_range=aspect_ratio_range, area_range=area_range,
                         max_attempts=max_attempts, pad_val=pad_val)
        self.pad_val = pad_val
        self.aspect_ratio_range = aspect_ratio_range
        self.area_range = area_range
        self.max_attempts = max_attempts
        self.enabled = False
        if area_range[1] <= 1.0 or area_range[0] > area_range[1]:
            warnings.warn("Skip DetRandomPadAug due to invalid parameters: %s" % (area_range,))
        elif aspect_ratio_range[0] <= 0 or aspect_ratio_range[0] > aspect_ratio_range[1]:
            warnings.warn("Skip DetRandomPadAug due to invalid aspect_ratio_range: %s"
                          % (aspect_ratio_range,))
        else:
            self.enabled = True

    def __call__(self, src, label):
        height, width, _ = src.shape
        pad = self._random_pad_proposal(label, height, width)
        if pad:
            x, y, w, h, label = pad
            # MXNet hands a single number to OpenCV as a one-value Scalar, which fills the
            # first channel only (and reads past it); here it fills every channel.
            fill = dict(values=tuple(self.pad_val)) if isinstance(self.pad_val, (list, tuple)) \
                else dict(value=self.pad_val)
            src = _image.copyMakeBorder(src, y, h - y - height, x, w - x - width, 0, **fill)
        return src, label

    def _update_labels(self, label, pad_box, height, width):
        out = label.copy()
        out[:, (1, 3)] = (out[:, (1, 3)] * width + pad_box[0]) / pad_box[2]
        out[:, (2, 4)] = (out[:, (2, 4)] * height + pad_box[1]) / pad_box[3]
        return out

    def _random_pad_proposal(self, label, height, width):
        """``(x, y, w, h, new label)`` of a canvas meeting the constraints, or ``()``; the
        draws are MXNet's."""
        if not self.enabled or height <= 0 or width <= 0:
            return ()
        min_area = self.area_range[0] * height * width
        max_area = self.area_range[1] * height * width
        for _ in range(self.max_attempts):
            ratio = random.uniform(*self.aspect_ratio_range)
            if ratio <= 0:
                continue
            h = int(round(math.sqrt(min_area / ratio)))
            max_h = int(round(math.sqrt(max_area / ratio)))
            if round(h * ratio) < width:
                h = int((width + 0.499999) / ratio)
            if h < height:
                h = height
            if h > max_h:
                h = max_h
            if h < max_h:
                h = random.randint(h, max_h)
            w = int(round(h * ratio))
            if (h - height) < 2 or (w - width) < 2:
                continue
            y = random.randint(0, max(0, h - height))
            x = random.randint(0, max(0, w - width))
            return (x, y, w, h, self._update_labels(label, (x, y, w, h), height, width))
        return ()


def CreateMultiRandCropAugmenter(min_object_covered=0.1, aspect_ratio_range=(0.75, 1.33),
                                 area_range=(0.05, 1.0), min_eject_coverage=0.3,
                                 max_attempts=50, skip_prob=0):
    """A ``DetRandomSelectAug`` of ``DetRandomCropAug``s: each argument given as a list holds
    one value per crop augmenter (lists of one value, and non-lists, are shared by all)."""
    params = [min_object_covered, aspect_ratio_range, area_range, min_eject_coverage,
              max_attempts]
    names = ["min_object_covered", "aspect_ratio_range", "area_range", "min_eject_coverage",
             "max_attempts"]
    params = [p if isinstance(p, list) else [p] for p in params]
    num = max(len(p) for p in params)
    for k, p in enumerate(params):
        if len(p) != num:
            if len(p) != 1:
                raise ValueError("CreateMultiRandCropAugmenter: %s has %d values; the lists "
                                 "must have 1 or %d" % (names[k], len(p), num))
            params[k] = p * num
    augs = [DetRandomCropAug(min_object_covered=moc, aspect_ratio_range=arr, area_range=ar,
                             min_eject_coverage=mec, max_attempts=ma)
            for moc, arr, ar, mec, ma in zip(*params)]
    return DetRandomSelectAug(augs, skip_prob=skip_prob)


def _checked_stat(value, default, name):
    if value is True:
        return numpy.array(default)
    if value is not None and (not isinstance(value, (numpy.ndarray, NDArray))
                              or value.shape[0] not in (1, 3)):
        raise ValueError("CreateDetAugmenter: %s must be True or an array of 1 or 3 values"
                         % name)
    return value


def CreateDetAugmenter(data_shape, resize=0, rand_crop=0, rand_pad=0, rand_gray=0,
                       rand_mirror=False, mean=None, std=None, brightness=0, contrast=0,
                       saturation=0, pca_noise=0, hue=0, inter_method=2, min_object_covered=0.1,
                       aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 3.0),
                       min_eject_coverage=0.3, max_attempts=50, pad_val=(127, 127, 127)):
    """MXNet's detection augmenter list for images of ``data_shape`` (C, H, W): resize the
    shorter side (``resize``), random crops with probability ``rand_crop`` (the crop arguments
    may be lists, see ``CreateMultiRandCropAugmenter``), flip (``rand_mirror``), random pad with
    probability ``rand_pad`` (area up to ``area_range[1]``), resize to the data shape, cast to
    float32, colour jitter, hue, PCA noise, gray, normalisation (``mean=True`` / ``std=True``:
    ImageNet's values)."""
    auglist = []
    if resize > 0:
        auglist.append(DetBorrowAug(ResizeAug(resize, inter_method)))
    if rand_crop > 0:
        auglist.append(CreateMultiRandCropAugmenter(min_object_covered, aspect_ratio_range,
                                                    area_range, min_eject_coverage,
                                                    max_attempts, skip_prob=(1 - rand_crop)))
    if rand_mirror > 0:
        auglist.append(DetHorizontalFlipAug(0.5))
    if rand_pad > 0:
        # MXNet fails on a comparison with a tuple when these are per-crop lists
        for name, value in (("aspect_ratio_range", aspect_ratio_range),
                            ("area_range", area_range), ("max_attempts", max_attempts)):
            if isinstance(value, list) and value and isinstance(value[0], (list, tuple)) \
                    or name == "max_attempts" and isinstance(value, list):
                raise ValueError("CreateDetAugmenter: rand_pad needs a single %s, not a list "
                                 "of one per crop augmenter" % name)
        pad_aug = DetRandomPadAug(aspect_ratio_range, (1.0, area_range[1]), max_attempts,
                                  pad_val)
        auglist.append(DetRandomSelectAug([pad_aug], 1 - rand_pad))
    auglist.append(DetBorrowAug(ForceResizeAug((data_shape[2], data_shape[1]), inter_method)))
    auglist.append(DetBorrowAug(CastAug()))
    if brightness or contrast or saturation:
        auglist.append(DetBorrowAug(ColorJitterAug(brightness, contrast, saturation)))
    if hue:
        auglist.append(DetBorrowAug(HueJitterAug(hue)))
    if pca_noise > 0:
        eigval = numpy.array([55.46, 4.794, 1.148])
        eigvec = numpy.array([[-0.5675, 0.7192, 0.4009],
                              [-0.5808, -0.0045, -0.8140],
                              [-0.5836, -0.6948, 0.4203]])
        auglist.append(DetBorrowAug(LightingAug(pca_noise, eigval, eigvec)))
    if rand_gray > 0:
        auglist.append(DetBorrowAug(RandomGrayAug(rand_gray)))
    mean = _checked_stat(mean, [123.68, 116.28, 103.53], "mean")
    std = _checked_stat(std, [58.395, 57.12, 57.375], "std")
    if mean is not None or std is not None:
        auglist.append(DetBorrowAug(ColorNormalizeAug(mean, std)))
    return auglist


# -------------------------------------------------------------------------------- drawing
def _spans(image, rows, x0, x1, color):
    """Fill columns x0..x1 (inclusive) of the given rows, clipped to the image."""
    height, width = image.shape[:2]
    r0, r1 = max(rows[0], 0), min(rows[1], height - 1)
    c0, c1 = max(min(x0, x1), 0), min(max(x0, x1), width - 1)
    if r0 <= r1 and c0 <= c1:
        image[r0:r1 + 1, c0:c1 + 1] = color


def _disc(image, cx, cy, radius, color):
    """OpenCV's filled circle (its midpoint algorithm's spans)."""
    err, dx, dy, plus, minus = 0, radius, 0, 1, 2 * radius - 1
    while dx >= dy:
        for y in (cy - dy, cy + dy):
            _spans(image, (y, y), cx - dx, cx + dx, color)
        for y in (cy - dx, cy + dx):
            _spans(image, (y, y), cx - dy, cx + dy, color)
        dy += 1
        err += plus
        plus += 2
        mask = -1 if err > 0 else 0
        err -= minus & mask
        dx += mask
        minus -= mask & 2


def _rectangle(image, pt1, pt2, color, thickness):
    """``cv2.rectangle(image, pt1, pt2, color, thickness)`` for 8-connected lines: thick edges
    are bands ``(thickness + 1) // 2`` pixels either side with round ends, as OpenCV draws them
    (checked against OpenCV 4.11: tests/data/mxnet_image_det/check_rectangles.py)."""
    color = numpy.clip(numpy.rint(numpy.asarray(color, dtype=numpy.float64)[:image.shape[2]]),
                       0, 255).astype(image.dtype)
    (x1, y1), (x2, y2) = pt1, pt2
    if thickness < 0:
        _spans(image, (min(y1, y2), max(y1, y2)), x1, x2, color)
        return
    half = (thickness + 1) // 2 if thickness > 1 else 0
    _spans(image, (y1 - half, y1 + half), x1, x2, color)
    _spans(image, (y2 - half, y2 + half), x1, x2, color)
    _spans(image, (min(y1, y2), max(y1, y2)), x1 - half, x1 + half, color)
    _spans(image, (min(y1, y2), max(y1, y2)), x2 - half, x2 + half, color)
    if half:
        for cx, cy in ((x1, y1), (x2, y1), (x2, y2), (x1, y2)):
            _disc(image, cx, cy, half, color)


# -------------------------------------------------------------------------------- iterator
class ImageDetIter(ImageIter):
    """Batches of augmented images and their object labels (see the module's description):
    ``ImageIter``'s sources and arguments (``label_name`` is ``'label'``), the augmenters of
    ``CreateDetAugmenter(data_shape, **kwargs)`` unless ``aug_list`` is given, and labels of
    shape (batch, most objects of any image, object width) padded with -1. The constructor reads
    every label once (not the images) to find that shape; a malformed label is an error naming
    the file and the record."""

    def __init__(self, batch_size, data_shape, path_imgrec=None, path_imglist=None,
                 path_root=None, path_imgidx=None, shuffle=False, part_index=0, num_parts=1,
                 aug_list=None, imglist=None, data_name="data", label_name="label",
                 last_batch_handle="pad", **kwargs):
        super().__init__(batch_size=batch_size, data_shape=tuple(data_shape),
                         path_imgrec=path_imgrec, path_imglist=path_imglist,
                         path_root=path_root, path_imgidx=path_imgidx, shuffle=shuffle,
                         part_index=part_index, num_parts=num_parts, aug_list=[],
                         imglist=imglist, data_name=data_name, label_name=label_name,
                         last_batch_handle=last_batch_handle)
        self._sources = (path_imgrec, path_imglist)
        self.auglist = CreateDetAugmenter(data_shape, **kwargs) if aug_list is None \
            else aug_list
        label_shape = self._estimate_label_shape()
        self.provide_label = [(label_name, (self.batch_size,) + label_shape)]
        self.label_shape = label_shape

    def _where(self, position):
        """Which record or list entry the sample just read came from, for errors."""
        path_imgrec, path_imglist = self._sources
        if self.seq is None:
            return "%s, record %d (counting from 0)" % (path_imgrec, position)
        key = self.seq[self.cur - 1]
        if self.imglist is not None:
            fname = self.imglist[key][1]
            if path_imglist:
                return "%s, index %s (%s)" % (path_imglist, key, fname)
            return "imglist entry %s (%s)" % (key, fname)
        return "%s, record with key %s" % (path_imgrec, key)

    def _check_valid_label(self, label):
        """A RuntimeError unless ``label`` is (1+, 5+) with an object of class >= 0 and a
        non-empty box."""
        if len(label.shape) != 2 or label.shape[1] < 5:
            raise RuntimeError("Label with shape (1+, 5+) required, %s received." % str(label))
        valid = numpy.where(numpy.logical_and(label[:, 0] >= 0, numpy.logical_and(
            label[:, 3] > label[:, 1], label[:, 4] > label[:, 2])))[0]
        if valid.size < 1:
            raise RuntimeError("Invalid label occurs.")

    def _estimate_label_shape(self):
        """(most objects of any image, object width), from every label once."""
        max_count, width, count = 0, None, 0
        self.reset()
        try:
            while True:
                label, _ = self.next_sample()
                try:
                    label = self._parse_label(label)
                    if width is not None and label.shape[1] != width:
                        raise DetLabelError("its objects are %d wide; those before it are %d"
                                            % (label.shape[1], width))
                except DetLabelError as exc:
                    raise DetLabelError("ImageDetIter: bad label in %s: %s"
                                        % (self._where(count), exc)) from None
                width = label.shape[1]
                max_count = max(max_count, label.shape[0])
                count += 1
        except StopIteration:
            pass
        self.reset()
        if width is None:
            raise ValueError("ImageDetIter: the source holds no images")
        return (max_count, width)

    def _parse_label(self, label):
        """A raw label ``[n, k, header..., objects...]`` as a (objects, k) float array of the
        objects whose box is not empty; DetLabelError (a RuntimeError) when malformed."""
        if isinstance(label, NDArray):
            label = label.asnumpy()
        raw = numpy.ravel(label)
        if raw.size < 7:
            raise DetLabelError("Label shape is invalid: %s (a detection label needs a header "
                                "width, an object width, and one object at least)"
                                % (raw.shape,))
        if not numpy.all(numpy.isfinite(raw[:2])):
            raise DetLabelError("the header width and object width must be numbers, got %s"
                                % raw[:2].tolist())
        header_width = int(raw[0])
        obj_width = int(raw[1])
        if not 2 <= header_width <= raw.size:
            raise DetLabelError("header width %d must be >= 2 and <= the label's length %d"
                                % (header_width, raw.size))
        if obj_width < 5:
            raise DetLabelError("object width %d must be >= 5 (id, xmin, ymin, xmax, ymax)"
                                % obj_width)
        if (raw.size - header_width) % obj_width != 0:
            raise DetLabelError("Label shape %s inconsistent with annotation width %d."
                                % (str(raw.shape), obj_width))
        out = numpy.reshape(raw[header_width:], (-1, obj_width))
        valid = numpy.where(numpy.logical_and(out[:, 3] > out[:, 1], out[:, 4] > out[:, 2]))[0]
        if valid.size < 1:
            raise DetLabelError("Encounter sample with no valid label.")
        return out[valid, :]

    def reshape(self, data_shape=None, label_shape=None):
        """A new ``data_shape`` (C, H, W) and/or ``label_shape`` (objects, width; no fewer
        objects, the same width)."""
        if data_shape is not None:
            data_shape = tuple(data_shape)
            self.check_data_shape(data_shape)
            self.provide_data = [(self.provide_data[0][0], (self.batch_size,) + data_shape)]
            self.data_shape = data_shape
        if label_shape is not None:
            label_shape = tuple(label_shape)
            self.check_label_shape(label_shape)
            self.provide_label = [(self.provide_label[0][0], (self.batch_size,) + label_shape)]
            self.label_shape = label_shape

    def _batchify(self, batch_data, batch_label, start=0):
        i = start
        try:
            while i < self.batch_size:
                label, encoded = self.next_sample()
                data = self.imdecode(encoded)
                try:
                    self.check_valid_image([data])
                    label = self._parse_label(label)
                    data, label = self.augmentation_transform(data, label)
                    self._check_valid_label(label)
                except RuntimeError as exc:
                    logging.debug("Invalid image, skipping:  %s", exc)
                    continue
                batch_data[i] = self.postprocess_data(data)
                rows = batch_label.shape[1]
                if label.shape[0] > rows:
                    raise ValueError("ImageDetIter: an image has %d objects, more than the "
                                     "label shape's %d (set by reshape)" % (label.shape[0], rows))
                num_object = label.shape[0]
                batch_label[i][0:num_object] = nd.array(label)
                if num_object < rows:
                    batch_label[i][num_object:] = -1
                i += 1
        except StopIteration:
            if not i:
                raise
        return i

    def _empty_labels(self):
        # A batch's rows past an image's objects (and the rows of pad samples) are -1.
        labels = nd.empty(self.provide_label[0][1])
        labels[:] = -1
        return labels

    def augmentation_transform(self, data, label):  # pylint: disable=arguments-differ
        for aug in self.auglist:
            data, label = aug(data, label)
        return data, label

    def check_label_shape(self, label_shape):
        """A ValueError unless ``label_shape`` is (objects, width) with no fewer objects than
        now and the same width."""
        if len(label_shape) != 2:
            raise ValueError("label_shape should have length 2")
        if label_shape[0] < self.label_shape[0]:
            raise ValueError("Attempts to reduce label count from %d to %d, not allowed."
                             % (self.label_shape[0], label_shape[0]))
        if label_shape[1] != self.provide_label[0][1][2]:
            raise ValueError("label_shape object width inconsistent: %d vs %d."
                             % (self.provide_label[0][1][2], label_shape[1]))

    def draw_next(self, color=None, thickness=2, mean=None, std=None, clip=True,
                  waitKey=None, window_name="draw_next", id2labels=None):  # noqa: N803
        """A generator of the next images (augmented, BGR uint8 NumPy arrays, ``mean``/``std``
        undone, clipped to [0, 255] with ``clip``) with their boxes drawn in ``color`` (RGB;
        None: a random colour per box from NumPy's global generator, as MXNet's). With OpenCV
        installed it draws as MXNet does (class names from ``id2labels``, a window when
        ``waitKey`` is not None); without it the boxes are drawn here, pixel for pixel as
        OpenCV's rectangles, and names and windows are left out with a warning."""
        try:
            import cv2
        except ImportError:
            cv2 = None
            if waitKey is not None or id2labels is not None:
                warnings.warn("draw_next: OpenCV (cv2) is not installed; drawing the boxes "
                              "without class names and showing no window")
        # MXNet reverses color inside its loop, so every other image got it in RGB
        bgr = color[::-1] if color else None
        count = 0
        try:
            while True:
                label, encoded = self.next_sample()
                data = self.imdecode(encoded)
                try:
                    self.check_valid_image([data])
                    label = self._parse_label(label)
                except RuntimeError as exc:
                    logging.debug("Invalid image, skipping:  %s", exc)
                    continue
                count += 1
                data, label = self.augmentation_transform(data, label)
                image = data.asnumpy()
                if std is True:
                    std = numpy.array([58.395, 57.12, 57.375])
                elif std is not None and (not isinstance(std, numpy.ndarray)
                                          or std.shape[0] not in (1, 3)):
                    raise ValueError("draw_next: std must be True or an array of 1 or 3 values")
                if std is not None:
                    image *= std
                if mean is True:
                    mean = numpy.array([123.68, 116.28, 103.53])
                elif mean is not None and (not isinstance(mean, numpy.ndarray)
                                           or mean.shape[0] not in (1, 3)):
                    raise ValueError("draw_next: mean must be True or an array of 1 or 3 "
                                     "values")
                if mean is not None:
                    image += mean
                image[:, :, (0, 1, 2)] = image[:, :, (2, 1, 0)]
                if clip:
                    image = numpy.maximum(0, numpy.minimum(255, image))
                image = image.astype(numpy.uint8)
                height, width, _ = image.shape
                for i in range(label.shape[0]):
                    x1 = int(label[i, 1] * width)
                    if x1 < 0:
                        continue
                    y1 = int(label[i, 2] * height)
                    x2 = int(label[i, 3] * width)
                    y2 = int(label[i, 4] * height)
                    bc = numpy.random.rand(3) * 255 if bgr is None else bgr
                    if cv2 is None:
                        _rectangle(image, (x1, y1), (x2, y2), bc, thickness)
                        continue
                    cv2.rectangle(image, (x1, y1), (x2, y2), bc, thickness)
                    if id2labels is not None:
                        cls_id = int(label[i, 0])
                        if cls_id in id2labels:
                            text = "{:s}".format(id2labels[cls_id])
                            font = cv2.FONT_HERSHEY_SIMPLEX
                            text_height = cv2.getTextSize(text, font, 0.5, 2)[0][1]
                            cv2.putText(image, text, (x1 + 5, y1 + text_height + 5), font, 0.5,
                                        (255, 255, 255), 2)
                if waitKey is not None and cv2 is not None:
                    cv2.imshow(window_name, image)
                    cv2.waitKey(waitKey)
                yield image
        except StopIteration:
            if not count:
                return

    def sync_label_shape(self, it, verbose=False):
        """Pad this iterator's and ``it``'s (another ImageDetIter's) labels to the larger
        object count of the two; returns ``it``."""
        if not isinstance(it, ImageDetIter):
            raise TypeError("sync_label_shape: it must be an ImageDetIter, got %s"
                            % type(it).__name__)
        train_label_shape = self.label_shape
        val_label_shape = it.label_shape
        if train_label_shape[1] != val_label_shape[1]:
            raise ValueError("sync_label_shape: object width mismatch: %d vs %d"
                             % (train_label_shape[1], val_label_shape[1]))
        max_count = max(train_label_shape[0], val_label_shape[0])
        if max_count > train_label_shape[0]:
            self.reshape(None, (max_count, train_label_shape[1]))
        if max_count > val_label_shape[0]:
            it.reshape(None, (max_count, val_label_shape[1]))
        if verbose and max_count > min(train_label_shape[0], val_label_shape[0]):
            logging.info("Resized label_shape to (%d, %d).", max_count, train_label_shape[1])
        return it
