"""Closing a ``multiprocessing`` pool in bounded time, whatever its workers did.

``Pool.terminate()`` can block forever: it first takes the task queue's read lock, which an idle
worker holds while it waits for a task, so a worker killed there (the out-of-memory killer,
SIGKILL) leaves the lock taken for good; a worker killed while writing a result does the same to
the result queue's write lock. A worker killed while reading a task leaves the task stream cut
mid-message, and ``terminate()``'s drain of that stream then raises half way (leaving the pool's
thread free to start a worker nobody ends, which interpreter exit then waits for) or waits for
bytes that never come. :func:`close_pool` kills the workers itself (a pool being closed has no
work anyone wants), gives the parent private locks in place of those the dead workers shared and
a task-stream drain that reads bytes, not messages, stops the pool's thread from starting
workers, then runs ``terminate()``/``join()`` on a daemon thread that it waits for at most
``timeout`` seconds. It reaches into the pool's private fields (``_pool``, ``_inqueue``,
``_outqueue``, ``_worker_handler``, ``_change_notifier``, ``_terminate``), each with a
fallback, because the standard library offers no bounded way to end a pool.
"""
from __future__ import annotations

import os
import sys
import threading
import time

__all__ = ["close_pool", "CLOSE_TIMEOUT_S", "leave_stops_to_parent"]

# A pool whose processes are all killed ends in milliseconds; this bounds the rare rest.
CLOSE_TIMEOUT_S = 5.0
# How often the wait kills a worker the pool started in place of a killed one.
_KILL_EVERY_S = 0.05


def leave_stops_to_parent(parent: int):
    """In a forked worker: the stops are the parent's to handle. Forked under the parent's stop
    handlers (a training run's raise), a worker would print a traceback per signal and lose its
    task: a terminal's Ctrl-C or hang-up, sent to the whole process group, is ignored here, so is
    SIGUSR1 (a relayed Ctrl-C under ``trainer run --workers``), and SIGTERM ends the worker by its
    default action, silently. A worker also goes as soon as its parent ``parent`` does (killed
    with SIGKILL, the parent cannot end it)."""
    import signal

    for name, action in (("SIGINT", signal.SIG_IGN), ("SIGHUP", signal.SIG_IGN),
                         ("SIGTERM", signal.SIG_DFL), ("SIGUSR1", signal.SIG_IGN)):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), action)

    def watch():
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="watch-parent").start()


def close_pool(pool, timeout: float = CLOSE_TIMEOUT_S) -> bool:
    """End ``pool`` (a process or thread pool) within about ``timeout`` seconds: its worker
    processes are killed with SIGKILL, its threads ended. True when ``terminate()`` and
    ``join()`` finished; False when they were left blocked on a daemon thread or stopped half way
    (the processes are killed all the same, no new one starts, and interpreter exit does not
    wait for that pool)."""
    deadline = time.monotonic() + timeout
    # Unshared also when no worker is listed: the pool's own thread may be starting one in
    # place of a dead worker right now, which would take the shared task-queue lock and be
    # killed holding it. A thread pool's queues have no such locks.
    ended = _all_ended(_kill(pool), deadline)
    if sys.is_finalizing():
        # A pool collected at interpreter exit (a DataLoader left in a script's globals): no new
        # thread starts now and Thread.start() would wait for it forever. The workers are dead;
        # the pool's exit finalizer is cancelled so that nothing touches the dead queues.
        _cancel_exit_finalizer(pool)
        return ended
    if ended:
        _unshare_locks(pool)
        _drain_tasks_as_bytes(pool)
    # Only now, with the locks unshared: the pool's thread, once stopped, sends the task thread
    # the sentinel that makes it write to the result queue, whose lock a killed worker may hold.
    # Stopped here and not left to terminate(), which can fail after its first step: a worker
    # started then would live on unended (waiting forever on a lock held when it forked), and
    # interpreter exit would wait for it.
    _stop_worker_starts(pool, deadline)
    _all_ended(_kill(pool), deadline)
    finished = []
    ender = threading.Thread(target=_terminate_and_join, args=(pool, finished), daemon=True,
                             name="close_pool")
    ender.start()
    while ender.is_alive():
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ender.join(min(_KILL_EVERY_S, left))
        _kill(pool)      # the pool may have started workers in place of the killed ones
    if not ender.is_alive():
        return bool(finished) and _all_ended(_kill(pool), deadline)
    _kill(pool)
    # terminate() has run the pool's exit finalizer already; cancelled in any case so that
    # interpreter exit never runs it again and blocks where the thread is blocked.
    _cancel_exit_finalizer(pool)
    return False


