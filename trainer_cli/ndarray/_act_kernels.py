"""Activations in one numba loop a pass (CPU): LeakyReLU's ``leaky``, ``gelu``, ``prelu`` and
``elu`` (SELU with a scale), ``sigmoid``, ``tanh``, Gluon's ``swish``, and softmax's and
log-softmax's rows; each with a NumPy body that gives the same bits.

In NumPy, GELU's forward calls Python's ``math.erf`` on every element (NumPy has no erf): about
0.15 us an element, 160 ms for a million values forward and backward, 26 times PyTorch's time. The
leaky ReLU's ``where`` with a product and a cast, and its gradient's, cost six passes with
temporaries. A loop here does each pass in one:

- ``gelu``: ``cdf = 0.5 * (1 + erf(x / sqrt(2)))`` and ``x * cdf``, every operation in the dtype
  in NumPy's order; the erf of float32 ``_expf.erf`` (within 2 ulp; one vectorized loop), of
  float64 the C library's (which ``math.erf`` and numba's both call): the same bits as the
  NumPy body.
- its gradient ``g * (cdf + x * exp(-0.5 * x * x) / sqrt(2 pi))``: the exp is Cephes'
  single-precision one (``_expf.exp_neg``, written out for whole arrays and for one
  element; NumPy's SIMD ``exp`` is no function a scalar loop can reproduce), taken as 0 below
  ``ln(FLT_MIN)``, where the exact value is a subnormal number; float32 only (float64 and float16
  keep NumPy's exp).
- ``leaky``: ``x`` where ``x > 0``, else ``x * slope``; the gradient ``g * 1`` or ``g * slope``
  (the slope rounded to the dtype, as NumPy's mixed arithmetic does). NaN takes the slope's side.
- ``prelu``: the same with a learned slope per channel (axis 1); its gradient ``g`` or
  ``g * slope``, and the slope's terms ``0`` or ``g * x`` in one pass (NumPy sums them).
- float32 ``sigmoid``, ``tanh``, ``elu`` (``expm1``), ``swish`` (``x * sigmoid(beta * x)`` and
  the gradient its three recorded operations give) and the softmaxes take Cephes' ``expf``
  (``_expf``, vectorized; NumPy's ``exp`` here runs at 2-5 ns a value); the gradients of
  ``sigmoid``/``tanh`` from the output, ELU's ``alpha * exp(x)`` below 0.
- ``softmax`` over the last axis: float32 rows in one loop (``exp(x - max)``, 0 below
  ``ln(FLT_MIN)``, NumPy's max first); float64 after NumPy's max, subtraction and ``exp``, each
  row divided by its sum (NumPy's pairwise summation from +0.0, ``_pairwise.pairwise``) in one
  pass; the gradient ``out * (g - sum(g * out))`` (then ``/ t`` for a temperature other than 1)
  a row at a time. ``log_softmax`` of float32 rows likewise, its gradient
  ``g - exp(out) * sum(g)``.

Each function returns None where its loop does not apply (no numba, another array library or
dtype, a non-contiguous array, fewer than ``MIN_SIZE`` elements for a first compile); the caller
then runs the NumPy body. Arrays of ``SPLIT_SIZE`` elements or more are worked in ranges on the
BLAS's thread count of threads: each element's value does not depend on the range.
``tests/test_act_kernels.py`` compares the bits of both bodies.
"""
from __future__ import annotations

import math

import numpy

from .. import _jit
from . import _pairwise as _pw
from . import host_threads as _host_threads
from ._expf import EXP_LOW, ONE, np_erf, np_exp_neg, np_expm1_neg, np_sigmoid
from ._expf import _exp_neg as _exp_neg_kernel
from ._expf import _erf, _expm1_neg, _sigmoid, _tanh

__all__ = ["gelu", "gelu_grad", "leaky", "leaky_grad", "prelu", "prelu_grad", "softmax_rows",
           "softmax_grad", "np_gelu", "np_gelu_grad", "sigmoid", "tanh", "sigmoid_grad",
           "tanh_grad", "elu", "elu_grad", "np_elu", "np_elu_grad", "softmax_f32",
           "np_softmax_f32", "log_softmax_f32", "np_log_softmax_f32", "log_softmax_grad_f32",
           "np_log_softmax_grad_f32", "exp_or_zero", "np_exp_or_zero", "swish", "swish_grad",
           "np_swish", "np_swish_grad", "MIN_SIZE", "SPLIT_SIZE"]

