"""One job at a time on a thread of its own: a checkpoint written while training goes on.

NumPy, hashlib, zlib and file I/O release the GIL, so the job costs the training thread little.
:meth:`BackgroundJob.start` first waits for the job before it, so at most one copy of the state
is held and jobs finish in order; :meth:`BackgroundJob.wait` hands back the job's result or
raises the exception it raised, in the calling thread.

A job given as a generator of small steps (:meth:`BackgroundJob.start_steps`) runs at the lowest
CPU priority, in the cycles training leaves: on a machine whose cores training keeps busy, a
job at equal priority would stall training's parallel kernels (each waits for its slowest
thread). Whoever waits for such a job takes over its remaining steps at its own priority, so a
job starved by a busy machine never holds training up longer than its work takes.
"""
from __future__ import annotations

import os
import sys
import threading

from .._stepwise import advance

__all__ = ["BackgroundJob"]

_LOWEST = 19


class BackgroundJob:
    def __init__(self):
        self._thread = None
        self._outcome = (None, None)
        self._steps = None            # the generator of a start_steps job
        self._hand_over = threading.Event()

    def start(self, fn, *args):
        """Run ``fn(*args)`` on a new thread, after the previous job ended (whose result is
        dropped: call :meth:`wait` first to get it)."""
        self.wait()
        self._start(lambda: fn(*args))

    def start_steps(self, steps):
        """Run the generator ``steps`` to its end (its return value is the job's result) on a
        new thread at the lowest priority, after the previous job ended; :meth:`wait` finishes
        it in the waiting thread."""
        self.wait()
        self._steps = steps
        self._hand_over.clear()

        def run():
            _lowest_priority()
            ended, value = advance(steps, self._hand_over)
            if ended:
                self._steps = None
            return value

        self._start(run)

    def _start(self, job):
        self._outcome = (None, None)

        def run():
            try:
                self._outcome = (job(), None)
            except BaseException as exc:  # handed to the thread that waits
                self._steps = None
                self._outcome = (None, exc)

        # Not a daemon: an interpreter exiting with a save under way finishes it first.
        self._thread = threading.Thread(target=run, name="trainer-checkpoint")
        self._thread.start()

    def wait(self):
        """The running or last job's result (None when there is none); its exception re-raised."""
        if self._thread is None:
            return None
        self._hand_over.set()
        self._thread.join()
        self._thread = None
        result, error = self._outcome
        self._outcome = (None, None)
        steps, self._steps = self._steps, None
        if error is not None:
            raise error
        if steps is not None:   # handed over: the rest here
            _, result = advance(steps)
        return result


def _lowest_priority():
    """Lower this thread's CPU priority (Linux: a thread's nice value is its own)."""
    if not sys.platform.startswith("linux"):
        return          # elsewhere the call would take a thread id for a process id
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _LOWEST)
    except OSError:
        pass