def _cancel_exit_finalizer(pool):
    finalizer = getattr(pool, "_terminate", None)
    if finalizer is not None and hasattr(finalizer, "cancel"):
        finalizer.cancel()


def _stop_worker_starts(pool, deadline):
    """What ``terminate()`` does first: the pool's thread is told to stop starting workers,
    woken, and waited for (until ``deadline``)."""
    handler = getattr(pool, "_worker_handler", None)
    if handler is None or not hasattr(handler, "_state"):
        return
    from multiprocessing.pool import TERMINATE
    handler._state = TERMINATE
    notifier = getattr(pool, "_change_notifier", None)
    if notifier is not None:
        try:
            notifier.put(None)
        except (OSError, ValueError):
            pass
    if handler.is_alive() and handler is not threading.current_thread():
        handler.join(max(0.0, deadline - time.monotonic()))


def _kill(pool) -> list:
    """SIGKILL to the pool's live worker processes (a thread pool has none); returns them."""
    processes = [p for p in list(getattr(pool, "_pool", None) or ())
                 if hasattr(p, "kill") and getattr(p, "pid", None)]
    for process in processes:
        try:
            process.kill()     # sends nothing to a process already reaped (its pid is reused)
        except (OSError, ValueError):
            pass
    return processes


def _all_ended(processes, deadline) -> bool:
    """Whether every one of ``processes`` ended by ``deadline``. The pool's own thread reaps
    its dead workers too, and a ``join()`` that loses that race returns with no exit code yet:
    an exit code is what shows that a process is gone."""
    for process in processes:
        while process.exitcode is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            process.join(min(_KILL_EVERY_S, left))
            if process.exitcode is None:
                time.sleep(0.001)
    return True


def _unshare_locks(pool):
    # Every process that shared these locks is dead, possibly holding one; from now only this
    # process's threads use them (terminate() drains the task queue, sends the result queue its
    # sentinel), so a lock of its own serves, and one a worker died holding no longer blocks.
    for queue, name in ((getattr(pool, "_inqueue", None), "_rlock"),
                        (getattr(pool, "_outqueue", None), "_wlock")):
        if getattr(queue, name, None) is not None:
            setattr(queue, name, threading.Lock())


class _ByteDrain:
    """Stands in for the task queue's reading end once every worker is dead: ``terminate()``
    drains it only to unblock the pool's task thread, and a stream a killed worker cut
    mid-message cannot be read as messages (a wrong length waits forever, a wrong body raises)."""

    def __init__(self, reader):
        self._reader = reader

    def poll(self, timeout=0.0):
        return self._reader.poll(timeout)

    def recv(self):
        os.read(self._reader.fileno(), 1 << 16)   # poll() said readable: returns at once

    def __getattr__(self, name):
        return getattr(self._reader, name)


def _drain_tasks_as_bytes(pool):
    queue = getattr(pool, "_inqueue", None)
    reader = getattr(queue, "_reader", None)
    if reader is not None and hasattr(reader, "fileno") and hasattr(reader, "poll"):
        queue._reader = _ByteDrain(reader)


def _terminate_and_join(pool, finished: list):
    try:
        pool.terminate()
        pool.join()
    except Exception:   # a pool already broken: the processes are killed, nothing to report
        return
    finished.append(True)
