"""An op's independent pieces of work on several host threads, each with a one-thread BLAS.

A convolution on host arrays works a few images at a time (``nn._convolution``): each piece is an
im2col, a GEMM and an epilogue small enough to stay in a core's cache. OpenBLAS's own threads
would split each piece's GEMM instead and meet at every block of it; on pieces this small two
threads lost to one (the CIFAR-sized layer's backward: 47 ms as whole GEMMs on two threads, 62 to
87 ms as pieces). Here each thread takes whole pieces (numba's kernels and NumPy's GEMMs release
the GIL) while the BLAS runs one thread per call.

The thread count is the BLAS's own at the call (``threads: N`` in a run, ``OPENBLAS_NUM_THREADS``,
threadpoolctl), so a process limited to one thread stays on one. What a piece computes does not
depend on the thread that runs it, and ``run``'s ``combine`` sees the pieces' results in index
order whatever the thread count: the results are the same bits on any number of threads.
"""
from __future__ import annotations

import contextvars
import itertools
import os
import threading

__all__ = ["run", "run_summed", "in_ranges", "blas_threads", "even_pieces", "pieces",
           "one_blas_thread"]

_controllers = None     # threadpoolctl's controllers of the loaded BLAS libraries, found once
_busy = threading.Lock()   # one parallel run at a time; a concurrent caller runs its pieces alone


def _blas():
    global _controllers
    if _controllers is None:
        try:
            from threadpoolctl import ThreadpoolController

            _controllers = ThreadpoolController().select(user_api="blas").lib_controllers
        except Exception:   # declared as a dependency; without it the BLAS keeps its own threads
            _controllers = []
    return _controllers


def blas_threads() -> int:
    """The largest thread count of the loaded BLAS libraries (1 where none is known)."""
    return max([lib.num_threads for lib in _blas()], default=1)


class one_blas_thread:
    """A ``with`` block whose GEMMs run on one BLAS thread: for a loop of GEMMs too small to
    split (a recurrent layer's step), where every call would make the BLAS's threads meet, and
    wait on a busy machine for a core each time. OpenBLAS splits the rows and columns of the
    product, never the sum, so the bits do not change. Nested in ``run`` or another such block
    (or with one thread already), it changes nothing."""

    __slots__ = ("_libs",)

    def __enter__(self):
        self._libs = []
        if blas_threads() > 1 and _busy.acquire(blocking=False):
            self._libs = [(lib, lib.num_threads) for lib in _blas()]
            for lib, _ in self._libs:
                lib.set_num_threads(1)
        return self

    def __exit__(self, *exc):
        if self._libs:
            for lib, n in self._libs:
                lib.set_num_threads(n)
            _busy.release()
        return False


def even_pieces(n: int, parts: int) -> list:
    """``[(start, stop)]`` of ``parts`` pieces of ``range(n)``, the first ``n % parts`` one longer
    (NumPy's ``array_split`` rule, MXNet's ``split_data``); with fewer items than pieces the last
    pieces are empty."""
    each, extra = divmod(n, parts)
    bounds, start = [], 0
    for i in range(parts):
        stop = start + each + (i < extra)
        bounds.append((start, stop))
        start = stop
    return bounds


