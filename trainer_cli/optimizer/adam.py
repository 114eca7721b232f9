"""Adam (``adam``, MXNet 1.9's L2 form) and AdamW (``adamw``, decoupled weight decay).

Each rule three times: the NumPy body (the reference), the CPU loop and the CUDA element, which
do its operations in the same order and precision (``kernels`` runs whichever fits); then Adam's
row_sparse path (a NumPy body and a ``RowKernel`` over the rows a gradient holds, chosen in
``adam_sparse_rule``); then the optimizer classes.

Row_sparse gradients (``SparseRows``), MXNet 1.9.1's ``AdamLazyUpdateDnsRspDnsImpl`` and
``AdamStdUpdateDnsRspDnsImpl``: lazy (``lazy_update=True``, the default) runs the dense rule on
the rows present in the gradient only (weight, mean and var of absent rows keep their bits;
O(rows present)); standard (``lazy_update=False``) is the dense rule with absent rows as
gradient 0. The bias correction comes from the parameter's update count, advanced by every
update, an empty gradient's included. AdamW (MXNet 2.0's, over contrib ``adamw_update``, which
has no row_sparse kernel) densifies the gradient.
"""
from __future__ import annotations

import math

import numpy

from ..context import array_module_of
from .kernels import CUDA_CLIP, Kernel, RowKernel, clip as _clip
from .optimizer import (Optimizer, Plan, SparseRows, densified, param_type, register, scaled_grad,
                        zeros_like)

__all__ = ["Adam", "AdamW", "adam_rule", "adamw_rule", "adam_sparse_rule"]

_np_ndarray = numpy.ndarray


# ----------------------------------------------------------------------------- the math
def _moments(xp, G, mean, var, beta1, beta2, scratch, adamw=False):
    """``mean = b1*mean + (1-b1)*G; var = b2*var + (1-b2)*G*G``, as the kernels round them:
    MXNet's adam_update ``((1-b2)*G)*G`` with ``1-b`` in the weight's dtype, or with ``adamw``
    its contrib adamw_update: ``(1-b2)*(G*G)``, ``1-b`` taken in float32 (``_one_minus``)."""
    t = param_type(mean.dtype)
    if adamw:
        below1, below2 = t(_one_minus(beta1)), t(_one_minus(beta2))
    else:
        below1, below2 = t(1) - t(beta1), t(1) - t(beta2)
    mean *= t(beta1)
    xp.multiply(G, below1, out=scratch)
    mean += scratch
    var *= t(beta2)
    xp.multiply(G, G if adamw else below2, out=scratch)
    scratch *= below2 if adamw else G
    var += scratch


def _one_minus(beta):
    """``1 - beta`` as the adamw_update operator takes it: in float32, its parameters' type."""
    return numpy.float32(1) - numpy.float32(beta)


def _adam_numpy(w, g, mean, var, lr, wd, beta1, beta2, epsilon, rescale, clip):
    """MXNet's adam_update: ``G = clip(rescale*g + wd*w)`` (decay is L2, inside the moments);
    ``w -= lr * mean / (sqrt(var) + epsilon)``. Bias correction is folded into ``lr``."""
    t = param_type(w.dtype)
    xp = numpy if type(w) is _np_ndarray else array_module_of(w)
    G = scaled_grad(g, rescale, clip, w, wd, params=t)
    scratch = xp.empty_like(G)
    _moments(xp, G, mean, var, beta1, beta2, scratch)
    xp.sqrt(var, out=G)
    G += t(epsilon)
    xp.multiply(mean, t(lr), out=scratch)
    scratch /= G
    w -= scratch


def _adamw_numpy(w, g, mean, var, eta, wd, beta1, beta2, epsilon, rescale, clip):
    """MXNet's contrib adamw_update with lr=1 (as MXNet 2.0's AdamW and GluonNLP call it):
    ``G = clip(rescale*g)``; ``w -= eta * (mean / (sqrt(var) + epsilon) + wd*w)``."""
    t = param_type(w.dtype)
    xp = numpy if type(w) is _np_ndarray else array_module_of(w)
    G = scaled_grad(g, rescale, clip, dtype=w.dtype, params=t)
    scratch = xp.empty_like(G)
    _moments(xp, G, mean, var, beta1, beta2, scratch, adamw=True)
    xp.sqrt(var, out=G)
    G += t(epsilon)
    xp.divide(mean, G, out=scratch)
    xp.multiply(w, t(wd), out=G)
    scratch += G
    scratch *= t(eta)
    w -= scratch


