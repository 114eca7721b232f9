"""``mx.image.ImageIter``: MXNet 1.9.1's Python image iterator over a RecordIO file
(``path_imgrec``, with ``path_imgidx`` for random access), an image list file
(``path_imglist``: ``key<TAB>label...<TAB>path`` lines, images under ``path_root``) or a list
of ``[label..., path]``. Each image is decoded (RGB), put through the augmenters (by default
``CreateAugmenter(data_shape, **kwargs)``) and transposed to (C, H, W); batches are
``DataBatch``es of (batch, C, H, W) float32 data and their labels, the last batch padded from
the start (``pad``), dropped (``discard``) or carried into the next epoch (``roll_over``), as
MXNet's. ``shuffle`` shuffles with Python's ``random``, as MXNet's does, so a seeded program
gets MXNet's order; the random augmenters draw as MXNet's do (see ``image``).
"""
from __future__ import annotations

import logging
import numbers
import os
import random

from . import image as _image
from . import ndarray as nd
from . import recordio
from ._bounded import MiB, read_regular
from .gluon.data.vision.datasets import read_image_list
from .gluon.data.vision.image_file import MAX_FILE_BYTES
from .io import DataBatch, DataIter

__all__ = ["ImageIter"]

MAX_LIST_BYTES = 1024 * MiB


def _read_list(path, dtype):
    """An image list file: ``{key: (label NDArray, path)}`` and the keys in file order."""
    imglist, keys = {}, []
    for key, labels, fname in read_image_list(path, MAX_LIST_BYTES):
        imglist[key] = (nd.array(labels, dtype=dtype), fname)
        keys.append(key)
    return imglist, keys


