"""What ``mx.profiler`` records while it runs: the timed spans (operators, and the tasks, frames
and events of ``profiler.Domain``'s objects) by category, the counters' values, the markers, and
the events ``dump()`` writes; one recorder per process, guarded by a lock."""
from __future__ import annotations

import threading
import time

__all__ = ["MAX_EVENTS", "RECORD", "OPERATOR"]

# Events kept for dump(); past this many the oldest stay and newer ones only count in dumps().
MAX_EVENTS = 1_000_000

# The category of the operators' spans (MXNet's section of the aggregate table).
OPERATOR = "operator"


class _Local(threading.local):
    depth = 0


class _Record:
    def __init__(self):
        self.lock = threading.Lock()
        self.config = {"filename": "profile.json", "aggregate_stats": False}
        self.running = False
        self.paused = False
        self.local = _Local()
        self.patched = []                     # (owner, name, original)
        self.reset()

    def reset(self):
        self.spans = {}        # category -> {name: [count, total, min, max]} in seconds
        self.counters = {}     # category -> {name: [changes, min, max, last]}
        self.marks = {}        # category -> {name: count}
        self.events = []       # (category, name, phase, start, seconds, thread, args)
        self.dropped = 0
        self.origin = time.perf_counter()

    @property
    def recording(self):
        return self.running and not self.paused

    def _event(self, event):
        if len(self.events) < MAX_EVENTS:
            self.events.append(event)
        else:
            self.dropped += 1

    def add(self, name, start, seconds, category=OPERATOR):
        """A span of ``seconds`` from ``start`` (``time.perf_counter()``)."""
        with self.lock:
            entries = self.spans.get(category)
            if entries is None:
                entries = self.spans[category] = {}
            entry = entries.get(name)
            if entry is None:
                entries[name] = [1, seconds, seconds, seconds]
            else:
                entry[0] += 1
                entry[1] += seconds
                entry[2] = min(entry[2], seconds)
                entry[3] = max(entry[3], seconds)
            self._event((category, name, "X", start, seconds, threading.get_ident(), None))

    def set_counter(self, category, name, value):
        with self.lock:
            entries = self.counters.setdefault(category, {})
            entry = entries.get(name)
            if entry is None:
                entries[name] = [1, value, value, value]
            else:
                entry[0] += 1
                entry[1] = min(entry[1], value)
                entry[2] = max(entry[2], value)
                entry[3] = value
            self._event((category, name, "C", time.perf_counter(), 0.0, threading.get_ident(),
                         {name: value}))

    def mark(self, category, name, scope):
        with self.lock:
            entries = self.marks.setdefault(category, {})
            entries[name] = entries.get(name, 0) + 1
            self._event((category, name, "i", time.perf_counter(), 0.0, threading.get_ident(),
                         scope))


RECORD = _Record()