MIN_SIZE = 1 << 12
SPLIT_SIZE = 1 << 18
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
_np_ndarray = numpy.ndarray
_SQRT_2, _SQRT_2PI = math.sqrt(2), math.sqrt(2 * math.pi)
_f = numpy.float32
ZERO, NEG_HALF = _f(0), _f(-0.5)
SQRT_2PI_F32 = _f(_SQRT_2PI)


def _usable(*arrays) -> bool:
    """C-contiguous NumPy arrays of one float dtype, the first of ``MIN_SIZE`` elements or more
    unless numba is loaded already (then a small call costs its dispatch only); numba there."""
    first = arrays[0]
    if type(first) is not _np_ndarray or not first.flags.c_contiguous:
        return False
    dtype = first.dtype
    if dtype is not _F32 and dtype is not _F64:
        return False
    for a in arrays[1:]:
        if type(a) is not _np_ndarray or a.dtype is not dtype or not a.flags.c_contiguous \
                or a.shape != first.shape:
            return False
    if first.size < MIN_SIZE and not _jit.loaded():
        return False
    return _jit.ready()


def _in_ranges(n, work):
    """``work(start, stop)`` over ``range(n)`` elements, in ranges on several threads when ``n``
    is large."""
    _host_threads.in_ranges(n, n, SPLIT_SIZE, work)


# ----------------------------------------------------------------------------- NumPy bodies
def _erf_in_dtype(v):
    """``math.erf`` of each element (double precision), rounded to ``v``'s dtype."""
    return numpy.frompyfunc(math.erf, 1, 1)(v).astype(v.dtype)


def np_gelu(x):
    """``(x * cdf, cdf)`` for a float NumPy array ``x``."""
    z = x / _SQRT_2
    cdf = 0.5 * (1 + (np_erf(z) if x.dtype == _F32 else _erf_in_dtype(z)))
    return x * cdf, cdf


def np_exp_or_zero(t):
    """``exp(t)`` for float32 ``t <= 0`` by Cephes' expf, 0 below ``ln(FLT_MIN)``."""
    return numpy.where(t < EXP_LOW, ZERO, np_exp_neg(t))


def np_gelu_grad(g, x, cdf):
    """GELU's input gradient from the output gradient ``g``, the input ``x`` and ``cdf``."""
    if x.dtype == _F32:
        e = np_exp_or_zero(NEG_HALF * x * x)
    else:
        e = numpy.exp(-0.5 * x * x)
    return g * (cdf + x * e / _SQRT_2PI)


def np_elu(x, alpha, scale):
    """ELU (``scale`` None) or SELU of float32 ``x``: ``x`` where positive, else
    ``alpha * expm1(x)``; times ``scale``."""
    y = numpy.where(x > ZERO, x, alpha * np_expm1_neg(numpy.where(x > ZERO, ZERO, x)))
    return y if scale is None else scale * y


def np_elu_grad(g, x, alpha, scale):
    """``g`` times the derivative of ``np_elu``: ``1`` or ``alpha * exp(x)``, times ``scale``."""
    d = numpy.where(x > ZERO, ONE, alpha * np_exp_neg(numpy.where(x > ZERO, ZERO, x)))
    return g * (d if scale is None else scale * d)


def np_swish(x, beta):
    """``(x * s, s)`` with ``s = sigmoid(x * beta)``, float32 ``x`` and ``beta``: Gluon's
    Swish, the operations of ``x * F.sigmoid(beta * x)`` in their order."""
    s = np_sigmoid(x * beta)
    return x * s, s


def np_swish_grad(g, x, s, beta):
    """Swish's input gradient as the recorded operations give it: ``g * s`` from the product,
    plus ``g * x`` through the sigmoid's gradient and the scaling."""
    return g * s + (((g * x) * s) * (ONE - s)) * beta


