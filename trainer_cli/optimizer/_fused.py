"""Fused CPU kernels for the optimizer rules, compiled with numba when it is installed.

A rule's NumPy body makes one pass over memory per operation; its kernel does the same operations
on one element at a time, in the same order and precision, in a single pass. Without fastmath LLVM
neither reassociates nor contracts a multiply-add into an FMA, so every element rounds exactly as
it does in NumPy and the results are bitwise equal (``tests/test_fused_kernels.py``).
``error_model="numpy"`` makes division follow IEEE (inf/nan, as NumPy) instead of raising, and the
missing exception branch is also what lets LLVM vectorize the loop.

The kernels are optional: without numba, with ``TRAINER_NO_NUMBA=1``, for arrays smaller than
``MIN_SIZE`` elements or for any layout a kernel does not handle, the NumPy body runs. numba is
imported and a kernel compiled (or loaded from numba's on-disk cache) only on the first call that
qualifies: about 0.3 s for the import and 0.5 s for the first kernel from the cache, once per
process. Small models, whose NumPy update costs microseconds, never pay it.
"""
from __future__ import annotations

import os

import numpy

__all__ = ["Kernel", "enabled", "MIN_SIZE"]

MIN_SIZE = 1 << 14
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
_np_ndarray = numpy.ndarray

_numba = None        # the module once imported; False when unavailable or turned off


def enabled() -> bool:
    """Whether fused kernels may run (numba importable and not turned off)."""
    global _numba
    if _numba is None:
        if os.environ.get("TRAINER_NO_NUMBA", "") not in ("", "0"):
            _numba = False
        else:
            try:
                import numba
            except ImportError:
                _numba = False
            else:
                _numba = numba
    return _numba is not False


class Kernel:
    """``pyfunc`` (a loop over one element at a time) compiled on first use.

    ``fits(*arrays)`` says whether the arrays are ones the kernel handles: NumPy, one float dtype,
    one size of at least ``MIN_SIZE``, C-contiguous. The caller passes them flattened with ``ravel``
    (a view for contiguous arrays) and scalars already cast to that dtype.
    """

    __slots__ = ("pyfunc", "_compiled")

    def __init__(self, pyfunc):
        self.pyfunc = pyfunc
        self._compiled = None

    def fits(self, w, *others) -> bool:
        if type(w) is not _np_ndarray or w.size < MIN_SIZE:
            return False
        dtype, size = w.dtype, w.size
        # Native float dtypes are singletons; anything else (byte-swapped...) takes the NumPy path.
        if (dtype is not _F32 and dtype is not _F64) or not w.flags.c_contiguous:
            return False
        for a in others:
            if type(a) is not _np_ndarray or a.dtype is not dtype or a.size != size \
                    or not a.flags.c_contiguous:
                return False
        # A kernel computes element i from elements i only, so buffers that overlap other than
        # exactly would see each other's writes in another order than the NumPy passes do.
        # Arrays owning their memory (parameters, gradients, states) are distinct allocations;
        # views are checked.
        arrays = (w,) + others
        for a in arrays:
            if a.base is not None:
                return self._disjoint(arrays)
        return _numba is not False and (_numba is not None or enabled())

    @staticmethod
    def _disjoint(arrays):
        for i, a in enumerate(arrays):
            for b in arrays[i + 1:]:
                if a is not b and numpy.may_share_memory(a, b):
                    return False
        return enabled()

    def __call__(self, *args):
        fn = self._compiled
        if fn is None:
            fn = self._compiled = self.compile()
        return fn(*args)

    def compile(self):
        if not enabled():
            raise RuntimeError("numba is not available (or TRAINER_NO_NUMBA is set)")
        try:
            return _numba.njit(self.pyfunc, nogil=True, error_model="numpy", cache=True)
        except Exception:       # no writable cache location: compile in memory each run
            return _numba.njit(self.pyfunc, nogil=True, error_model="numpy")
