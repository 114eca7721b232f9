"""Differentiable array ops: elementwise math, reductions, shape changes, products, softmax.

Each op computes on the raw array and, while recording an input that needs a gradient, hands
``_recorded`` a vector-Jacobian function; the same
function serves NumPy and CuPy because it only uses the array module of its inputs.
"""
from __future__ import annotations

import builtins as _builtins
import functools
import math
import numbers

import numpy

from .ndarray import (NDArray, _maximum_op, _minimum_op, _no_gradient, _recorded,
                      _recording_for, _scalar, _scatter_add, _wrap, _xp_of, unbroadcast)
from .. import autograd as _ag
from ..base import IndexRangeError, ShapeError
from . import _act_kernels, _expf, _fc_cuda, _fc_kernels
from . import _special
from . import integers as _integers

_state = _ag._state
_np_ndarray = numpy.ndarray

__all__ = [
    "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "square", "abs", "sign", "negative",
    "reciprocal", "sin", "cos", "tanh", "sigmoid", "relu", "softrelu", "clip", "floor", "ceil",
    "round", "maximum", "minimum", "power", "add", "subtract", "multiply", "divide", "where",
    "sum", "mean", "max", "min", "prod", "norm", "argmax", "argmin", "reshape", "transpose",
    "flatten", "expand_dims", "squeeze", "swapaxes", "broadcast_to", "broadcast_like", "tile",
    "repeat", "dot", "batch_dot", "softmax", "log_softmax", "concat", "concatenate", "stack",
    "split", "pick", "take", "one_hot", "topk", "sort", "argsort", "slice_axis", "zeros_like",
    "ones_like", "full_like", "Activation", "FullyConnected", "flip", "reshape_like",
    "log2", "log10", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh", "arccosh",
    "arctanh", "degrees", "radians", "cbrt", "rcbrt", "trunc", "fix", "rint", "erf", "erfinv",
    "gamma", "gammaln", "softsign",
    "hard_sigmoid", "smooth_l1", "identity", "BlockGrad", "stop_gradient", "cast", "Cast", "add_n",
    "ElementWiseSum", "broadcast_axis", "broadcast_axes", "softmin", "sum_axis", "max_axis",
    "min_axis", "Reshape", "Concat", "SwapAxis", "SliceChannel", "equal", "not_equal", "greater",
    "greater_equal", "lesser", "lesser_equal", "broadcast_equal", "broadcast_not_equal",
    "broadcast_greater", "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
]


def _float_like(out, d):
    """``out`` in ``d``'s floating dtype; floating for an integer ``d`` (``_unary`` converts
    it back as MXNet does)."""
    return out.astype(d.dtype, copy=False) if d.dtype.kind == "f" else out


def _unary(x, fwd, grad):
    """``grad(g, x_raw, out_raw)`` gives the input gradient; ``None`` marks a constant op."""
    xd = x._data
    if xd.dtype.kind in "iu":
        # MXNet computes a floating function of integers in float32 and converts back; whether
        # the function is floating, its result on no elements tells.
        with numpy.errstate(all="ignore"):
            if fwd(xd.reshape(-1)[:0]).dtype.kind == "f":
                out = _integers.c_cast(fwd(xd.astype(numpy.float32)), xd.dtype)
            else:
                out = fwd(xd)
        return _wrap(out, x._ctx)
    out = fwd(xd)
    if grad is not None and _state.recording and (x._node is not None or x._grad is not None):
        return _recorded(out, x._ctx, (x,), lambda g, needs: (grad(g, xd, out),))
    return _wrap(out, x._ctx)


def exp(x):
    return _unary(x, lambda d: _xp_of(d).exp(d), lambda g, d, o: g * o)


def log(x):
    return _unary(x, lambda d: _xp_of(d).log(d), lambda g, d, o: g / d)


def log1p(x):
    return _unary(x, lambda d: _xp_of(d).log1p(d), lambda g, d, o: g / (1 + d))


def expm1(x):
    return _unary(x, lambda d: _xp_of(d).expm1(d), lambda g, d, o: g * (o + 1))


def sqrt(x):
    return _unary(x, lambda d: _xp_of(d).sqrt(d), lambda g, d, o: g / (2 * o))


def rsqrt(x):
    return _unary(x, lambda d: 1 / _xp_of(d).sqrt(d), lambda g, d, o: -0.5 * g * o / d)


def _square_raw(d):
    return d * d


def _square_grad(g, d, o):
    return 2 * g * d


def square(x):
    return _unary(x, _square_raw, _square_grad)


def abs(x):
    return _unary(x, lambda d: _xp_of(d).abs(d), lambda g, d, o: g * _xp_of(d).sign(d))


def sign(x):
    return _unary(x, lambda d: _xp_of(d).sign(d), _zero_grad)


def negative(x):
    return -x


def reciprocal(x):
    return _unary(x, lambda d: 1 / d, lambda g, d, o: -g * o * o)


def sin(x):
    return _unary(x, lambda d: _xp_of(d).sin(d), lambda g, d, o: g * _xp_of(d).cos(d))


def cos(x):
    return _unary(x, lambda d: _xp_of(d).cos(d), lambda g, d, o: -g * _xp_of(d).sin(d))


# On the CPU, float32 sigmoid and tanh are Cephes' (``_expf``): one vectorized loop where numba
# runs, the same operations over whole arrays where it does not; NumPy's SIMD exp is slower here
# and no loop reproduces its bits.
def _tanh_raw(d):
    if type(d) is _np_ndarray and d.dtype == numpy.float32:
        out = _act_kernels.tanh(d)
        return _expf.np_tanh(d) if out is None else out
    return _xp_of(d).tanh(d)


def _tanh_grad(g, d, o):
    gx = _act_kernels.tanh_grad(g, o)
    return g * (1 - o * o) if gx is None else gx


def tanh(x):
    return _unary(x, _tanh_raw, _tanh_grad)


def _sigmoid_raw(d):
    if type(d) is _np_ndarray and d.dtype == numpy.float32:
        out = _act_kernels.sigmoid(d)
        return _expf.np_sigmoid(d) if out is None else out
    xp = _xp_of(d)
    # Split by sign so that exp never overflows, for float32 and float64 alike.
    e = xp.exp(-xp.abs(d))
    return _float_like(xp.where(d >= 0, 1 / (1 + e), e / (1 + e)), d)


def _sigmoid_grad(g, d, o):
    gx = _act_kernels.sigmoid_grad(g, o)
    return g * o * (1 - o) if gx is None else gx


def sigmoid(x):
    return _unary(x, _sigmoid_raw, _sigmoid_grad)


def _relu_raw(d):
    out = _fc_kernels.relu(d)       # one pass; NumPy's maximum with a scalar is slow
    return _xp_of(d).maximum(d, 0) if out is None else out


def _relu_grad(g, d, o):
    masked = _fc_kernels.relu_mask(g, d)
    return g * (d > 0) if masked is None else masked


def relu(x):
    return _unary(x, _relu_raw, _relu_grad)


def softrelu(x):
    return _unary(x, lambda d: _float_like(_xp_of(d).logaddexp(d, 0), d),
                  lambda g, d, o: g * _sigmoid_raw(d))


def clip(data, a_min, a_max):
    lo, hi = _scalar(a_min), _scalar(a_max)
    return _unary(data, lambda d: _xp_of(d).clip(d, lo, hi),
                  lambda g, d, o: g * ((d >= lo) & (d <= hi)))


def _zero_grad(g, d, o):
    return _xp_of(g).zeros_like(g)


# Piecewise-constant ops have a zero gradient in MXNet: the graph goes on through them.
def floor(x):
    return _unary(x, lambda d: _xp_of(d).floor(d), _zero_grad)


def ceil(x):
    return _unary(x, lambda d: _xp_of(d).ceil(d), _zero_grad)


def _round_half_away(d):
    """MXNet's ``round``: halves go away from zero (NumPy's ``round`` goes to even)."""
    if d.dtype.kind in "iub":
        return d.copy()
    xp = _xp_of(d)
    t = xp.trunc(d)     # d - t is exact, so the halves are found exactly (floor(d + 0.5) is not)
    return xp.where(xp.abs(d - t) >= d.dtype.type(0.5), t + xp.sign(d), t)


