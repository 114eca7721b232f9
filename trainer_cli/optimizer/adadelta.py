"""AdaDelta (``adadelta``, Zeiler 2012): no learning rate at all."""
from __future__ import annotations

import numpy

from ..context import array_module_of
from .optimizer import Optimizer, register, scaled_grad, zeros_like

__all__ = ["AdaDelta", "adadelta_rule"]


def adadelta_rule(w, g, acc_g, acc_delta, *, wd, rho, epsilon, rescale, clip):
    """``G = clip(rescale*g)``; ``acc_g = rho*acc_g + (1-rho)*G*G``;
    ``d = sqrt(acc_delta + eps)/sqrt(acc_g + eps)*G``; ``acc_delta = rho*acc_delta + (1-rho)*d*d``;
    ``w -= d + wd*w`` (wd is not scaled by any learning rate, as in MXNet)."""
    xp = array_module_of(w)
    G = scaled_grad(g, rescale, clip)
    acc_g *= rho
    acc_g += (1. - rho) * G * G
    delta = acc_delta + epsilon
    xp.sqrt(delta, out=delta)
    delta /= xp.sqrt(acc_g + epsilon)
    delta *= G
    acc_delta *= rho
    xp.multiply(delta, 1. - rho, out=G)
    G *= delta
    acc_delta += G
    delta += w * wd
    w -= delta


@register
class AdaDelta(Optimizer):
    """AdaDelta. State: ``(accumulated g^2, accumulated delta^2)``, float32. The caller's gradient
    is left untouched (MXNet scales it in place)."""

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho = rho
        self.epsilon = epsilon

    def create_state(self, index, weight):
        return (zeros_like(weight, numpy.float32), zeros_like(weight, numpy.float32))

    def _step(self, index, w, g, state, lr, wd):
        acc_g, acc_delta = state
        adadelta_rule(w, g, acc_g, acc_delta, wd=wd, rho=self.rho, epsilon=self.epsilon,
                      rescale=self.rescale_grad, clip=self._clip)
