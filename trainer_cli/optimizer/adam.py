"""Adam (``adam``, MXNet 1.9's L2 form) and AdamW (``adamw``, decoupled weight decay)."""
from __future__ import annotations

import math

import numpy

from ..context import array_module_of
from . import _fused
from .optimizer import Optimizer, register, scaled_grad, zeros_like

__all__ = ["Adam", "AdamW", "adam_rule", "adamw_rule"]

_np_ndarray = numpy.ndarray


def _moments(xp, G, mean, var, beta1, beta2, scratch):
    """``mean = b1*mean + (1-b1)*G; var = b2*var + (1-b2)*G*G``, as the kernels round them."""
    t = mean.dtype.type
    beta1, beta2 = t(beta1), t(beta2)
    mean *= beta1
    xp.multiply(G, t(1) - beta1, out=scratch)
    mean += scratch
    var *= beta2
    xp.multiply(G, t(1) - beta2, out=scratch)
    scratch *= G
    var += scratch


def adam_rule(w, g, mean, var, *, lr, wd, beta1, beta2, epsilon, rescale, clip):
    """MXNet's adam_update: ``G = clip(rescale*g + wd*w)`` (decay is L2, inside the moments);
    ``w -= lr * mean / (sqrt(var) + epsilon)``. Bias correction is folded into ``lr`` by the caller."""
    t = w.dtype.type
    if w.size >= _fused.MIN_SIZE and _adam_kernel.fits(w, g, mean, var):
        # One conversion for all scalars: each rounds to w's dtype as t(x) would.
        clipping = clip is not None
        scalars = numpy.array([rescale, wd, -clip if clipping else 0, clip if clipping else 0,
                               beta1, beta2, epsilon, lr, 1], dtype=t)
        if w.ndim != 1:
            w, g, mean, var = w.ravel(), g.ravel(), mean.ravel(), var.ravel()
        _adam_kernel(w, g, mean, var, scalars, bool(wd), clipping)
        return
    xp = numpy if type(w) is _np_ndarray else array_module_of(w)
    G = scaled_grad(g, rescale, clip, w, wd)
    scratch = xp.empty_like(G)
    _moments(xp, G, mean, var, beta1, beta2, scratch)
    xp.sqrt(var, out=G)
    G += t(epsilon)
    xp.multiply(mean, t(lr), out=scratch)
    scratch /= G
    w -= scratch


def adamw_rule(w, g, mean, var, *, eta, wd, beta1, beta2, epsilon, rescale, clip):
    """MXNet's contrib adamw_update with lr=1 (as MXNet 2.0's AdamW and GluonNLP call it):
    ``G = clip(rescale*g)``; ``w -= eta * (mean / (sqrt(var) + epsilon) + wd*w)``."""
    t = w.dtype.type
    if w.size >= _fused.MIN_SIZE and _adamw_kernel.fits(w, g, mean, var):
        clipping = clip is not None
        scalars = numpy.array([rescale, wd, -clip if clipping else 0, clip if clipping else 0,
                               beta1, beta2, epsilon, eta, 1], dtype=t)
        if w.ndim != 1:
            w, g, mean, var = w.ravel(), g.ravel(), mean.ravel(), var.ravel()
        _adamw_kernel(w, g, mean, var, scalars, clipping)
        return
    xp = numpy if type(w) is _np_ndarray else array_module_of(w)
    G = scaled_grad(g, rescale, clip, dtype=w.dtype)
    scratch = xp.empty_like(G)
    _moments(xp, G, mean, var, beta1, beta2, scratch)
    xp.sqrt(var, out=G)
    G += t(epsilon)
    xp.divide(mean, G, out=scratch)
    xp.multiply(w, t(wd), out=G)
    scratch += G
    scratch *= t(eta)
    w -= scratch


