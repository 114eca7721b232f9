"""LAMB (``lamb``, You et al. 2019): Adam directions scaled per layer by a trust ratio."""
from __future__ import annotations

import math
import os

from ..context import array_module_of
from .optimizer import Optimizer, param_type, register, scaled_grad, zeros_like

__all__ = ["LAMB", "lamb_rule"]


def lamb_rule(w, g, mean, var, *, lr, wd, beta1, beta2, epsilon, t, bias_correction,
              lower_bound, upper_bound, rescale, clip):
    """MXNet's lamb_update_phase1/phase2. ``G = clip(rescale*g)`` (decay is not in the moments);
    ``upd = m_hat/(sqrt(v_hat) + eps) + wd*w``; ``r1 = ||w||`` clamped to the bounds given,
    ``r2 = ||upd||``; ``w -= lr * (r1/r2 if both > 0 else 1) * upd``."""
    xp = array_module_of(w)
    ty = param_type(w.dtype)
    beta1, beta2, one = ty(beta1), ty(beta2), ty(1)
    G = scaled_grad(g, rescale, clip, dtype=w.dtype, params=ty)
    mean *= beta1
    tmp = G * (one - beta1)
    mean += tmp
    var *= beta2
    xp.square(G, out=tmp)
    tmp *= one - beta2
    var += tmp
    if bias_correction:
        xp.divide(var, one - beta2 ** ty(t), out=tmp)
        xp.sqrt(tmp, out=tmp)
        tmp += ty(epsilon)
        xp.divide(mean, one - beta1 ** ty(t), out=G)
    else:
        xp.sqrt(var, out=tmp)
        tmp += ty(epsilon)
        G[...] = mean
    G /= tmp
    xp.multiply(w, ty(wd), out=tmp)
    G += tmp
    r1 = _norm(xp, w)
    if lower_bound:
        r1 = max(r1, lower_bound) if lower_bound > 0 else r1
    if upper_bound:
        r1 = min(r1, upper_bound) if upper_bound > 0 else r1
    r2 = _norm(xp, G)
    t = w.dtype.type
    # phase 2's lr * r1 / r2, in the weight's dtype
    G *= ty(lr) if r1 == 0 or r2 == 0 else ty(lr) * t(r1) / t(r2)
    w -= G


def _norm(xp, a):
    # float32 as MXNet's float32 norms (float64 weights: float64 norms)
    flat = a.reshape(-1) if a.dtype == "float64" else a.reshape(-1).astype("float32", copy=False)
    return math.sqrt(flat.dot(flat).item())      # on CuPy: the one transfer, explicit


@register
class LAMB(Optimizer):
    """LAMB. State: ``(mean, var)``. Tensors are grouped up to 45 per call, as MXNet's Updater does."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lower_bound = lower_bound
        self.upper_bound = upper_bound
        self.bias_correction = bias_correction
        self.aggregate_num = max(1, min(45, int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE",
                                                          "45"))))

    def create_state(self, index, weight):
        return (zeros_like(weight), zeros_like(weight))

    def _step(self, index, w, g, state, lr, wd):
        mean, var = state
        lamb_rule(w, g, mean, var, lr=lr, wd=wd, beta1=self.beta1, beta2=self.beta2,
                  epsilon=self.epsilon, t=self._index_update_count[index],
                  bias_correction=self.bias_correction, lower_bound=self.lower_bound,
                  upper_bound=self.upper_bound, rescale=self.rescale_grad, clip=self._clip)
