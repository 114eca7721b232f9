"""``nd.contrib.adamw_update`` and ``mp_adamw_update``: MXNet 1.9.1's AdamW update operators,
which optimizers written for MXNet call (GluonNLP's BERTAdam: ``lr=1``, ``eta`` the learning
rate, ``rescale_grad`` an NDArray).

The operator's arithmetic in its order (``contrib/adamw-inl.h``), one element at a time in the
weight's dtype (float32 for the multi-precision form, on its float32 copy of the weight), its
float parameters cast to that dtype (so float32-rounded for float64 weights)::

    g = clip(rescale_grad * grad)
    mean = beta1 * mean + (1 - beta1) * g
    var = beta2 * var + (1 - beta2) * g**2
    weight = weight - eta * (lr * mean / (sqrt(var) + epsilon) + wd * weight)

A ``rescale_grad`` that is zero or not finite (mixed precision's overflow check) skips the
update: nothing changes, as in MXNet. As in MXNet, ``adamw_update`` leaves ``grad`` scaled and
clipped (it computes in place there); ``mp_adamw_update`` leaves it as it was.
"""
from __future__ import annotations

import math

import numpy

from .ndarray import NDArray, _wrap, _xp_of

__all__ = ["adamw_update", "mp_adamw_update"]


def _scale(rescale_grad):
    value = rescale_grad.asscalar() if isinstance(rescale_grad, NDArray) else rescale_grad
    return float(value)


def _param(dtype):
    """What the operator's scalars become for weights of ``dtype``: its parameters are floats,
    cast to the weight's type (float64 weights get float32-rounded scalars)."""
    t = numpy.dtype(dtype).type
    return lambda x: t(numpy.float32(x))


def _moments_and_step(w, g, mean, var, t, lr, eta, beta1, beta2, epsilon, wd):
    """The update of ``w`` (in place) from the scaled, clipped gradient ``g``, its scalars
    converted by ``t`` (``_param``)."""
    xp = _xp_of(w)
    f = numpy.float32
    # MXNet takes 1 - beta in float and then the dtype (float16: not 1 - beta in half).
    b1, b2 = t(beta1), t(beta2)
    mean[...] = b1 * mean + t(f(1) - f(beta1)) * g
    var[...] = b2 * var + t(f(1) - f(beta2)) * (g * g)
    w[...] = w - t(eta) * (t(lr) * mean / (xp.sqrt(var) + t(epsilon)) + t(wd) * w)


def _scaled_clipped(g, t, scale, clip_gradient):
    g = g * t(scale)
    if clip_gradient >= 0:
        clip = t(clip_gradient)
        g = _xp_of(g).clip(g, -clip, clip)
    return g


def _result(weight, new_w, out):
    """``new_w`` written into ``out`` (returned), or a new array when ``out`` is None."""
    if out is None:
        return _wrap(new_w, weight._ctx)
    _xp_of(out._data).copyto(out._data, new_w, casting="unsafe")
    return out


def adamw_update(weight, grad, mean, var, rescale_grad, lr, eta, beta1=0.9, beta2=0.999,
                 epsilon=1e-8, wd=0.0, clip_gradient=-1.0, out=None, name=None):
    """The AdamW step of ``weight`` (returned, or written into ``out``: ``out=weight`` updates
    it in place), ``mean`` and ``var`` updated in place; see the module's docstring."""
    scale = _scale(rescale_grad)
    w = weight._data
    if not math.isfinite(scale) or scale == 0:
        return _result(weight, w.copy(), out)
    t = _param(w.dtype)
    g = _scaled_clipped(grad._data, t, scale, float(clip_gradient))
    grad._data[...] = g
    new_w = w.copy()
    _moments_and_step(new_w, g, mean._data, var._data, t, lr, eta, beta1, beta2, epsilon, wd)
    return _result(weight, new_w, out)


def mp_adamw_update(weight, grad, mean, var, weight32, rescale_grad, lr, eta, beta1=0.9,
                    beta2=0.999, epsilon=1e-8, wd=0.0, clip_gradient=-1.0, out=None,
                    name=None):
    """``adamw_update`` of a float16 ``weight`` through its float32 copy ``weight32`` (updated
    in place, with ``mean`` and ``var``): the step in float32, the weight its rounding."""
    scale = _scale(rescale_grad)
    if not math.isfinite(scale) or scale == 0:
        return _result(weight, weight._data.copy(), out)
    w32 = weight32._data
    t = _param(numpy.float32)
    g = _scaled_clipped(grad._data.astype(numpy.float32), t, scale, float(clip_gradient))
    _moments_and_step(w32, g, mean._data, var._data, t, lr, eta, beta1, beta2, epsilon, wd)
    return _result(weight, w32.astype(weight._data.dtype), out)
