"""The fused RNN operator's gate math for one time step (the pointwise part after the GEMMs),
as one numba loop per mode and direction, with a NumPy body that gives the same bits.

The gate nonlinearities are not NumPy's ``exp``/``tanh`` (SIMD code whose last bits no scalar
loop reproduces) but Cephes' single-precision ``expf``/``tanhf`` (within 3 ulp of the true
values), written out here twice as the same float32 operations in the same order: once for whole
arrays (``np_exp_neg``, ``np_sigmoid``, ``np_tanh``: the NumPy reference, which also runs without
numba) and once for one element (``exp_neg``, ``sigmoid``, ``tanh``: what the loops inline).
Every constant is a float32 scalar, so no operation is promoted to float64 in either body; numba
without fastmath neither reassociates nor contracts a multiply-add, so each operation rounds as
NumPy's does. Branches are NumPy's ``where`` on one side, ``if`` on the other, on the same
condition.

``exp_neg`` takes arguments <= 0 only (the sigmoid and tanh below pass ``-|x|``): the range
reduction ``x = n ln2 + r`` then needs powers of two ``2**n`` for ``n`` in ``[-126, 0]``, read
from a table (exact), and arguments under ``ln(FLT_MIN)`` are raised to it (their exp is below
``1.2e-38``, which no gate resolves).

The step functions (``lstm_forward`` ... ``rnn_backward``) take float32 C-contiguous NumPy arrays
and run the loop when ``_jit.ready()`` (numba importable, not turned off) and the step has
``MIN_SIZE`` gate values or numba is loaded already, else the NumPy body;
``tests/test_rnn_kernels.py`` compares the bits of both. On another array library (CuPy)
``rnn.py`` runs the same array functions for float32 through that library; float64 keeps
NumPy's or CuPy's own ``exp`` and ``tanh``.
"""
from __future__ import annotations

import numpy

from .. import _jit
from .ndarray import _xp_of

__all__ = ["usable", "np_sigmoid", "np_tanh", "lstm_forward", "gru_forward", "rnn_forward",
           "lstm_backward", "gru_backward", "rnn_backward"]

_F32 = numpy.dtype(numpy.float32)
MIN_SIZE = 1 << 12
_f = numpy.float32
ZERO, HALF, ONE, NEG_TWO = _f(0), _f(0.5), _f(1), _f(-2)
# expf (Cephes): x = n*ln2 + r with ln2 split in two (C1 exact in 9 bits, so n*C1 is exact).
LOG2E = _f(1.44269504088896341)
C1, C2 = _f(0.693359375), _f(-2.12194440e-4)
E0, E1, E2, E3, E4, E5 = (_f(1.9875691500e-4), _f(1.3981999507e-3), _f(8.3334519073e-3),
                          _f(4.1665795894e-2), _f(1.6666665459e-1), _f(5.0000001201e-1))
EXP_LOW = _f(-87.33654475)                     # ln(FLT_MIN): 2**n stays a normal number
POW2 = numpy.array([2.0 ** k for k in range(-126, 1)], dtype=numpy.float32)   # 2**(i - 126)
# tanhf (Cephes): an odd polynomial under 0.625, (1 - e) / (1 + e) with e = exp(-2|x|) above.
TANH_SMALL = _f(0.625)
T0, T1, T2, T3, T4 = (_f(-5.70498872745e-3), _f(2.06390887954e-2), _f(-5.37397155531e-2),
                      _f(1.33314422036e-1), _f(-3.33332819422e-1))


def usable(*arrays) -> bool:
    """Every array a float32 NumPy array: the step functions apply (to C-contiguous ones)."""
    for a in arrays:
        if type(a) is not numpy.ndarray or a.dtype is not _F32:
            return False
    return True


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
    return y * numpy.take(_pow2(x), n + 126)


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


# ----------------------------------------------------------------------------- one element
def exp_neg(x):
    # Selects, not branches, and the table read at an unsigned index: LLVM then vectorizes a
    # loop that calls this (GELU's gradient over a million values 10.2 -> 3.7 ms). A NaN reads
    # 2**0, and y * 1 is y, bit for bit.
    x = EXP_LOW if x < EXP_LOW else x
    nf = numpy.floor(x * LOG2E + HALF)
    x = x - nf * C1
    x = x - nf * C2
    z = x * x
    y = (((((E0 * x + E1) * x + E2) * x + E3) * x + E4) * x + E5) * z + x + ONE
    n = nf if nf == nf else ZERO
    return y * POW2[numpy.uint64(numpy.int64(n) + 126)]


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


