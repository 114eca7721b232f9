"""``mx.io.LibSVMIter``: batches of csr arrays from LibSVM text files, as MXNet 1.9.1 makes them.

A line is ``label index:value index:value ...`` with zero-based indices (an index is never
shifted, as in MXNet). Batches are ``(batch_size, data_shape[0])`` csr data and float32 labels
``(batch_size,)``, or, with ``label_libsvm``, csr labels ``(batch_size, label_shape[0])`` from
the same line of that file. ``num_parts`` / ``part_index`` cut the file's bytes as dmlc-core
does: part ``k`` nominally starts at ``k * ceil(size / num_parts)`` and both its ends move to the
start of the next line (a line starting exactly at a boundary goes to the part before). As in
MXNet the last batch of a pass is filled from the start of the data (``pad`` says how many)
and the next pass starts after those lines.

Where MXNet reads out of bounds or crashes, this says why, naming the file and line: an index
at or past ``data_shape[0]``, a token that is not ``index:value`` (MXNet: a segmentation
fault), a label file with fewer lines than the data. ``round_batch=False`` (MXNet: an error)
pads the last batch with empty rows.
"""
from __future__ import annotations

import os

import numpy

from .._bounded import open_regular
from .._csr_rows import gather_rows
from ..ndarray import creation
from ..ndarray.sparse import csr_matrix
from ._held_batch import HeldBatchIter
from ._source_files import source_files
from .data_batch import DataDesc

__all__ = ["LibSVMIter", "LibSVMError", "read_libsvm"]

_IGNORED = ("prefetch_buffer", "ctx", "dtype")
_TOKEN_CHARS = 64        # the most characters one index:value may take


class LibSVMError(ValueError):
    """A LibSVM file that cannot be read as the iterator's rows."""


def _next_line(handle, position, total):
    """dmlc-core's ``SeekRecordBegin``: from ``position``, past the end of the line there and
    the line breaks after it."""
    handle.seek(position)
    while position < total:
        char = handle.read(1)
        position += 1
        if char in (b"\n", b"\r"):
            break
    while position < total:
        char = handle.read(1)
        if char not in (b"\n", b"\r"):
            break
        position += 1
    return position


