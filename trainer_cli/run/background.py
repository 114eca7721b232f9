"""One job at a time on a thread of its own: a checkpoint written while training goes on.

NumPy, hashlib and file writes release the GIL, so the job costs the training thread little.
:meth:`BackgroundJob.start` first waits for the job before it, so at most one copy of the state
is held and jobs finish in order; :meth:`BackgroundJob.wait` hands back the job's result or
raises the exception it raised, in the calling thread.
"""
from __future__ import annotations

import threading

__all__ = ["BackgroundJob"]


class BackgroundJob:
    def __init__(self):
        self._thread = None
        self._outcome = (None, None)

    def start(self, fn, *args):
        """Run ``fn(*args)`` on a new thread, after the previous job ended (whose result is
        dropped: call :meth:`wait` first to get it)."""
        self.wait()
        self._outcome = (None, None)

        def run():
            try:
                self._outcome = (fn(*args), None)
            except BaseException as exc:  # handed to the thread that waits
                self._outcome = (None, exc)

        # Not a daemon: an interpreter exiting with a save under way finishes it first.
        self._thread = threading.Thread(target=run, name="trainer-checkpoint")
        self._thread.start()

    def wait(self):
        """The running or last job's result (None when there is none); its exception re-raised."""
        if self._thread is None:
            return None
        self._thread.join()
        self._thread = None
        result, error = self._outcome
        self._outcome = (None, None)
        if error is not None:
            raise error
        return result