class ImageIter(DataIter):
    """Batches of augmented images from a RecordIO file, an image list file or a list (see the
    module's description); MXNet 1.9.1's arguments and batches."""

    def __init__(self, batch_size, data_shape, label_width=1, path_imgrec=None,
                 path_imglist=None, path_root=None, path_imgidx=None, shuffle=False,
                 part_index=0, num_parts=1, aug_list=None, imglist=None, data_name="data",
                 label_name="softmax_label", dtype="float32", last_batch_handle="pad",
                 **kwargs):
        super().__init__()
        if not (path_imgrec or path_imglist or isinstance(imglist, list)):
            raise ValueError("ImageIter needs path_imgrec, path_imglist or imglist")
        if dtype not in ("int32", "float32", "int64", "float64"):
            raise ValueError(dtype + " label not supported")
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError("last_batch_handle must be 'pad', 'discard' or 'roll_over', got %r"
                             % (last_batch_handle,))
        if path_imgrec:
            if path_imgidx:
                self.imgrec = recordio.MXIndexedRecordIO(path_imgidx, path_imgrec, "r")
                self.imgidx = list(self.imgrec.keys)
            else:
                self.imgrec = recordio.MXRecordIO(path_imgrec, "r")
                self.imgidx = None
        else:
            self.imgrec = None
        imgkeys = None
        if path_imglist:
            self.imglist, imgkeys = _read_list(path_imglist, dtype)
        elif isinstance(imglist, list):
            self.imglist, imgkeys = {}, []
            for index, img in enumerate(imglist, 1):
                if len(img) > 2:
                    label = nd.array(img[:-1], dtype=dtype)
                elif isinstance(img[0], numbers.Number):
                    label = nd.array([img[0]], dtype=dtype)
                else:
                    label = nd.array(img[0], dtype=dtype)
                self.imglist[str(index)] = (label, img[-1])
                imgkeys.append(str(index))
        else:
            self.imglist = None
        self.path_root = path_root
        self.check_data_shape(data_shape)
        self.provide_data = [(data_name, (batch_size,) + tuple(data_shape))]
        self.provide_label = [(label_name, (batch_size, label_width) if label_width > 1
                               else (batch_size,))]
        self.batch_size = batch_size
        self.data_shape = tuple(data_shape)
        self.label_width = label_width
        self.shuffle = shuffle
        if self.imgrec is None:
            self.seq = imgkeys
        elif shuffle or num_parts > 1 or path_imgidx:
            if self.imgidx is None:
                raise ValueError("shuffle and num_parts need random access: give path_imgidx")
            self.seq = self.imgidx
        else:
            self.seq = None
        if num_parts > 1:
            if not 0 <= part_index < num_parts:
                raise ValueError("part_index %d is not below num_parts %d"
                                 % (part_index, num_parts))
            share = len(self.seq) // num_parts
            self.seq = self.seq[part_index * share:(part_index + 1) * share]
        self.auglist = _image.CreateAugmenter(data_shape, **kwargs) if aug_list is None \
            else aug_list
        self.cur = 0
        self._allow_read = True
        self.last_batch_handle = last_batch_handle
        self.num_image = len(self.seq) if self.seq is not None else None
        self._cache_data = self._cache_label = self._cache_idx = None
        self.reset()

    def reset(self):
        """Back to the first image (a new shuffle with ``shuffle``). A batch carried over by
        ``roll_over`` stays, and the images after it follow it."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.last_batch_handle != "roll_over" or self._cache_data is None:
            if self.imgrec is not None:
                self.imgrec.reset()
            self.cur = 0
            self._allow_read = True

    def hard_reset(self):
        """``reset``, also forgetting a batch carried over by ``roll_over``."""
        if self.seq is not None and self.shuffle:
            random.shuffle(self.seq)
        if self.imgrec is not None:
            self.imgrec.reset()
        self.cur = 0
        self._allow_read = True
        self._cache_data = self._cache_label = self._cache_idx = None

    def next_sample(self):
        """The next image's label and encoded bytes; StopIteration at the end of the epoch."""
        if self._allow_read is False:
            raise StopIteration
        if self.seq is not None:
            if self.cur >= self.num_image:
                if self.last_batch_handle != "discard":
                    self.cur = 0
                raise StopIteration
            idx = self.seq[self.cur]
            self.cur += 1
            if self.imgrec is not None:
                header, img = recordio.unpack(self.imgrec.read_idx(idx))
                return (header.label if self.imglist is None else self.imglist[idx][0]), img
            label, fname = self.imglist[idx]
            return label, self.read_image(fname)
        record = self.imgrec.read()
        if record is None:
            if self.last_batch_handle != "discard":
                self.imgrec.reset()
            raise StopIteration
        header, img = recordio.unpack(record)
        return header.label, img

    def _batchify(self, batch_data, batch_label, start=0):
        i = start
        try:
            while i < self.batch_size:
                label, encoded = self.next_sample()
                data = self.imdecode(encoded)
                try:
                    self.check_valid_image(data)
                except RuntimeError as exc:
                    logging.debug("Invalid image, skipping:  %s", exc)
                    continue
                data = self.augmentation_transform(data)
                batch_data[i] = self.postprocess_data(data)
                batch_label[i] = label
                i += 1
        except StopIteration:
            if not i:
                raise
        return i

    def _empty_labels(self):
        """The label array of a new batch, before its samples are read."""
        return nd.empty(self.provide_label[0][1])

    def next(self):
        c, h, w = self.data_shape
        if self._cache_data is not None:
            batch_data, batch_label, i = self._cache_data, self._cache_label, self._cache_idx
        else:
            batch_data = nd.zeros((self.batch_size, c, h, w))
            batch_label = self._empty_labels()
            i = self._batchify(batch_data, batch_label)
        pad = self.batch_size - i
        if pad:
            if self.last_batch_handle == "discard":
                raise StopIteration
            if self.last_batch_handle == "roll_over" and self._cache_data is None:
                self._cache_data, self._cache_label, self._cache_idx = (batch_data, batch_label,
                                                                        i)
                raise StopIteration
            self._batchify(batch_data, batch_label, i)
            if self.last_batch_handle == "pad":
                self._allow_read = False
            else:
                self._cache_data = self._cache_label = self._cache_idx = None
        return DataBatch([batch_data], [batch_label], pad=pad)

    def check_data_shape(self, data_shape):
        if len(data_shape) != 3:
            raise ValueError("data_shape should have length 3, with dimensions CxHxW")
        if data_shape[0] != 3:
            raise ValueError("This iterator expects inputs to have 3 channels.")

    def check_valid_image(self, data):
        if len(data[0].shape) == 0:
            raise RuntimeError("Data shape is wrong")

    def imdecode(self, s):
        """``s`` decoded (RGB, (H, W, 3)); a RuntimeError naming the image when it cannot be."""
        try:
            return _image.imdecode(s)
        except Exception as exc:
            if self.seq is not None:
                idx = self.seq[(self.cur % self.num_image) - 1]
            else:
                idx = "the record before the reader's position"
            where = ("filename: %s" % self.imglist[idx][1] if self.imglist is not None
                     else "index: %s" % idx)
            raise RuntimeError("Broken image %s, %s" % (where, exc)) from None

    def read_image(self, fname):
        """The bytes of the image file ``fname`` under ``path_root``."""
        return read_regular(os.path.join(self.path_root or "", fname), MAX_FILE_BYTES)

    def augmentation_transform(self, data):
        for aug in self.auglist:
            data = aug(data)
        return data

    def postprocess_data(self, datum):
        return nd.transpose(datum, axes=(2, 0, 1))
