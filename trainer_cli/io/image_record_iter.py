"""``mx.io.ImageRecordIter`` (and ``ImageRecordUInt8Iter``): batches of augmented images from a
RecordIO file, as MXNet 1.9.1's C++ iterator makes them.

Each record is decoded (gray for a 1-channel ``data_shape``, colour for 3), put through MXNet's
default augmenter (:mod:`._image_record_aug`: ``resize``, ``pad``, ``random_resized_crop`` with
its area and aspect ratio ranges, ``min/max_crop_size``, the centre or ``rand_crop`` crop,
``brightness``/``contrast``/``saturation``, ``pca_noise``, ``inter_method``), mirrored
(``mirror``, ``rand_mirror``) and normalised as MXNet's parser does it, ``(pixel - mean) *
(scale / std)`` per channel in float32, channels first in RGB order. Labels are the record's
(``label_width`` of them) or, with ``path_imglist``, the list's by record id. With
``round_batch`` (the default) the last batch is filled from the start of the next pass, which
then starts after those images; without it the last batch keeps the previous batch's images
past its own; ``pad`` says how many. Without random augmenters the batches are MXNet's bit for
bit for PNG records (tests/test_io_image_record.py); JPEG decodes through Pillow, whose decoder
can differ from MXNet's libjpeg-turbo in the last bits of some pixels.

Random crops, flips and jitters draw from NumPy generators seeded by ``seed`` (or per image by
``seed_aug`` and its place in the pass), not from MXNet's streams. ``shuffle`` gives a new order
each pass from ``seed`` (over every record, where MXNet's without ``path_imgidx`` shuffles only
within chunks). ``num_parts`` / ``part_index`` split the records by count (MXNet's by bytes of
the file). ``preprocess_threads`` decode and augment in parallel. MXNet's affine augmenters
(rotation, shear, random scale, image size limits, an aspect ratio range without
``random_resized_crop``), the HSL jitter, ``mean_img``, 4-channel images and the int8 output
are not provided: asking for one is an error naming it.
"""
from __future__ import annotations

import logging
import os

import numpy

from .. import recordio
from ..gluon.data.vision import image_file
from ..gluon.data.vision.datasets import read_image_list
from ..ndarray import creation
from . import _image_record_aug as _aug
from ._held_batch import HeldBatchIter
from .data_batch import DataDesc

__all__ = ["ImageRecordIter", "ImageRecordUInt8Iter"]

_MAX_LIST_BYTES = 1 << 30
# MXNet's parameters this iterator does not provide, with the value each has when unused.
_ABSENT = {"max_rotate_angle": 0.0, "rotate": -1.0, "rotate_list": "", "max_shear_ratio": 0.0,
           "max_random_scale": 1.0, "min_random_scale": 1.0, "max_img_size": 1e10,
           "min_img_size": 0.0, "random_h": 0, "random_s": 0, "random_l": 0, "mean_img": ""}
# Accepted and without effect here (threads of MXNet's prefetcher, pinned memory, logging).
_IGNORED = ("prefetch_buffer", "ctx", "device_id", "verbose", "shuffle_chunk_size",
            "shuffle_chunk_seed", "aug_seq", "data_shape_", "silent")
_AUG_ARGS = ("resize", "rand_crop", "random_resized_crop", "max_aspect_ratio", "min_aspect_ratio",
             "max_random_area", "min_random_area", "max_crop_size", "min_crop_size",
             "brightness", "contrast", "saturation", "pca_noise", "pad", "fill_value",
             "inter_method")


def _positions(path, idx_path):
    """``(reader, [record positions])``: the index's keys where there is one, else the byte
    offsets of the records, found by one pass over the file."""
    if idx_path:
        reader = recordio.MXIndexedRecordIO(idx_path, path, "r")
        return reader, list(reader.keys)
    reader = recordio.MXRecordIO(path, "r")
    offsets = recordio.record_offsets(reader)
    return reader, offsets