def pieces(n: int, item_size: int, budget: int) -> list:
    """``even_pieces`` of ``n`` items of ``item_size`` values each, as few as keep every piece
    within ``budget`` values (one item at least); one empty piece for no items. Where pieces of
    several items come to an odd count above one, one piece fewer: on two threads an odd count
    keeps one thread waiting for the other's last piece (GoogLeNet's convolutions at batch 32
    made five pieces, one thread taking three: its step on two threads 0.965 of that time with
    four), while pieces up to half as large again as the budget cost one thread nothing
    measurable (GoogLeNet, MobileNet, ResNet, LeNet). The count depends on the sizes alone,
    never on the thread count, so that the pieces' sums keep their bits on any number of
    threads."""
    per = max(1, budget // item_size)
    count = max(1, -(-n // per))
    if count > 2 and count % 2 and per > 1:
        count -= 1
    return even_pieces(n, count)


def _forget_pool():
    # A forked child has the workers' objects but none of their threads.
    global _workers, _busy
    _workers, _busy = [], threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


class _Worker:
    """A daemon thread that runs the pieces of whichever ``run`` last handed it its share.

    Not a ``ThreadPoolExecutor``: its submit and the future's wake-up cost about 60 us a run on
    this 2-core VM, and a LeNet step makes eight runs. Here a run sets the job and notifies (a
    few us), and waits only for the pieces a worker actually took: one that wakes after the
    caller has taken every piece finds none left and goes back to sleep unwaited for."""

    def __init__(self):
        self._cond = threading.Condition(threading.Lock())
        self._job = None
        threading.Thread(target=self._loop, name="trainer-piece", daemon=True).start()

    def give(self, job):
        with self._cond:
            self._job = job        # a job not yet picked up has no pieces left: all were taken
            self._cond.notify()

    def _loop(self):
        while True:
            with self._cond:
                while self._job is None:
                    self._cond.wait()
                job, self._job = self._job, None
            context, share, piece, indices, count = job
            try:
                context.run(share, piece, indices, count)
            except Exception:   # share keeps a piece's error for its run; never lose the thread
                pass


_workers = []


def _workers_for(count: int) -> list:
    while len(_workers) < count:
        _workers.append(_Worker())
    return _workers[:count]


class _Ordered:
    """Hands each piece's result to ``combine`` in index order, and stops every thread at the
    first error (every wait ends: on its turn, or on an error anywhere)."""

    def __init__(self, combine):
        self.combine = combine
        self.turn = 0
        self.running = 0        # pieces taken and not finished
        self.error = None
        self.cond = threading.Condition()

    def failed(self, exc):
        with self.cond:
            if self.error is None:
                self.error = exc
            self.cond.notify_all()

    def give(self, index, value):
        """Combine piece ``index``'s result on its turn; the piece stops counting as running.
        Without ``combine`` there is no turn to wait for: a thread that finished a piece takes
        the next one at once, not after the pieces before it finished on other threads."""
        with self.cond:
            if self.combine is None:
                self.running -= 1
                self.cond.notify_all()
                return
            try:
                while self.turn != index and self.error is None:
                    self.cond.wait()
                if self.error is None:
                    try:
                        if self.combine is not None:
                            self.combine(index, value)
                    except BaseException as exc:
                        self.error = exc
                    self.turn += 1
            finally:
                self.running -= 1
                self.cond.notify_all()

    def share(self, piece, indices, count):
        # Each thread takes the next piece not yet taken: one slowed by other work (a BLAS
        # thread still spinning after its last GEMM, another process) takes fewer.
        while True:
            with self.cond:
                index = next(indices)
                if index >= count or self.error is not None:
                    return
                self.running += 1
            try:
                value = piece(index)
            except BaseException as exc:
                with self.cond:
                    self.running -= 1
                    if self.error is None:
                        self.error = exc
                    self.cond.notify_all()
                return
            self.give(index, value)

    def wait(self):
        """Until every piece taken has finished and been combined (a worker's included)."""
        with self.cond:
            while self.running:
                self.cond.wait()


def run(count: int, piece, combine=None):
    """``piece(i)`` for every ``i < count``, then ``combine(i, result)`` in order of ``i``, on up
    to the BLAS's thread count of threads; the first error is raised once every piece taken has
    finished (a signal while waiting, at once: the other threads stop after their piece)."""
    threads = min(count, blas_threads()) if count > 1 else count   # one piece: no BLAS query
    ordered = _Ordered(combine)
    indices = itertools.count()     # taken under ordered's lock
    if threads <= 1 or not _busy.acquire(blocking=False):
        ordered.share(piece, indices, count)
    else:
        libs = [(lib, lib.num_threads) for lib in _blas()]
        try:
            for lib, _ in libs:
                lib.set_num_threads(1)
            # Each worker in a copy of the caller's context: NumPy's errstate is kept there.
            for worker in _workers_for(threads - 1):
                worker.give((contextvars.copy_context(), ordered.share, piece, indices, count))
            ordered.share(piece, indices, count)
            ordered.wait()
        except BaseException as exc:   # a signal while waiting: the other threads stop too
            ordered.failed(exc)
            raise
        finally:
            for lib, n in libs:
                lib.set_num_threads(n)
            _busy.release()
    if ordered.error is not None:
        raise ordered.error


def in_ranges(count: int, values: int, split: int, work):
    """``work(lo, hi)`` over ranges covering ``range(count)`` items: the whole range at once when
    the work touches fewer than ``split`` ``values`` (or there is one item), else twice the
    BLAS's thread count of ranges, on that many threads. Each item's arithmetic must not depend
    on the range it falls in, so that the bits do not depend on the thread count."""
    if values < split or count < 2:
        work(0, count)
        return
    ranges = even_pieces(count, min(count, 2 * blas_threads()))
    run(len(ranges), lambda i: work(*ranges[i]))


def run_summed(count: int, piece):
    """``run(count, piece)``, returning the sum of the results other than None, added in index
    order into the first of them (None when there is none): the same bits on any thread count."""
    total = []

    def add(index, value):
        if value is not None:
            if total:
                total[0] += value
            else:
                total.append(value)
    run(count, piece, add)
    return total[0] if total else None
