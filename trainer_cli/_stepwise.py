"""Work written as a generator of small steps, whose return value is the work's result: a thread
can run some of the steps and another thread the rest (``run.background``)."""
from __future__ import annotations

__all__ = ["advance", "run_to_end"]


def advance(steps, stop=None):
    """Run the generator ``steps`` until it ends, ``(True, its return value)``, or until the event
    ``stop`` is set, ``(False, None)``: then another call (on any thread) goes on from there."""
    while stop is None or not stop.is_set():
        try:
            next(steps)
        except StopIteration as done:
            return True, done.value
    return False, None


def run_to_end(steps):
    """The return value of the generator ``steps``, run to its end."""
    return advance(steps)[1]