def round(x):
    return _unary(x, _round_half_away, _zero_grad)


def _as_nd(x, like):
    return x if isinstance(x, NDArray) else like


def maximum(lhs, rhs):
    if isinstance(lhs, NDArray):
        return _maximum_op(lhs, rhs)
    if not isinstance(rhs, NDArray):
        return _builtins.max(lhs, rhs)      # two numbers: a number, as MXNet
    return _maximum_op(rhs, lhs)


def minimum(lhs, rhs):
    if isinstance(lhs, NDArray):
        return _minimum_op(lhs, rhs)
    if not isinstance(rhs, NDArray):
        return _builtins.min(lhs, rhs)
    return _minimum_op(rhs, lhs)


def power(base, exp):
    return base ** exp


def add(lhs, rhs):
    return lhs + rhs


def subtract(lhs, rhs):
    return lhs - rhs


def multiply(lhs, rhs):
    return lhs * rhs


def divide(lhs, rhs):
    return lhs / rhs


def where(condition, x, y):
    cond = condition._data != 0
    if cond.ndim == 1 and x.ndim > 1 and cond.shape[0] == x.shape[0]:
        # MXNet: a 1-D condition picks whole rows (along the first axis) of x or y.
        cond = cond.reshape((-1,) + (1,) * (x.ndim - 1))
    xp = _xp_of(cond)
    out = xp.where(cond, x._data, y._data)
    if _recording_for(x, y):
        xs, ys = x._data.shape, y._data.shape
        return _recorded(out, x._ctx, (x, y), lambda g, needs: (
            unbroadcast(g * cond, xs) if needs[0] else None,
            unbroadcast(g * ~cond, ys) if needs[1] else None))
    return _wrap(out, x._ctx)


def log2(x):
    return _unary(x, lambda d: _xp_of(d).log2(d), lambda g, d, o: g / (d * numpy.log(2.0)))


def log10(x):
    return _unary(x, lambda d: _xp_of(d).log10(d), lambda g, d, o: g / (d * numpy.log(10.0)))


def tan(x):
    return _unary(x, lambda d: _xp_of(d).tan(d), lambda g, d, o: g * (1 + o * o))


def arcsin(x):
    return _unary(x, lambda d: _xp_of(d).arcsin(d), lambda g, d, o: g / _xp_of(d).sqrt(1 - d * d))


def arccos(x):
    return _unary(x, lambda d: _xp_of(d).arccos(d), lambda g, d, o: -g / _xp_of(d).sqrt(1 - d * d))


def arctan(x):
    return _unary(x, lambda d: _xp_of(d).arctan(d), lambda g, d, o: g / (1 + d * d))


def sinh(x):
    return _unary(x, lambda d: _xp_of(d).sinh(d), lambda g, d, o: g * _xp_of(d).cosh(d))


def cosh(x):
    return _unary(x, lambda d: _xp_of(d).cosh(d), lambda g, d, o: g * _xp_of(d).sinh(d))


def arcsinh(x):
    return _unary(x, lambda d: _xp_of(d).arcsinh(d), lambda g, d, o: g / _xp_of(d).sqrt(d * d + 1))


def arccosh(x):
    return _unary(x, lambda d: _xp_of(d).arccosh(d), lambda g, d, o: g / _xp_of(d).sqrt(d * d - 1))


def arctanh(x):
    return _unary(x, lambda d: _xp_of(d).arctanh(d), lambda g, d, o: g / (1 - d * d))


def degrees(x):
    return _unary(x, lambda d: _xp_of(d).degrees(d), lambda g, d, o: g * (180.0 / numpy.pi))


def radians(x):
    return _unary(x, lambda d: _xp_of(d).radians(d), lambda g, d, o: g * (numpy.pi / 180.0))


def cbrt(x):
    return _unary(x, lambda d: _xp_of(d).cbrt(d), lambda g, d, o: g / (3 * o * o))


def rcbrt(x):
    return _unary(x, lambda d: 1 / _xp_of(d).cbrt(d), lambda g, d, o: -g * o / (3 * d))


def trunc(x):
    return _unary(x, lambda d: _xp_of(d).trunc(d), _zero_grad)


fix = trunc


def _rint_half_down(d):
    """MXNet's ``rint``: ``n.5`` goes to ``n`` (down, for either sign; NumPy's goes to even)."""
    if d.dtype.kind in "iub":
        return d.copy()
    xp = _xp_of(d)
    low, high = xp.floor(d), xp.ceil(d)
    return xp.where(d - low <= high - d, low, high)      # MXNet's formula, its rounding too


def rint(x):
    return _unary(x, _rint_half_down, _zero_grad)


def _erf_raw(d):
    xp = _xp_of(d)
    if xp is numpy:
        # NumPy has no erf; math.erf is exact to the last bit, elementwise.
        return numpy.frompyfunc(math.erf, 1, 1)(d).astype(d.dtype if d.dtype.kind == "f"
                                                          else numpy.float32)
    import cupyx.scipy.special
    return cupyx.scipy.special.erf(d)


def erf(x):
    return _unary(x, _erf_raw,
                  lambda g, d, o: g * (2 / math.sqrt(math.pi)) * _xp_of(d).exp(-d * d))


def _special_unary(name, x, grad):
    """``_special``'s ``name`` with ``grad(g, x_raw, out_raw)``; integers take MXNet's double
    path (its integer overloads of the C functions), not ``_unary``'s float32 one."""
    if x._data.dtype.kind in "iu":
        return _wrap(_special.on_integers(name, x._data), x._ctx)
    return _unary(x, getattr(_special, name), grad)


def gamma(data):
    """The gamma function of each element (MXNet's ``gamma(data)``): the C library's
    ``tgammaf`` (float32, float16) or ``tgamma`` (float64, integers), NaN at the negative
    integers, +-inf at +-0. Gradient ``gamma(x) psi(x)`` (Cephes' digamma, as MXNet's)."""
    return _special_unary("gamma", data, lambda g, d, o: _special.gamma_grad(g, d))


def gammaln(data):
    """The log of ``|gamma|`` of each element (MXNet's ``gammaln(data)``): the C library's
    ``lgammaf``/``lgamma``; +inf at 0 and the negative integers. Gradient ``psi(x)`` (MXNet's
    Cephes digamma: the largest double, inf in float32, at the poles)."""
    return _special_unary("gammaln", data, lambda g, d, o: _special.gammaln_grad(g, d))


def erfinv(data):
    """The inverse error function of each element (MXNet's ``erfinv(data)``), computed in
    double by Cephes' ``ndtri`` as MXNet's: +-inf at +-1, NaN beyond. Gradient
    ``sqrt(pi)/2 exp(erfinv(x)^2)``, from the output as MXNet's."""
    return _special_unary("erfinv", data, lambda g, d, o: _special.erfinv_grad(g, o))


def softsign(x):
    return _unary(x, lambda d: d / (1 + _xp_of(d).abs(d)),
                  lambda g, d, o: g / ((1 + _xp_of(d).abs(d)) ** 2))


def hard_sigmoid(x, alpha=0.2, beta=0.5):
    return _unary(x, lambda d: _xp_of(d).clip(d * alpha + beta, 0, 1),
                  lambda g, d, o: g * alpha * ((o > 0) & (o < 1)))


def smooth_l1(data, scalar=1.0):
    """``0.5 (scalar x)^2`` where ``|x| < 1/scalar^2``, else ``|x| - 0.5/scalar^2``."""
    s2 = float(scalar) ** 2

    def fwd(d):
        xp = _xp_of(d)
        a = xp.abs(d)
        return _float_like(xp.where(a < 1 / s2, 0.5 * s2 * d * d, a - 0.5 / s2), d)
    return _unary(data, fwd, lambda g, d, o: g * _xp_of(d).where(_xp_of(d).abs(d) < 1 / s2, s2 * d,
                                                                   _xp_of(d).sign(d)))


