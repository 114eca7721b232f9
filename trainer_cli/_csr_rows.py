"""Rows of a CSR matrix held as its three arrays, gathered in a given order (NumPy only: the
runner's batches of CSR features and the io iterators' csr shuffles and batches take it)."""
from __future__ import annotations

import numpy

__all__ = ["gather_rows"]


def gather_rows(indptr, indices, values, rows):
    """``(indptr, indices, values)`` of the rows ``rows`` (in that order, repeats allowed) of the
    CSR matrix ``(indptr, indices, values)``; each row keeps its column order."""
    rows = numpy.asarray(rows, dtype=numpy.int64)
    lengths = numpy.diff(indptr)[rows]
    new_indptr = numpy.concatenate([[0], numpy.cumsum(lengths)]).astype(indptr.dtype)
    # Each kept value's place: its row's old start, plus its place in the new row.
    picked = numpy.repeat(indptr[:-1][rows] - new_indptr[:-1], lengths) + \
        numpy.arange(new_indptr[-1], dtype=indptr.dtype)
    return new_indptr, indices[picked], values[picked]
