"""The raw arrays of MXNet 1.9.1's special functions ``gamma``, ``gammaln`` and ``erfinv``, and
of their gradients (the digamma function ``psi`` of Cephes), to MXNet's bits on the CPU.

MXNet's CPU calls the C library for the gamma functions: ``tgammaf``/``lgammaf`` for float32
(and float16, through float), ``tgamma``/``lgamma`` for float64 and for integers; they are
called here through ``_libm``, as are the logarithms, tangents and exponentials inside psi and
erfinv's gradient (NumPy's SIMD ones differ from glibc's in the last bit for a good share of
inputs).

``psi`` and ``erfinv`` are MXNet's C++ (``special_functions-inl.h``, ``contrib/erfinv-inl.h``)
written over arrays, operation for operation in the same order and precision: psi<float> does
its arithmetic in float except where the C++ mixes in a double literal (``y += 1.0/w``,
``logf(s) - (0.5/s) - y - w``), which is then computed in float64 and rounded once, as there;
psi<double> takes ``logf`` of its argument (a float logarithm), as MXNet's does; erfinv computes
in double for every dtype and rounds the result (through float for float16).

On CuPy the functions are ``cupyx.scipy.special``'s (gamma, gammaln, digamma, erfinv), with
MXNet's values at the poles; their last bits may differ from MXNet's GPU build.
"""
from __future__ import annotations

import math

import numpy

from . import _libm
from . import integers as _integers
from .ndarray import _xp_of

_f32, _f64 = numpy.float32, numpy.float64

libm = _libm.call      # the C library's function of each element (``_libm``)


# ---- psi (digamma), Cephes as MXNet holds it ----------------------------------------------------

_EUL = 0.57721566490153286061
_PI = 3.14159265358979323846
_PSI_A = {_f64: [8.33333333333333333333E-2, -2.10927960927960927961E-2,
                 7.57575757575757575758E-3, -4.16666666666666666667E-3,
                 3.96825396825396825397E-3, -8.33333333333333333333E-3,
                 8.33333333333333333333E-2],
          _f32: [-4.16666666666666666667E-3, 3.96825396825396825397E-3,
                 -8.33333333333333333333E-3, 8.33333333333333333333E-2]}


def _harmonic(T):
    """psi at 1..10 as MXNet's loop sums it: ``y += 1.0/w`` in double, kept in ``T``."""
    table = [T(0)]
    for n in range(1, 11):
        y = T(0)
        for i in range(1, n):
            y = T(_f64(y) + 1.0 / i)
        table.append(T(y - T(_EUL)))
    return numpy.array(table, dtype=T)


_HARMONIC = {T: _harmonic(T) for T in (_f32, _f64)}


def psi(x):
    """Cephes' digamma of the float32 or float64 NumPy array ``x``, MXNet's
    ``special_functions::cephes::psi<DType>``: ``DBL_MAX`` (inf in float32) at 0 and the
    negative integers."""
    T = x.dtype.type
    single = T is _f32
    x = numpy.array(x, dtype=T, copy=True).reshape(-1)
    y = numpy.zeros_like(x)
    nz = numpy.zeros_like(x)
    pole = numpy.zeros(x.shape, dtype=bool)
    with numpy.errstate(all="ignore"):
        neg = x <= 0
        if neg.any():
            q = x[neg]
            p = numpy.floor(q)
            pole[neg] = p == q
            # the nearest integer is taken away so that tan(PI x) has no zeros
            r = q - p
            half = r == T(0.5)
            r = numpy.where(r > T(0.5), q - (p + T(1)), r)
            tan = libm("tanf" if single else "tan", T(_PI) * r)
            nz[neg] = numpy.where(half, T(0), T(_PI) / tan)
            x[neg] = T(1) - q
        whole = (x <= 10) & (x == numpy.floor(x)) & ~pole
        y[whole] = _HARMONIC[T][x[whole].astype(numpy.int64)]
        rest = ~whole & ~pole
        s = x[rest]
        w = numpy.zeros_like(s)
        below = s < 10
        while below.any():
            if single:
                w[below] = (w[below].astype(_f64) + 1.0 / s[below].astype(_f64)).astype(_f32)
            else:
                w[below] += 1.0 / s[below]
            s[below] += T(1)
            below = s < 10
        z = T(1) / (s * s)
        coef = _PSI_A[T]
        ans = numpy.full_like(s, T(coef[0]))
        for c in coef[1:]:
            ans = ans * z + T(c)
        h = numpy.where(s < (1.0e8 if single else 1.0e17), z * ans, T(0))
        # logf in both: psi<double> calls the float logarithm on its double argument
        log_s = libm("logf", s.astype(_f32)).astype(_f64)
        y[rest] = (log_s - 0.5 / s.astype(_f64) - h.astype(_f64) - w.astype(_f64)).astype(T)
        y = numpy.where(neg, y - nz, y)
        y[pole] = numpy.finfo(_f64).max     # float32: inf
    return y