def identity(data):
    """A copy of ``data`` that passes gradients through (MXNet's ``_copy``)."""
    return data.copy()


def BlockGrad(data):
    """``data`` as a constant: no gradient flows back through it."""
    return _wrap(data._data.copy(), data._ctx)


stop_gradient = BlockGrad


def cast(data, dtype):
    return data.astype(dtype)


Cast = cast


def add_n(*args):
    if len(args) == 1 and isinstance(args[0], (list, tuple)):
        args = tuple(args[0])
    out = args[0]
    for a in args[1:]:
        out = out + a
    return out if len(args) > 1 else out.copy()


ElementWiseSum = add_n


def _compare_fn(op):
    def fn(lhs, rhs):
        if not isinstance(lhs, NDArray):
            return getattr(rhs, _REFLECTED[op])(lhs)
        return getattr(lhs, op)(rhs)
    return fn


_REFLECTED = {"__eq__": "__eq__", "__ne__": "__ne__", "__gt__": "__lt__", "__ge__": "__le__",
              "__lt__": "__gt__", "__le__": "__ge__"}
equal = broadcast_equal = _compare_fn("__eq__")
not_equal = broadcast_not_equal = _compare_fn("__ne__")
greater = broadcast_greater = _compare_fn("__gt__")
greater_equal = broadcast_greater_equal = _compare_fn("__ge__")
lesser = broadcast_lesser = _compare_fn("__lt__")
lesser_equal = broadcast_lesser_equal = _compare_fn("__le__")


# ----------------------------------------------------------------------------- reductions
def _axes(ndim, axis, exclude):
    if type(axis) is int:
        # The common case, memoized: a training step asks for the same few reductions.
        key = (ndim, axis, exclude)
        axes = _AXES_CACHE.get(key)
        if axes is None:
            if len(_AXES_CACHE) > 1024:
                _AXES_CACHE.clear()
            axes = _AXES_CACHE[key] = _axes_uncached(ndim, axis, exclude)
        return axes
    return _axes_uncached(ndim, axis, exclude)


_AXES_CACHE: dict = {}


def _axes_uncached(ndim, axis, exclude):
    if axis is None or axis == ():
        return tuple(range(ndim))       # every axis, with exclude too (MXNet)
    elif isinstance(axis, numbers.Integral):
        axes = (axis % ndim,)
    else:
        axes = tuple(a % ndim for a in axis)
    if exclude:
        axes = tuple(i for i in range(ndim) if i not in axes)
    return axes


def _keep_shape(shape, axes):
    key = (shape, axes)
    kept = _KEEP_CACHE.get(key)
    if kept is None:
        if len(_KEEP_CACHE) > 1024:
            _KEEP_CACHE.clear()
        kept = _KEEP_CACHE[key] = tuple(1 if i in axes else n for i, n in enumerate(shape))
    return kept


_KEEP_CACHE: dict = {}


def _fix_scalar(out):
    # MXNet 1.x has no 0-d arrays: a full reduction gives shape (1,).
    return out.reshape(1) if out.ndim == 0 else out


def _reduce(x, axis, keepdims, exclude, fwd, grad):
    d = x._data
    axes = _axes(d.ndim, axis, exclude)
    if d.dtype.kind in "iu" and fwd in _INT_REDUCTIONS:
        return _wrap(_fix_scalar(_INT_REDUCTIONS[fwd](d, axes, keepdims)), x._ctx)
    out = _fix_scalar(fwd(d, axes, keepdims))
    if grad is not None and _state.recording and (x._node is not None or x._grad is not None):
        kshape = _keep_shape(d.shape, axes)

        def vjp(g, needs):
            return (grad(g.reshape(kshape), d, out.reshape(kshape), axes),)
        return _recorded(out, x._ctx, (x,), vjp)
    return _wrap(out, x._ctx)


def _sum_raw(d, a, k):
    if type(d) is _np_ndarray:
        # The ufunc itself, which ``d.sum`` calls through NumPy's ``_methods``: the same bits,
        # and an overflow's RuntimeWarning then comes from this package, whose filter keeps
        # it silent as MXNet's sum is (from ``_methods`` it would reach the program).
        return _add_reduce(d, a, None, None, k)
    return d.sum(axis=a, keepdims=k)


def _sum_grad(g, d, o, a):
    return _broadcast_grad(g, d.shape)


def _broadcast_grad(g, shape):
    """``g`` (one value per reduced position) broadcast to ``shape``, as a read-only view. A
    single value, the loss of a full reduction, gets its view directly: NumPy's
    ``broadcast_to`` costs microseconds of Python per call."""
    if type(g) is numpy.ndarray and g.size == 1:
        view = numpy.ndarray(shape, g.dtype, g, 0, (0,) * len(shape))
        view.flags.writeable = False
        return view
    return _xp_of(g).broadcast_to(g, shape)


def sum(data, axis=None, keepdims=False, exclude=False):
    return _reduce(data, axis, keepdims, exclude, _sum_raw, _sum_grad)


_FLOAT_KINDS = (numpy.dtype(numpy.float32), numpy.dtype(numpy.float64))


def _mean_raw(d, a, k):
    if type(d) is _np_ndarray and d.dtype in _FLOAT_KINDS and (k or len(a) < d.ndim):
        # NumPy's own ``_methods._mean`` for a float array reduced to an array, without its
        # Python-level checks: the same sum, divided in place by the same intp count.
        count = 1
        for i in a:
            count *= d.shape[i]
        if count:
            out = _add_reduce(d, a, None, None, k)
            if count == 1:          # x / 1 is x: a per-sample loss over one value, say
                return out
            return _true_divide(out, numpy.intp(count), out=out, casting="unsafe", subok=False)
    # NumPy's mean warns from its own ``_methods`` module, past this package's warning filter;
    # MXNet's mean overflows silently.
    with numpy.errstate(over="ignore", invalid="ignore"):
        return d.mean(axis=a, keepdims=k)


_add_reduce = numpy.add.reduce
_true_divide = numpy.true_divide


def _mean_grad(g, d, o, a):
    count = 1
    for i in a:
        count *= d.shape[i]
    if count != 1:
        g = g / count
    # Reducing only axes of length 1 leaves the shape: broadcast_to would be a costly no-op.
    return g if g.shape == d.shape else _broadcast_grad(g, d.shape)


def mean(data, axis=None, keepdims=False, exclude=False):
    return _reduce(data, axis, keepdims, exclude, _mean_raw, _mean_grad)


def _extreme_grad(g, d, o, a):
    return g * (d == o)


def max(data, axis=None, keepdims=False, exclude=False):
    return _reduce(data, axis, keepdims, exclude, lambda d, a, k: d.max(axis=a, keepdims=k), _extreme_grad)


def min(data, axis=None, keepdims=False, exclude=False):
    return _reduce(data, axis, keepdims, exclude, lambda d, a, k: d.min(axis=a, keepdims=k), _extreme_grad)


def _prod_raw(d, a, k):
    return d.prod(axis=a, keepdims=k)


def prod(data, axis=None, keepdims=False, exclude=False):
    return _reduce(data, axis, keepdims, exclude, _prod_raw, lambda g, d, o, a: g * o / d)


def _int_mean(d, a, k):
    count = math.prod(d.shape[i] for i in a)
    total = d.sum(axis=a, keepdims=k, dtype=d.dtype)
    return _integers.divide(total, total.dtype.type(count)) if count else total


# MXNet's reductions of integers: in the array's dtype (sums wrap), means truncated
_INT_REDUCTIONS = {_sum_raw: lambda d, a, k: d.sum(axis=a, keepdims=k, dtype=d.dtype),
                   _mean_raw: _int_mean,
                   _prod_raw: lambda d, a, k: d.prod(axis=a, keepdims=k, dtype=d.dtype)}


