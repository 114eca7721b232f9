"""RMSProp (``rmsprop``): Tieleman & Hinton's, or Graves's centered variant."""
from __future__ import annotations

import numpy

from ..context import array_module_of
from .optimizer import Optimizer, in_float32, param_type, register, scaled_grad, zeros_like

__all__ = ["RMSProp", "rmsprop_rule", "rmsprop_centered_rule"]


def _update_n(xp, G, n, gamma1, scratch, square_first):
    """``n = (1-gamma1)*G^2 + gamma1*n`` (the two kernels associate the product differently)."""
    t = param_type(n.dtype)
    if square_first:
        xp.multiply(G, G, out=scratch)
        scratch *= t(1) - gamma1
    else:
        xp.multiply(G, t(1) - gamma1, out=scratch)
        scratch *= G
    n *= gamma1
    n += scratch


def rmsprop_rule(w, g, n, *, lr, wd, gamma1, epsilon, clip_weights, rescale, clip):
    """MXNet's rmsprop_update: ``G = clip(rescale*g + wd*w)``; ``n = (1-g1)*G^2 + g1*n``;
    ``w -= lr * G/sqrt(n + epsilon)``; then ``w`` is clipped to ``clip_weights`` if set."""
    xp = array_module_of(w)
    t = param_type(w.dtype)
    G = scaled_grad(g, rescale, clip, w, wd, params=t)
    scratch = xp.empty_like(G)
    _update_n(xp, G, n, t(gamma1), scratch, square_first=True)
    xp.add(n, t(epsilon), out=scratch)
    xp.sqrt(scratch, out=scratch)
    G /= scratch
    G *= t(lr)
    w -= G
    _clip_weights(xp, w, clip_weights)


def rmsprop_centered_rule(w, g, n, gbar, delta, *, lr, wd, gamma1, gamma2, epsilon, clip_weights,
                          rescale, clip):
    """MXNet's rmspropalex_update: ``n`` and ``gbar`` track G^2 and G;
    ``delta = g2*delta - lr*G/sqrt(n - gbar^2 + epsilon)``; ``w += delta``; then clip_weights."""
    xp = array_module_of(w)
    t = param_type(w.dtype)
    gamma1 = t(gamma1)
    G = scaled_grad(g, rescale, clip, w, wd, params=t)
    scratch = xp.empty_like(G)
    _update_n(xp, G, n, gamma1, scratch, square_first=False)
    xp.multiply(G, t(1) - gamma1, out=scratch)
    gbar *= gamma1
    gbar += scratch
    xp.multiply(gbar, gbar, out=scratch)
    xp.subtract(n, scratch, out=scratch)
    scratch += t(epsilon)
    xp.sqrt(scratch, out=scratch)
    G *= t(lr)
    G /= scratch
    delta *= t(gamma2)
    delta -= G
    w += delta
    _clip_weights(xp, w, clip_weights)


def _clip_weights(xp, w, bound):
    if bound and bound > 0:     # MXNet passes it only when truthy; the kernel ignores negatives
        xp.clip(w, w.dtype.type(-bound), w.dtype.type(bound), out=w)


@register
class RMSProp(Optimizer):
    """RMSProp. State: ``(n,)``, or ``(n, g, delta)`` when centered; float32 (MXNet)."""

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8, centered=False,
                 clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1 = gamma1
        self.gamma2 = gamma2
        self.centered = centered
        self.epsilon = epsilon
        self.clip_weights = clip_weights

    def create_state(self, index, weight):
        count = 3 if self.centered else 1
        return tuple(zeros_like(weight, numpy.float32) for _ in range(count))

    def _step(self, index, w, g, state, lr, wd):
        common = dict(lr=lr, wd=wd, gamma1=self.gamma1, epsilon=self.epsilon,
                      clip_weights=self.clip_weights, rescale=self.rescale_grad, clip=self._clip)
        if self.centered:
            in_float32(rmsprop_centered_rule, w, g, *state, gamma2=self.gamma2, **common)
        else:
            in_float32(rmsprop_rule, w, g, state[0], **common)