class ImageRecordIter(HeldBatchIter):
    """Batches of ``data_shape`` images from ``path_imgrec`` (see the module's description)."""

    _default_dtype = "float32"

    def __init__(self, path_imgrec, data_shape, batch_size, path_imgidx="", path_imglist="",
                 label_width=1, shuffle=False, seed=0, seed_aug=None, round_batch=True,
                 num_parts=1, part_index=0, preprocess_threads=4, rand_mirror=False,
                 mirror=False, mean_r=0.0, mean_g=0.0, mean_b=0.0, mean_a=0.0, std_r=1.0,
                 std_g=1.0, std_b=1.0, std_a=1.0, scale=1.0, max_random_contrast=0.0,
                 max_random_illumination=0.0, dtype=None, data_name="data",
                 label_name="softmax_label", **kwargs):
        aug_args = {k: kwargs.pop(k) for k in list(kwargs) if k in _AUG_ARGS}
        for name, unused in _ABSENT.items():
            if name in kwargs and kwargs.pop(name) not in (unused, None):
                raise NotImplementedError("ImageRecordIter: %s is not provided here (MXNet's "
                                          "affine, HSL and mean-image augmenters are not; "
                                          "docs/porting.md)" % name)
        unknown = sorted(set(kwargs) - set(_IGNORED))
        if unknown:
            raise TypeError("ImageRecordIter() got an unexpected keyword argument %r"
                            % unknown[0])
        dtype = numpy.dtype(dtype or self._default_dtype)
        if dtype not in (numpy.float32, numpy.uint8):
            raise ValueError("ImageRecordIter: dtype must be float32 or uint8, got %s" % dtype)
        data_shape = tuple(int(d) for d in data_shape)
        if len(data_shape) != 3 or data_shape[0] not in (1, 3) or min(data_shape) < 1:
            raise ValueError("ImageRecordIter: data_shape must be (channels, height, width) "
                             "with 1 or 3 channels, got %s" % (data_shape,))
        batch_size, label_width = int(batch_size), int(label_width)
        if batch_size < 1 or label_width < 1:
            raise ValueError("ImageRecordIter: batch_size and label_width must be at least 1")
        if not 0 <= int(part_index) < int(num_parts):
            raise ValueError("ImageRecordIter: part_index %s of num_parts %s: need 0 <= "
                             "part_index < num_parts" % (part_index, num_parts))
        super().__init__(batch_size)
        self._params = _aug.AugmentParams(data_shape, **aug_args)
        self._data_shape, self._label_width, self._dtype = data_shape, label_width, dtype
        self._reader, positions = _positions(os.fspath(path_imgrec), path_imgidx)
        self._path = os.fspath(path_imgrec)
        count = len(positions)
        part = positions[count * int(part_index) // int(num_parts):
                         count * (int(part_index) + 1) // int(num_parts)]
        if not part or (round_batch and len(part) < batch_size):
            raise ValueError("ImageRecordIter: %s holds %d images%s, fewer than a batch of %d"
                             % (self._path, len(part),
                                "" if num_parts == 1 else " in part %s" % part_index, batch_size))
        self._part = part
        self._labels = None
        if path_imglist:
            self._labels = {key: numpy.asarray(labels, numpy.float32) for key, labels, _ in
                            read_image_list(os.fspath(path_imglist), _MAX_LIST_BYTES)}
        channels = data_shape[0]
        means = numpy.array([mean_r, mean_g, mean_b][:channels], numpy.float32)
        stds = numpy.array([std_r, std_g, std_b][:channels], numpy.float32)
        contrast = numpy.float32(max_random_contrast)
        illumination = numpy.float32(max_random_illumination)
        self._normalize = (means, stds, numpy.float32(scale), contrast, illumination)
        self._mirror, self._rand_mirror = bool(mirror), bool(rand_mirror)
        self._shuffle, self._round = bool(shuffle), bool(round_batch)
        self._order_rng = numpy.random.RandomState(int(seed) % (1 << 32))
        self._aug_rng = numpy.random.RandomState([int(seed) % (1 << 32), 1])
        self._seed_aug = seed_aug
        self._threads = max(1, int(preprocess_threads))
        self._pool = None
        self._order = self._new_order()
        self._pos = 0
        self._overflow = 0
        self._done = 0          # images given this pass (seed_aug's per-image seed)
        self._buf_data = numpy.zeros((batch_size,) + data_shape, dtype)
        label_tail = () if label_width == 1 else (label_width,)
        self._buf_label = numpy.zeros((batch_size,) + label_tail, numpy.float32)
        self._batch = None
        self.provide_data = [DataDesc(data_name, self._buf_data.shape, dtype)]
        self.provide_label = [DataDesc(label_name, self._buf_label.shape, numpy.float32)]
        logging.getLogger(__name__).info("ImageRecordIter: %s, %d images, batches of %s",
                                         self._path, len(part), self.provide_data[0].shape)

    def _new_order(self):
        order = numpy.arange(len(self._part))
        if self._shuffle:
            self._order_rng.shuffle(order)
        return order

    def _restart(self):
        self._order, self._pos, self._done = self._new_order(), 0, 0

    def iter_next(self):
        self._batch = None
        if self._overflow:
            return False
        n, bs = len(self._order), self.batch_size
        take = min(bs, n - self._pos)
        if take <= 0:
            return False
        items = list(self._order[self._pos:self._pos + take])
        self._pos += take
        pad = 0
        if take < bs:
            pad = bs - take
            if self._round:
                self._order, self._done = self._new_order(), 0
                items += list(self._order[:pad])
                self._pos = self._overflow = pad
        images = self._load(items)
        for i, (pixels, label) in enumerate(images):
            self._buf_data[i] = pixels
            self._buf_label[i] = label if self._label_width > 1 else label[0]
        self._batch = (creation.array(self._buf_data, dtype=self._dtype),
                       creation.array(self._buf_label, dtype=numpy.float32), pad)
        return True

    def _load(self, items):
        records = [self._read(self._part[i]) for i in items]
        if self._seed_aug is not None:
            seeds = [(int(self._seed_aug) + self._done + k) % (1 << 32)
                     for k in range(len(records))]
        else:
            seeds = self._aug_rng.randint(0, 1 << 31, size=len(records)).tolist()
        self._done += len(records)
        jobs = list(zip(records, seeds))
        if self._threads == 1 or len(jobs) == 1:
            return [self._process(r, s) for r, s in jobs]
        if self._pool is None:
            from concurrent.futures import ThreadPoolExecutor   # only where threads are asked for
            self._pool = ThreadPoolExecutor(self._threads)
        # A run of images a thread (a hand-over each costs more than a small image's work).
        size = -(-len(jobs) // self._threads)
        runs = [jobs[i:i + size] for i in range(0, len(jobs), size)]
        return [out for run in self._pool.map(self._run, runs) for out in run]

    def _run(self, jobs):
        return [self._process(record, seed) for record, seed in jobs]

    def _read(self, position):
        if isinstance(self._reader, recordio.MXIndexedRecordIO):
            return self._reader.read_idx(position)
        return recordio.read_record_at(self._reader, position)

    def _process(self, record, seed):
        rng = numpy.random.RandomState(seed)
        header, encoded = recordio.unpack(record)
        label = self._label_of(header)
        flag = 0 if self._data_shape[0] == 1 else 1
        pixels = image_file.imdecode(encoded, flag, "%s, record %d" % (self._path, header.id))
        if pixels.shape[2] == 3:
            pixels = pixels[..., ::-1]      # OpenCV's order: the augmenter works on BGR
        pixels = _aug.augment(numpy.ascontiguousarray(pixels), self._params, rng)
        mirrored = self._mirror or (self._rand_mirror and rng.uniform() < 0.5)
        means, stds, scale, contrast, illumination = self._normalize
        contrast_scaled = (numpy.float32(rng.uniform()) * contrast * 2 - contrast + 1) * scale
        illumination_scaled = (numpy.float32(rng.uniform()) * illumination * 2
                               - illumination) * scale
        return (_aug.to_output(pixels, mirrored, means, contrast_scaled / stds,
                               illumination_scaled / stds, self._dtype), label)

    def _label_of(self, header):
        if self._labels is not None:
            label = self._labels.get(int(header.id))
            if label is None:
                raise ValueError("ImageRecordIter: record id %d is not in the image list"
                                 % header.id)
        else:
            label = numpy.atleast_1d(numpy.asarray(header.label, numpy.float32))
        if len(label) != self._label_width:
            raise ValueError("ImageRecordIter: %s, record %d has %d label(s) but label_width is "
                             "%d" % (self._path, header.id, len(label), self._label_width))
        return label

    def __del__(self):
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)


class ImageRecordUInt8Iter(ImageRecordIter):
    """``ImageRecordIter`` giving the augmented pixels as uint8, unnormalised."""

    _default_dtype = "uint8"