# ----------------------------------------------------------------------------- the kernels
# The NumPy bodies one element at a time: the CPU loops (numba) and the CUDA elements, side by
# side. ``one`` is 1 in the weight's dtype (``1 - beta1`` rounds as in the NumPy body).
_SCALARS = ("rescale", "wd", "lo", "hi", "beta1", "beta2", "epsilon", "lr", "one", "clipping",
            "decay")
# AdamW's kernels take 1 - beta as the operator does (``_one_minus``), not as ``one - beta``.
_SCALARS_W = _SCALARS + ("one_minus_beta1", "one_minus_beta2")


def _adam_cpu(w, g, mean, var, s):
    rescale, wd, lo, hi = s[0], s[1], s[2], s[3]
    beta1, beta2, epsilon, lr, one = s[4], s[5], s[6], s[7], s[8]
    clipping, decay = s[9], s[10]
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


def _adam_cpu_checked(w, g, mean, var, s):
    # _adam_cpu's arithmetic, unchanged, and whether it read and wrote only finite values (see
    # ``Kernel``'s ``checked``): x - x is 0 for every finite x, NaN for NaN and inf.
    rescale, wd, lo, hi = s[0], s[1], s[2], s[3]
    beta1, beta2, epsilon, lr, one = s[4], s[5], s[6], s[7], s[8]
    clipping, decay = s[9], s[10]
    one_minus_beta1, one_minus_beta2 = one - beta1, one - beta2
    finite = True
    for i in range(w.shape[0]):
        gi = g[i]
        G = gi * rescale
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
        wi = w[i] - (m * lr) / (numpy.sqrt(v) + epsilon)
        w[i] = wi
        finite &= ((gi - gi) + (m - m)) + ((v - v) + (wi - wi)) == 0
    return finite


_PARAMS = ("T g, T rescale, T wd, T lo, T hi, T beta1, T beta2, T epsilon, T lr, T one, "
           "T clipping, T decay")

# Adam's moments from the clipped gradient x, as _moments rounds them.
_CUDA_MOMENTS = """
    T m = mean * beta1;
    m = m + x * %s;
    mean = m;
    T v = var * beta2;
    v = v + %s;
    var = v;
"""

_ADAM_CUDA = (_PARAMS, "T w, T mean, T var", """
    T x = g * rescale;
    if (decay != 0) x = x + w * wd;
    if (clipping != 0) {""" + CUDA_CLIP + """
    }""" + _CUDA_MOMENTS % ("(one - beta1)", "(x * (one - beta2)) * x") + """
    w = w - (m * lr) / (sqrt(v) + epsilon);
""")


def _adamw_cpu(w, g, mean, var, s):
    rescale, wd, lo, hi = s[0], s[1], s[2], s[3]
    beta1, beta2, epsilon, eta = s[4], s[5], s[6], s[7]
    clipping = s[9]
    one_minus_beta1, one_minus_beta2 = s[11], s[12]
    for i in range(w.shape[0]):
        G = g[i] * rescale
        if clipping:
            G = _clip(G, lo, hi)
        m = mean[i] * beta1
        m = m + G * one_minus_beta1
        mean[i] = m
        v = var[i] * beta2
        v = v + one_minus_beta2 * (G * G)
        var[i] = v
        wi = w[i]
        w[i] = wi - (m / (numpy.sqrt(v) + epsilon) + wi * wd) * eta


def _adamw_cpu_checked(w, g, mean, var, s):
    # _adamw_cpu's arithmetic, unchanged, and whether it read and wrote only finite values.
    rescale, wd, lo, hi = s[0], s[1], s[2], s[3]
    beta1, beta2, epsilon, eta = s[4], s[5], s[6], s[7]
    clipping = s[9]
    one_minus_beta1, one_minus_beta2 = s[11], s[12]
    finite = True
    for i in range(w.shape[0]):
        gi = g[i]
        G = gi * rescale
        if clipping:
            G = _clip(G, lo, hi)
        m = mean[i] * beta1
        m = m + G * one_minus_beta1
        mean[i] = m
        v = var[i] * beta2
        v = v + one_minus_beta2 * (G * G)
        var[i] = v
        wi = w[i]
        wi = wi - (m / (numpy.sqrt(v) + epsilon) + wi * wd) * eta
        w[i] = wi
        finite &= ((gi - gi) + (m - m)) + ((v - v) + (wi - wi)) == 0
    return finite


_ADAMW_CUDA = (_PARAMS + ", T one_minus_beta1, T one_minus_beta2", "T w, T mean, T var", """
    T x = g * rescale;
    if (clipping != 0) {""" + CUDA_CLIP + """
    }""" + _CUDA_MOMENTS % ("one_minus_beta1", "one_minus_beta2 * (x * x)") + """
    T wi = w;
    w = wi - (m / (sqrt(v) + epsilon) + wi * wd) * lr;
""")

