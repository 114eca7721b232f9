"""``NDArrayIter``: batches over in-memory arrays, with MXNet 1.9.1's exact batch contents.

Shuffling draws from NumPy's global generator (``numpy.random.shuffle``) as MXNet's does, so a
program that seeds ``numpy.random`` gets MXNet's order. As in MXNet, each ``reset()`` shuffles
the already shuffled arrays again, and the rolled-over examples of ``'roll_over'`` come first in
the next pass.

Sparse sources are MXNet's too: a csr array needs ``last_batch_handle='discard'``, shuffles as a
csr array, and gives dense batches (MXNet's batches are its ``slice_axis``, which falls back to
the dense operator); a row_sparse one gives dense batches and turns dense when shuffled.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy

from .._csr_rows import gather_rows
from ..ndarray import NDArray
from ..ndarray import creation, ops
from ..ndarray.sparse import BaseSparseNDArray, csr_matrix
from .data_batch import DataBatch, DataDesc, DataIter

__all__ = ["NDArrayIter"]

_HANDLES = ("pad", "discard", "roll_over")


def _init_data(data, allow_empty, default_name):
    """``data`` as a list of ``(name, NDArray)`` sorted by name, as MXNet's ``_init_data``."""
    if data is None:
        if not allow_empty:
            raise ValueError("NDArrayIter needs data")
        data = []
    if isinstance(data, (numpy.ndarray, NDArray)):
        data = [data]
    if isinstance(data, list):
        if not data and not allow_empty:
            raise ValueError("NDArrayIter needs data")
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict([("_%d_%s" % (i, default_name), d) for i, d in enumerate(data)])
    if not isinstance(data, dict):
        raise TypeError("Input must be NDArray, numpy.ndarray, a list of them or dict with them "
                        "as values")
    out = {}
    for name, value in data.items():
        if not isinstance(value, NDArray):
            try:
                value = creation.array(value)
            except Exception:
                raise TypeError("Invalid type '%s' for %s, should be NDArray or numpy.ndarray"
                                % (type(value), name)) from None
        out[name] = value
    return sorted(out.items())


class NDArrayIter(DataIter):
    """Iterate over ``data`` (and ``label``) in batches of ``batch_size`` along the batch axis.

    ``last_batch_handle``: ``'pad'`` fills the last batch from the start of the data (its
    ``pad`` says how many), ``'discard'`` drops it, ``'roll_over'`` keeps its examples for the
    first batch of the next pass.
    """

    def __init__(self, data, label=None, batch_size=1, shuffle=False, last_batch_handle="pad",
                 data_name="data", label_name="softmax_label", layout="NCHW"):
        super().__init__(batch_size)
        if last_batch_handle not in _HANDLES:
            raise ValueError("last_batch_handle must be one of %s, got %r"
                             % (", ".join(_HANDLES), last_batch_handle))
        if int(batch_size) < 1:
            raise ValueError("batch_size must be at least 1, got %r" % (batch_size,))
        self.data = _init_data(data, allow_empty=False, default_name=data_name)
        self.label = _init_data(label, allow_empty=True, default_name=label_name)
        if last_batch_handle != "discard" and any(
                getattr(v, "stype", None) == "csr" for _, v in self.data + self.label):
            raise NotImplementedError("`NDArrayIter` only supports ``CSRNDArray`` with "
                                      "`last_batch_handle` set to `discard`.")
        self.idx = numpy.arange(self.data[0][1].shape[0])
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = int(batch_size)
        self.cursor = -self.batch_size
        self.num_data = self.idx.shape[0]
        self.reset()
        self.data_list = [x[1] for x in self.data] + [x[1] for x in self.label]
        self.num_source = len(self.data_list)
        self._cache_data = None
        self._cache_label = None
        self.layout = layout

    def _descs(self, sources):
        axis = self.layout.find("N")
        return [DataDesc(k, tuple(list(v.shape[:axis]) + [self.batch_size] + list(v.shape[axis + 1:])),
                         v.dtype, layout=self.layout) for k, v in sources]

    @property
    def provide_data(self):
        return self._descs(self.data)

    @property
    def provide_label(self):
        return self._descs(self.label)

    def hard_reset(self):
        """Back to the start, forgetting rolled-over examples."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self):
        if self.shuffle:
            self._shuffle_data()
        if self.last_batch_handle == "roll_over" and \
                self.num_data - self.batch_size < self.cursor < self.num_data:
            # The examples of the unfinished last batch start the next pass.
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self):
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self):
        if not self.iter_next():
            raise StopIteration
        data = self.getdata()
        label = self.getlabel()
        if data[0].shape[self.layout.find("N")] != self.batch_size:
            # An incomplete last batch (discard, roll_over): kept for the next pass.
            self._cache_data = data
            self._cache_label = label
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _getdata(self, sources, start=None, end=None):
        start = 0 if start is None else start
        if end is None:
            end = sources[0][1].shape[0] if sources else 0
        axis = self.layout.find("N")
        return [x[1].slice_axis(axis, start, end).copy() if isinstance(x[1], BaseSparseNDArray)
                else ops.slice_axis(x[1], axis, start, end).copy() for x in sources]

    def _concat(self, first, second):
        if not first or not second:
            return first if first else second
        axis = self.layout.find("N")
        return [ops.concat(a, b, dim=axis) for a, b in zip(first, second)]

    @staticmethod
    def _tile(data, repeats):
        out = []
        for datum in data:
            reps = [1] * len(datum.shape)
            reps[0] = repeats
            out.append(ops.tile(datum, reps))
        return out

    def _batchify(self, sources):
        if self.cursor >= self.num_data:
            raise RuntimeError("DataIter needs reset.")
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            cache = self._cache_data if self._cache_data is not None else self._cache_label
            if cache is None:
                raise RuntimeError("next epoch should have cached data")
            second = self._getdata(sources, end=self.cursor + self.batch_size)
            if self._cache_data is not None:
                self._cache_data = None
            else:
                self._cache_label = None
            return self._concat(cache, second)
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            pad = self.batch_size - self.num_data + self.cursor
            first = self._getdata(sources, start=self.cursor)
            if pad > self.num_data:
                second = self._tile(self._getdata(sources, end=self.num_data), pad // self.num_data)
                if pad % self.num_data:
                    second = self._concat(second, self._getdata(sources, end=pad % self.num_data))
            else:
                second = self._getdata(sources, end=pad)
            return self._concat(first, second)
        end = min(self.cursor + self.batch_size, self.num_data)
        return self._getdata(sources, self.cursor, end)

    def getdata(self):
        return self._batchify(self.data)

    def getlabel(self):
        return self._batchify(self.label)

    def getpad(self):
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0

    def _shuffle_data(self):
        numpy.random.shuffle(self.idx)
        self.data = [(k, _rows(v, self.idx)) for k, v in self.data]
        self.label = [(k, _rows(v, self.idx)) for k, v in self.label]


def _rows(array, order):
    """Rows ``order`` of ``array`` as MXNet's shuffle makes them: a csr array stays csr (MXNet
    goes through SciPy), anything else is gathered on the host into a new array of the default
    float32 (MXNet's ``nd.array``), a row_sparse one dense."""
    if getattr(array, "stype", None) != "csr":
        return creation.array(array.asnumpy()[order], array.context)
    indptr, indices, values = gather_rows(array.indptr.asnumpy(), array.indices.asnumpy(),
                                          array.data.asnumpy(), order)
    return csr_matrix((values, indices, indptr), shape=array.shape, ctx=array.context,
                      dtype=array.dtype)
