"""Reading the next batch's features while the current step computes.

Worth it for memory-mapped data, whose rows come from the disk (NumPy's gathers release the GIL
while they copy), and for images, made on the thread while the step's kernels and GEMMs leave it
the interpreter, or by worker processes it waits for; for data in memory a batch is gathered in
microseconds and a thread would only add hand-overs. Reads are pure functions of the row ids,
so results are the same bits whether a batch was read ahead or not.
"""
from __future__ import annotations

import collections
from concurrent.futures import ThreadPoolExecutor

__all__ = ["Prefetcher", "read_each"]

# Reads kept: the loop asks for the next step's batch before it takes this step's, which was
# asked for a step earlier and may still be on its way.
DEPTH = 2


class Prefetcher:
    """Reads ahead on a worker thread, in order: :meth:`ahead` starts ``read(rows)``;
    :meth:`get` returns it for the same ``rows`` object (or reads now for any other), dropping
    the reads asked for before it; an error of the read is raised by :meth:`get`, in the
    training thread. ``hits`` counts the gets a read ahead served."""

    def __init__(self, read):
        self._read = read
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="trainer-prefetch")
        self._pending = collections.deque()    # (rows object, future), oldest first
        self.hits = 0

    def ahead(self, rows):
        while len(self._pending) >= DEPTH:
            self._pending.popleft()[1].cancel()
        self._pending.append((rows, self._pool.submit(self._read, rows)))

    def get(self, rows):
        if any(pending is rows for pending, _ in self._pending):
            while True:
                pending, future = self._pending.popleft()
                if pending is rows:
                    self.hits += 1
                    return future.result()
                future.cancel()
        return self._read(rows)

    def _drop(self):
        while self._pending:
            self._pending.popleft()[1].cancel()

    def close(self):
        self._drop()
        self._pool.shutdown(wait=True)


def read_each(read, parts: list, ahead: bool):
    """``(part, read(part))`` for each of ``parts`` in order; with ``ahead``, each read on a
    thread while the caller works on the part before (the first one too). Close the generator
    (``contextlib.closing``) where the caller may stop early: the thread ends then."""
    if not ahead:
        for part in parts:
            yield part, read(part)
        return
    prefetcher = Prefetcher(read)
    try:
        if parts:
            prefetcher.ahead(parts[0])
        for i, part in enumerate(parts):
            if i + 1 < len(parts):
                prefetcher.ahead(parts[i + 1])
            yield part, prefetcher.get(part)
    finally:
        prefetcher.close()