def norm(data, ord=2, axis=None, keepdims=False):
    if ord == 1:
        return sum(abs(data), axis=axis, keepdims=keepdims)
    if ord != 2:
        raise ValueError("norm supports ord=1 and ord=2, got %r" % (ord,))

    def fwd(d, a, k):
        if d.dtype == numpy.float16:    # squares summed in float32: not inf beyond 256
            wide = d.astype(numpy.float32)
            return _xp_of(d).sqrt((wide * wide).sum(axis=a, keepdims=k)).astype(d.dtype)
        return _xp_of(d).sqrt((d * d).sum(axis=a, keepdims=k))

    def grad(g, d, o, a):
        xp = _xp_of(d)
        safe = xp.where(o == 0, 1, o)
        return g * d / safe * (o != 0)
    return _reduce(data, axis, keepdims, False, fwd, grad)


def _arg_reduce(data, axis, keepdims, fn):
    d = data._data
    if axis is None:
        out = fn(d.reshape(-1), axis=0)
    else:
        out = fn(d, axis=axis)
        if keepdims:
            out = _xp_of(d).expand_dims(out, axis)
    # MXNet returns indices as floats in the input's dtype.
    return _no_gradient(_fix_scalar(out.astype(d.dtype)), data._ctx, (data,))


def sum_axis(data, axis=None, keepdims=False, exclude=False):
    return sum(data, axis, keepdims, exclude)


def max_axis(data, axis=None, keepdims=False, exclude=False):
    return max(data, axis, keepdims, exclude)


def min_axis(data, axis=None, keepdims=False, exclude=False):
    return min(data, axis, keepdims, exclude)


def argmax(data, axis=None, keepdims=False):
    return _arg_reduce(data, axis, keepdims, lambda d, axis: _xp_of(d).argmax(d, axis=axis))


def argmin(data, axis=None, keepdims=False):
    return _arg_reduce(data, axis, keepdims, lambda d, axis: _xp_of(d).argmin(d, axis=axis))


# ----------------------------------------------------------------------------- shapes
def _shape_op(x, out):
    """An op that only rearranges elements: its gradient reshapes/permutes back."""
    if _state.recording and (x._node is not None or x._grad is not None):
        shape = x._data.shape
        return _recorded(out, x._ctx, (x,), lambda g, needs: (g.reshape(shape),))
    return _wrap(out, x._ctx)


def _mxnet_shape(src, target, reverse=False):
    """Resolve MXNet's reshape codes 0 (copy), -1 (infer), -2 (copy rest), -3 (merge two), -4 (split)."""
    if reverse:
        return tuple(reversed(_mxnet_shape(tuple(reversed(src)), tuple(reversed(target)))))
    out, i, j = [], 0, 0
    target = list(target)
    while j < len(target):
        t = target[j]
        if t == 0:
            out.append(src[i]); i += 1
        elif t == -1:
            out.append(-1); i += 1
        elif t == -2:
            out.extend(src[i:]); i = len(src)
        elif t == -3:
            out.append(src[i] * src[i + 1]); i += 2
        elif t == -4:
            a, b = target[j + 1], target[j + 2]
            if a == -1:
                a = src[i] // b
            if b == -1:
                b = src[i] // a
            out.extend([a, b]); i += 1; j += 2
        else:
            out.append(t); i += 1
        j += 1
    return tuple(out)


def reshape(data, shape=None, reverse=False, **kwargs):
    if shape is None:
        shape = kwargs.get("newshape")
    if type(shape) is not tuple:
        shape = (shape,) if isinstance(shape, numbers.Integral) else tuple(shape)
    # Only 0, -2, -3 and -4 need MXNet's rules; -1 and sizes are NumPy's.
    try:
        if shape and (0 in shape or _builtins.min(shape) < -1):
            shape = _mxnet_shape(data._data.shape, shape, reverse)
        out = data._data.reshape(shape)
    except (ValueError, IndexError) as exc:
        raise ShapeError("reshape: cannot make shape %s%s of an array of shape %s (%s)"
                         % (shape, " (reverse)" if reverse else "", data.shape, exc)) from None
    return _shape_op(data, out)


def reshape_like(lhs, rhs, lhs_begin=None, lhs_end=None, rhs_begin=None, rhs_end=None):
    """``lhs`` in ``rhs``'s shape; with the begin/end arguments (MXNet's), the axes
    ``[lhs_begin, lhs_end)`` of ``lhs`` take the sizes of ``rhs``'s ``[rhs_begin, rhs_end)``."""
    if lhs_begin is lhs_end is rhs_begin is rhs_end is None:
        return reshape(lhs, rhs.shape)
    lshape = tuple(lhs.shape)
    lo = slice(lhs_begin, lhs_end).indices(len(lshape))
    shape = lshape[:lo[0]] + tuple(rhs.shape)[rhs_begin:rhs_end] + lshape[lo[1]:]
    return reshape(lhs, shape)


def flatten(data):
    d = data._data
    return _shape_op(data, d.reshape(d.shape[0] if d.ndim else 1, -1))


def expand_dims(data, axis):
    return _shape_op(data, _xp_of(data._data).expand_dims(data._data, axis))


def squeeze(data, axis=None):
    try:
        out = data._data.squeeze(axis=axis)
    except ValueError as exc:
        raise ShapeError("squeeze: axis %s of shape %s (%s)" % (axis, data.shape, exc)) from None
    return _shape_op(data, _fix_scalar(out))


def transpose(data, axes=None):
    d = data._data
    if axes is None or axes == ():
        axes = tuple(reversed(range(d.ndim)))
    axes = tuple(a % d.ndim for a in axes)
    try:
        out = d.transpose(axes)
    except ValueError as exc:
        raise ShapeError("transpose: axes %s of shape %s (%s)" % (axes, d.shape, exc)) from None
    if _recording_for(data):
        inverse = tuple(numpy.argsort(axes))
        return _recorded(out, data._ctx, (data,), lambda g, needs: (g.transpose(inverse),))
    return _wrap(out, data._ctx)


def swapaxes(data, dim1=0, dim2=1):
    axes = list(range(data.ndim))
    axes[dim1], axes[dim2] = axes[dim2], axes[dim1]
    return transpose(data, axes)


def flip(data, axis):
    d = data._data
    out = _xp_of(d).flip(d, axis)
    if _recording_for(data):
        return _recorded(out, data._ctx, (data,), lambda g, needs: (_xp_of(g).flip(g, axis),))
    return _wrap(out, data._ctx)


def broadcast_to(data, shape):
    d = data._data
    shape = tuple(s if s != 0 else d.shape[i] for i, s in enumerate(shape))
    try:
        out = _xp_of(d).broadcast_to(d, shape).copy()
    except ValueError as exc:
        raise ShapeError("broadcast_to: shape %s to %s (%s)" % (d.shape, shape, exc)) from None
    if _recording_for(data):
        src = d.shape
        return _recorded(out, data._ctx, (data,), lambda g, needs: (unbroadcast(g, src),))
    return _wrap(out, data._ctx)


def broadcast_like(lhs, rhs, lhs_axes=None, rhs_axes=None):
    """``lhs`` broadcast to ``rhs``'s shape; with ``lhs_axes``/``rhs_axes`` (MXNet's), only
    those axes of ``lhs`` (of size 1) to the sizes of ``rhs``'s ``rhs_axes``."""
    if lhs_axes is None and rhs_axes is None:
        return broadcast_to(lhs, rhs.shape)
    lhs_axes = (lhs_axes,) if isinstance(lhs_axes, numbers.Integral) else tuple(lhs_axes or ())
    rhs_axes = (rhs_axes,) if isinstance(rhs_axes, numbers.Integral) else tuple(rhs_axes or ())
    if len(lhs_axes) != len(rhs_axes):
        raise ShapeError("broadcast_like: lhs_axes %s and rhs_axes %s differ in length"
                         % (lhs_axes, rhs_axes))
    shape = list(lhs.shape)
    for a, b in zip(lhs_axes, rhs_axes):
        shape[a] = rhs.shape[b]
    return broadcast_to(lhs, tuple(shape))


def broadcast_axis(data, axis=(), size=()):
    """Broadcast the length-1 ``axis`` (int or tuple) of ``data`` to ``size``."""
    axes = (axis,) if isinstance(axis, numbers.Integral) else tuple(axis)
    sizes = (size,) if isinstance(size, numbers.Integral) else tuple(size)
    shape = list(data.shape)
    for a, n in zip(axes, sizes):
        shape[a] = n
    return broadcast_to(data, tuple(shape))


