"""Integer arrays as MXNet's operators compute them: the result keeps the array's integer dtype.

MXNet converts a scalar to the array's dtype first (``x * 0.5`` multiplies by 0, ``uint8 + 300``
adds 44), divides integers towards zero, sums and averages in the dtype (wrapping, truncating),
and computes a floating function (sqrt, exp, power, ...) in float32 before converting back.
Its C++ conversions of a NaN or an out-of-range value are undefined; x86 gives the minimum of a
64-bit integer for int64 and of a 32-bit integer (whose low bits narrower types keep) otherwise,
which is what ``c_cast`` gives, so that results match MXNet's on the machines it runs on.
"""
from __future__ import annotations

import numpy

__all__ = ["c_cast", "scalar", "divide", "IntegerDivisionByZero"]


class IntegerDivisionByZero(ZeroDivisionError):
    """An integer array divided by zero (MXNet's process dies of SIGFPE there)."""


def c_cast(values, dtype):
    """``values`` (floating) converted to the integer ``dtype`` as C++ converts them on x86."""
    xp = numpy if type(values) is numpy.ndarray or numpy.isscalar(values) else _xp(values)
    wide = numpy.int64 if numpy.dtype(dtype).itemsize == 8 else numpy.int32
    info = numpy.iinfo(wide)
    f = xp.asarray(values, dtype=numpy.float64)
    # NaN fails both comparisons; 2**63 and 2**31 are exact in float64.
    inside = (f >= float(info.min)) & (f < -float(info.min))
    with numpy.errstate(invalid="ignore"):
        whole = xp.where(inside, xp.trunc(f), float(info.min)).astype(wide)
    return whole.astype(dtype)


def scalar(value, dtype):
    """MXNet's ``DType(scalar)``: the scalar, passed as a double, converted to ``dtype``."""
    return c_cast(numpy.float64(value), dtype)[()]


def divide(a, b):
    """``a / b`` for integers, truncated towards zero (C's division), in ``a``'s dtype."""
    xp = _xp(a)
    if not xp.all(b != 0):
        raise IntegerDivisionByZero(
            "integer division by zero: an integer NDArray divides as MXNet's integer operators do "
            "(its own dtype, truncating), and MXNet's process dies at a zero divisor; cast to a "
            "floating dtype first (x.astype('float32') / y)")
    with numpy.errstate(over="ignore"):     # the minimum over -1 wraps
        q = xp.floor_divide(a, b)
        q += ((xp.remainder(a, b) != 0) & ((a < 0) != (b < 0))).astype(q.dtype)
    return q


def _xp(a):
    from ..context import array_module_of
    return array_module_of(a)