def _part_lines(path, num_parts, part_index, line_limit):
    """``(file, byte position after the line, line)`` of the lines in part ``part_index`` of
    the file(s), taken as one stream."""
    files = source_files(path)
    sizes = [os.path.getsize(f) for f in files]
    total = sum(sizes)
    step = -(-total // num_parts)
    begin, end = min(step * part_index, total), min(step * (part_index + 1), total)
    start = 0
    for name, size in zip(files, sizes):
        first, start = start, start + size
        if start <= begin or first >= end:
            continue
        lo, hi = max(begin, first) - first, min(end, start) - first
        try:
            handle = open_regular(name, "rb")
        except OSError as exc:
            raise LibSVMError("%s: cannot read (%s)" % (name, exc.strerror or exc)) from None
        with handle:
            if begin > 0 and first <= begin < start:
                lo = _next_line(handle, lo, size)
            if end < total and first <= end < start:
                hi = _next_line(handle, hi, size)
            handle.seek(lo)
            position = lo
            while position < hi:
                raw = handle.readline(line_limit + 1)
                if not raw:
                    break
                if len(raw) > line_limit:
                    raise LibSVMError("%s, byte %d: a line longer than %d bytes (more than "
                                      "the data shape's features allow)"
                                      % (name, position, line_limit))
                position += len(raw)
                line = raw.strip()
                if line:
                    yield name, position, line


def read_libsvm(path, width):
    """``(labels, indptr, indices, values)`` of every line of the LibSVM file(s) at ``path``,
    the CSR matrix's columns below ``width``: float32 labels and values, int64 positions."""
    return _read(os.fspath(path), int(width), 1, 0)


def _read(path, width, num_parts, part_index):
    """``(labels, indptr, indices, values)`` of the part's lines, columns below ``width``."""
    labels, indptr, indices, values = [], [0], [], []
    for name, position, line in _part_lines(path, num_parts, part_index,
                                           _TOKEN_CHARS * (width + 1) + 256):
        tokens = line.split()
        try:
            labels.append(float(tokens[0].split(b":")[0]))
            for token in tokens[1:]:
                column, value = token.split(b":")
                column = int(column)
                if not 0 <= column < width:
                    raise IndexError(column)
                indices.append(column)
                values.append(float(value))
        except IndexError as exc:
            raise LibSVMError("%s, the line ending at byte %d: feature index %s outside the "
                              "data shape's %d columns" % (name, position, exc, width)) from None
        except ValueError:
            raise LibSVMError("%s, the line ending at byte %d: expected 'label index:value ...', "
                              "got %r" % (name, position, line[:80].decode("ascii", "replace"))) \
                from None
        indptr.append(len(indices))
    return (numpy.array(labels, numpy.float32), numpy.array(indptr, numpy.int64),
            numpy.array(indices, numpy.int64), numpy.array(values, numpy.float32))


class LibSVMIter(HeldBatchIter):
    """Batches of csr rows of ``data_libsvm`` (a file or a folder of files); see the module's
    description."""

    def __init__(self, data_libsvm, data_shape, batch_size, label_libsvm=None, label_shape=(1,),
                 num_parts=1, part_index=0, round_batch=True, data_name="data",
                 label_name="softmax_label", **kwargs):
        unknown = sorted(set(kwargs) - set(_IGNORED))
        if unknown:
            raise TypeError("LibSVMIter() got an unexpected keyword argument %r" % unknown[0])
        data_shape, label_shape = tuple(data_shape), tuple(label_shape)
        if len(data_shape) != 1 or int(data_shape[0]) < 1:
            raise ValueError("LibSVMIter: data_shape must be (features,), got %s" % (data_shape,))
        if label_libsvm in (None, "NULL"):
            label_libsvm = None
            if int(numpy.prod(label_shape)) != 1:
                raise ValueError("LibSVMIter: label_shape must be (1,) without label_libsvm, "
                                 "got %s" % (label_shape,))
        elif len(label_shape) != 1 or int(label_shape[0]) < 2:
            raise ValueError("LibSVMIter: label_shape must be (columns,) with more than one "
                             "column with label_libsvm, got %s" % (label_shape,))
        num_parts, part_index = int(num_parts), int(part_index)
        if num_parts < 1 or not 0 <= part_index < num_parts:
            raise ValueError("LibSVMIter: part_index %d of num_parts %d: need 0 <= part_index < "
                             "num_parts" % (part_index, num_parts))
        super().__init__(int(batch_size))
        if self.batch_size < 1:
            raise ValueError("LibSVMIter: batch_size must be at least 1, got %d" % self.batch_size)
        self._width = int(data_shape[0])
        self._labels, *self._data = _read(os.fspath(data_libsvm), self._width, num_parts,
                                          part_index)
        if not len(self._labels):
            raise LibSVMError("%s holds no lines%s" % (data_libsvm, "" if num_parts == 1 else
                                                      " in part %d" % part_index))
        self._label_csr = None
        if label_libsvm is not None:
            _, *self._label_csr = _read(os.fspath(label_libsvm), int(label_shape[0]), num_parts,
                                        part_index)
            if len(self._label_csr[0]) - 1 < len(self._labels):
                raise LibSVMError("%s has %d lines, fewer than the %d of %s"
                                  % (label_libsvm, len(self._label_csr[0]) - 1,
                                     len(self._labels), data_libsvm))
        self._label_width = int(label_shape[0])
        self._round = bool(round_batch)
        self._pos = 0
        self._overflow = 0
        self._batch = None
        self.provide_data = [DataDesc(data_name, (self.batch_size, self._width))]
        self.provide_label = [DataDesc(label_name, (self.batch_size,) if label_libsvm is None
                                       else (self.batch_size, self._label_width))]

    def iter_next(self):
        self._batch = None
        n, bs = len(self._labels), self.batch_size
        if self._overflow or self._pos >= n:
            return False
        rows = list(range(self._pos, min(self._pos + bs, n)))
        self._pos += len(rows)
        pad = bs - len(rows)
        if pad and self._round:
            rows += [i % n for i in range(pad)]
            self._pos = self._overflow = pad % n or n
        self._batch = (self._csr(self._data, rows, pad, self._width),
                       self._label_rows(rows, pad), pad)
        return True

    def _csr(self, arrays, rows, pad, width):
        indptr, indices, values = gather_rows(*arrays, rows)
        if pad and not self._round:     # empty rows fill the batch
            indptr = numpy.concatenate([indptr, numpy.full(pad, indptr[-1], indptr.dtype)])
        return csr_matrix((values, indices, indptr), shape=(self.batch_size, width))

    def _label_rows(self, rows, pad):
        if self._label_csr is not None:
            return self._csr(self._label_csr, rows, pad, self._label_width)
        labels = numpy.zeros(self.batch_size, numpy.float32)
        labels[:len(rows)] = self._labels[rows]
        return creation.array(labels, dtype=numpy.float32)