ADAM_KERNEL = Kernel("adam", scalars=_SCALARS, arrays=4, cpu=_adam_cpu, cuda=_ADAM_CUDA,
                     checked=_adam_cpu_checked)
ADAMW_KERNEL = Kernel("adamw", scalars=_SCALARS_W, arrays=4, cpu=_adamw_cpu, cuda=_ADAMW_CUDA,
                      checked=_adamw_cpu_checked)
ADAM_ROWS_KERNEL = RowKernel("adam", scalars=_SCALARS, arrays=4, one=_adam_cpu, params=True,
                             cuda=_ADAM_CUDA)


def _scalars(lr, wd, beta1, beta2, epsilon, rescale, clip):
    clipping = clip is not None
    return dict(rescale=rescale, wd=wd, lo=-clip if clipping else 0, hi=clip if clipping else 0,
                beta1=beta1, beta2=beta2, epsilon=epsilon, lr=lr, one=1, clipping=clipping,
                decay=wd != 0,      # the NumPy body's ``if wd`` (scaled_grad) on wd itself
                one_minus_beta1=_one_minus(beta1), one_minus_beta2=_one_minus(beta2))


# ----------------------------------------------------------------------------- the rules
def adam_rule(w, g, mean, var, *, lr, wd, beta1, beta2, epsilon, rescale, clip):
    """MXNet's adam_update on raw arrays, in place (see ``_adam_numpy``)."""
    if ADAM_KERNEL.declines(w) or not ADAM_KERNEL.run(
            (w, g, mean, var), _scalars(lr, wd, beta1, beta2, epsilon, rescale, clip)):
        _adam_numpy(w, g, mean, var, lr, wd, beta1, beta2, epsilon, rescale, clip)


def adamw_rule(w, g, mean, var, *, eta, wd, beta1, beta2, epsilon, rescale, clip):
    """MXNet's contrib adamw_update on raw arrays, in place (see ``_adamw_numpy``)."""
    if ADAMW_KERNEL.declines(w) or not ADAMW_KERNEL.run(
            (w, g, mean, var), _scalars(eta, wd, beta1, beta2, epsilon, rescale, clip)):
        _adamw_numpy(w, g, mean, var, eta, wd, beta1, beta2, epsilon, rescale, clip)


def _adam_rows_numpy(w, rows, g, mean, var, lr, wd, beta1, beta2, epsilon, rescale, clip):
    """MXNet's lazy row_sparse Adam: the dense body on rows ``rows`` of ``w``, ``mean`` and
    ``var`` (``g``: the gradient's values), gathered and scattered back."""
    rows_w, rows_mean, rows_var = w[rows], mean[rows], var[rows]
    _adam_numpy(rows_w, g, rows_mean, rows_var, lr, wd, beta1, beta2, epsilon, rescale, clip)
    mean[rows] = rows_mean
    var[rows] = rows_var
    w[rows] = rows_w


def adam_sparse_rule(w, grad, mean, var, *, lr, wd, beta1, beta2, epsilon, rescale, clip, lazy):
    """MXNet's adam_update with a row_sparse gradient ``grad`` (``SparseRows``), in place: lazy
    (only the present rows) or standard (the dense rule, absent rows with gradient 0)."""
    if not lazy:
        grad.checked_for(w)
        adam_rule(w, grad.dense(), mean, var, lr=lr, wd=wd, beta1=beta1, beta2=beta2,
                  epsilon=epsilon, rescale=rescale, clip=clip)
        return
    grad.checked_for(w, rows=False)
    rows = grad.rows
    if not len(rows):
        return          # MXNet: no stored row, nothing changes (the count has advanced)
    width = w.size // w.shape[0]
    w2, g2 = w.reshape(w.shape[0], width), grad.values.reshape(len(rows), width)
    mean2, var2 = mean.reshape(w2.shape), var.reshape(w2.shape)
    if not ADAM_ROWS_KERNEL.run(w2, rows, g2, (mean2, var2),
                                _scalars(lr, wd, beta1, beta2, epsilon, rescale, clip)):
        grad.checked_for(w)
        _adam_rows_numpy(w2, rows, g2, mean2, var2, lr, wd, beta1, beta2, epsilon, rescale,
                         clip)


