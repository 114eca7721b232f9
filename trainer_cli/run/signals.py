"""Ctrl-C and SIGTERM during training: the first finishes the current step and saves a
checkpoint (the run then exits 130); a second one stops at once (the previous checkpoint stays).
"""
from __future__ import annotations

import signal
import threading

__all__ = ["StopOnSignal"]

_SIGNALS = tuple(s for s in (getattr(signal, "SIGINT", None), getattr(signal, "SIGTERM", None)) if s)


class StopOnSignal:
    """Context manager; ``requested()`` turns true after the first signal. Outside the main
    thread (where handlers cannot be installed) it never does, and signals act as usual."""

    def __init__(self, on_first=None):
        self._requested = None          # the first signal's name, once one came
        self._on_first = on_first
        self._old = {}

    def requested(self) -> bool:
        """Whether a signal came; the first call that sees it runs ``on_first(name)``. That
        happens here, in the loop's own flow, not in the handler: a handler that writes to a
        log the interrupted code was writing to meets a reentrant call on its buffer."""
        if self._requested is None:
            return False
        if self._on_first is not None:
            on_first, self._on_first = self._on_first, None
            on_first(self._requested)
        return True

    def _handle(self, signum, frame):
        if self._requested is not None:
            raise KeyboardInterrupt
        self._requested = signal.Signals(signum).name

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
        return False
