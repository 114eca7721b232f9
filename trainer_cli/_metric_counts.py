"""Accuracy's count of one batch in one compiled pass: each row's arg-max taken and compared with
its label in the same loop.

``Accuracy.update`` by NumPy makes four arrays for a batch (the arg-maxes, two int64 casts, the
comparison) and sums one of them: about 3 us of calls for a small classifier's 32 x 4 outputs in
a tight loop, more between the other work of a 200 us training step, where the runner counts
each step's batch. The loop does what those calls do, to the same count:

- the arg-max is NumPy's: the first maximum of a row, and the first NaN where a row has one
  (NumPy orders NaN above every number);
- a label counts as ``label.astype(int64)``: a float is truncated toward zero; NaN, infinities
  and magnitudes beyond int64 (which that cast turns into int64's minimum) match no column.

It runs only where numba is already loaded (the runner loads it before training), on 2-D float32
or float64 predictions and 1-D float or integer labels; elsewhere NumPy counts.
"""
from __future__ import annotations

import numpy

from . import _jit

__all__ = ["correct_count"]

_PRED_DTYPES = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))
_LABEL_DTYPES = _PRED_DTYPES + (numpy.dtype(numpy.int32), numpy.dtype(numpy.int64))
# Floats at least this large (in magnitude) are outside int64's range, or at its minimum: none
# of them is a column's index after NumPy's cast.
_INT64_LIMIT = 9.2e18


def _count_loop(pred, label):
    count = 0
    for i in range(pred.shape[0]):
        best = pred[i, 0]
        at = 0
        if best == best:
            for j in range(1, pred.shape[1]):
                value = pred[i, j]
                if value > best:
                    best = value
                    at = j
                elif value != value:
                    at = j
                    break
        y = label[i]
        if y == y and -_INT64_LIMIT < y < _INT64_LIMIT and numpy.int64(y) == at:
            count += 1
    return count


_COUNT = _jit.Kernel(_count_loop)


def correct_count(pred, label):
    """How many rows of ``pred`` (samples x classes) have their arg-max equal to ``label``'s entry
    (one per row), as ``Accuracy`` counts them; None where the compiled loop does not apply
    (then NumPy's calls count)."""
    if (type(pred) is not numpy.ndarray or type(label) is not numpy.ndarray
            or pred.ndim != 2 or label.ndim != 1 or pred.shape[0] != label.shape[0]
            or pred.shape[1] == 0 or pred.dtype not in _PRED_DTYPES
            or label.dtype not in _LABEL_DTYPES or not _jit.loaded()):
        return None
    return int(_COUNT(pred, label))
