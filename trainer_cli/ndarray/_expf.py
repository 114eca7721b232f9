"""Cephes' single-precision ``expf`` and the functions built on it (``sigmoid``, ``tanh``, and
``expm1`` of arguments <= 0), each written out twice as the same float32 operations in the same
order: for whole arrays (``np_exp_neg``, ``np_sigmoid``, ``np_tanh``, ``np_expm1_neg``: the NumPy
reference, which also runs without numba, and on CuPy's arrays) and for one element
(``exp_neg``, ``sigmoid``, ``tanh``, ``expm1_neg``: what compiled loops inline).

Why not NumPy's ``exp``: its SIMD code's last bits are no function a scalar loop can reproduce,
and this NumPy build takes 2-5 ns a float32 value on an AVX2 machine. A loop over ``exp_neg``
takes about 1.2 ns: LLVM vectorizes it, the selects being selects and ``2**n`` made from its bits
(``float32_from_bits``) rather than read from a table, which it would gather an element at a
time. Within 3 ulp of the true values (Cephes).

Every constant is a float32 scalar, so no operation is promoted to float64 in either body;
numba without fastmath neither reassociates nor contracts a multiply-add, so each operation
rounds as NumPy's does. Branches are NumPy's ``where`` on one side, a conditional expression on
the other, on the same condition.

``exp_neg`` takes arguments <= 0 (or NaN) only: the range reduction ``x = n ln2 + r`` then needs
``2**n`` for ``n`` in ``[-126, 0]`` (the NumPy body reads them from a table; both exact), and
arguments under ``ln(FLT_MIN)`` are raised to it (their exp is below ``1.2e-38``).

``erf`` (GELU's, float32): ``z + z * Q(z**2)`` for ``|z| < 0.7``, else ``1 - exp(-z**2) * R(z)``,
``Q`` and ``R`` polynomials fitted here (least squares on Chebyshev nodes, relative error) to
``erf(z)/z - 1`` and to ``erfc(z) * exp(z**2)`` on ``[0.7, 4]``; ``|z|`` above 4 taken as 4,
where float32's ``erf`` is 1. Within 2 ulp of the true values (about 2.5 times the rounding of
a double-precision ``erf``, which cost 8 ns a value here and does not vectorize).

``expm1_neg`` (ELU's, SELU's ``exp(x) - 1`` for ``x <= 0``, where ``exp(x) - 1`` itself would
lose every digit near 0): the Taylor polynomial to degree 8 on ``[-0.5, 0]`` (within 1.02 ulp
of the true values there), ``exp_neg(x) - 1`` below (within 1.15 ulp); ``-0.0`` stays ``-0.0``.
"""
from __future__ import annotations

import math

import numpy

from .. import _jit
from .ndarray import _xp_of

__all__ = ["np_exp_neg", "np_sigmoid", "np_tanh", "np_expm1_neg", "np_erf", "EXP_LOW"]

_f = numpy.float32
ZERO, HALF, ONE, NEG_TWO = _f(0), _f(0.5), _f(1), _f(-2)
# expf (Cephes): x = n*ln2 + r with ln2 split in two (C1 exact in 9 bits, so n*C1 is exact).
LOG2E = _f(1.44269504088896341)
C1, C2 = _f(0.693359375), _f(-2.12194440e-4)
E0, E1, E2, E3, E4, E5 = (_f(1.9875691500e-4), _f(1.3981999507e-3), _f(8.3334519073e-3),
                          _f(4.1665795894e-2), _f(1.6666665459e-1), _f(5.0000001201e-1))
EXP_LOW = _f(-87.33654475)                     # ln(FLT_MIN): 2**n stays a normal number
POW2 = numpy.array([2.0 ** k for k in range(-126, 1)], dtype=numpy.float32)   # 2**(i - 126)
EXPONENT_BIAS, MANTISSA_BITS = numpy.int32(127), numpy.int32(23)
# tanhf (Cephes): an odd polynomial under 0.625, (1 - e) / (1 + e) with e = exp(-2|x|) above.
TANH_SMALL = _f(0.625)
T0, T1, T2, T3, T4 = (_f(-5.70498872745e-3), _f(2.06390887954e-2), _f(-5.37397155531e-2),
                      _f(1.33314422036e-1), _f(-3.33332819422e-1))