broadcast_axes = broadcast_axis


def tile(data, reps):
    d = data._data
    reps = (reps,) if isinstance(reps, numbers.Integral) else tuple(reps)
    out = _xp_of(d).tile(d, reps)
    if _recording_for(data):
        shape = d.shape
        full = (1,) * (out.ndim - len(shape)) + shape
        reps_full = (1,) * (out.ndim - len(reps)) + reps

        def vjp(g, needs):
            split = []
            for r, n in zip(reps_full, full):
                split.extend([r, n])
            summed = g.reshape(split).sum(axis=tuple(range(0, 2 * len(full), 2)))
            return (summed.reshape(shape),)
        return _recorded(out, data._ctx, (data,), vjp)
    return _wrap(out, data._ctx)


def repeat(data, repeats, axis=None):
    d = data._data
    out = _xp_of(d).repeat(d, repeats, axis=axis)
    if _recording_for(data):
        shape = d.shape

        def vjp(g, needs):
            if axis is None:
                return (_sum_repeats(g.reshape(-1, repeats), 1).reshape(shape),)
            ax = axis % len(shape)
            new = shape[:ax] + (shape[ax], repeats) + shape[ax + 1:]
            return (_sum_repeats(g.reshape(new), ax + 1),)
        return _recorded(out, data._ctx, (data,), vjp)
    return _wrap(out, data._ctx)


# Below this many elements NumPy's own reduction costs less than a pass per repeat.
_SHORT_SUM_MIN = 1 << 12


def _sum_repeats(v, axis):
    """``v.sum(axis=axis)`` for a float32/float64 ``v`` whose ``axis`` is short (a repeat's or an
    upsampling's copies): NumPy reduces an axis of fewer than 8 values from +0.0, one value
    after another (pairwise summation starts at 8), which is what the passes here do, one
    strided add per value instead of NumPy's loop per output element (10.6 -> 0.4 ms for the
    gradient of a 2x nearest upsampling of 16x64x16x16)."""
    count = v.shape[axis]
    if not 1 < count < 8 or type(v) is not _np_ndarray or v.dtype.kind != "f" \
            or v.dtype.itemsize < 4 or v.size < _SHORT_SUM_MIN:     # float16 adds in float32
        return v.sum(axis=axis)
    index = [slice(None)] * v.ndim
    index[axis] = 0
    total = numpy.add(v.dtype.type(0), v[tuple(index)])
    for k in range(1, count):
        index[axis] = k
        total += v[tuple(index)]
    return total


def slice_axis(data, axis, begin, end):
    index = [slice(None)] * data.ndim
    if not -data.ndim <= axis < data.ndim:
        raise IndexRangeError("slice_axis: axis %d of an array of %d axes" % (axis, data.ndim))
    index[axis] = slice(begin, end)
    return data[tuple(index)]


# ----------------------------------------------------------------------------- products
def dot(lhs, rhs, transpose_a=False, transpose_b=False):
    """MXNet's dot: contracts the last axis of ``lhs`` (the first, with ``transpose_a``) with the
    first axis of ``rhs`` (the last, with ``transpose_b``); N-D operands are viewed as matrices."""
    a, b = lhs._data, rhs._data
    if transpose_a:
        a2 = a.reshape(a.shape[0], -1)
        left, am = a.shape[1:], a2.T
    else:
        a2 = a.reshape(-1, a.shape[-1])
        left, am = a.shape[:-1], a2
    if transpose_b:
        b2 = b.reshape(-1, b.shape[-1])
        right, bm = b.shape[:-1], b2.T
    else:
        b2 = b.reshape(b.shape[0], -1)
        right, bm = b.shape[1:], b2
    if am.shape[1] != bm.shape[0]:
        raise ShapeError("dot: shapes %s and %s do not fit (transpose_a=%s, transpose_b=%s)"
                         % (a.shape, b.shape, transpose_a, transpose_b))
    out = (am @ bm).reshape(left + right or (1,))
    if _recording_for(lhs, rhs):
        def vjp(g, needs):
            g2 = g.reshape(am.shape[0], bm.shape[1])
            ga = gb = None
            if needs[0]:
                ga = (bm @ g2.T) if transpose_a else (g2 @ bm.T)
                ga = ga.reshape(a.shape)
            if needs[1]:
                gb = (g2.T @ am) if transpose_b else (am.T @ g2)
                gb = gb.reshape(b.shape)
            return ga, gb
        return _recorded(out, lhs._ctx, (lhs, rhs), vjp)
    return _wrap(out, lhs._ctx)


def batch_dot(lhs, rhs, transpose_a=False, transpose_b=False):
    a, b = lhs._data, rhs._data
    at = a.swapaxes(-1, -2) if transpose_a else a
    bt = b.swapaxes(-1, -2) if transpose_b else b
    try:
        out = at @ bt
    except ValueError as exc:
        raise ShapeError("batch_dot: shapes %s and %s do not fit (transpose_a=%s, transpose_b=%s):"
                         " %s" % (a.shape, b.shape, transpose_a, transpose_b, exc)) from None
    if _recording_for(lhs, rhs):
        def vjp(g, needs):
            ga = gb = None
            if needs[0]:
                ga = g @ bt.swapaxes(-1, -2)
                if transpose_a:
                    ga = ga.swapaxes(-1, -2)
            if needs[1]:
                gb = at.swapaxes(-1, -2) @ g
                if transpose_b:
                    gb = gb.swapaxes(-1, -2)
            return ga, gb
        return _recorded(out, lhs._ctx, (lhs, rhs), vjp)
    return _wrap(out, lhs._ctx)


def FullyConnected(data, weight, bias=None, num_hidden=None, no_bias=False, flatten=True):
    """``data @ weight.T + bias`` as one recorded op (the hot path of every Dense layer)."""
    return _fully_connected(data, weight, None if no_bias else bias, flatten, False)


def _fully_connected(data, weight, bias, flatten, relu):
    """FullyConnected, followed by ReLU when ``relu`` (one node: Dense(activation='relu'))."""
    x, w = data._data, weight._data
    b = None if bias is None else bias._data
    out, x2 = fc_forward(x, w, b, flatten, relu)
    if _state.recording and (data._node is not None or data._grad is not None
                             or weight._node is not None or weight._grad is not None
                             or (bias is not None and (bias._node is not None
                                                       or bias._grad is not None))):
        def vjp(g, needs):
            return fc_backward(g, needs[0], needs[1], bias is not None and needs[2], x.shape, x2,
                               w, out, relu, weight, bias)
        return _recorded(out, data._ctx, (data, weight, bias) if bias is not None else (data, weight), vjp)
    return _wrap(out, data._ctx)


def fc_forward(x, w, b, flatten, relu):
    """FullyConnected's (and ReLU's when ``relu``) output on raw arrays, and the 2-D view of
    ``x`` its gradient needs: the one computation the eager op and a hybridized block's cached
    plan share, so that both give the same bits."""
    x2 = x if x.ndim == 2 else (x.reshape(x.shape[0], -1) if flatten
                                 else x.reshape(-1, x.shape[-1]))
    if x2.shape[1] != w.shape[-1] or w.ndim != 2 or (b is not None and b.shape != w.shape[:1]):
        raise ShapeError("FullyConnected: weight shape %s%s does not fit data shape %s (flatten=%s)"
                         % (w.shape, "" if b is None else " and bias shape %s" % (b.shape,),
                            x.shape, flatten))
    if type(x2) is _np_ndarray and x2.shape[0] < w.shape[0]:
        # OpenBLAS runs a batch smaller than the layer's width 1.2-2x faster with the weight as
        # the left operand: the same dot products, the same bits, a transposed (F-order) result.
        # Bias and ReLU go on the contiguous transpose, where the loops are fastest.
        out_t = w @ x2.T
        # The kernels' size floor is looked at here too: a tiny layer (a perceptron's) then
        # skips their calls, as it skips the CUDA ones on the CPU.
        if not (out_t.size >= _fc_kernels.MIN_SIZE
                and _fc_kernels.bias_relu(out_t, b, True, relu)):
            if b is not None:
                out_t += b.reshape(-1, 1)
            if relu:
                numpy.maximum(out_t, 0, out=out_t)
        out = out_t.T
    else:
        out = x2 @ w.T
        fused = (out.size >= _fc_kernels.MIN_SIZE and _fc_kernels.bias_relu(out, b, False, relu)
                 if type(out) is _np_ndarray else _fc_cuda.bias_relu(out, b, relu))
        if not fused:
            if b is not None:
                out += b
            if relu:
                # In place: FullyConnected's own gradient does not need its output.
                _xp_of(out).maximum(out, 0, out=out)
    if not flatten:
        out = out.reshape(x.shape[:-1] + (w.shape[0],))
    return out, x2


