"""``CSVIter``: batches from CSV files of numbers, with MXNet 1.9.1's batch contents and ``pad``.

MXNet's iterator streams the file; this one reads it whole into one array (a CSV that fits in
memory, which is what CSVIter is used for) and then cuts batches exactly as MXNet's batch
loader does: with ``round_batch`` the last batch wraps around to the first rows and the next
pass starts after them; without it the last batch keeps, past its real rows, the rows the
previous batch had there (MXNet reuses its batch buffer), and ``pad`` says how many.
"""
from __future__ import annotations

import itertools
import os

import numpy

from .._bounded import open_regular
from ..ndarray import creation
from ._held_batch import HeldBatchIter
from ._source_files import source_files
from .data_batch import DataDesc

__all__ = ["CSVIter", "CSVError"]

_DTYPES = ("float32", "float64", "float16", "int32", "int64", "int8", "uint8")


class CSVError(ValueError):
    """A CSV file that cannot be read as rows of numbers of the given shape."""


# The most characters one value of a line may take: a line longer than its values allow is
# refused before it is split (one line of a gigabyte would be millions of strings first).
_VALUE_CHARS = 256
_BLOCK = 1 << 20   # values parsed before they are packed into an array block


def _read_rows(path, width, dtype):
    """The rows of the CSV file(s) at ``path`` as an ``(n, width)`` array of ``dtype``."""
    dtype = numpy.dtype(dtype)
    parse = float if dtype.kind == "f" else int
    low = high = None
    if dtype.kind in "iu":
        low, high = numpy.iinfo(dtype).min, numpy.iinfo(dtype).max
    line_limit = _VALUE_CHARS * width + 2
    blocks, values = [], []
    for name in source_files(path):
        try:
            handle = open_regular(name, "rb")
        except OSError as exc:
            raise CSVError("%s: cannot read the CSV file (%s)" % (name, exc.strerror or exc)) from None
        with handle:
            for lineno in itertools.count(1):
                raw = handle.readline(line_limit + 1)
                if not raw:
                    break
                if len(raw) > line_limit:
                    raise CSVError("%s, line %d: longer than %d values of a number each could be "
                                   "(the shape's size is %d)" % (name, lineno, width, width))
                line = raw.strip()
                if not line:
                    continue
                try:
                    row = [parse(v) for v in line.decode("ascii").split(",")]
                except (UnicodeDecodeError, ValueError):
                    raise CSVError("%s, line %d: expected %d comma-separated numbers, got %r"
                                   % (name, lineno, width, line[:80].decode("ascii", "replace"))) from None
                if len(row) != width:
                    raise CSVError("%s, line %d: expected %d values (the size of the shape), got %d"
                                   % (name, lineno, width, len(row)))
                if low is not None and not all(low <= v <= high for v in row):
                    raise CSVError("%s, line %d: a value outside %s's range [%d, %d]"
                                   % (name, lineno, dtype.name, low, high))
                values.extend(row)
                if len(values) >= _BLOCK:
                    blocks.append(_packed(values, dtype))
                    values = []
    blocks.append(_packed(values, dtype))
    data = numpy.concatenate(blocks)
    return data.reshape(len(data) // width if width else 0, width)


def _packed(values, dtype):
    with numpy.errstate(over="ignore"):   # a number beyond float16/32 is Inf, as in MXNet
        return numpy.array(values, dtype=dtype)


class CSVIter(HeldBatchIter):
    """Batches of ``data_shape`` examples read from ``data_csv`` (a file or a folder of files),
    with labels from ``label_csv`` (zeros without one)."""

    def __init__(self, data_csv, data_shape, batch_size, label_csv=None, label_shape=(1,),
                 round_batch=True, prefetch_buffer=4, ctx="gpu", dtype=None, data_name="data",
                 label_name="softmax_label", **kwargs):
        super().__init__(int(batch_size))
        dtype = "float32" if dtype is None else numpy.dtype(dtype).name
        if dtype not in _DTYPES:
            raise ValueError("CSVIter dtype must be one of %s, got %r" % (", ".join(_DTYPES), dtype))
        if self.batch_size < 1:
            raise ValueError("batch_size must be at least 1, got %r" % (batch_size,))
        self._data_shape = tuple(int(d) for d in data_shape)
        self._label_shape = tuple(int(d) for d in label_shape)
        self._data = _read_rows(os.fspath(data_csv), int(numpy.prod(self._data_shape)), dtype)
        n = len(self._data)
        if label_csv is not None and label_csv != "NULL":
            self._label = _read_rows(os.fspath(label_csv), int(numpy.prod(self._label_shape)), dtype)
            if len(self._label) != n:
                raise CSVError("%s has %d rows but %s has %d" % (label_csv, len(self._label),
                                                                 data_csv, n))
        else:
            self._label = numpy.zeros((n, int(numpy.prod(self._label_shape))), dtype=dtype)
        if n == 0:
            raise CSVError("%s holds no rows" % (data_csv,))
        if round_batch and n < self.batch_size:
            raise CSVError("%s: number of input must be bigger than batch size (%d rows, "
                           "batch_size %d)" % (data_csv, n, self.batch_size))
        self._round = bool(round_batch)
        self._dtype = dtype
        self._data_name, self._label_name = data_name, label_name
        # MXNet keeps one batch buffer; without round_batch a short batch shows its old rows.
        self._buf_data = numpy.zeros((self.batch_size,) + self._data_shape, dtype=dtype)
        label_tail = () if self._label_shape == (1,) else self._label_shape
        self._buf_label = numpy.zeros((self.batch_size,) + label_tail, dtype=dtype)
        self._pos = 0          # next row to read
        self._overflow = 0     # rows the last batch took from the start (round_batch)
        self._batch = None

    @property
    def provide_data(self):
        return [DataDesc(self._data_name, self._buf_data.shape, numpy.dtype(self._dtype))]

    @property
    def provide_label(self):
        return [DataDesc(self._label_name, self._buf_label.shape, numpy.dtype(self._dtype))]


    def iter_next(self):
        self._batch = None
        if self._overflow:
            return False
        n, bs = len(self._data), self.batch_size
        take = min(bs, n - self._pos)
        if take <= 0:
            return False
        rows = list(range(self._pos, self._pos + take))
        self._pos += take
        pad = 0
        if take < bs:
            if self._round:
                self._overflow = bs - take
                rows += list(range(self._overflow))
                self._pos = self._overflow
                pad = self._overflow
            else:
                pad = bs - take
        count = len(rows)
        self._buf_data[:count] = self._data[rows].reshape((count,) + self._data_shape)
        self._buf_label[:count] = self._label[rows].reshape((count,) + self._buf_label.shape[1:])
        self._batch = (creation.array(self._buf_data, dtype=self._dtype),
                       creation.array(self._buf_label, dtype=self._dtype), pad)
        return True
