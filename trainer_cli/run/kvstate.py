"""The kvstore's own state that an exact resume needs: gradient compression's error-feedback
residuals, saved in a checkpoint's ``kvstore.npz`` under these names:

``r<key>_<position>``  in-process stores (``device``): parameter index ``key``'s residual for the
                       gradient from source device ``position``.
``r<key>_w<rank>``     dist stores: ``key``'s residual for what worker ``rank`` sends to the others.
                       A worker merges its own devices uncompressed, so this is its only one.

A dist job's residuals live on every rank, and only rank 0 writes checkpoints, so saving gathers
them there: :func:`get_residuals` is a collective that every rank calls at every checkpoint. On
resume every rank reads the file and takes its own. A job with another number of ranks than the
checkpoint's cannot use them (a residual belongs to the shard of each batch its rank trained on),
nor can one resumed from a checkpoint saved before they were kept: their residuals restart at zero,
as at the start of a run, and the resume says so. Such a run continues, but not bitwise as the
original job would have.
"""
from __future__ import annotations

import re

import numpy

__all__ = ["get_residuals", "set_residuals", "wire_entries"]

_KEY = re.compile(r"^r(\d+)_(\d+)$")
_WIRE = re.compile(r"^r(\d+)_w(\d+)$")


def _compressing(kv) -> bool:
    return kv is not None and getattr(kv, "gradient_compression", None) is not None


def _dist(kv) -> bool:
    return _compressing(kv) and "dist" in kv.type


def _in_process(kv) -> bool:
    return _compressing(kv) and "dist" not in kv.type and hasattr(kv, "compression_residuals")


def _host(arr):
    return arr.get() if hasattr(arr, "get") else numpy.array(arr)


def get_residuals(kv) -> dict:
    """``{"r<key>_<device position>" or "r<key>_w<rank>": host array}``; empty without compression.

    Under a dist store every rank must call it at the same point; rank 0 gets every rank's
    residuals, the others an empty dict.
    """
    if _dist(kv):
        every = kv.gather_wire_residuals(root=0)
        if every is None:
            return {}
        return {"r%d_w%d" % (key, rank): arr
                for rank, mine in enumerate(every) for key, arr in sorted(mine.items())}
    if not _in_process(kv):
        return {}
    return {"r%d_%d" % (key, pos): _host(arr)
            for (key, pos), arr in sorted(kv.compression_residuals().items())}


def wire_entries(arrays: dict) -> dict:
    """The dist entries of a ``kvstore.npz`` as ``{rank: {key: array}}``."""
    out: dict = {}
    for name, value in arrays.items():
        match = _WIRE.match(name)
        if match is not None:
            out.setdefault(int(match.group(2)), {})[int(match.group(1))] = value
    return out


def set_residuals(kv, arrays: dict, contexts, where) -> str | None:
    """Put saved residuals back (after the Trainer set up compression, which clears them).

    ``where`` names the file (or the checkpoint, when it has none) in the note returned when a
    dist job cannot use what was saved; None otherwise. A residual that does not fit the store's
    keys raises ValueError or KeyError.
    """
    if _dist(kv):
        return _set_wire(kv, wire_entries(arrays), where)
    if not _in_process(kv) or not arrays:
        return None
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
    return None


def _set_wire(kv, by_rank: dict, where) -> str | None:
    restart = ("so they start again from zero on every rank. The run continues, but not bitwise "
               "as it would have %s.")
    if not by_rank:
        return ("%s holds no gradient-compression residuals of the workers (it was saved before "
                "trainer-cli kept them), %s" % (where, restart % "without the interruption"))
    ranks = sorted(by_rank)
    if ranks != list(range(kv.num_workers)):
        saved = "%d rank%s" % (len(ranks), "" if len(ranks) == 1 else "s")
        return ("%s holds the gradient-compression residuals of %s, but this job has %d: each "
                "belongs to the shard of the batches its rank trained on, %s"
                % (where, saved, kv.num_workers, restart % ("with " + saved)))
    kv.set_wire_residuals(by_rank[kv.rank])
    return None
