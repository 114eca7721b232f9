"""``test``: MXNet's Test optimizer, used by the kvstore tests (``w += rescale_grad * g``)."""
from __future__ import annotations

import numpy

from .optimizer import Optimizer, raw, register, zeros_like

__all__ = ["Test"]


@register
class Test(Optimizer):
    """``w += rescale_grad * g``; the state mirrors the weight. No learning rate, no update count."""

    __test__ = False    # not a pytest test class

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def create_state(self, index, weight):
        return zeros_like(weight, numpy.float32)

    def update(self, index, weight, grad, state):
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state):
                self.update(i, w, g, s)
            return
        w = raw(weight)
        w += raw(grad) * self.rescale_grad
        raw(state)[...] = w