def np_softmax_f32(x):
    """Softmax of float32 ``x`` over its last axis (exponentials under ``ln(FLT_MIN)``, where
    the exact value is subnormal, are 0: a masked entry's ``-inf`` gives 0)."""
    e = np_exp_or_zero(x - x.max(axis=-1, keepdims=True))
    e /= e.sum(axis=-1, keepdims=True)
    return e


def np_log_softmax_f32(x):
    """Log-softmax of float32 ``x`` over its last axis."""
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - numpy.log(np_exp_or_zero(shifted).sum(axis=-1, keepdims=True))


def np_log_softmax_grad_f32(g, out):
    """``g - exp(out) * sum(g)`` over the last axis of float32 ``out``, a log-softmax."""
    return g - np_exp_or_zero(out) * g.sum(axis=-1, keepdims=True)


# ----------------------------------------------------------------------------- entry points
def _grad_of(loop, g, x, *args):
    """``loop(flat g, flat x, *args, flat gx, i0, i1)`` into a new ``gx`` like ``x``: an
    element-wise gradient, or None where the loop does not apply."""
    if not _usable(g, x):
        return None
    gx = numpy.empty_like(x)
    gf, xf, out = g.reshape(-1), x.reshape(-1), gx.reshape(-1)
    _in_ranges(xf.size, lambda i0, i1: loop(gf, xf, *args, out, i0, i1))
    return gx


def gelu(x):
    """``np_gelu(x)`` by the loop, or None where it does not apply."""
    if not _usable(x):
        return None
    out, cdf = numpy.empty_like(x), numpy.empty_like(x)
    flat, o, c = x.reshape(-1), out.reshape(-1), cdf.reshape(-1)
    t = x.dtype.type
    loop = _gelu_forward_f32 if x.dtype is _F32 else _gelu_forward
    _in_ranges(flat.size, lambda i0, i1: loop(flat, t(_SQRT_2), t(0.5), t(1), o, c, i0, i1))
    return out, cdf


def gelu_grad(g, x, cdf):
    """``np_gelu_grad(g, x, cdf)`` by the loop (float32), or None where it does not apply."""
    if not _usable(g, x, cdf) or x.dtype is not _F32:
        return None
    return _grad_of(_gelu_backward, g, x, cdf.reshape(-1))


def leaky(x, slope):
    """``where(x > 0, x, x * slope)`` by the loop, or None where it does not apply."""
    if not _usable(x):
        return None
    out = numpy.empty_like(x)
    flat, o = x.reshape(-1), out.reshape(-1)
    s = x.dtype.type(slope)
    _in_ranges(flat.size, lambda i0, i1: _leaky_forward(flat, s, o, i0, i1))
    return out


def leaky_grad(g, x, slope):
    """``g * where(x > 0, 1, slope)`` by the loop, or None where it does not apply."""
    t = x.dtype.type
    return _grad_of(_leaky_backward, g, x, t(slope), t(1))


def _planes(x, slope):
    """``(planes, channels, plane size)`` of ``x`` for a slope of ``slope.size`` values on axis 1
    (one value: the whole array a plane)."""
    if slope.size == 1 or x.ndim < 2:
        return 1, 1, x.size
    return x.shape[0] * x.shape[1], x.shape[1], x.size // (x.shape[0] * x.shape[1])


def prelu(x, slope):
    """``where(x > 0, x, x * slope)`` with ``slope`` per channel (or one value), by the loop; None
    where it does not apply."""
    if not _usable(x) or type(slope) is not _np_ndarray or slope.dtype is not x.dtype \
            or (slope.size != 1 and (x.ndim < 2 or slope.size != x.shape[1])):
        return None
    out = numpy.empty_like(x)
    planes, channels, size = _planes(x, slope)
    flat, o, s = x.reshape(-1), out.reshape(-1), numpy.ascontiguousarray(slope.reshape(-1))
    _host_threads.in_ranges(planes, x.size, SPLIT_SIZE, lambda p0, p1: _prelu_forward(
        flat, s, channels, size, o, p0, p1))
    return out


