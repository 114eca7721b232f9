"""MXNet's automatic names for symbol nodes: ``hint + counter`` (``fullyconnected0``), and inside a
block's name scope the block's prefix before it (``dense0_fwd``, ``mlp0__plus0``)."""
from __future__ import annotations

import threading

__all__ = ["NameManager", "Prefix", "current"]

_state = threading.local()


class NameManager:
    """Names for nodes made without one: ``hint`` followed by a per-hint counter."""

    def __init__(self):
        self._counter = {}
        self._old = None

    def get(self, name, hint):
        if name:
            return name
        count = self._counter.get(hint, 0)
        self._counter[hint] = count + 1
        return "%s%d" % (hint, count)

    def __enter__(self):
        self._old = current()
        _state.value = self
        return self

    def __exit__(self, *exc):
        _state.value = self._old
        return False


class Prefix(NameManager):
    """Every name, given or automatic, starts with ``prefix`` (a block's name scope)."""

    def __init__(self, prefix):
        super().__init__()
        self._prefix = prefix

    def get(self, name, hint):
        return self._prefix + super().get(name, hint)


def current() -> NameManager:
    manager = getattr(_state, "value", None)
    if manager is None:
        manager = _state.value = NameManager()
    return manager
