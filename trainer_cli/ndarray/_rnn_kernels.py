"""The fused RNN operator's gate math for one time step (the pointwise part after the GEMMs),
as one numba loop per mode and direction, with a NumPy body that gives the same bits.

The gate nonlinearities are not NumPy's ``exp``/``tanh`` but Cephes' single-precision
``expf``/``tanhf`` (``_expf``: ``np_sigmoid``/``np_tanh`` for whole arrays in the NumPy bodies,
which also run without numba, and ``sigmoid``/``tanh`` for one element in the loops: the same
float32 operations in the same order).

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
from ._expf import ONE, ZERO, np_sigmoid, np_tanh, sigmoid, tanh
from ._expf import _sigmoid, _tanh

__all__ = ["usable", "np_sigmoid", "np_tanh", "lstm_forward", "gru_forward", "rnn_forward",
           "lstm_backward", "gru_backward", "rnn_backward"]

_F32 = numpy.dtype(numpy.float32)
MIN_SIZE = 1 << 12


def usable(*arrays) -> bool:
    """Every array a float32 NumPy array: the step functions apply (to C-contiguous ones)."""
    for a in arrays:
        if type(a) is not numpy.ndarray or a.dtype is not _F32:
            return False
    return True


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


_GATE_HELPERS = {"sigmoid": _sigmoid, "tanh": _tanh}
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
