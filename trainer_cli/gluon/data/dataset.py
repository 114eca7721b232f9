"""Datasets: indexable collections of samples."""
from __future__ import annotations

import os

import numpy

from ... import recordio
from ...ndarray import NDArray
from .sampler import FilterSampler, Sampler, SequentialSampler

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "RecordFileDataset"]


class Dataset:
    """Abstract dataset: ``__getitem__`` and ``__len__``."""

    def __getitem__(self, idx):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def filter(self, fn):
        """The samples for which ``fn(sample)`` is true (``fn`` is called on each now)."""
        return _SampledDataset(self, FilterSampler(fn, self))

    def shard(self, num_shards, index):
        """Part ``index`` of ``num_shards`` nearly equal consecutive parts (the first
        ``len % num_shards`` parts one sample longer), as MXNet cuts them."""
        if not 0 < num_shards or not 0 <= index < num_shards:
            raise ValueError("shard %r of %r: the index must be in [0, num_shards) and "
                             "num_shards positive" % (index, num_shards))
        size, rest = divmod(len(self), num_shards)
        start = size * index + min(index, rest)
        return _SampledDataset(self, SequentialSampler(size + (index < rest), start))

    def take(self, count):
        """The first ``count`` samples (all of them when ``count`` is None or larger)."""
        if count is None or count > len(self):
            count = len(self)
        return _SampledDataset(self, SequentialSampler(count))

    def sample(self, sampler):
        """The samples at the indices ``sampler`` gives (drawn once, now)."""
        if not isinstance(sampler, Sampler):
            raise TypeError("Invalid sampler type: %s. Expected gluon.data.Sampler instead."
                            % type(sampler))
        return _SampledDataset(self, sampler)

    def transform(self, fn, lazy=True):
        """``fn`` applied to every sample (unpacked when it is a tuple); ``lazy=False`` applies it
        to all samples now."""
        trans = _TransformedDataset(self, fn)
        if lazy:
            return trans
        return SimpleDataset([trans[i] for i in range(len(trans))])

    def transform_first(self, fn, lazy=True):
        """``fn`` applied to the first element of every sample only (the data, not the label)."""
        def first(x, *rest):
            return (fn(x),) + rest if rest else fn(x)
        return self.transform(first, lazy)


class _SampledDataset(Dataset):
    """``dataset``'s samples at the indices of ``sampler``, listed once."""

    def __init__(self, dataset, sampler):
        self._dataset = dataset
        self._indices = list(sampler)

    def __len__(self):
        return len(self._indices)

    def __getitem__(self, idx):
        return self._dataset[self._indices[idx]]


class _TransformedDataset(Dataset):
    def __init__(self, data, fn):
        self._data = data
        self._fn = fn

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        item = self._data[idx]
        return self._fn(*item) if isinstance(item, tuple) else self._fn(item)


class SimpleDataset(Dataset):
    """A dataset over any indexable sequence."""

    def __init__(self, data):
        self._data = data

    def __len__(self):
        return len(self._data)

    def __getitem__(self, idx):
        return self._data[idx]


class ArrayDataset(Dataset):
    """Several equal-length arrays zipped: item ``i`` is ``(a[i], b[i], ...)``."""

    def __init__(self, *args):
        if not args:
            raise ValueError("ArrayDataset needs at least one array")
        self._length = len(args[0])
        self._data = []
        for i, data in enumerate(args):
            if len(data) != self._length:
                raise ValueError("All arrays must have the same length; array[0] has length %d "
                                 "while array[%d] has %d." % (self._length, i + 1, len(data)))
            if isinstance(data, NDArray) and data.ndim == 1:
                data = data.asnumpy()
            self._data.append(data)

    def __getitem__(self, idx):
        if len(self._data) == 1:
            return self._data[0][idx]
        return tuple(data[idx] for data in self._data)

    def __len__(self):
        return self._length

    def _can_take_batch(self):
        return all(isinstance(data, (NDArray, numpy.ndarray)) for data in self._data)

    def _take_batch(self, indices):
        """A whole batch by one gather per array: the same values as stacking the samples."""
        from ...ndarray import creation
        out = []
        for data in self._data:
            if isinstance(data, NDArray):
                out.append(data[indices])
            else:
                arr = data[indices]
                out.append(creation.array(arr, dtype=arr.dtype))
        return out[0] if len(out) == 1 else out


class RecordFileDataset(Dataset):
    """The records of a RecordIO file (``filename``, with its index beside it: the same name
    ending ``.idx``), item ``i`` the bytes of the ``i``-th key of the index. Worker processes
    reopen the file (each keeps its own offset)."""

    def __init__(self, filename):
        self.idx_file = os.path.splitext(filename)[0] + ".idx"
        self.filename = filename
        self._record = recordio.MXIndexedRecordIO(self.idx_file, self.filename, "r")

    def __getitem__(self, idx):
        return self._record.read_idx(self._record.keys[idx])

    def __len__(self):
        return len(self._record.keys)
