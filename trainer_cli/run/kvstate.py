"""The kvstore's own state that an exact resume needs: gradient compression's error-feedback
residuals, one per (parameter index, source device), as files name them (``r<key>_<position>``).

Distributed stores keep per-rank residuals that rank 0 cannot see; they are not saved (a
compressed dist run resumes, but not bitwise).
"""
from __future__ import annotations

import re

import numpy

__all__ = ["get_residuals", "set_residuals"]

_KEY = re.compile(r"^r(\d+)_(\d+)$")


def _in_process(kv) -> bool:
    return kv is not None and "dist" not in kv.type and hasattr(kv, "compression_residuals") \
        and kv.gradient_compression is not None


def get_residuals(kv) -> dict:
    """``{"r<key>_<device position>": host array}``; empty without compression."""
    if not _in_process(kv):
        return {}
    out = {}
    for (key, pos), arr in sorted(kv.compression_residuals().items()):
        out["r%d_%d" % (key, pos)] = arr.get() if hasattr(arr, "get") else numpy.array(arr)
    return out


def set_residuals(kv, arrays: dict, contexts) -> None:
    """Put saved residuals back (after the Trainer set up compression, which clears them)."""
    if not _in_process(kv) or not arrays:
        return
    residuals = {}
    for name, value in arrays.items():
        match = _KEY.match(name)
        if match is None:
            continue
        key, pos = int(match.group(1)), int(match.group(2))
        ctx = contexts[pos] if pos < len(contexts) else contexts[0]
        with ctx.device_scope():
            residuals[(key, pos)] = ctx.xp.array(value, dtype=numpy.float32).reshape(-1)
    kv.set_compression_residuals(residuals)
