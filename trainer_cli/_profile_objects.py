"""``mx.profiler``'s objects for marking up one's own code, as MXNet 1.9.1 has them: a ``Domain``
groups ``Task``s, ``Frame``s, ``Counter``s and ``Marker``s; an ``Event`` stands alone.

What they record goes where MXNet puts it: spans of tasks under the domain's name, of frames
under ``<domain>,frame``, of events under ``event``, counters' values under the domain's name,
markers under ``<domain>,instant_marker``, in ``dumps()``'s table and ``dump()``'s trace. As in
MXNet they record while the profiler runs and is not paused, and are silent otherwise; a
``stop()`` without its ``start()`` (on that thread) records nothing.
"""
from __future__ import annotations

import threading
import time

from ._profile_record import RECORD

__all__ = ["Domain", "Task", "Frame", "Event", "Counter", "Marker"]

# Chrome's trace scopes of an instant event, for MXNet's marker scopes.
_SCOPES = {"global": "g", "process": "p", "thread": "t", "task": "t", "marker": "t"}


class Domain:
    """Groups profiling objects into a category (a section of the table, of the trace)."""

    def __init__(self, name):
        self.name = str(name)

    def __str__(self):
        return self.name

    def new_task(self, name):
        return Task(self, name)

    def new_frame(self, name):
        return Frame(self, name)

    def new_counter(self, name, value=None):
        return Counter(self, name, value)

    def new_marker(self, name):
        return Marker(self, name)


class _Span:
    """A named span timed from ``start()`` to ``stop()``, each thread its own."""

    def __init__(self, name, category):
        self.name = str(name)
        self._category = category
        self._started = threading.local()

    def start(self):
        self._started.at = time.perf_counter() if RECORD.recording else None

    def stop(self):
        start = getattr(self._started, "at", None)
        self._started.at = None
        if start is not None and RECORD.recording:
            RECORD.add(self.name, start, time.perf_counter() - start, self._category)

    def __str__(self):
        return self.name


class Task(_Span):
    """A unit of work: every pass from ``start()`` to ``stop()`` adds to one row."""

    def __init__(self, domain, name):
        super().__init__(name, domain.name)


class Frame(_Span):
    """A period such as a step or a batch, under ``<domain>,frame``."""

    def __init__(self, domain, name):
        super().__init__(name, domain.name + ",frame")


class Event(_Span):
    """A span of one's code in no domain (``event``)."""

    def __init__(self, name):
        super().__init__(name, "event")


class Counter:
    """A value followed over time: each change is recorded (the trace's counter track)."""

    def __init__(self, domain, name, value=None):
        self.name = str(name)
        self._category = domain.name
        self._value = 0
        self._lock = threading.Lock()
        if value is not None:
            self.set_value(value)

    def _record(self, value):
        if RECORD.recording:
            RECORD.set_counter(self._category, self.name, value)

    def set_value(self, value):
        with self._lock:
            self._value = int(value)
            self._record(self._value)

    def increment(self, delta=1):
        with self._lock:
            self._value += int(delta)
            self._record(self._value)

    def decrement(self, delta=1):
        with self._lock:
            self._value -= int(delta)
            self._record(self._value)

    def __iadd__(self, delta):
        self.increment(delta)
        return self

    def __isub__(self, delta):
        self.decrement(delta)
        return self

    def __str__(self):
        return self.name


class Marker:
    """An instant, marked with ``mark(scope)``: 'global', 'process' (default), 'thread',
    'task' or 'marker'."""

    def __init__(self, domain, name):
        self.name = str(name)
        self.domain = domain

    def mark(self, scope="process"):
        if scope not in _SCOPES:
            raise ValueError("profiler.Marker.mark: scope must be one of %s, got %r"
                             % (", ".join(_SCOPES), scope))
        if RECORD.recording:
            RECORD.mark(self.domain.name + ",instant_marker", self.name, _SCOPES[scope])
