"""Whether arrays hold only finite values: the check a training step makes on every weight,
optimizer state and gradient, so it is one call, not one per array.

Small float32/float64 host arrays (most arrays of most models) go to one numba loop over all of
them, which adds ``x * 0`` up: 0 for every finite ``x``, NaN for an inf or NaN, and no overflow
to mistake for one. Large arrays take NumPy's vectorised sum (NaN and inf propagate into it; a
non-finite sum of finite values that overflowed is told apart by the exact test), as do device
arrays, float16 and strided views.
"""
from __future__ import annotations

import math

import numpy

from .. import _jit
from .interop import array_module, raw

__all__ = ["all_finite"]

_SMALL = 1 << 16          # elements: below this, a call's overhead outweighs the work
_LOOP_DTYPES = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))


def _zero_sum(arrays):
    acc = 0.0
    for a in arrays:
        for i in range(a.shape[0]):
            acc += a[i] * 0.0
    return acc


_ZERO_SUM = _jit.Kernel(_zero_sum)


def all_finite(arrays) -> bool:
    """True when no NDArray of ``arrays`` holds an inf or NaN (integer arrays always do not)."""
    small = {}
    for array in arrays:
        data = raw(array)
        if data.dtype.kind not in "fc" or data.size == 0:
            continue
        if (type(data) is numpy.ndarray and data.size < _SMALL and data.dtype in _LOOP_DTYPES
                and data.flags.c_contiguous):
            small.setdefault(data.dtype, []).append(data.reshape(-1))
        elif not _finite_one(data, array_module(array)):
            return False
    if not small:
        return True
    if not _jit.ready():
        return all(_finite_one(d, numpy) for group in small.values() for d in group)
    return all(math.isfinite(_ZERO_SUM(tuple(group))) for group in small.values())


def _finite_one(data, xp) -> bool:
    with numpy.errstate(over="ignore", invalid="ignore"):  # an overflowing sum is expected here
        if bool(xp.isfinite(data.sum())):
            return True
    return bool(xp.isfinite(data).all())