_exp_neg = _jit.Kernel(exp_neg, inline=True)
_sigmoid = _jit.Kernel(sigmoid, {"exp_neg": _exp_neg}, inline=True)
_tanh = _jit.Kernel(tanh, {"exp_neg": _exp_neg}, inline=True)
_GATE_HELPERS = {"sigmoid": _sigmoid, "tanh": _tanh}


# ----------------------------------------------------------------------------- the loops
# Arrays are 2-D (batch, features); ``bh`` the recurrent bias. Each loop computes per element
# exactly what the NumPy body below it computes per array.
def _lstm_forward_loop(gx, gh, bh, c_prev, act, c, m):
    # Row by row, one simple loop per gate block, which LLVM vectorizes better than one loop
    # doing everything per cell.
    batch, hidden = c.shape
    g0, g1, width = 2 * hidden, 3 * hidden, 4 * hidden
    for b in range(batch):
        ghr, gxr, ar = gh[b], gx[b], act[b]
        for j in range(width):
            ghr[j] = (ghr[j] + bh[j]) + gxr[j]
        for j in range(g0):
            ar[j] = sigmoid(ghr[j])
        for j in range(g0, g1):
            ar[j] = tanh(ghr[j])
        for j in range(g1, width):
            ar[j] = sigmoid(ghr[j])
        cr, cp, mr = c[b], c_prev[b], m[b]
        for j in range(hidden):
            cv = ar[hidden + j] * cp[j] + ar[j] * ar[g0 + j]
            cr[j] = cv
            mr[j] = ar[g1 + j] * tanh(cv)


def _np_lstm_forward(gx, gh, bh, c_prev, act, c, m):
    hidden = c.shape[1]
    gh += bh
    gh += gx
    act[...] = np_sigmoid(gh)
    act[:, 2 * hidden:3 * hidden] = np_tanh(gh[:, 2 * hidden:3 * hidden])
    i, f, g, o = (act[:, k * hidden:(k + 1) * hidden] for k in range(4))
    numpy.add(f * c_prev, i * g, out=c)
    numpy.multiply(o, np_tanh(c), out=m)


def _gru_forward_loop(gx, gh, bh, h_prev, act, ghn, h):
    batch, hidden = h.shape
    g0 = 2 * hidden
    for b in range(batch):
        ghr, gxr, ar, hnr, hp, hr = gh[b], gx[b], act[b], ghn[b], h_prev[b], h[b]
        for j in range(g0):
            ar[j] = sigmoid(gxr[j] + (ghr[j] + bh[j]))
        for j in range(hidden):
            hn = ghr[g0 + j] + bh[g0 + j]
            hnr[j] = hn
            ar[g0 + j] = tanh(gxr[g0 + j] + ar[j] * hn)
        for j in range(hidden):
            z = ar[hidden + j]
            hr[j] = (ONE - z) * ar[g0 + j] + z * hp[j]


def _np_gru_forward(gx, gh, bh, h_prev, act, ghn, h):
    hidden = h.shape[1]
    gh += bh
    act[:, :2 * hidden] = np_sigmoid(gx[:, :2 * hidden] + gh[:, :2 * hidden])
    r, z = act[:, :hidden], act[:, hidden:2 * hidden]
    ghn[...] = gh[:, 2 * hidden:]
    act[:, 2 * hidden:] = np_tanh(gx[:, 2 * hidden:] + r * ghn)
    numpy.add((ONE - z) * act[:, 2 * hidden:], z * h_prev, out=h)


def _rnn_forward_loop(gx, gh, bh, h, relu):
    batch, hidden = h.shape
    for b in range(batch):
        ghr, gxr, hr = gh[b], gx[b], h[b]
        for j in range(hidden):
            a = (ghr[j] + bh[j]) + gxr[j]
            if relu:
                hr[j] = ZERO if a < ZERO else a     # NaN stays NaN
            else:
                hr[j] = tanh(a)


def _np_rnn_forward(gx, gh, bh, h, relu):
    gh += bh
    gh += gx
    if relu:
        h[...] = numpy.where(gh < ZERO, ZERO, gh)
    else:
        h[...] = np_tanh(gh)


def _lstm_backward_loop(dm, act, c, c_prev, dc_in, da, dc_out):
    batch, hidden = c.shape
    g0, g1 = 2 * hidden, 3 * hidden
    for b in range(batch):
        ar, cr, cp, dmr, dci, dar, dco = act[b], c[b], c_prev[b], dm[b], dc_in[b], da[b], dc_out[b]
        for j in range(hidden):
            i = ar[j]
            f = ar[hidden + j]
            g = ar[g0 + j]
            o = ar[g1 + j]
            tc = tanh(cr[j])
            d = dmr[j]
            dc = dci[j] + d * o * (ONE - tc * tc)
            dar[j] = dc * g * i * (ONE - i)
            dar[hidden + j] = dc * cp[j] * f * (ONE - f)
            dar[g0 + j] = dc * i * (ONE - g * g)
            dar[g1 + j] = d * tc * o * (ONE - o)
            dco[j] = dc * f