# expm1 near 0: x + x**2 * (1/2! + x/3! + ... + x**6/8!).
EXPM1_SMALL = _f(-0.5)
M2, M3, M4, M5, M6, M7, M8 = (_f(1 / math.factorial(k)) for k in range(2, 9))
# erf: below ERF_SMALL z + z*Q(z*z), Q highest power first; above, 1 - exp(-z*z) * R(z - ERF_MID)
# up to ERF_HIGH.
ERF_SMALL, ERF_MID, ERF_HIGH = _f(0.7), _f(2.35), _f(4)
Q5, Q4, Q3, Q2, Q1, Q0 = (_f(-6.980582256801426e-4), _f(5.142168141901493e-3),
                          _f(-2.6846302673220634e-2), _f(0.11283576488494873),
                          _f(-0.37612631916999817), _f(0.12837916612625122))
R12, R11, R10, R9, R8, R7, R6, R5, R4, R3, R2, R1, R0 = (
    _f(1.698089135970804e-07), _f(-7.503643359996204e-07), _f(1.4956185623304918e-06),
    _f(-5.0537682909634896e-06), _f(2.301246058777906e-05), _f(-8.388997957808897e-05),
    _f(2.8436272987164557e-04), _f(-9.530913084745407e-04), _f(3.095807507634163e-03),
    _f(-9.662715718150139e-03), _f(2.8898276388645172e-02), _f(-8.240406960248947e-02),
    _f(0.22254787385463715))


# ----------------------------------------------------------------------------- whole arrays
def np_exp_neg(x):
    """``exp(x)`` for float32 ``x <= 0`` (or NaN)."""
    x = numpy.where(x < EXP_LOW, EXP_LOW, x)
    nf = numpy.floor(x * LOG2E + HALF)
    x = x - nf * C1
    x = x - nf * C2
    z = x * x
    y = (((((E0 * x + E1) * x + E2) * x + E3) * x + E4) * x + E5) * z + x + ONE
    with numpy.errstate(invalid="ignore"):
        n = numpy.where(nf == nf, nf, ZERO).astype(numpy.int64)    # a NaN reads any entry
    return y * _pow2(x)[n + 126]         # indexing keeps the layout, as a ufunc would


_POW2_BY_MODULE = {}


def _pow2(like):
    """``POW2`` in the array module of ``like`` (NumPy's own, or a copy on the device)."""
    xp = _xp_of(like)
    if xp is numpy:
        return POW2
    table = _POW2_BY_MODULE.get(xp)
    if table is None:
        table = _POW2_BY_MODULE[xp] = xp.asarray(POW2)
    return table


def np_sigmoid(x):
    e = np_exp_neg(-numpy.abs(x))
    return numpy.where(x >= ZERO, ONE / (ONE + e), e / (ONE + e))


def np_tanh(x):
    a = numpy.abs(x)
    z = x * x
    small = ((((T0 * z + T1) * z + T2) * z + T3) * z + T4) * z * x + x
    e = np_exp_neg(a * NEG_TWO)
    big = (ONE - e) / (ONE + e)
    big = numpy.where(x < ZERO, -big, big)
    return numpy.where(a < TANH_SMALL, small, big)


def np_expm1_neg(x):
    """``exp(x) - 1`` for float32 ``x <= 0`` (or NaN)."""
    p = ((((((M8 * x + M7) * x + M6) * x + M5) * x + M4) * x + M3) * x + M2)
    small = numpy.where(x == ZERO, x, (x * x) * p + x)
    return numpy.where(x >= EXPM1_SMALL, small, np_exp_neg(x) - ONE)


# erf's two polynomials are arithmetic only: the same functions serve whole arrays and, compiled
# into ``erf``, one element.
def erf_small(z, w):
    """``erf(z)`` for ``0 <= z < ERF_SMALL``, ``w = z * z``."""
    return z + z * (((((Q5 * w + Q4) * w + Q3) * w + Q2) * w + Q1) * w + Q0)


def erfc_scaled(t):
    """``erfc(z) * exp(z**2)`` at ``t = z - ERF_MID``."""
    return ((((((((((((R12 * t + R11) * t + R10) * t + R9) * t + R8) * t + R7) * t + R6) * t
                   + R5) * t + R4) * t + R3) * t + R2) * t + R1) * t + R0)