def _adam_loop(w, g, mean, var, scalars, decay, clipping):
    rescale, wd, lo, hi = scalars[0], scalars[1], scalars[2], scalars[3]
    beta1, beta2, epsilon, lr, one = scalars[4], scalars[5], scalars[6], scalars[7], scalars[8]
    one_minus_beta1, one_minus_beta2 = one - beta1, one - beta2
    for i in range(w.shape[0]):
        G = g[i] * rescale
        if decay:
            G = G + w[i] * wd
        if clipping:
            # numpy.clip: max with lo, then min with hi, a NaN kept.
            if G == G:
                G = G if G > lo else lo
                G = G if G < hi else hi
        m = mean[i] * beta1
        m = m + G * one_minus_beta1
        mean[i] = m
        v = var[i] * beta2
        v = v + (G * one_minus_beta2) * G
        var[i] = v
        w[i] = w[i] - (m * lr) / (numpy.sqrt(v) + epsilon)


def _adamw_loop(w, g, mean, var, scalars, clipping):
    rescale, wd, lo, hi = scalars[0], scalars[1], scalars[2], scalars[3]
    beta1, beta2, epsilon, eta, one = scalars[4], scalars[5], scalars[6], scalars[7], scalars[8]
    one_minus_beta1, one_minus_beta2 = one - beta1, one - beta2
    for i in range(w.shape[0]):
        G = g[i] * rescale
        if clipping:
            if G == G:
                G = G if G > lo else lo
                G = G if G < hi else hi
        m = mean[i] * beta1
        m = m + G * one_minus_beta1
        mean[i] = m
        v = var[i] * beta2
        v = v + (G * one_minus_beta2) * G
        var[i] = v
        wi = w[i]
        w[i] = wi - (m / (numpy.sqrt(v) + epsilon) + wi * wd) * eta


_adam_kernel = _fused.Kernel(_adam_loop)
_adamw_kernel = _fused.Kernel(_adamw_loop)


class _AdamBase(Optimizer):
    def __init__(self, learning_rate, beta1, beta2, epsilon, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return (zeros_like(weight), zeros_like(weight))      # mean, variance

    def _corrected_lr(self, index, lr):
        t = self._index_update_count[index]
        return lr * math.sqrt(1. - self.beta2 ** t) / (1. - self.beta1 ** t)


@register
class Adam(_AdamBase):
    """Adam (Kingma & Ba). ``epsilon`` is added to sqrt of the uncorrected variance (MXNet)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate, beta1, beta2, epsilon, **kwargs)
        self.lazy_update = lazy_update      # row-sparse gradients only; all arrays here are dense

    def _step(self, index, w, g, state, lr, wd):
        mean, var = state
        adam_rule(w, g, mean, var, lr=self._corrected_lr(index, lr), wd=wd, beta1=self.beta1,
                  beta2=self.beta2, epsilon=self.epsilon, rescale=self.rescale_grad,
                  clip=self._clip)


@register
class AdamW(_AdamBase):
    """AdamW (Loshchilov & Hutter): weight decay applied to the weight, not to the gradient.

    MXNet 1.9 has no ``adamw`` optimizer, only the ``contrib.adamw_update`` operator; this follows
    MXNet 2.0's AdamW over that operator: ``eta = lr*sqrt(1-b2^t)/(1-b1^t)`` (``lr`` without
    ``correct_bias``) and ``w -= eta*(m/(sqrt(v)+epsilon) + wd*w)``. Like the operator, a step whose
    ``rescale_grad`` is 0 or not finite (an AMP overflow) leaves weight and moments unchanged."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 correct_bias=True, **kwargs):
        super().__init__(learning_rate, beta1, beta2, epsilon, **kwargs)
        self.correct_bias = correct_bias

    def _step(self, index, w, g, state, lr, wd):
        rescale = float(self.rescale_grad)
        if rescale == 0 or not math.isfinite(rescale):
            return
        mean, var = state
        eta = self._corrected_lr(index, lr) if self.correct_bias else lr
        adamw_rule(w, g, mean, var, eta=eta, wd=wd, beta1=self.beta1, beta2=self.beta2,
                   epsilon=self.epsilon, rescale=rescale, clip=self._clip)
