"""numba, loaded on first need: the one place that imports it for the CPU kernels.

The kernels (the optimizer rules in ``optimizer._fused``, FullyConnected's element-wise passes in
``ndarray._fc_kernels``) are optional. Each runs the same operations as a NumPy body, one element
at a time in the same order and precision, and the NumPy body stays the reference: without numba,
with ``TRAINER_NO_NUMBA=1``, or for arrays too small to pay for numba, the NumPy body runs and
gives bitwise the same numbers. Without fastmath LLVM neither reassociates nor contracts a
multiply-add into an FMA, so every element rounds as it does in NumPy; ``error_model="numpy"``
makes division follow IEEE (inf/nan) instead of raising, which is also what lets LLVM vectorize.

numba is imported, and a kernel compiled or loaded from numba's on-disk cache, only on the first
call that qualifies: about 0.3 s for the import and 0.5 s for the first kernel from the cache,
once per process. Small models never pay it.
"""
from __future__ import annotations

import os

__all__ = ["enabled", "jit", "Kernel"]

_numba = None        # the module once imported; False when unavailable or turned off


def enabled() -> bool:
    """Whether kernels may run (numba importable and not turned off)."""
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


def jit(pyfunc):
    """``pyfunc`` compiled without the GIL, cached on disk where that is possible."""
    if not enabled():
        raise RuntimeError("numba is not available (or TRAINER_NO_NUMBA is set)")
    try:
        return _numba.njit(pyfunc, nogil=True, error_model="numpy", cache=True)
    except Exception:       # no writable cache location: compile in memory each run
        return _numba.njit(pyfunc, nogil=True, error_model="numpy")


class Kernel:
    """``pyfunc`` (a loop over one element at a time) compiled on its first call.

    A loop may call another kernel through a module global: numba resolves globals when it
    compiles, so ``name`` is bound to the compiled ``callee`` first.
    """

    __slots__ = ("pyfunc", "_compiled", "name", "callee")

    def __init__(self, pyfunc, name=None, callee=None):
        self.pyfunc = pyfunc
        self._compiled = None
        self.name, self.callee = name, callee

    def __call__(self, *args):
        return (self._compiled or self.compiled())(*args)

    def compiled(self):
        if self._compiled is None:
            if self.name is not None:
                self.pyfunc.__globals__[self.name] = self.callee.compiled()
            self._compiled = jit(self.pyfunc)
        return self._compiled
