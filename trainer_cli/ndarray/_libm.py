"""The C library's mathematical functions, elementwise over NumPy arrays.

MXNet's CPU kernels call the C library (glibc) for ``exp``, ``log``, ``tgamma``, ... in float or
double; NumPy's vectorised kernels differ from glibc's in the last bit for a share of inputs, and
Python's ``math.gamma``/``math.lgamma`` are CPython's own. Operators that reproduce MXNet's bits
call the C library's function here: one element at a time through ctypes, or a compiled numba
loop over the same function when numba is already loaded and the array is large. Without a
loadable C library (some Windows setups) CPython's ``math`` stands in, and the last bits may
differ from MXNet's.
"""
from __future__ import annotations

import math

import numpy

from .. import _jit

__all__ = ["call", "native"]

_f32, _f64 = numpy.float32, numpy.float64
_FUNCTIONS = ("tgammaf", "lgammaf", "logf", "tanf", "expf", "tgamma", "lgamma", "log", "tan",
              "exp")


def _fallback(fn):
    """``fn`` (a ``math`` function) with the C library's results where ``math`` raises (poles,
    overflow, domain)."""
    def call(v):
        try:
            return fn(v)
        except OverflowError:
            return math.inf
        except ValueError:
            if fn is math.lgamma:
                return math.inf                                 # a pole
            if v == 0:
                return math.copysign(math.inf, v) if fn is math.gamma else -math.inf
            return math.nan
    return call


def _load():
    # Imported here, at the first call: ctypes.util costs ~7 ms, too much for every start-up.
    import ctypes
    import ctypes.util
    path = ctypes.util.find_library("m")
    lib = None
    if path:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            lib = None
    table = {}
    for name in _FUNCTIONS:
        single = name.endswith("f")
        ctype = ctypes.c_float if single else ctypes.c_double
        fn = getattr(lib, name, None) if lib is not None else None
        if fn is not None:
            fn.restype, fn.argtypes = ctype, [ctype]
        else:
            # No C library found (some Windows setups): CPython's math, correctly rounded to
            # float for the float functions; the last bits may then differ from MXNet's.
            fn = _fallback(getattr(math, {"tgamma": "gamma"}.get(name.rstrip("f"),
                                                                  name.rstrip("f"))))
        table[name] = (fn, _f32 if single else _f64, lib is not None and hasattr(lib, name))
    return table


_LIBM = None
_LOOPS = {}


def _table():
    global _LIBM
    if _LIBM is None:
        _LIBM = _load()
    return _LIBM


def native(name) -> bool:
    """Whether ``call(name, ...)`` is the C library's own function (not CPython's stand-in)."""
    return _table()[name][2]
# The ufunc over ctypes calls costs about 0.3-0.6 us an element, a numba loop over the same
# function about 0.05 us (1.5 us a call) but 0.5-0.7 s to compile, once a process and function;
# below this many elements (0.5 ms by the ufunc) that is not worth paying.
_NUMBA_MIN = 1024


def _numba_loop(name, fn):
    loop = _LOOPS.get(name)
    if loop is None:
        import numba        # already imported: _jit.loaded() said so

        def body(src, dst):
            for i in range(src.size):
                dst[i] = fn(src[i])
        # A loop that calls a ctypes function cannot be cached on disk: compiled once a process.
        loop = _LOOPS[name] = numba.njit(nogil=True)(body)
    return loop


def call(name, d):
    """The C library's ``name`` (``tgammaf``, ``log``, ...) of every element of the NumPy array
    ``d`` (converted to the function's float or double first), in that precision."""
    fn, dtype, native = _table()[name]
    src = numpy.ascontiguousarray(d, dtype=dtype)
    if src.size >= _NUMBA_MIN and native and _jit.loaded():
        out = numpy.empty_like(src)
        _numba_loop(name, fn)(src.reshape(-1), out.reshape(-1))
        return out
    if not src.ndim:
        return dtype(fn(src.item()))
    with numpy.errstate(all="ignore"):      # the C library's flags (poles, overflow) are results
        return numpy.frompyfunc(fn, 1, 1)(src).astype(dtype)
