"""DataLoader: batches from a Dataset, in order or shuffled with the seedable generator."""
from __future__ import annotations

import numpy

from ...ndarray import NDArray
from ...ndarray import creation, ops
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_batchify_fn"]


def default_batchify_fn(data):
    """Stack samples: NDArrays with ``stack``, tuples field by field, anything else via NumPy."""
    if isinstance(data[0], NDArray):
        return ops.stack(*data)
    if isinstance(data[0], tuple):
        return [default_batchify_fn(list(field)) for field in zip(*data)]
    arr = numpy.asarray(data)
    return creation.array(arr, dtype=arr.dtype)


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size``."""

    def __init__(self, dataset, batch_size=None, shuffle=False, sampler=None, last_batch=None,
                 batch_sampler=None, batchify_fn=None, num_workers=0, pin_memory=False,
                 pin_device_id=0, prefetch=None, thread_pool=False, timeout=120):
        self._dataset = dataset
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("batch_size must be specified unless batch_sampler is specified")
            if sampler is None:
                sampler = RandomSampler(len(dataset)) if shuffle else SequentialSampler(len(dataset))
            elif shuffle:
                raise ValueError("shuffle must not be specified if sampler is specified")
            batch_sampler = BatchSampler(sampler, batch_size, last_batch if last_batch else "keep")
        elif batch_size is not None or shuffle or sampler is not None or last_batch is not None:
            raise ValueError("batch_size, shuffle, sampler and last_batch must not be specified if "
                             "batch_sampler is specified.")
        self._batch_sampler = batch_sampler
        self._batchify_fn = batchify_fn

    def __iter__(self):
        # Plain sequences (lists) take the per-sample path: gathering from them would convert
        # the whole list once per batch.
        can_gather = getattr(self._dataset, "_can_take_batch", None)
        fast = self._batchify_fn is None and can_gather is not None and can_gather()
        for batch in self._batch_sampler:
            if fast:
                yield self._dataset._take_batch(batch)
            else:
                fn = self._batchify_fn or default_batchify_fn
                yield fn([self._dataset[i] for i in batch])

    def __len__(self):
        return len(self._batch_sampler)
