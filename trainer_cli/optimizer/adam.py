"""Adam (``adam``, MXNet 1.9's L2 form) and AdamW (``adamw``, decoupled weight decay)."""
from __future__ import annotations

import math

import numpy

from ..context import array_module_of
from . import _cuda, _fused
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


# The kernels' scalars, by position (per tensor in a group: wd and the step size).
_WD, _LR = 1, 7


def _scalars(dtype, rescale, wd, clip, beta1, beta2, epsilon, lr):
    """One conversion for all scalars: each rounds to ``dtype`` as ``dtype(x)`` would."""
    clipping = clip is not None
    return numpy.array([rescale, wd, -clip if clipping else 0, clip if clipping else 0,
                        beta1, beta2, epsilon, lr, 1], dtype=dtype)


def adam_rule(w, g, mean, var, *, lr, wd, beta1, beta2, epsilon, rescale, clip):
    """MXNet's adam_update: ``G = clip(rescale*g + wd*w)`` (decay is L2, inside the moments);
    ``w -= lr * mean / (sqrt(var) + epsilon)``. Bias correction is folded into ``lr`` by the caller."""
    t = w.dtype.type
    if w.size >= _fused.MIN_SIZE and _adam_kernel.fits(w, g, mean, var):
        clipping = clip is not None
        scalars = _scalars(t, rescale, wd, clip, beta1, beta2, epsilon, lr)
        if w.ndim != 1:
            w, g, mean, var = w.ravel(), g.ravel(), mean.ravel(), var.ravel()
        _adam_kernel(w, g, mean, var, scalars, bool(wd), clipping)
        return
    if type(w) is not _np_ndarray and _cuda.handles(w, g, mean, var):
        _cuda.adam(w, g, mean, var, lr=lr, wd=wd, beta1=beta1, beta2=beta2, epsilon=epsilon,
                   rescale=rescale, clip=clip)
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
        scalars = _scalars(t, rescale, wd, clip, beta1, beta2, epsilon, eta)
        if w.ndim != 1:
            w, g, mean, var = w.ravel(), g.ravel(), mean.ravel(), var.ravel()
        _adamw_kernel(w, g, mean, var, scalars, clipping)
        return
    if type(w) is not _np_ndarray and _cuda.handles(w, g, mean, var):
        _cuda.adamw(w, g, mean, var, eta=eta, wd=wd, beta1=beta1, beta2=beta2, epsilon=epsilon,
                    rescale=rescale, clip=clip)
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
            G = _clip(G, lo, hi)
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
            G = _clip(G, lo, hi)
        m = mean[i] * beta1
        m = m + G * one_minus_beta1
        mean[i] = m
        v = var[i] * beta2
        v = v + (G * one_minus_beta2) * G
        var[i] = v
        wi = w[i]
        w[i] = wi - (m / (numpy.sqrt(v) + epsilon) + wi * wd) * eta


_clip = None        # bound to ``_fused.clip`` when a loop compiles
_adam_kernel = _fused.Kernel(_adam_loop, "_clip", _fused.clip)
_adamw_kernel = _fused.Kernel(_adamw_loop, "_clip", _fused.clip)

# Each tensor of a group with its own row of scalars (see ``sgd``).
_adam_one = _adamw_one = _column = None


def _adam_multi_loop(table, rows, clipping, spans):
    for j in range(spans.shape[0]):
        k, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
        _adam_one(_column(table, k, 1, rows)[a:b], _column(table, k, 2, rows)[a:b],
                  _column(table, k, 3, rows)[a:b], _column(table, k, 4, rows)[a:b], rows[k],
                  rows[k, 1] != 0, clipping)


def _adamw_multi_loop(table, rows, clipping, spans):
    for j in range(spans.shape[0]):
        k, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
        _adamw_one(_column(table, k, 1, rows)[a:b], _column(table, k, 2, rows)[a:b],
                   _column(table, k, 3, rows)[a:b], _column(table, k, 4, rows)[a:b], rows[k],
                   clipping)


_adam_multi = _fused.MultiKernel(_adam_multi_loop, _adam_kernel, "_adam_one")
_adamw_multi = _fused.MultiKernel(_adamw_multi_loop, _adamw_kernel, "_adamw_one")


def _adam_steps(rule, multi, cache, weights, grads, states, plans, *, beta1, beta2, epsilon,
                rescale, clip):
    """``rule`` for each tensor (``plans``: its ``(lr, wd)``, ``lr`` bias-corrected), the tensors
    the kernel ``multi`` handles in one call per dtype."""
    means, variances = [s[0] for s in states], [s[1] for s in states]
    groups, rest = cache.groups((weights, grads, means, variances))
    clipping = clip is not None
    for positions, table, spans in groups:
        template = _scalars(weights[positions[0]].dtype, rescale, 0, clip, beta1, beta2, epsilon,
                            0)
        rows = _fused.scalar_rows(template, len(positions), {
            _LR: [plans[p][0] for p in positions], _WD: [plans[p][1] for p in positions]})
        multi.run(table, rows, clipping, spans=spans)
    for p in rest:
        lr, wd = plans[p]
        rule(weights[p], grads[p], means[p], variances[p], lr, wd, beta1=beta1, beta2=beta2,
             epsilon=epsilon, rescale=rescale, clip=clip)


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

    def _steps(self, weights, grads, states, plans):
        _adam_steps(self._rule, self._multi, self._fused_tables(), weights, grads, states, plans,
                    beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon,
                    rescale=self._rescale(), clip=self._clip)

    def _rescale(self):
        return self.rescale_grad


@register
class Adam(_AdamBase):
    """Adam (Kingma & Ba). ``epsilon`` is added to sqrt of the uncorrected variance (MXNet)."""

    _multi = _adam_multi

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate, beta1, beta2, epsilon, **kwargs)
        self.lazy_update = lazy_update      # row-sparse gradients only; all arrays here are dense

    def _plan(self, indices, weights, grads):
        return [(self._corrected_lr(index, lr), wd)
                for index, lr, wd in super()._plan(indices, weights, grads)]

    @staticmethod
    def _rule(w, g, mean, var, lr, wd, **kw):
        adam_rule(w, g, mean, var, lr=lr, wd=wd, **kw)


@register
class AdamW(_AdamBase):
    """AdamW (Loshchilov & Hutter): weight decay applied to the weight, not to the gradient.

    MXNet 1.9 has no ``adamw`` optimizer, only the ``contrib.adamw_update`` operator; this follows
    MXNet 2.0's AdamW over that operator: ``eta = lr*sqrt(1-b2^t)/(1-b1^t)`` (``lr`` without
    ``correct_bias``) and ``w -= eta*(m/(sqrt(v)+epsilon) + wd*w)``. Like the operator, a step whose
    ``rescale_grad`` is 0 or not finite (an AMP overflow) leaves weight and moments unchanged."""

    _multi = _adamw_multi

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 correct_bias=True, **kwargs):
        super().__init__(learning_rate, beta1, beta2, epsilon, **kwargs)
        self.correct_bias = correct_bias

    def _plan(self, indices, weights, grads):
        return [(self._corrected_lr(index, lr) if self.correct_bias else lr, wd)
                for index, lr, wd in super()._plan(indices, weights, grads)]

    def _rescale(self):
        return float(self.rescale_grad)

    def _steps(self, weights, grads, states, plans):
        rescale = self._rescale()
        if rescale == 0 or not math.isfinite(rescale):
            return
        super()._steps(weights, grads, states, plans)

    @staticmethod
    def _rule(w, g, mean, var, lr, wd, **kw):
        adamw_rule(w, g, mean, var, eta=lr, wd=wd, **kw)
