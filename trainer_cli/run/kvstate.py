"""The kvstore's own state that an exact resume needs: gradient compression's error-feedback
residuals, one per (parameter index, source device).

The in-process store keeps them in ``KVStoreLocal._residuals``; it has no public accessor yet, so
this module is the one place that reaches in. Distributed stores keep per-rank residuals that
rank 0 cannot see; they are not saved (a compressed dist run resumes, but not bitwise).
"""
from __future__ import annotations

import re

import numpy

__all__ = ["get_residuals", "set_residuals"]

_KEY = re.compile(r"^r(\d+)_(\d+)$")


def _store_residuals(kv):
    if kv is None or "dist" in getattr(kv, "type", ""):
        return None
    residuals = getattr(kv, "_residuals", None)
    return residuals if isinstance(residuals, dict) else None


def get_residuals(kv) -> dict:
    """``{"r<key>_<device position>": host array}``; empty without compression."""
    residuals = _store_residuals(kv)
    if not residuals:
        return {}
    out = {}
    for (key, pos), arr in sorted(residuals.items()):
        out["r%d_%d" % (key, pos)] = arr.get() if hasattr(arr, "get") else numpy.array(arr)
    return out


def set_residuals(kv, arrays: dict, contexts) -> None:
    """Put saved residuals back (after the Trainer set up compression, which clears them)."""
    residuals = _store_residuals(kv)
    if residuals is None or not arrays:
        return
    for name, value in arrays.items():
        match = _KEY.match(name)
        if match is None:
            continue
        key, pos = int(match.group(1)), int(match.group(2))
        ctx = contexts[pos] if pos < len(contexts) else contexts[0]
        with ctx.device_scope():
            residuals[(key, pos)] = ctx.xp.array(value, dtype=numpy.float32)