def prelu_grad(g, x, slope, need_x, need_slope):
    """``(g or g * slope where x <= 0, 0 or g * x where x <= 0)`` (None for what is not needed)
    by the loop; None where it does not apply."""
    if not _usable(g, x) or type(slope) is not _np_ndarray or slope.dtype is not x.dtype \
            or (slope.size != 1 and (x.ndim < 2 or slope.size != x.shape[1])):
        return None
    gx = numpy.empty_like(x) if need_x else x
    terms = numpy.empty_like(x) if need_slope else x
    planes, channels, size = _planes(x, slope)
    gf, xf, s = g.reshape(-1), x.reshape(-1), numpy.ascontiguousarray(slope.reshape(-1))
    _host_threads.in_ranges(planes, x.size, SPLIT_SIZE, lambda p0, p1: _prelu_backward(
        gf, xf, s, channels, size, need_x, need_slope, x.dtype.type(0), gx.reshape(-1),
        terms.reshape(-1), p0, p1))
    return (gx if need_x else None), (terms if need_slope else None)


def softmax_rows(e):
    """``e /= e.sum(axis=-1, keepdims=True)`` in place on the exponentials ``e`` (C-contiguous),
    by the loop; False where it does not apply."""
    if not _usable(e) or not e.ndim or not e.shape[-1]:
        return False
    width = e.shape[-1]
    rows = e.size // width
    flat, zero = e.reshape(-1), e.dtype.type(0)

    def work(r0, r1):
        tasks, values, _ = _pw.workspace(e.dtype, 0)
        _softmax_divide(flat, width, zero, tasks, values, r0, r1)
    _host_threads.in_ranges(rows, e.size, SPLIT_SIZE, work)
    return True


def softmax_grad(g, out, t):
    """``out * (g - (g * out).sum(axis=-1, keepdims=True)) / t`` (no division for ``t`` = 1) by
    the loop; None where it does not apply."""
    if not _usable(g, out) or not out.ndim or not out.shape[-1]:
        return None
    width = out.shape[-1]
    rows = out.size // width
    gx = numpy.empty_like(out)
    dtype = out.dtype
    divide = t != 1

    def work(r0, r1):
        tasks, values, scratch = _pw.workspace(dtype, width)
        _softmax_backward(g.reshape(-1), out.reshape(-1), width, dtype.type(t), divide,
                          dtype.type(0), gx.reshape(-1), tasks, values, scratch, r0, r1)
    _host_threads.in_ranges(rows, out.size, SPLIT_SIZE, work)
    return gx


def _elementwise(loop, x, *args):
    """``loop(flat x, *args, flat out, i0, i1)`` over ``x`` into a new array, or None where the
    loop does not apply (float32 only)."""
    if not _usable(x) or x.dtype is not _F32:
        return None
    out = numpy.empty_like(x)
    flat, o = x.reshape(-1), out.reshape(-1)
    _in_ranges(flat.size, lambda i0, i1: loop(flat, *args, o, i0, i1))
    return out


def exp_or_zero(t, out):
    """``out[...] = np_exp_or_zero(t)`` (float32 ``t <= 0``) by the loop; False where it does
    not apply (then nothing is written)."""
    if not _usable(t, out) or t.dtype is not _F32:
        return False
    flat, o = t.reshape(-1), out.reshape(-1)
    _in_ranges(flat.size, lambda i0, i1: _exp_or_zero_forward(flat, o, i0, i1))
    return True


def sigmoid(x):
    """``_expf.np_sigmoid(x)`` of float32 ``x`` by the loop, or None where it does not apply."""
    return _elementwise(_sigmoid_forward, x)


def tanh(x):
    """``_expf.np_tanh(x)`` of float32 ``x`` by the loop, or None where it does not apply."""
    return _elementwise(_tanh_forward, x)


def elu(x, alpha, scale):
    """``np_elu(x, alpha, scale)`` by the loop (float32), or None where it does not apply."""
    return _elementwise(_elu_forward, x, _f(alpha), _f(1 if scale is None else scale),
                        scale is not None)


def swish(x, beta):
    """``np_swish(x, beta)`` by the loop (float32), or None where it does not apply."""
    if not _usable(x) or x.dtype is not _F32:
        return None
    out, s = numpy.empty_like(x), numpy.empty_like(x)
    flat, o, sf = x.reshape(-1), out.reshape(-1), s.reshape(-1)
    _in_ranges(flat.size, lambda i0, i1: _swish_forward(flat, _f(beta), o, sf, i0, i1))
    return out, s


