"""Delay-compensated asynchronous SGD (``dcasgd``, Zheng et al. 2016)."""
from __future__ import annotations

from .optimizer import Optimizer, register, scaled_grad, zeros_like

__all__ = ["DCASGD", "dcasgd_rule"]


def dcasgd_rule(w, g, mom, prev_w, *, lr, wd, momentum, lamda, rescale, clip):
    """``step = -lr*(G + wd*w + lamda*G*G*(w - prev_w))`` with ``G = clip(rescale*g)``;
    ``prev_w = w``; ``w += step`` (with momentum: ``mom = momentum*mom + step; w += mom``)."""
    G = scaled_grad(g, rescale, clip, dtype=w.dtype)
    comp = G * lamda
    comp *= G
    comp *= w - prev_w
    step = w * wd
    step += G                  # MXNet sums left to right: (G + wd*w) + compensation
    step += comp
    step *= -lr
    prev_w[...] = w
    if mom is None:
        w += step
    else:
        mom *= momentum
        mom += step
        w += mom


@register
class DCASGD(Optimizer):
    """DCASGD. State: ``(momentum or None, previous weight)``."""

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.weight_previous = {}
        self.lamda = lamda

    def create_state(self, index, weight):
        mom = None if self.momentum == 0.0 else zeros_like(weight)
        return (mom, weight.copy())

    def _step(self, index, w, g, state, lr, wd):
        mom, prev_w = state
        dcasgd_rule(w, g, mom, prev_w, lr=lr, wd=wd, momentum=self.momentum, lamda=self.lamda,
                    rescale=self.rescale_grad, clip=self._clip)
