"""DataLoader: batches from a Dataset, in order or shuffled with the seedable generator; with
``num_workers`` > 0, made by worker processes (or threads, ``thread_pool=True``) ahead of use."""
from __future__ import annotations

import multiprocessing
import multiprocessing.pool
import os
import random as _py_random
import time

import numpy

from ... import random as _random
from ..._pools import close_pool, leave_stops_to_parent
from ...ndarray import NDArray
from ...ndarray import creation, ops
from .sampler import BatchSampler, RandomSampler, SequentialSampler

__all__ = ["DataLoader", "default_batchify_fn", "DataLoaderTimeout", "DataLoaderWorkerDied"]


class DataLoaderTimeout(TimeoutError):
    """A worker did not deliver a batch within the DataLoader's ``timeout``."""


class DataLoaderWorkerDied(RuntimeError):
    """A worker process ended while batches were awaited (killed by a signal, the out-of-memory
    killer say): the batch it held is lost, so the wait ends at once rather than at ``timeout``."""


# How often a wait for a batch looks whether a worker process has died.
_WORKER_CHECK_S = 0.5


def default_batchify_fn(data):
    """Stack samples: NDArrays with ``stack``, tuples field by field, anything else via NumPy."""
    if isinstance(data[0], NDArray):
        return ops.stack(*data)
    if isinstance(data[0], tuple):
        return [default_batchify_fn(list(field)) for field in zip(*data)]
    arr = numpy.asarray(data)
    return creation.array(arr, dtype=arr.dtype)


class _Host:
    """An NDArray's values on their way from a worker process (NDArrays do not cross processes)."""
    __slots__ = ("values",)

    def __init__(self, values):
        self.values = values


def _to_host(obj):
    if isinstance(obj, NDArray):
        return _Host(obj.asnumpy().view(numpy.ndarray))
    if isinstance(obj, (list, tuple)):
        return type(obj)(_to_host(o) for o in obj)
    return obj


def _from_host(obj):
    if isinstance(obj, _Host):
        return creation.array(obj.values, dtype=obj.values.dtype)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_from_host(o) for o in obj)
    return obj


# The dataset and batchify function of a worker process: set once when the process starts
# (inherited through fork, so datasets holding lambdas need no pickling).
_worker_state = None


def _worker_init(dataset, batchify_fn, seed, parent):
    global _worker_state
    _worker_state = (dataset, batchify_fn)
    # Ctrl-C and the other stops are the main process's (as MXNet's workers ignore Ctrl-C): a
    # worker would print a traceback and leave its batch undone.
    leave_stops_to_parent(parent)
    # Forked workers would all continue the parent's random streams and draw the same
    # augmentations; each gets its own.
    worker_seed = (seed + os.getpid()) % (1 << 32)
    _random.seed(worker_seed)
    numpy.random.seed(worker_seed)
    _py_random.seed(worker_seed)


def _worker_batch(indices):
    dataset, batchify_fn = _worker_state
    return _to_host(batchify_fn([dataset[i] for i in indices]))


class DataLoader:
    """Iterate over ``dataset`` in batches of ``batch_size``.

    ``num_workers`` > 0 makes batches in that many worker processes (forked, so the dataset
    and transforms need not be picklable), ``prefetch`` (default ``2 * num_workers``) batches
    ahead, delivered in order; ``thread_pool=True`` uses threads instead. A batch that takes a
    worker more than ``timeout`` seconds is an error. ``pin_memory`` is accepted; batches are
    in ordinary host memory.
    """

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
        if not timeout > 0:
            raise ValueError("timeout must be positive, given %r" % (timeout,))
        self._batch_sampler = batch_sampler
        self._batchify_fn = batchify_fn
        self._num_workers = max(0, int(num_workers))
        self._prefetch = max(0, int(prefetch) if prefetch is not None else 2 * self._num_workers)
        self._thread_pool = bool(thread_pool)
        self._timeout = timeout
        self._pool = None
        self._workers = []   # the worker processes the pool started (none for threads)

    def _worker_pool(self):
        if self._pool is None:
            batchify = self._batchify_fn or default_batchify_fn
            if self._thread_pool:
                self._pool = multiprocessing.pool.ThreadPool(self._num_workers)
            else:
                method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
                seed = int(_random.generator(None).integers(0, 1 << 31))
                self._pool = multiprocessing.get_context(method).Pool(
                    self._num_workers, initializer=_worker_init,
                    initargs=(self._dataset, batchify, seed, os.getpid()))
                # The pool replaces a dead worker silently and the batch it held never comes:
                # its first processes are kept to see that one ended.
                self._workers = list(getattr(self._pool, "_pool", ()))
        return self._pool

    def _wait(self, result):
        """The batch of ``result``; an error when a worker died or ``timeout`` passed."""
        deadline = time.monotonic() + self._timeout
        while True:
            try:
                return result.get(max(0.0, min(_WORKER_CHECK_S, deadline - time.monotonic())))
            except multiprocessing.TimeoutError:
                pass
            for worker in self._workers:
                code = worker.exitcode
                if code is not None:
                    how = ("was killed by signal %d" % -code if code < 0
                           else "exited with status %d" % code)
                    raise DataLoaderWorkerDied(
                        "a DataLoader worker process (pid %d) %s while batches were awaited (out "
                        "of memory?); its batch is lost" % (worker.pid, how))
            if time.monotonic() >= deadline:
                raise DataLoaderTimeout(
                    "a DataLoader worker gave no batch within timeout=%s seconds (a slow "
                    "transform: raise timeout)" % (self._timeout,))

    def __iter__(self):
        if self._num_workers == 0:
            return self._same_process()
        return self._from_workers()

    def _same_process(self):
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

    def _from_workers(self):
        pool = self._worker_pool()
        batchify = self._batchify_fn or default_batchify_fn
        dataset = self._dataset
        if self._thread_pool:
            def submit(indices):
                return pool.apply_async(lambda: batchify([dataset[i] for i in indices]))
        else:
            def submit(indices):
                return pool.apply_async(_worker_batch, (indices,))
        pending = []
        batches = iter(self._batch_sampler)
        for indices in batches:
            pending.append(submit(indices))
            if len(pending) > self._prefetch:
                break
        while pending:
            result = pending.pop(0)
            batch = self._wait(result)
            for indices in batches:
                pending.append(submit(indices))
                break
            yield batch if self._thread_pool else _from_host(batch)

    def __len__(self):
        return len(self._batch_sampler)

    def close(self):
        """Stop the worker processes or threads (also done when the DataLoader is collected)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            close_pool(pool)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