# ---- erfinv, Cephes' ndtri as MXNet holds it --------------------------------------------------

_P0 = [-5.99633501014107895267E1, 9.80010754185999661536E1, -5.66762857469070293439E1,
       1.39312609387279679503E1, -1.23916583867381258016E0]
_Q0 = [1.95448858338141759834E0, 4.67627912898881538453E0, 8.63602421390890590575E1,
       -2.25462687854119370527E2, 2.00260212380060660359E2, -8.20372256168333339912E1,
       1.59056225126211695515E1, -1.18331621121330003142E0]
_P1 = [4.05544892305962419923E0, 3.15251094599893866154E1, 5.71628192246421288162E1,
       4.40805073893200834700E1, 1.46849561928858024014E1, 2.18663306850790267539E0,
       -1.40256079171354495875E-1, -3.50424626827848203418E-2, -8.57456785154685413611E-4]
_Q1 = [1.57799883256466749731E1, 4.53907635128879210584E1, 4.13172038254672030440E1,
       1.50425385692907503408E1, 2.50464946208309415979E0, -1.42182922854787788574E-1,
       -3.80806407691578277194E-2, -9.33259480895457427372E-4]
_P2 = [3.23774891776946035970E0, 6.91522889068984211695E0, 3.93881025292474443415E0,
       1.33303460815807542389E0, 2.01485389549179081538E-1, 1.23716634817820021358E-2,
       3.01581553508235416007E-4, 2.65806974686737550832E-6, 6.23974539184983293730E-9]
_Q2 = [6.02427039364742014255E0, 3.67983563856160859403E0, 1.37702099489081330271E0,
       2.16236993594496635890E-1, 1.34204006088543189037E-2, 3.28014464682127739104E-4,
       2.89247864745380683936E-6, 6.79019408009981274425E-9]
_EXP_M2 = 0.13533528323661269189          # exp(-2)
_S2PI = 2.50662827463100050242E0
_M_2_SQRTPI = 1.12837916709551257390
_M_SQRT1_2 = 0.70710678118654752440


def _polevl(x, coef):
    ans = numpy.full_like(x, coef[0])
    for c in coef[1:]:
        ans = ans * x + c
    return ans


def _p1evl(x, coef):
    ans = x + coef[0]
    for c in coef[1:]:
        ans = ans * x + c
    return ans


def _ndtri(y0):
    """Cephes' inverse of the normal distribution function, of float64 ``y0`` in (0, 1)."""
    y = y0.copy()
    flip = y > (1.0 - _EXP_M2)
    y[flip] = 1.0 - y[flip]
    out = numpy.empty_like(y)
    mid = y > _EXP_M2
    c = y[mid] - 0.5
    c2 = c * c
    out[mid] = (c + c * (c2 * _polevl(c2, _P0) / _p1evl(c2, _Q0))) * _S2PI
    tail = ~mid
    x = numpy.sqrt(-2.0 * libm("log", y[tail]))
    x0 = x - libm("log", x) / x
    z = 1.0 / x
    x1 = numpy.where(x < 8.0, z * _polevl(z, _P1) / _p1evl(z, _Q1),
                     z * _polevl(z, _P2) / _p1evl(z, _Q2))
    t = x0 - x1
    out[tail] = numpy.where(flip[tail], t, -t)
    return out


def erfinv64(v):
    """MXNet's ``mshadow_op::erfinv`` in double of the float64 NumPy array ``v``: ``y/(2/sqrt
    pi)`` for ``|y| < 1e-7``, ``ndtri((y+1)/2)/sqrt 2`` inside (-1, 1), +-inf at +-1, NaN
    beyond."""
    v = numpy.asarray(v, dtype=_f64).reshape(-1)
    out = numpy.full_like(v, numpy.nan)
    with numpy.errstate(all="ignore"):
        small = (-1e-7 < v) & (v < 1e-7)
        out[small] = v[small] / _M_2_SQRTPI
        inside = (-1.0 < v) & (v < 1.0) & ~small
        out[inside] = _ndtri(0.5 * (v[inside] + 1.0)) * _M_SQRT1_2
        edge = (v == -1.0) | (v == 1.0)
        out[edge] = numpy.copysign(numpy.inf, v[edge])
    return out


# ---- the ops' raw functions ---------------------------------------------------------------------

def _cupy_special():
    import cupyx.scipy.special
    return cupyx.scipy.special


def _computed(d):
    """``(work, dtype)``: the array MXNet's kernel computes on (float for float16) and the
    dtype its result is stored in."""
    return (d.astype(_f32) if d.dtype == numpy.float16 else d), d.dtype


