"""The CPU row pass of an embedding's row_sparse gradient (numba; see ``_jit``).

Once the looked-up ids are sorted with their positions packed into the low bits
(``sparse._sorted_keys``), one pass writes each distinct id once and its row: the output row of
its first lookup, plus the rows of its later lookups in lookup order. In NumPy that is the
unpacking, a gather of the rows in sorted order, a comparison of neighbours and, with repeats,
``add.at``: five passes and three temporaries, on a step that does little else. The sums are
the NumPy path's: each id's first row, then its later rows added one at a time.

``group_rows`` returns None where it does not apply (no numba, fewer than ``MIN_SIZE`` values,
another dtype or layout); ``tests/test_sparse_gluon.py`` compares the bits of both paths.
"""
from __future__ import annotations

import numpy

from .. import _jit

__all__ = ["group_rows", "MIN_SIZE"]

MIN_SIZE = 1 << 12
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)


def _group_rows_loop(keys, shift, grads, ids, values):
    mask = (1 << shift) - 1
    width = grads.shape[1]
    count, previous = 0, -1
    for k in range(keys.shape[0]):
        key = keys[k]
        row = key >> shift
        src = grads[key & mask]
        if row == previous:
            dst = values[count - 1]
            for j in range(width):
                dst[j] = dst[j] + src[j]
        else:
            ids[count] = row
            dst = values[count]
            for j in range(width):
                dst[j] = src[j]
            count += 1
            previous = row
    return count


_group_rows = _jit.Kernel(_group_rows_loop)


def group_rows(keys, shift, grads):
    """``(ids, values)`` from sorted packed ``keys`` (id << shift | position) and ``grads``
    (one C-contiguous row per position, 2-D): each id once, its rows summed in position order;
    None where the kernel does not apply."""
    dtype = grads.dtype
    if type(grads) is not numpy.ndarray or grads.size < MIN_SIZE or grads.ndim != 2 \
            or (dtype is not _F32 and dtype is not _F64) or not grads.flags.c_contiguous \
            or not _jit.ready():
        return None
    ids = numpy.empty(keys.shape[0], dtype=numpy.int64)
    values = numpy.empty(grads.shape, dtype=dtype)
    count = _group_rows(keys, shift, grads, ids, values)
    if count == keys.shape[0]:
        return ids, values
    # Repeats: the distinct rows alone, not a buffer sized for every lookup.
    return ids[:count].copy(), values[:count].copy()