def fc_backward(g, need_x, need_w, bias_grad, x_shape, x2, w, out, relu, weight, bias):
    """``(gx, gw, gb)`` of ``fc_forward`` for the output gradient ``g`` (None where not needed;
    ``autograd.WRITTEN`` where it went straight into the parameter's gradient buffer, see
    ``autograd.direct_grad_buffer``); ``weight``/``bias`` are the NDArrays whose buffers those
    are, ``bias`` None without one."""
    # Like the weight's below, the bias's gradient may go straight into its buffer.
    gb_buf = _ag.direct_grad_buffer(bias) if bias_grad else None
    fused = _fc_grad(g, out, relu, bias_grad, gb_buf) if relu or bias_grad else None
    if fused is not None:
        g2, gb = fused
        if gb is not None and gb is gb_buf:
            gb = _ag.WRITTEN
    else:
        if relu:
            masked = _fc_cuda.relu_mask(g, out)
            g = g * (out > 0) if masked is None else masked  # relu's d > 0 mask, NaN included
        g2 = g.reshape(-1, w.shape[0])
        gb = None
        if gb_buf is not None and type(gb_buf) is type(g2) and gb_buf.dtype == g2.dtype:
            g2.sum(axis=0, out=gb_buf)
            gb = _ag.WRITTEN
        elif bias_grad:
            gb = g2.sum(axis=0)
    gx = None
    if need_x:
        # In x's layout (F-order after a transposed forward): the ReLU mask of the
        # layer below then multiplies arrays of one layout, three times faster.
        gx = ((w.T @ g2.T).T if x2.flags.f_contiguous and not x2.flags.c_contiguous
              else g2 @ w).reshape(x_shape)
    gw = None
    if need_w:
        buf = _ag.direct_grad_buffer(weight)
        if buf is not None and type(buf) is type(g2) and buf.dtype == g2.dtype:
            _xp_of(buf).matmul(g2.T, x2, out=buf)
            gw = _ag.WRITTEN
        else:
            gw = g2.T @ x2
    if bias is not None:
        return gx, gw, gb
    return gx, gw


def _fc_grad(g, out, relu, bias_grad, sums=None):
    """``(g * (out > 0) if relu else g, its sum over the batch)`` in one kernel pass, for 2-D
    NumPy gradients in the layout of ``out`` (the sum into ``sums`` where the kernel can), and
    CuPy ones of a batch's rows (``_fc_cuda``); None where neither applies."""
    if type(g) is not _np_ndarray:
        return _fc_cuda.relu_bias_grad(g, out, relu, bias_grad, sums)
    if g.ndim != 2 or g.size < _fc_kernels.MIN_SIZE:
        return None
    if g.flags.c_contiguous:
        return _fc_kernels.relu_bias_grad(g, out, True, relu, bias_grad, sums)
    if g.flags.f_contiguous:
        # The transposed forward's layout: one unit per row of the transposes.
        fused = _fc_kernels.relu_bias_grad(g.T, out.T, False, relu, bias_grad, sums)
        if fused is not None:
            return fused[0].T, fused[1]
    return None


# ----------------------------------------------------------------------------- activations
def _f32_rows(d, axis):
    """Whether a softmax of ``d`` over ``axis`` is one of float32 rows on the CPU: those take
    Cephes' exp (``_act_kernels``), by one loop a row where numba runs."""
    return type(d) is _np_ndarray and d.dtype == numpy.float32 and d.ndim \
        and axis % d.ndim == d.ndim - 1


def _softmax_raw(d, axis, temperature):
    xp = _xp_of(d)
    if temperature is not None and temperature != 1:
        d = d / temperature
    if _f32_rows(d, axis):
        out = _act_kernels.softmax_f32(d)
        return _act_kernels.np_softmax_f32(d) if out is None else out
    e = xp.exp(d - d.max(axis=axis, keepdims=True))
    if not (axis % d.ndim == d.ndim - 1 and _act_kernels.softmax_rows(e)):
        e /= e.sum(axis=axis, keepdims=True)
    return e


def _softmax_grad(g, out, axis, t):
    if axis % out.ndim == out.ndim - 1:
        gx = _act_kernels.softmax_grad(g, out, t)
        if gx is not None:
            return gx
    return out * (g - (g * out).sum(axis=axis, keepdims=True)) / t


def _length_mask(d, length, axis):
    """Where a softmax of ``d`` over ``axis`` reads (``use_length``): the first ``length``
    entries of each lane, ``length`` holding one count per lane (``d``'s shape without
    ``axis``), in an integer dtype as MXNet requires."""
    if length is None:
        raise TypeError("softmax: use_length=True needs the length input")
    lengths = length._data if isinstance(length, NDArray) else _xp_of(d).asarray(length)
    if lengths.dtype.kind not in "iu":
        raise TypeError("softmax: length must be an integer array (MXNet: 'This operation only "
                        "support integer types'), got %s" % lengths.dtype)
    axis = axis % d.ndim
    lanes = d.shape[:axis] + d.shape[axis + 1:]
    if tuple(lengths.shape) != lanes:
        raise ShapeError("softmax: length has shape %s, but the lanes of data %s over axis %d "
                         "are %s" % (tuple(lengths.shape), d.shape, axis, lanes))
    xp = _xp_of(d)
    steps = xp.arange(d.shape[axis]).reshape((-1,) + (1,) * (d.ndim - axis - 1))
    return steps < xp.expand_dims(lengths, axis)


def softmax(data, length=None, axis=-1, temperature=None, dtype=None, use_length=False):
    """MXNet's softmax; with ``use_length``, over the first ``length`` entries of each lane
    only (the rest 0, and a lane of length 0 all 0)."""
    if dtype is not None:
        data = data.astype(dtype, copy=False)
    if not use_length:
        if length is not None:
            raise TypeError("softmax takes one input unless use_length=True (MXNet: 'Operator "
                            "softmax expects 1 inputs, but got 2')")
        out = _softmax_raw(data._data, axis, temperature)
    else:
        mask = _length_mask(data._data, length, axis)
        d = _xp_of(data._data).where(mask, data._data, -_xp_of(data._data).inf)
        with numpy.errstate(invalid="ignore"):
            out = _softmax_raw(d, axis, temperature)
        out[~mask] = 0      # a lane of length 0 (all -inf) as well
    if _recording_for(data):
        t = 1 if temperature is None else temperature

        def vjp(g, needs):
            return (_softmax_grad(g, out, axis, t),)
        return _recorded(out, data._ctx, (data,), vjp)
    return _wrap(out, data._ctx)


def _log_softmax_raw(d, axis, temperature):
    xp = _xp_of(d)
    if temperature is not None and temperature != 1:
        d = d / temperature
    if _f32_rows(d, axis):
        out = _act_kernels.log_softmax_f32(d)
        return _act_kernels.np_log_softmax_f32(d) if out is None else out
    shifted = d - d.max(axis=axis, keepdims=True)
    return shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))


def _log_softmax_grad(g, out, axis, t):
    if _f32_rows(out, axis) and type(g) is _np_ndarray and g.dtype == out.dtype:
        gx = _act_kernels.log_softmax_grad_f32(g, out)
        g = _act_kernels.np_log_softmax_grad_f32(g, out) if gx is None else gx
    else:
        g = g - _xp_of(out).exp(out) * g.sum(axis=axis, keepdims=True)
    return g if t == 1 else g / t


