"""MXNet's iterator wrappers: ``ResizeIter`` (an epoch of a fixed number of batches from another
iterator) and ``PrefetchingIter`` (the next batches of one or more iterators read by background
threads while the current one is used)."""
from __future__ import annotations

import queue
import threading

from .data_batch import DataBatch, DataDesc, DataIter

__all__ = ["ResizeIter", "PrefetchingIter"]


class _FromCurrentBatch(DataIter):
    """The batch getters of an iterator that keeps its batch whole (``current_batch``)."""

    current_batch = None

    def getdata(self):
        return self.current_batch.data

    def getlabel(self):
        return self.current_batch.label

    def getindex(self):
        return self.current_batch.index

    def getpad(self):
        return self.current_batch.pad


class ResizeIter(_FromCurrentBatch):
    """``size`` batches of ``data_iter`` an epoch: a shorter iterator starts over within the
    epoch, a longer one is cut. ``reset_internal``: ``reset()`` resets ``data_iter`` too
    (otherwise the next epoch goes on where this one stopped)."""

    def __init__(self, data_iter, size, reset_internal=True):
        super().__init__()
        self.data_iter = data_iter
        self.size = size
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self):
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self):
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True


_END = object()


class _Failed:
    def __init__(self, error):
        self.error = error


class PrefetchingIter(_FromCurrentBatch):
    """One or more iterators read ahead, each by a thread of its own: a batch holds the data
    and labels of all of them, in order (they must have as many batches and the same ``pad``).
    ``rename_data`` / ``rename_label``: a dict per iterator renaming its ``provide_data`` /
    ``provide_label`` entries. An error raised by an iterator's ``next()`` is raised by this
    one's, in the caller's thread."""

    _POLL_S = 0.1       # how often a waiting reader thread looks whether it should stop

    def __init__(self, iters, rename_data=None, rename_label=None):
        super().__init__()
        if not isinstance(iters, list):
            iters = [iters]
        if not iters:
            raise ValueError("PrefetchingIter needs at least one iterator")
        self.n_iter = len(iters)
        self.iters = iters
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch = None
        self._threads = []
        self._start()

    def _start(self):
        self._stop = threading.Event()
        self._queues = [queue.Queue(maxsize=1) for _ in self.iters]
        self._threads = [threading.Thread(target=self._read, args=(it, q, self._stop),
                                          name="trainer-cli-prefetch", daemon=True)
                         for it, q in zip(self.iters, self._queues)]
        for thread in self._threads:
            thread.start()

    @classmethod
    def _read(cls, it, slot, stop):
        while not stop.is_set():
            try:
                item = it.next()
            except StopIteration:
                item = _END
            except BaseException as exc:      # handed to the reader, who raises it
                item = _Failed(exc)
            while not stop.is_set():
                try:
                    slot.put(item, timeout=cls._POLL_S)
                    break
                except queue.Full:
                    continue
            if item is _END or isinstance(item, _Failed):
                return

    def _shutdown(self):
        self._stop.set()
        for slot in self._queues:       # a thread waiting to hand over a batch sees the stop
            try:
                slot.get_nowait()
            except queue.Empty:
                pass
        for thread in self._threads:
            thread.join()

    def __del__(self):
        if getattr(self, "_threads", None):
            self._shutdown()

    def _renamed(self, which, renames):
        descs = []
        for k, it in enumerate(self.iters):
            for desc in getattr(it, which):
                if renames is not None:
                    desc = desc if isinstance(desc, DataDesc) else DataDesc(*desc)
                    desc = DataDesc(renames[k][desc.name], desc.shape, desc.dtype)
                descs.append(desc)
        return descs

    @property
    def provide_data(self):
        return self._renamed("provide_data", self.rename_data)

    @property
    def provide_label(self):
        return self._renamed("provide_label", self.rename_label)

    def reset(self):
        """Stop the readers, reset every iterator and read ahead again from the start."""
        self._shutdown()
        for it in self.iters:
            it.reset()
        self._start()

    def iter_next(self):
        batches = [slot.get() for slot in self._queues]
        for slot, item in zip(self._queues, batches):
            if item is _END or isinstance(item, _Failed):
                slot.put(item)      # its reader has stopped: later calls see the same end
        for item in batches:
            if isinstance(item, _Failed):
                raise item.error
        if all(item is _END for item in batches):
            return False
        if any(item is _END for item in batches) \
                or any(b.pad != batches[0].pad for b in batches):
            raise ValueError("Number of entry mismatches between iterators")
        self.current_batch = DataBatch(sum([b.data for b in batches], []),
                                       sum([b.label for b in batches], []), batches[0].pad,
                                       batches[0].index, provide_data=self.provide_data,
                                       provide_label=self.provide_label)
        return True

    def next(self):
        if self.iter_next():
            return self.current_batch
        raise StopIteration
