"""AdaMax (``adamax``, Kingma & Ba section 7): Adam with an infinity-norm second moment."""
from __future__ import annotations

from ..context import array_module_of
from .optimizer import Optimizer, register, scaled_grad, zeros_like

__all__ = ["Adamax", "adamax_rule"]


def adamax_rule(w, g, m, u, *, lr, wd, beta1, beta2, rescale, clip):
    """``G = clip(rescale*g + wd*w)``; ``m = b1*m + (1-b1)*G``; ``u = max(b2*u, |G|)``;
    ``w -= lr*m/u`` (no epsilon: a zero ``u`` gives NaN, as in MXNet). ``lr`` is bias-corrected."""
    xp = array_module_of(w)
    G = scaled_grad(g, rescale, clip, w, wd)
    m *= beta1
    m += (1. - beta1) * G
    u *= beta2
    xp.maximum(u, xp.abs(G), out=u)
    xp.multiply(m, lr, out=G)
    G /= u
    w -= G


@register
class Adamax(Optimizer):
    """AdaMax. State: ``(m, u)``."""

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1 = beta1
        self.beta2 = beta2

    def create_state(self, index, weight):
        return (zeros_like(weight), zeros_like(weight))

    def _step(self, index, w, g, state, lr, wd):
        t = self._index_update_count[index]
        m, u = state
        adamax_rule(w, g, m, u, lr=lr / (1. - self.beta1 ** t), wd=wd, beta1=self.beta1,
                    beta2=self.beta2, rescale=self.rescale_grad, clip=self._clip)