def log_softmax(data, axis=-1, temperature=None, dtype=None, use_length=False):
    if use_length:
        # MXNet 1.9.1 declares the parameter but gives log_softmax no length input.
        raise TypeError("log_softmax: use_length=True is softmax's (MXNet's log_softmax takes "
                        "no length input)")
    if dtype is not None:
        data = data.astype(dtype, copy=False)
    out = _log_softmax_raw(data._data, axis, temperature)
    if _recording_for(data):
        t = 1 if temperature is None else temperature

        def vjp(g, needs):
            return (_log_softmax_grad(g, out, axis, t),)
        return _recorded(out, data._ctx, (data,), vjp)
    return _wrap(out, data._ctx)


_ACTIVATIONS = {"relu": relu, "sigmoid": sigmoid, "tanh": tanh, "softrelu": softrelu,
                "softsign": softsign}


def softmin(data, axis=-1, temperature=None):
    return softmax(-data, axis=axis, temperature=temperature)


def Activation(data, act_type):
    try:
        return _ACTIVATIONS[act_type](data)
    except KeyError:
        raise ValueError("unknown act_type %r; expected one of %s" % (act_type, sorted(_ACTIVATIONS))) from None


# ----------------------------------------------------------------------------- joining, splitting
def concat(*data, dim=1, num_args=None):
    if num_args is not None and num_args != len(data):
        raise ShapeError("concat: num_args=%d, but %d arrays were given" % (num_args, len(data)))
    raws = [x._data for x in data]
    try:
        out = _xp_of(raws[0]).concatenate(raws, axis=dim)
    except ValueError as exc:
        raise ShapeError("concat along dim %d: shapes %s do not fit (%s)"
                         % (dim, [r.shape for r in raws], exc)) from None
    if _recording_for(*data):
        bounds = numpy.cumsum([r.shape[dim] for r in raws])[:-1].tolist()

        def vjp(g, needs):
            return tuple(_xp_of(g).split(g, bounds, axis=dim))
        return _recorded(out, data[0]._ctx, tuple(data), vjp)
    return _wrap(out, data[0]._ctx)


def concatenate(arrays, axis=0, always_copy=True):
    return concat(*arrays, dim=axis)


def stack(*data, axis=0, num_args=None):
    if len(data) == 1 and isinstance(data[0], (list, tuple)):
        data = tuple(data[0])
    raws = [x._data for x in data]
    try:
        out = _xp_of(raws[0]).stack(raws, axis=axis)
    except ValueError as exc:
        raise ShapeError("stack: shapes %s are not all equal (%s)"
                         % ([r.shape for r in raws], exc)) from None
    if _recording_for(*data):
        def vjp(g, needs):
            parts = _xp_of(g).moveaxis(g, axis, 0)
            return tuple(parts[i] for i in range(len(data)))    # views; no iteration over g
        return _recorded(out, data[0]._ctx, tuple(data), vjp)
    return _wrap(out, data[0]._ctx)


def split(data, num_outputs, axis=1, squeeze_axis=False):
    size = data.shape[axis]
    if size % num_outputs:
        raise ShapeError("cannot split axis of length %d into %d equal parts" % (size, num_outputs))
    step = size // num_outputs
    outs = []
    for i in range(num_outputs):
        part = slice_axis(data, axis, i * step, (i + 1) * step)
        if squeeze_axis and step == 1:
            part = squeeze(part, axis=axis)
        outs.append(part)
    return outs[0] if num_outputs == 1 else outs


# ----------------------------------------------------------------------------- gathering
def _pick_raw(d, index, axis, keepdims, mode):
    """``(out, idx, ax)``: the picked values, and the index array and axis its gradient needs."""
    xp = _xp_of(d)
    ax = axis % d.ndim
    idx = index._data.astype(numpy.int64) if isinstance(index, NDArray) else xp.asarray(index, dtype=numpy.int64)
    n = d.shape[ax]
    # minimum(maximum()) is what clip computes, without clip's Python-level checks (which cost
    # more than the clipping on a batch of labels).
    idx = xp.minimum(xp.maximum(idx, 0), n - 1) if mode == "clip" else idx % n
    idx = idx.reshape(d.shape[:ax] + (1,) + d.shape[ax + 1:])
    if d.ndim == 2 and ax == 1:
        # Class scores per row (every classification loss): plain fancy indexing, the same
        # elements take_along_axis gathers through its index-building helpers.
        out = d[xp.arange(d.shape[0]).reshape(-1, 1), idx]
    else:
        out = xp.take_along_axis(d, idx, axis=ax)
    if not keepdims:
        out = _fix_scalar(out.squeeze(ax))
    return out, idx, ax


def _pick_grad(g, d, idx, ax):
    n = d.shape[ax]
    positions = _xp_of(d).arange(n).reshape((n,) + (1,) * (d.ndim - ax - 1))
    return (positions == idx) * g.reshape(idx.shape)


def pick(data, index, axis=-1, keepdims=False, mode="clip"):
    d = data._data
    out, idx, ax = _pick_raw(d, index, axis, keepdims, mode)
    if _recording_for(data):
        def vjp(g, needs):
            return (_pick_grad(g, d, idx, ax),)
        return _recorded(out, data._ctx, (data,), vjp)
    return _wrap(out, data._ctx)


def take(a, indices, axis=0, mode="clip"):
    d = a._data
    xp = _xp_of(d)
    axis = axis % d.ndim
    idx = indices._data.astype(numpy.int64) if isinstance(indices, NDArray) else xp.asarray(indices, dtype=numpy.int64)
    n = d.shape[axis]
    if mode == "raise":
        if idx.size and bool(((idx < 0) | (idx >= n)).any()):
            raise IndexRangeError("take: an index is outside [0, %d) along axis %d "
                                  "(mode='raise')" % (n, axis))
    elif mode == "clip":
        idx = xp.clip(idx, 0, n - 1)
    elif mode == "wrap":
        idx = idx % n
    else:
        raise ValueError("take: mode must be 'clip', 'wrap' or 'raise', not %r" % (mode,))
    out = xp.take(d, idx, axis=axis)
    if _recording_for(a):
        def vjp(g, needs):
            z = xp.zeros(d.shape, dtype=d.dtype)
            moved = xp.moveaxis(z, axis, 0)
            gm = xp.moveaxis(g, tuple(range(axis, axis + idx.ndim)), tuple(range(idx.ndim)))
            _scatter_add(moved, idx.reshape(-1), gm.reshape((-1,) + moved.shape[1:]))
            return (z,)
        return _recorded(out, a._ctx, (a,), vjp)
    return _wrap(out, a._ctx)


def one_hot(indices, depth, on_value=1.0, off_value=0.0, dtype="float32"):
    d = indices._data
    xp = _xp_of(d)
    hit = xp.expand_dims(d.astype(numpy.int64), -1) == xp.arange(depth)
    out = xp.where(hit, on_value, off_value).astype(numpy.dtype(dtype), copy=False)
    return _no_gradient(out, indices._ctx, (indices,))


def _order(d, axis, is_ascend):
    """The stable sorting permutation along ``axis``; descending keeps tied entries in index
    order too, as MXNet does (flipping the ascending order would reverse them)."""
    xp = _xp_of(d)
    if is_ascend:
        return xp.argsort(d, axis=axis, kind="stable")
    n = d.shape[axis]
    return (n - 1) - xp.flip(xp.argsort(xp.flip(d, axis=axis), axis=axis, kind="stable"),
                             axis=axis)


def _gathered(data, values, order, k, axis):
    """``values`` (the first ``k`` entries of ``data`` along ``axis`` in the permutation
    ``order``), recorded so that the gradient flows back to the entries they came from, as
    MXNet's ``sort`` and ``topk`` do."""
    if not _recording_for(data):
        return _wrap(values, data._ctx)
    xp = _xp_of(values)

    def vjp(g, needs):
        if k < order.shape[axis]:
            pad = list(g.shape)
            pad[axis] = order.shape[axis] - k
            g = xp.concatenate([g, xp.zeros(pad, dtype=g.dtype)], axis=axis)
        return (xp.take_along_axis(g, xp.argsort(order, axis=axis), axis=axis),)
    return _recorded(values, data._ctx, (data,), vjp)


