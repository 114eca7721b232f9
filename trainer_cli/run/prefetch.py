"""Reading the next batch's features while the current step computes.

Worth it for memory-mapped data, whose rows come from the disk (NumPy's gathers release the GIL
while they copy); for data in memory a batch is gathered in microseconds and a thread would only
add hand-overs. Reads are pure functions of the row ids, so results are the same bits whether a
batch was read ahead or not.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

__all__ = ["Prefetcher"]


class Prefetcher:
    """One read ahead at a time: :meth:`ahead` starts ``read(rows)`` on a worker thread,
    :meth:`get` returns it for the same ``rows`` object (or reads now for any other); an error
    of the read is raised by :meth:`get`, in the training thread."""

    def __init__(self, read):
        self._read = read
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="trainer-prefetch")
        self._pending = None    # (rows object, future)

    def ahead(self, rows):
        self._drop()
        self._pending = (rows, self._pool.submit(self._read, rows))

    def get(self, rows):
        if self._pending is not None and self._pending[0] is rows:
            future = self._pending[1]
            self._pending = None
            return future.result()
        return self._read(rows)

    def _drop(self):
        if self._pending is not None:
            self._pending[1].cancel()
            self._pending = None

    def close(self):
        self._drop()
        self._pool.shutdown(wait=True)