def swish_grad(g, x, s, beta):
    """``np_swish_grad(g, x, s, beta)`` by the loop (float32), or None."""
    if not _usable(g, x, s) or x.dtype is not _F32:
        return None
    return _grad_of(_swish_backward, g, x, s.reshape(-1), _f(beta))


def elu_grad(g, x, alpha, scale):
    """``np_elu_grad(g, x, alpha, scale)`` by the loop (float32), or None."""
    if x.dtype is not _F32:
        return None
    return _grad_of(_elu_backward, g, x, _f(alpha), _f(1 if scale is None else scale),
                    scale is not None)


def sigmoid_grad(g, out):
    """``g * out * (1 - out)`` (``out`` the sigmoid) by the loop, or None."""
    return _grad_of(_sigmoid_backward, g, out, out.dtype.type(1))


def tanh_grad(g, out):
    """``g * (1 - out * out)`` (``out`` the tanh) by the loop, or None."""
    return _grad_of(_tanh_backward, g, out, out.dtype.type(1))


def _rows_f32(x):
    """``(rows, width)`` of a float32 array worked over its last axis by a row loop, or None."""
    if not _usable(x) or x.dtype is not _F32 or not x.ndim or not x.shape[-1]:
        return None
    return x.size // x.shape[-1], x.shape[-1]


def _row_tops(x):
    """``(rows, width, room for each row's maximum, an output like x)`` for a softmax's row
    loop, or None where it does not apply; ``_tops`` fills the maxima of a range of rows."""
    shape = _rows_f32(x)
    if shape is None:
        return None
    return shape + (numpy.empty(shape[0], _F32), numpy.empty_like(x))


def _tops(x, width, top, r0, r1):
    """NumPy's maxima of rows ``r0..r1`` of ``x`` into ``top``: in each range's own thread (a
    row's maximum is the same whatever range it falls in)."""
    numpy.max(x.reshape(-1, width)[r0:r1], axis=-1, out=top[r0:r1])


def softmax_f32(x):
    """``np_softmax_f32(x)`` by the loop, or None where it does not apply."""
    made = _row_tops(x)
    if made is None:
        return None
    rows, width, top, out = made

    def work(r0, r1):
        _tops(x, width, top, r0, r1)
        tasks, values, _ = _pw.workspace(_F32, 0)
        _softmax_forward(x.reshape(-1), top, width, ZERO, out.reshape(-1), tasks, values, r0, r1)
    _host_threads.in_ranges(rows, x.size, SPLIT_SIZE, work)
    return out


def log_softmax_f32(x):
    """``np_log_softmax_f32(x)`` by the loop, or None where it does not apply."""
    made = _row_tops(x)
    if made is None:
        return None
    rows, width, top, out = made
    sums = numpy.empty(rows, _F32)

    def work(r0, r1):
        _tops(x, width, top, r0, r1)
        tasks, values, scratch = _pw.workspace(_F32, width)
        _log_softmax_shift(x.reshape(-1), top, width, ZERO, out.reshape(-1), sums, tasks,
                           values, scratch, r0, r1)
        # NumPy's log and subtraction, as before, on the rows this thread just wrote.
        out.reshape(-1, width)[r0:r1] -= numpy.log(sums[r0:r1]).reshape(-1, 1)
    _host_threads.in_ranges(rows, x.size, SPLIT_SIZE, work)
    return out


def log_softmax_grad_f32(g, out):
    """``np_log_softmax_grad_f32(g, out)`` by the loop, or None where it does not apply."""
    shape = _rows_f32(out)
    if shape is None or not _usable(g, out):
        return None
    rows, width = shape
    gx = numpy.empty_like(out)

    def work(r0, r1):
        tasks, values, _ = _pw.workspace(_F32, 0)
        _log_softmax_backward(g.reshape(-1), out.reshape(-1), width, ZERO, gx.reshape(-1),
                              tasks, values, r0, r1)
    _host_threads.in_ranges(rows, out.size, SPLIT_SIZE, work)
    return gx


# ----------------------------------------------------------------------------- the loops
def _gelu_forward_loop(x, s2, half, one, out, cdf, i0, i1):
    for i in range(i0, i1):
        v = x[i]
        cdf[i] = math.erf(numpy.float64(v / s2))     # stored: rounded to the dtype
        c = half * (one + cdf[i])
        cdf[i] = c
        out[i] = v * c