def _adam_steps(rule, kernel, step, plans, *, beta1, beta2, epsilon, rescale, clip):
    """``rule`` for each tensor of a ``PreparedStep`` (``plans``: each one's ``Plan``, its rate
    bias-corrected), the tensors ``kernel`` takes in one call per dtype."""
    weights, grads, states = step.weights, step.grads, step.states

    def columns():
        return weights, grads, [s[0] for s in states], [s[1] for s in states]

    def rows_of(positions):
        chosen = [plans[p] for p in positions]
        return kernel.rows(weights[positions[0]].dtype, len(chosen),
                           _scalars(0, 0, beta1, beta2, epsilon, rescale, clip),
                           {"lr": [p.lr for p in chosen], "wd": [p.wd for p in chosen],
                            "decay": [p.wd != 0 for p in chosen]})

    for p in kernel.run_groups(step.split(kernel, columns), rows_of, step):
        mean, var = states[p]
        rule(weights[p], grads[p], mean, var, plans[p].lr, plans[p].wd, beta1=beta1,
             beta2=beta2, epsilon=epsilon, rescale=rescale, clip=clip)


# ----------------------------------------------------------------------------- the optimizers
class _AdamBase(Optimizer):
    def __init__(self, learning_rate, beta1, beta2, epsilon, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return (zeros_like(weight), zeros_like(weight))      # mean, variance

    def _bias_factors(self, t):
        """``(sqrt(1 - beta2^t), 1 - beta1^t)``: the rate at count ``t`` is lr times the first
        over the second."""
        return math.sqrt(1. - self.beta2 ** t), 1. - self.beta1 ** t

    def _corrected_lr(self, index, lr):
        root, below = self._bias_factors(self._index_update_count[index])
        return lr * root / below

    def _plan(self, indices, weights, grads):
        # The bias correction folded into each tensor's rate, from its count; the factors
        # worked out once per distinct count (a step's hundreds of tensors mostly share one).
        plans = super()._plan(indices, weights, grads)
        if not self._corrects_bias():
            return plans
        counts, factors, corrected = self._index_update_count, {}, []
        for p in plans:
            t = counts[p.index]
            f = factors.get(t)
            if f is None:
                f = factors[t] = self._bias_factors(t)
            corrected.append(Plan(p.index, p.lr * f[0] / f[1], p.wd))
        return corrected

    def _corrects_bias(self):
        return True

    def _steps(self, step, plans):
        _adam_steps(self._rule, self._kernel, step, plans, beta1=self.beta1, beta2=self.beta2,
                    epsilon=self.epsilon, rescale=self._rescale(), clip=self._clip)

    def _rescale(self):
        return self.rescale_grad


@register
class Adam(_AdamBase):
    """Adam (Kingma & Ba). ``epsilon`` is added to sqrt of the uncorrected variance (MXNet)."""

    _kernel = ADAM_KERNEL

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate, beta1, beta2, epsilon, **kwargs)
        self.lazy_update = lazy_update      # row_sparse gradients only (adam_sparse_rule)

    def create_state(self, index, weight):
        # Lazy: a row_sparse weight gets row_sparse moments (MXNet).
        stype = weight.stype if self.lazy_update else "default"
        return (zeros_like(weight, stype=stype), zeros_like(weight, stype=stype))

    def _rule(self, w, g, mean, var, lr, wd, **kw):
        if type(g) is SparseRows:
            adam_sparse_rule(w, g, mean, var, lr=lr, wd=wd, lazy=self.lazy_update, **kw)
        else:
            adam_rule(w, g, mean, var, lr=lr, wd=wd, **kw)


@register
class AdamW(_AdamBase):
    """AdamW (Loshchilov & Hutter): weight decay applied to the weight, not to the gradient.

    MXNet 1.9 has no ``adamw`` optimizer, only the ``contrib.adamw_update`` operator; this follows
    MXNet 2.0's AdamW over that operator: ``eta = lr*sqrt(1-b2^t)/(1-b1^t)`` (``lr`` without
    ``correct_bias``) and ``w -= eta*(m/(sqrt(v)+epsilon) + wd*w)``. Like the operator, a step whose
    ``rescale_grad`` is 0 or not finite (an AMP overflow) leaves weight and moments unchanged."""

    _kernel = ADAMW_KERNEL

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 correct_bias=True, **kwargs):
        super().__init__(learning_rate, beta1, beta2, epsilon, **kwargs)
        self.correct_bias = correct_bias

    def _corrects_bias(self):
        return self.correct_bias

    def _rescale(self):
        return float(self.rescale_grad)

    def _steps(self, step, plans):
        rescale = self._rescale()
        if rescale == 0 or not math.isfinite(rescale):
            return
        super()._steps(step, plans)

    @staticmethod
    def _rule(w, g, mean, var, lr, wd, **kw):
        adamw_rule(w, densified(g), mean, var, eta=lr, wd=wd, **kw)
