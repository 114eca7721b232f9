"""Nesterov accelerated gradient (``nag``)."""
from __future__ import annotations

from ..context import array_module_of
from .optimizer import Optimizer, param_type, register, scaled_grad, zeros_like
from .sgd import sgd_rule, sgd_sparse_rule

__all__ = ["NAG", "nag_rule"]


def nag_rule(w, g, mom, *, lr, wd, momentum, rescale, clip):
    """MXNet's nag_mom_update kernel, in place on ``w``.

    ``mom *= momentum; w += -mom + (1+momentum)*(mom - lr*(G + wd*w))`` then
    ``mom -= lr*(G + wd*w)`` with the UPDATED ``w`` (the kernel writes its output over the weight
    before reading it again), where ``G = clip(rescale*g)``."""
    xp = array_module_of(w)
    t = param_type(w.dtype)
    lr, wd, momentum = t(lr), t(wd), t(momentum)
    G = scaled_grad(g, rescale, clip, dtype=w.dtype, params=t)
    mom *= momentum
    d = w * wd
    d += G
    d *= lr
    xp.subtract(mom, d, out=d)
    d *= momentum + t(1)
    w -= mom
    w += d
    xp.multiply(w, wd, out=d)
    d += G
    d *= lr
    mom -= d


@register
class NAG(Optimizer):
    """NAG; without momentum it is plain SGD. State: momentum (negative velocity) or None."""

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state(self, index, weight):
        return zeros_like(weight) if self.momentum != 0.0 else None

    def _mp_pack(self, weight32, state):
        return (state, weight32)

    def _mp_unpack(self, state):
        return state[1], state[0]

    def _sparse_step(self, index, w, grad, mom, lr, wd, rsp_weight):
        # Without momentum MXNet runs sgd_update, lazy by default; with momentum it densifies.
        if mom is None or self.momentum <= 0:
            sgd_sparse_rule(w, grad, None, lr=lr, wd=wd, momentum=0.0, rescale=self.rescale_grad,
                            clip=self._clip, lazy=True)
        else:
            super()._sparse_step(index, w, grad, mom, lr, wd, rsp_weight)

    def _step(self, index, w, g, mom, lr, wd):
        momentum = self.momentum if self.momentum > 0 else 0.0
        if mom is None or momentum == 0.0:
            sgd_rule(w, g, None, lr=lr, wd=wd, momentum=0.0, rescale=self.rescale_grad,
                     clip=self._clip, single=True)
        else:
            nag_rule(w, g, mom, lr=lr, wd=wd, momentum=momentum, rescale=self.rescale_grad,
                     clip=self._clip)
