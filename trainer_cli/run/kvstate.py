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

from ..kvstore.dist import wire_entries

__all__ = ["get_residuals", "set_residuals", "wire_entries"]


def get_residuals(kv) -> dict:
    """``{"r<key>_<device position>" or "r<key>_w<rank>": host array}``; empty without compression
    (``KVStore.compression_state``).

    Under a dist store every rank must call it at the same point; rank 0 gets every rank's
    residuals, the others an empty dict.
    """
    return {} if kv is None else kv.compression_state()


def set_residuals(kv, arrays: dict, contexts, where) -> str | None:
    """Put saved residuals back (after the Trainer set up compression, which clears them):
    ``KVStore.load_compression_state``.

    ``where`` names the file (or the checkpoint, when it has none) in the note returned when a
    dist job cannot use what was saved; None otherwise. A residual that does not fit the store's
    keys raises ValueError or KeyError.
    """
    return None if kv is None else kv.load_compression_state(arrays, contexts, where)