def _stored(out, dtype, shape):
    # float16 from float (half_t's constructor; overflow is inf)
    with numpy.errstate(over="ignore"):
        return out.astype(dtype, copy=False).reshape(shape)


def gamma(d):
    """MXNet's ``gamma`` of a floating array: ``tgammaf``/``tgamma`` of each element."""
    work, dtype = _computed(d)
    if _xp_of(d) is not numpy:
        xp = _xp_of(d)
        r = _cupy_special().gamma(work)
        # glibc's values at the poles: NaN at the negative integers, +-inf at +-0
        r = xp.where((work < 0) & (work == xp.floor(work)), xp.nan, r)
        r = xp.where(work == 0, xp.copysign(xp.inf, work), r)
        with numpy.errstate(over="ignore"):
            return r.astype(dtype, copy=False)
    return _stored(libm("tgammaf" if work.dtype == _f32 else "tgamma", work), dtype, d.shape)


def gammaln(d):
    """MXNet's ``gammaln``: ``lgammaf``/``lgamma``, the log of ``|gamma|``."""
    work, dtype = _computed(d)
    if _xp_of(d) is not numpy:
        return _cupy_special().gammaln(work).astype(dtype, copy=False)
    return _stored(libm("lgammaf" if work.dtype == _f32 else "lgamma", work), dtype, d.shape)


def erfinv(d):
    """MXNet's ``erfinv``: computed in double, stored in ``d``'s dtype (through float for
    float16, as half_t's constructor from double rounds)."""
    if _xp_of(d) is not numpy:
        work, dtype = _computed(d)
        return _cupy_special().erfinv(work).astype(dtype, copy=False)
    out = erfinv64(d).reshape(d.shape)
    if d.dtype == numpy.float16:
        out = out.astype(_f32)
    with numpy.errstate(over="ignore"):
        return out.astype(d.dtype, copy=False)


def _digamma(work):
    xp = _xp_of(work)
    if xp is numpy:
        return psi(work).reshape(work.shape)
    r = _cupy_special().digamma(work)
    return xp.where((work <= 0) & (work == xp.floor(work)),
                    work.dtype.type(numpy.finfo(_f64).max if work.dtype == _f64 else numpy.inf),
                    r)


def gamma_grad(g, d):
    """``g * gamma(x) psi(x)``: MXNet's ``_backward_gamma`` (float arithmetic for float16, its
    product rounded to half before the head gradient multiplies it)."""
    work, dtype = _computed(d)
    with numpy.errstate(all="ignore"):
        local = (gamma(work) * _digamma(work)).astype(dtype, copy=False)
        return _times(g, local)


def gammaln_grad(g, d):
    """``g * psi(x)``: MXNet's ``_backward_gammaln``."""
    work, dtype = _computed(d)
    with numpy.errstate(all="ignore"):
        return _times(g, _digamma(work).astype(dtype, copy=False))


def erfinv_grad(g, o):
    """``g * sqrt(pi)/2 exp(erfinv(x)^2)`` from the output ``o`` (MXNet's gradient uses the
    output). MXNet's constant is ``0.5 * sqrtf(float(pi))``: float-accurate also in float64."""
    work, dtype = _computed(o)
    xp = _xp_of(o)
    half_root_pi = 0.5 * float(numpy.sqrt(_f32(math.pi)))
    with numpy.errstate(all="ignore"):
        square = work * work
        if xp is numpy:
            e = libm("expf" if work.dtype == _f32 else "exp", square).reshape(o.shape)
        else:
            e = xp.exp(square)
        local = (half_root_pi * e.astype(_f64)).astype(work.dtype).astype(dtype, copy=False)
        return _times(g, local)


def _times(g, local):
    # float16 * float16 is a float product rounded to half, as mshadow's half_t multiplies
    if local.dtype == numpy.float16:
        return (g.astype(_f32) * local.astype(_f32)).astype(numpy.float16)
    return (g * local).astype(local.dtype, copy=False)


def on_integers(name, d):
    """``name``'s result for an integer array: MXNet computes in double (its integer overload
    of the C functions) and converts back as x86 does; erfinv's NaN (a constant the compiler
    folds) becomes 0."""
    xp = _xp_of(d)
    work = d.astype(_f64)
    if name == "erfinv":
        if xp is numpy:
            r = erfinv64(work).reshape(d.shape)
        else:
            r = _cupy_special().erfinv(work)
        r = xp.where(xp.isnan(r), 0.0, r)
    elif xp is numpy:
        r = libm("tgamma" if name == "gamma" else "lgamma", work)
    else:
        r = gamma(work) if name == "gamma" else _cupy_special().gammaln(work)
    return _integers.c_cast(r, d.dtype)
