"""One CUDA launch over many tensors: a table with a row per tensor (its element count, then
array addresses); block row ``blockIdx.y`` takes one tensor and its threads stride over the
elements. The optimizer's multi-tensor kernels and the inf/NaN check launch this way."""
from __future__ import annotations

import numpy

__all__ = ["THREADS", "blocks_for", "launch"]

THREADS = 256
_MAX_BLOCKS = 1024          # per tensor; threads stride over larger tensors
_MAX_ROWS = 65535           # gridDim.y's limit


def blocks_for(largest: int, per_thread: int = 1) -> int:
    """Blocks per tensor for tables whose largest tensor has ``largest`` elements (> 0), each
    thread taking ``per_thread`` of them at a time."""
    return min(_MAX_BLOCKS, -(-largest // (THREADS * per_thread)))


def launch(kernel, table, count, blocks, *args):
    """``kernel(table, first, *args)`` over the ``count`` rows of ``table``, in launches of at
    most ``_MAX_ROWS`` block rows (``first``: the launch's first row)."""
    for first in range(0, count, _MAX_ROWS):
        kernel((blocks, min(_MAX_ROWS, count - first)), (THREADS,),
               (table, numpy.int32(first)) + tuple(args))