def np_erf(x):
    """``erf(x)`` of float32 ``x``."""
    a = numpy.abs(x)
    z = numpy.where(a > ERF_HIGH, ERF_HIGH, a)
    w = z * z
    big = ONE - np_exp_neg(-w) * erfc_scaled(z - ERF_MID)
    r = numpy.where(z < ERF_SMALL, erf_small(z, w), big)
    return numpy.where(x < ZERO, -r, r)


# ----------------------------------------------------------------------------- one element
def float32_from_bits(bits):
    """The float32 whose bit pattern is the integer ``bits`` (a bitcast when compiled)."""
    return numpy.array(bits, dtype=numpy.int32).view(numpy.float32)[()]


def exp_neg(x):
    # Selects, not branches: LLVM then vectorizes a loop that calls this. A NaN makes n = 0, and
    # y * 1 is y, bit for bit.
    x = EXP_LOW if x < EXP_LOW else x
    nf = numpy.floor(x * LOG2E + HALF)
    x = x - nf * C1
    x = x - nf * C2
    z = x * x
    y = (((((E0 * x + E1) * x + E2) * x + E3) * x + E4) * x + E5) * z + x + ONE
    n = nf if nf == nf else ZERO
    return y * float32_from_bits((numpy.int32(n) + EXPONENT_BIAS) << MANTISSA_BITS)


def sigmoid(x):
    e = exp_neg(-abs(x))
    if x >= ZERO:
        return ONE / (ONE + e)
    return e / (ONE + e)


def tanh(x):
    a = abs(x)
    if a < TANH_SMALL:
        z = x * x
        return ((((T0 * z + T1) * z + T2) * z + T3) * z + T4) * z * x + x
    e = exp_neg(a * NEG_TWO)
    big = (ONE - e) / (ONE + e)
    if x < ZERO:
        return -big
    return big


def expm1_neg(x):
    p = ((((((M8 * x + M7) * x + M6) * x + M5) * x + M4) * x + M3) * x + M2)
    small = x if x == ZERO else (x * x) * p + x
    big = exp_neg(x) - ONE
    return small if x >= EXPM1_SMALL else big


def erf(x):
    a = abs(x)
    z = ERF_HIGH if a > ERF_HIGH else a
    w = z * z
    big = ONE - exp_neg(-w) * erfc_scaled(z - ERF_MID)
    e = erf_small(z, w) if z < ERF_SMALL else big
    return -e if x < ZERO else e


class _BitsKernel(_jit.Kernel):
    """``float32_from_bits`` as a numba intrinsic: a truncation to 32 bits and a bitcast, which
    LLVM vectorizes (a table read at a computed index it does not)."""

    __slots__ = ()
    _intrinsic = None      # kept apart from _compiled, which holds a compiled function's dispatcher

    def compiled(self):
        if _BitsKernel._intrinsic is None:
            from numba import types
            from numba.extending import intrinsic
            from llvmlite import ir

            @intrinsic
            def from_bits(typingctx, bits):
                if not isinstance(bits, types.Integer):
                    return None

                def codegen(context, builder, sig, args):
                    word = args[0]
                    if bits.bitwidth != 32:
                        word = builder.trunc(word, ir.IntType(32))
                    return builder.bitcast(word, ir.FloatType())
                return types.float32(bits), codegen

            _BitsKernel._intrinsic = from_bits
        return _BitsKernel._intrinsic


_float32_from_bits = _BitsKernel(float32_from_bits)
_exp_neg = _jit.Kernel(exp_neg, {"float32_from_bits": _float32_from_bits}, inline=True)
_sigmoid = _jit.Kernel(sigmoid, {"exp_neg": _exp_neg}, inline=True)
_tanh = _jit.Kernel(tanh, {"exp_neg": _exp_neg}, inline=True)
_expm1_neg = _jit.Kernel(expm1_neg, {"exp_neg": _exp_neg}, inline=True)
_erf = _jit.Kernel(erf, {"exp_neg": _exp_neg,
                         "erf_small": _jit.Kernel(erf_small, inline=True),
                         "erfc_scaled": _jit.Kernel(erfc_scaled, inline=True)}, inline=True)
