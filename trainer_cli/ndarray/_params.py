"""Operator arguments as MXNet's parameter parser reads them, for the operators that check
their own."""
from __future__ import annotations

__all__ = ["flag"]


def flag(op, name, value):
    """A flag: a bool, a number, or the strings "true"/"false"/"1"/"0" (any case), as MXNet's
    parser takes them from a graph's attributes; anything else a ValueError naming it."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "1"):
            return True
        if text in ("false", "0"):
            return False
        raise ValueError("%s: %s must be a boolean, got %r" % (op, name, value))
    return bool(value)