def _put_ones(mask, idx, axis):
    """``put_along_axis(mask, idx, 1, axis)``, which CuPy lacks."""
    xp = _xp_of(mask)
    grids = list(xp.ix_(*[xp.arange(n) for n in idx.shape]))
    grids[axis] = idx
    mask[tuple(grids)] = 1


def topk(data, axis=-1, k=1, ret_typ="indices", is_ascend=False, dtype="float32"):
    if axis is None:        # MXNet: over the flattened array
        data, axis = reshape(data, (-1,)), 0
    d = data._data
    xp = _xp_of(d)
    axis = axis % d.ndim
    if k < 1:               # MXNet: the whole axis
        k = d.shape[axis]
    elif k > d.shape[axis]:
        raise ShapeError("topk: k=%d is larger than axis %d of shape %s" % (k, axis, d.shape))
    order = _order(d, axis, is_ascend)
    idx = xp.take(order, xp.arange(k), axis=axis)
    if ret_typ == "indices":
        return _no_gradient(idx.astype(numpy.dtype(dtype)), data._ctx, (data,))
    if ret_typ == "mask":
        mask = xp.zeros(d.shape, dtype=d.dtype)
        _put_ones(mask, idx, axis)
        return _no_gradient(mask, data._ctx, (data,))
    if ret_typ not in ("value", "both"):
        raise ValueError("topk: ret_typ must be 'value', 'indices', 'mask' or 'both', not %r"
                         % (ret_typ,))
    values = _gathered(data, xp.take_along_axis(d, idx, axis=axis), order, k, axis)
    if ret_typ == "value":
        return values
    return [values, _wrap(idx.astype(numpy.dtype(dtype)), data._ctx)]


def sort(data, axis=-1, is_ascend=True):
    if axis is None:        # MXNet: the flattened array
        data, axis = reshape(data, (-1,)), 0
    d = data._data
    xp = _xp_of(d)
    axis = axis % d.ndim
    order = _order(d, axis, is_ascend)
    return _gathered(data, xp.take_along_axis(d, order, axis=axis), order, d.shape[axis], axis)


def argsort(data, axis=-1, is_ascend=True, dtype="float32"):
    d = data._data
    return _no_gradient(_order(d, axis, is_ascend).astype(numpy.dtype(dtype)), data._ctx,
                        (data,))


def _slice_op(data, begin, end, step=None):
    """MXNet's ``slice``: per-axis ``begin``/``end``/``step`` (``None`` entries mean the default)."""
    step = step or ()
    keys = []
    for i in range(len(begin)):
        st = step[i] if i < len(step) else None
        keys.append(slice(begin[i], end[i] if i < len(end) else None, st))
    return data[tuple(keys)]


Reshape = reshape
Concat = concat
SwapAxis = swapaxes
SliceChannel = split


# ----------------------------------------------------------------------------- *_like
def zeros_like(data, dtype=None):
    return _wrap(data._xp.zeros(data._data.shape, dtype=dtype or data._data.dtype), data._ctx)


def ones_like(data, dtype=None):
    return _wrap(data._xp.ones(data._data.shape, dtype=dtype or data._data.dtype), data._ctx)


def full_like(data, fill_value, dtype=None):
    return _wrap(data._xp.full(data._data.shape, fill_value, dtype=dtype or data._data.dtype), data._ctx)


# ----------------------------------------------------------------------------- fresh outputs
# The operators that NumPy answers with a view of their input. MXNet's operators always write
# a new array, so a user who writes into the result (``y = nd.transpose(w); y[:] = 0``), or
# into the input afterwards (an optimizer step), changes only that one; here too. (MXNet's
# ``NDArray.reshape`` method and first-axis slices do share memory, and stay views.) The
# library's own code calls the module's functions, which may return views.
VIEW_OPS = ("reshape", "Reshape", "reshape_like", "flatten", "Flatten", "expand_dims", "squeeze",
            "transpose", "swapaxes", "SwapAxis", "flip", "reverse", "moveaxis", "slice",
            "crop", "slice_axis", "slice_like", "split", "SliceChannel", "split_v2")


def _own(result, source):
    if type(result) is NDArray:
        data = result._data
        if _xp_of(data).may_share_memory(data, source):
            result._data = data.copy()      # C-ordered: the next op reads it in order
    elif type(result) in (list, tuple):
        for part in result:
            _own(part, source)


def owning(fn):
    """``fn`` whose NDArray outputs share no memory with its first argument (a copy where NumPy
    gave a view)."""
    @functools.wraps(fn)
    def op(*args, **kwargs):
        result = fn(*args, **kwargs)
        source = args[0] if args else kwargs.get("data", kwargs.get("ary",
                                                                    kwargs.get("tensor")))
        if type(source) is NDArray:
            _own(result, source._data)
        return result
    return op


# ----------------------------------------------------------------------------- NDArray methods
_METHODS = {
    "exp": exp, "log": log, "log1p": log1p, "expm1": expm1, "sqrt": sqrt, "rsqrt": rsqrt,
    "square": square, "abs": abs, "sign": sign, "reciprocal": reciprocal, "sin": sin, "cos": cos,
    "tanh": tanh, "sigmoid": sigmoid, "relu": relu, "clip": clip, "floor": floor, "ceil": ceil,
    "round": round, "sum": sum, "mean": mean, "max": max, "min": min, "prod": prod, "norm": norm,
    "argmax": argmax, "argmin": argmin, "transpose": transpose, "flatten": flatten,
    "expand_dims": expand_dims, "squeeze": squeeze, "swapaxes": swapaxes, "flip": flip,
    "broadcast_to": broadcast_to, "broadcast_like": broadcast_like, "tile": tile,
    "repeat": repeat, "softmax": softmax, "log_softmax": log_softmax, "split": split,
    "pick": pick, "take": take, "one_hot": one_hot, "topk": topk, "sort": sort,
    "argsort": argsort, "slice_axis": slice_axis, "zeros_like": zeros_like, "ones_like": ones_like,
    "reshape_like": reshape_like, "dot": dot, "log2": log2, "log10": log10, "tan": tan,
    "arcsin": arcsin, "arccos": arccos, "arctan": arctan, "sinh": sinh, "cosh": cosh,
    "arcsinh": arcsinh, "arccosh": arccosh, "arctanh": arctanh, "degrees": degrees,
    "radians": radians, "cbrt": cbrt, "rcbrt": rcbrt, "trunc": trunc, "fix": fix, "rint": rint,
    "softmin": softmin, "broadcast_axes": broadcast_axes, "broadcast_axis": broadcast_axis,
    "slice": _slice_op,
}


def _reshape_method(self, *shape, **kwargs):
    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        shape = shape[0]
    return reshape(self, shape if shape else kwargs.pop("shape"), **kwargs)


def _install_methods():
    for name, fn in _METHODS.items():
        setattr(NDArray, name, _taking_out(name, owning(fn) if name in VIEW_OPS else fn))
    NDArray.reshape = _reshape_method


def _taking_out(name, fn):
    """The method ``x.name(...)``: ``fn(x, ...)``, with MXNet's ``out=`` (``x.exp(out=x)``).
    NumPy's functions call the reductions as methods (``numpy.sum(x)`` calls ``x.sum(axis=None,
    out=None)``, ``numpy.mean(x)`` passes ``dtype=None`` too)."""
    # An operator of this module is looked up at each call, as the module's: mx.profiler times
    # it there.
    by_name = globals().get(name) is fn

    def method(self, *args, out=None, **kwargs):
        if "dtype" in kwargs and kwargs["dtype"] is None:
            del kwargs["dtype"]
        result = (globals()[name] if by_name else fn)(self, *args, **kwargs)
        if out is None:
            return result
        from .out_arg import write_out
        return write_out(result, out)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = fn.__doc__
    return method


_install_methods()
