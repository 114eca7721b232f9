"""The CPU pass of an embedding's row_sparse gradient (numba; see ``_jit``).

One call sorts the looked-up ids and writes each distinct id once with its row: the output row
of its first lookup, plus the rows of its later lookups in lookup order. The sort is a stable LSD
radix sort of the ids (11 bits a pass, two passes for a table of up to 4M rows), carrying each
id's position: on a batch of 1,000 random ids it takes a third of NumPy's sort, and the grouping
that follows needs no second pass. In NumPy the same is a sort, a gather of the rows in sorted
order, a comparison of neighbours and, with repeats, ``add.at``: five passes and three
temporaries, on a step that does little else. The sums are the NumPy path's: each id's first
row, then its later rows added one at a time.

``group_rows`` returns None where it does not apply (no numba, fewer than ``MIN_SIZE`` values,
another dtype or layout); ``tests/test_sparse_gluon.py`` compares the bits of both paths.
"""
from __future__ import annotations

import numpy

from .. import _jit

__all__ = ["group_rows", "MIN_SIZE"]

MIN_SIZE = 1 << 12
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)


def _group_rows_loop(ids, bits, grads, out_ids, values):
    n = ids.shape[0]
    order = numpy.arange(n)
    spare = numpy.empty(n, numpy.int64)
    counts = numpy.empty(1 << 11, numpy.int64)
    mask = (1 << 11) - 1
    shift = 0
    while shift < bits:         # one stable counting pass per digit, lowest digit first
        counts[:] = 0
        for i in range(n):
            counts[(ids[order[i]] >> shift) & mask] += 1
        total = 0
        for d in range(counts.shape[0]):
            c = counts[d]
            counts[d] = total
            total += c
        for i in range(n):
            k = order[i]
            d = (ids[k] >> shift) & mask
            spare[counts[d]] = k
            counts[d] += 1
        order, spare = spare, order
        shift += 11
    width = grads.shape[1]
    count, previous = 0, -1
    for k in range(n):
        position = order[k]
        row = ids[position]
        src = grads[position]
        if count and row == previous:
            dst = values[count - 1]
            for j in range(width):
                dst[j] = dst[j] + src[j]
        else:
            out_ids[count] = row
            dst = values[count]
            for j in range(width):
                dst[j] = src[j]
            count += 1
            previous = row
    return count


_group_rows = _jit.Kernel(_group_rows_loop)


def group_rows(ids, table_rows, grads):
    """``(ids, values)`` for looked-up ``ids`` (int64 in ``[0, table_rows)``) and ``grads`` (one
    C-contiguous row per id, 2-D): each id once, sorted, its rows summed in lookup order; None
    where the kernel does not apply."""
    dtype = grads.dtype
    if type(grads) is not numpy.ndarray or grads.size < MIN_SIZE or grads.ndim != 2 \
            or (dtype is not _F32 and dtype is not _F64) or not grads.flags.c_contiguous \
            or type(ids) is not numpy.ndarray or ids.dtype != numpy.int64 or ids.ndim != 1 \
            or not _jit.ready():
        return None
    out_ids = numpy.empty(ids.shape[0], dtype=numpy.int64)
    values = numpy.empty(grads.shape, dtype=dtype)
    count = _group_rows(ids, max(1, int(table_rows - 1).bit_length()), grads, out_ids, values)
    if count == ids.shape[0]:
        return out_ids, values
    # Repeats: the distinct rows alone, not a buffer sized for every lookup.
    return out_ids[:count].copy(), values[:count].copy()