def _gelu_forward_f32_loop(x, s2, half, one, out, cdf, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        v = x[i]
        c = half * (one + erf(v / s2))      # noqa: F821 - bound to the compiled _expf.erf
        cdf[i] = c
        out[i] = v * c


def _exp_or_zero(t):
    e = exp_neg(t)          # noqa: F821 - bound to the compiled _expf.exp_neg
    return ZERO if t < EXP_LOW else e


# Indices as uint64 where they are used (see _conv_kernels: numba's check for negative indices
# keeps LLVM from vectorizing).
_U = numpy.uint64


def _gelu_backward_loop(g, x, cdf, gx, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        v = x[i]
        e = exp_or_zero(NEG_HALF * v * v)   # noqa: F821 - bound to the compiled helper
        gx[i] = g[i] * (cdf[i] + v * e / SQRT_2PI_F32)


def _leaky_forward_loop(x, slope, out, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        v = x[i]
        out[i] = v if v > 0 else v * slope


def _leaky_backward_loop(g, x, slope, one, gx, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        gx[i] = g[i] * (one if x[i] > 0 else slope)


def _prelu_forward_loop(x, slope, channels, size, out, p0, p1):
    for p in range(p0, p1):
        s = slope[p % channels]
        for k in range(p * size, (p + 1) * size):
            i = _U(k)
            v = x[i]
            out[i] = v if v > 0 else v * s


def _prelu_backward_loop(g, x, slope, channels, size, need_x, need_slope, zero, gx, terms, p0,
                         p1):
    for p in range(p0, p1):
        s = slope[p % channels]
        for k in range(p * size, (p + 1) * size):
            i = _U(k)
            v = x[i]
            gv = g[i]
            if need_x:
                gx[i] = gv if v > 0 else gv * s
            if need_slope:
                terms[i] = zero if v > 0 else gv * v


def _softmax_divide_loop(e, d, zero, tasks, values, r0, r1):
    for r in range(r0, r1):
        at = r * d
        total = zero + pairwise(e, at, d, zero, tasks, values)     # noqa: F821
        for k in range(at, at + d):
            j = _U(k)
            e[j] = e[j] / total


def _softmax_backward_loop(g, out, d, t, divide, zero, gx, tasks, values, scratch, r0, r1):
    for r in range(r0, r1):
        at = _U(r * d)
        for k in range(d):
            j = _U(k)
            scratch[j] = g[at + j] * out[at + j]
        total = zero + pairwise(scratch, 0, d, zero, tasks, values)     # noqa: F821
        for k in range(d):
            j = at + _U(k)
            v = out[j] * (g[j] - total)
            gx[j] = v / t if divide else v


def _exp_or_zero_forward_loop(t, out, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        out[i] = exp_or_zero(t[i])      # noqa: F821 - bound to the compiled helper


def _sigmoid_forward_loop(x, out, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        out[i] = sigmoid_one(x[i])      # noqa: F821 - bound to the compiled _expf.sigmoid


def _tanh_forward_loop(x, out, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        out[i] = tanh_one(x[i])         # noqa: F821 - bound to the compiled _expf.tanh


def _sigmoid_backward_loop(g, o, one, gx, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        v = o[i]
        gx[i] = g[i] * v * (one - v)


def _tanh_backward_loop(g, o, one, gx, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        v = o[i]
        gx[i] = g[i] * (one - v * v)


def _swish_forward_loop(x, beta, out, s, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        v = x[i]
        e = sigmoid_one(v * beta)       # noqa: F821 - bound to the compiled _expf.sigmoid
        s[i] = e
        out[i] = v * e


def _swish_backward_loop(g, x, s, beta, gx, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        gv, e = g[i], s[i]
        gx[i] = gv * e + (((gv * x[i]) * e) * (ONE - e)) * beta


def _elu_forward_loop(x, alpha, scale, scaled, out, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        v = x[i]
        e = alpha * expm1_neg(ZERO if v > ZERO else v)      # noqa: F821 - _expf.expm1_neg
        y = v if v > ZERO else e
        out[i] = scale * y if scaled else y


def _elu_backward_loop(g, x, alpha, scale, scaled, gx, i0, i1):
    for k in range(i0, i1):
        i = _U(k)
        v = x[i]
        e = alpha * exp_neg(ZERO if v > ZERO else v)        # noqa: F821 - _expf.exp_neg
        d = ONE if v > ZERO else e
        gx[i] = g[i] * (scale * d if scaled else d)


def _softmax_forward_loop(x, top, d, zero, out, tasks, values, r0, r1):
    for r in range(r0, r1):
        at, m = r * d, top[r]
        for k in range(at, at + d):
            j = _U(k)
            out[j] = exp_or_zero(x[j] - m)      # noqa: F821 - bound to the compiled helper
        total = zero + pairwise(out, at, d, zero, tasks, values)     # noqa: F821
        for k in range(at, at + d):
            j = _U(k)
            out[j] = out[j] / total


def _log_softmax_shift_loop(x, top, d, zero, out, sums, tasks, values, scratch, r0, r1):
    for r in range(r0, r1):
        at, m = r * d, top[r]
        for k in range(d):
            j = _U(k)
            v = x[_U(at) + j] - m
            out[_U(at) + j] = v
            scratch[j] = exp_or_zero(v)        # noqa: F821 - bound to the compiled helper
        sums[r] = zero + pairwise(scratch, 0, d, zero, tasks, values)     # noqa: F821


def _log_softmax_backward_loop(g, out, d, zero, gx, tasks, values, r0, r1):
    for r in range(r0, r1):
        at = r * d
        total = zero + pairwise(g, at, d, zero, tasks, values)     # noqa: F821
        for k in range(at, at + d):
            j = _U(k)
            gx[j] = g[j] - exp_or_zero(out[j]) * total     # noqa: F821


_exp_or_zero_kernel = _jit.Kernel(_exp_or_zero, {"exp_neg": _exp_neg_kernel}, inline=True)
_gelu_forward = _jit.Kernel(_gelu_forward_loop)
_gelu_forward_f32 = _jit.Kernel(_gelu_forward_f32_loop, {"erf": _erf})
_gelu_backward = _jit.Kernel(_gelu_backward_loop, {"exp_or_zero": _exp_or_zero_kernel})
_leaky_forward = _jit.Kernel(_leaky_forward_loop)
_leaky_backward = _jit.Kernel(_leaky_backward_loop)
_prelu_forward = _jit.Kernel(_prelu_forward_loop)
_prelu_backward = _jit.Kernel(_prelu_backward_loop)
_softmax_divide = _jit.Kernel(_softmax_divide_loop, {"pairwise": _pw.pairwise})
_softmax_backward = _jit.Kernel(_softmax_backward_loop, {"pairwise": _pw.pairwise})
_sigmoid_forward = _jit.Kernel(_sigmoid_forward_loop, {"sigmoid_one": _sigmoid})
_tanh_forward = _jit.Kernel(_tanh_forward_loop, {"tanh_one": _tanh})
_sigmoid_backward = _jit.Kernel(_sigmoid_backward_loop)
_tanh_backward = _jit.Kernel(_tanh_backward_loop)
_elu_forward = _jit.Kernel(_elu_forward_loop, {"expm1_neg": _expm1_neg})
_elu_backward = _jit.Kernel(_elu_backward_loop, {"exp_neg": _exp_neg_kernel})
_softmax_forward = _jit.Kernel(_softmax_forward_loop, {"exp_or_zero": _exp_or_zero_kernel,
                                                       "pairwise": _pw.pairwise})
_log_softmax_shift = _jit.Kernel(_log_softmax_shift_loop, {"exp_or_zero": _exp_or_zero_kernel,
                                                           "pairwise": _pw.pairwise})
_log_softmax_backward = _jit.Kernel(_log_softmax_backward_loop,
                                    {"exp_or_zero": _exp_or_zero_kernel, "pairwise": _pw.pairwise})
_exp_or_zero_forward = _jit.Kernel(_exp_or_zero_forward_loop, {"exp_or_zero": _exp_or_zero_kernel})
_swish_forward = _jit.Kernel(_swish_forward_loop, {"sigmoid_one": _sigmoid})
_swish_backward = _jit.Kernel(_swish_backward_loop)