def _np_lstm_backward(dm, act, c, c_prev, dc_in, da, dc_out):
    hidden = c.shape[1]
    i, f, g, o = (act[:, k * hidden:(k + 1) * hidden] for k in range(4))
    tc = np_tanh(c)
    dc = dc_in + dm * o * (ONE - tc * tc)
    da[:, :hidden] = dc * g * i * (ONE - i)
    da[:, hidden:2 * hidden] = dc * c_prev * f * (ONE - f)
    da[:, 2 * hidden:3 * hidden] = dc * i * (ONE - g * g)
    da[:, 3 * hidden:] = dm * tc * o * (ONE - o)
    numpy.multiply(dc, f, out=dc_out)


def _gru_backward_loop(dh, act, ghn, h_prev, da, dgh, dhz):
    batch, hidden = dh.shape
    g0 = 2 * hidden
    for b in range(batch):
        ar, hnr, hp, dhr, dar, dghr, dhzr = act[b], ghn[b], h_prev[b], dh[b], da[b], dgh[b], dhz[b]
        for j in range(hidden):
            r = ar[j]
            z = ar[hidden + j]
            n = ar[g0 + j]
            d = dhr[j]
            dn = d * (ONE - z) * (ONE - n * n)
            dr = dn * hnr[j] * r * (ONE - r)
            dz = d * (hp[j] - n) * z * (ONE - z)
            dar[j] = dr
            dar[hidden + j] = dz
            dar[g0 + j] = dn
            dghr[j] = dr
            dghr[hidden + j] = dz
            dghr[g0 + j] = dn * r
            dhzr[j] = d * z


def _np_gru_backward(dh, act, ghn, h_prev, da, dgh, dhz):
    hidden = dh.shape[1]
    r, z, n = (act[:, k * hidden:(k + 1) * hidden] for k in range(3))
    dn = dh * (ONE - z) * (ONE - n * n)
    da[:, :hidden] = dn * ghn * r * (ONE - r)
    da[:, hidden:2 * hidden] = dh * (h_prev - n) * z * (ONE - z)
    da[:, 2 * hidden:] = dn
    dgh[:, :2 * hidden] = da[:, :2 * hidden]
    numpy.multiply(dn, r, out=dgh[:, 2 * hidden:])
    numpy.multiply(dh, z, out=dhz)


def _rnn_backward_loop(dh, y, da, relu):
    batch, hidden = dh.shape
    for b in range(batch):
        dhr, yr, dar = dh[b], y[b], da[b]
        for j in range(hidden):
            v = yr[j]
            if relu:
                dar[j] = dhr[j] * (ONE if v > ZERO else ZERO)
            else:
                dar[j] = dhr[j] * (ONE - v * v)


def _np_rnn_backward(dh, y, da, relu):
    if relu:
        numpy.multiply(dh, y > ZERO, out=da)
    else:
        numpy.multiply(dh, ONE - y * y, out=da)


_LOOPS = {name: _jit.Kernel(loop, _GATE_HELPERS) for name, loop in (
    ("lstm_forward", _lstm_forward_loop), ("gru_forward", _gru_forward_loop),
    ("rnn_forward", _rnn_forward_loop), ("lstm_backward", _lstm_backward_loop),
    ("gru_backward", _gru_backward_loop), ("rnn_backward", _rnn_backward_loop))}


def _dispatch(name, body):
    def step(*args):
        # A step's gates (its second array) of MIN_SIZE elements or more pay for loading numba.
        if _jit.ready() and (args[1].size >= MIN_SIZE or _jit.loaded()):
            _LOOPS[name](*args)
        else:
            body(*args)
    step.__name__ = name
    step.__doc__ = body.__doc__
    return step


# ``gx``/``gh`` the step's input projection (with its bias) and raw recurrent product; ``gh``
# may be overwritten. Outputs are written into the arrays given.
lstm_forward = _dispatch("lstm_forward", _np_lstm_forward)      # -> act, c, m
gru_forward = _dispatch("gru_forward", _np_gru_forward)         # -> act, ghn (+ bias), h
rnn_forward = _dispatch("rnn_forward", _np_rnn_forward)         # -> h
lstm_backward = _dispatch("lstm_backward", _np_lstm_backward)   # -> da, dc_out
gru_backward = _dispatch("gru_backward", _np_gru_backward)      # -> da, dgh, dh * z
rnn_backward = _dispatch("rnn_backward", _np_rnn_backward)      # -> da
