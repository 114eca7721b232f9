"""Nadam (``nadam``, Dozat 2016): Adam with Nesterov momentum and a warming momentum schedule."""
from __future__ import annotations

from ..context import array_module_of
from .optimizer import Optimizer, register, scaled_grad, zeros_like

__all__ = ["Nadam", "nadam_rule"]


def nadam_rule(w, g, m, v, *, lr, wd, beta1, beta2, epsilon, mu_t, mu_t1, m_schedule,
               m_schedule_next, t, rescale, clip):
    """``G = clip(rescale*g + wd*w)``; Adam moments;
    ``mbar = (1-mu_t)*G/(1-m_schedule) + mu_t1*m/(1-m_schedule_next)``;
    ``w -= lr*mbar/(sqrt(v/(1-b2^t)) + eps)``."""
    xp = array_module_of(w)
    G = scaled_grad(g, rescale, clip, w, wd)
    m *= beta1
    m += (1. - beta1) * G
    v *= beta2
    v += (1. - beta2) * G * G
    G /= 1. - m_schedule
    G *= 1. - mu_t
    G += mu_t1 * (m / (1. - m_schedule_next))
    denom = v / (1. - pow(beta2, t))
    xp.sqrt(denom, out=denom)
    denom += epsilon
    G *= lr
    G /= denom
    w -= G


@register
class Nadam(Optimizer):
    """Nadam. ``m_schedule`` is ONE scalar on the optimizer, multiplied once per parameter update,
    so it is shared by all parameters and devices (MXNet 1.9 does this; reproduced for identical
    numbers). State: ``(m, v)``."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.schedule_decay = schedule_decay
        self.m_schedule = 1.

    def create_state(self, index, weight):
        return (zeros_like(weight), zeros_like(weight))

    def _step(self, index, w, g, state, lr, wd):
        t = self._index_update_count[index]
        mu_t = self.beta1 * (1. - 0.5 * (pow(0.96, t * self.schedule_decay)))
        mu_t1 = self.beta1 * (1. - 0.5 * (pow(0.96, (t + 1) * self.schedule_decay)))
        self.m_schedule = self.m_schedule * mu_t
        m, v = state
        nadam_rule(w, g, m, v, lr=lr, wd=wd, beta1=self.beta1, beta2=self.beta2,
                   epsilon=self.epsilon, mu_t=mu_t, mu_t1=mu_t1, m_schedule=self.m_schedule,
                   m_schedule_next=self.m_schedule * mu_t1, t=t, rescale=self.rescale_grad,
                   clip=self._clip)

    def _extra_state(self):
        return {"m_schedule": self.m_schedule}, {}

    def _set_extra_state(self, scalars, arrays):
        self.m_schedule = float(scalars["m_schedule"])
