"""``MNISTIter``: MXNet 1.9.1's MNIST iterator over the idx files, with its batches and order.

What MXNet's C++ iterator does, and this one too: it reads part ``part_index`` of
``num_parts`` of the images and labels (part ``k`` starts at ``int(count / num_parts * k)``),
scales each byte by 1/256 (not 1/255) into float32 ``(batch, 1, rows, cols)`` images, or
``(batch, rows * cols)`` with ``flat``, and float32 labels ``(batch,)``; with ``shuffle`` (the
default) it shuffles once, when made, by ``std::shuffle`` over ``std::mt19937(seed)``
(:mod:`._cxx_shuffle`, the same order as MXNet's), so every pass, ``reset()`` included, gives
the same order; it gives whole batches only (the images after the last whole batch are never
seen) and ``pad`` is 0.

Where MXNet's would read garbage or crash, this one says why instead: a file that is not an
idx file of the right kind, image and label files of different lengths, a batch larger than
the part (MXNet: ``StopIteration`` from the constructor), a part index out of range. A file
named ``.gz`` is read compressed (MXNet's reads only the unpacked files). ``input_shape`` and
``data_shape`` (which MXNet's ignores) and the prefetcher's ``prefetch_buffer`` and ``ctx`` are
accepted and have no effect.
"""
from __future__ import annotations

import logging

import numpy

from ..gluon.data.vision.datasets import read_idx
from ..ndarray import creation
from ._cxx_shuffle import shuffled_order
from .data_batch import DataDesc, DataIter

__all__ = ["MNISTIter"]

_IMAGES, _LABELS = 0x803, 0x801
# Accepted for MXNet's sake and unused (MXNet's iterator ignores them too).
_IGNORED = ("input_shape", "data_shape", "prefetch_buffer", "ctx")


def _part(count, num_parts, part_index):
    """``(start, stop)`` of part ``part_index``: MXNet's ``GetPart``, in double then truncated."""
    return (int(count / num_parts * part_index), int(count / num_parts * (part_index + 1)))


class MNISTIter(DataIter):
    """Batches of MNIST from ``image`` (idx3 file) and ``label`` (idx1 file); see the module's
    docstring for what MXNet's iterator does with each argument."""

    def __init__(self, image="./train-images-idx3-ubyte", label="./train-labels-idx1-ubyte",
                 batch_size=128, shuffle=True, flat=False, seed=0, silent=False, num_parts=1,
                 part_index=0, dtype=None, data_name="data", label_name="softmax_label",
                 **kwargs):
        unknown = sorted(set(kwargs) - set(_IGNORED))
        if unknown:
            raise TypeError("MNISTIter() got an unexpected keyword argument %r" % unknown[0])
        if dtype not in (None, "float32", numpy.float32):
            raise ValueError("MNISTIter: dtype=%r: MNIST batches are float32 (MXNet's iterator "
                             "fails on any other dtype); cast the batches instead" % (dtype,))
        batch_size, num_parts, part_index = int(batch_size), int(num_parts), int(part_index)
        if batch_size < 1:
            raise ValueError("MNISTIter: batch_size must be at least 1, got %d" % batch_size)
        if num_parts < 1 or not 0 <= part_index < num_parts:
            raise ValueError("MNISTIter: part_index %d of num_parts %d: need 0 <= part_index < "
                             "num_parts" % (part_index, num_parts))
        super().__init__(batch_size)
        images = read_idx(str(image), _IMAGES, 3)
        labels = read_idx(str(label), _LABELS, 1)
        if len(images) != len(labels):
            raise ValueError("MNISTIter: %s holds %d images but %s holds %d labels"
                             % (image, len(images), label, len(labels)))
        start, stop = _part(len(images), num_parts, part_index)
        images, labels = images[start:stop], labels[start:stop]
        if batch_size > len(images):
            raise ValueError("MNISTIter: batch_size %d is larger than the %d images of %s%s: the "
                             "iterator gives whole batches only"
                             % (batch_size, len(images), image,
                                "" if num_parts == 1 else " (part %d of %d)" % (part_index, num_parts)))
        if shuffle:
            order = shuffled_order(len(images), int(seed))
            images, labels = images[order], labels[order]
        rows, cols = images.shape[1:]
        self._images = images.reshape(len(images), rows * cols) if flat else \
            images.reshape(len(images), 1, rows, cols)
        self._labels = labels
        self._at = 0
        self._batch = None
        self.provide_data = [DataDesc(data_name, (batch_size,) + self._images.shape[1:])]
        self.provide_label = [DataDesc(label_name, (batch_size,))]
        if not silent:
            logging.getLogger(__name__).info(
                "MNISTIter: load %d images, shuffle=%d, shape=%s", len(images), bool(shuffle),
                self.provide_data[0].shape)

    def reset(self):
        self._at = 0

    def iter_next(self):
        if self._at + self.batch_size > len(self._images):
            return False
        self._batch = slice(self._at, self._at + self.batch_size)
        self._at += self.batch_size
        return True

    def getdata(self):
        # A byte times 1/256 is exact in float32, as MXNet's in-place scaling of the bytes.
        pixels = self._images[self._batch].astype(numpy.float32) * numpy.float32(1 / 256)
        return [creation.array(pixels, dtype=numpy.float32)]

    def getlabel(self):
        return [creation.array(self._labels[self._batch], dtype=numpy.float32)]

    def getpad(self):
        return 0
