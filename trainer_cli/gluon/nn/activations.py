"""Parametrised activations as layers, as MXNet 1.9's ``gluon.nn.activations``."""
from __future__ import annotations

from ... import initializer as _init
from ... import ndarray as _nd
from ...ndarray import nn as _nd_nn
from ..block import HybridBlock

__all__ = ["LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "Swish"]


class LeakyReLU(HybridBlock):
    """``x`` for ``x > 0``, ``alpha * x`` otherwise."""

    _plan_step = "op"

    def __init__(self, alpha, **kwargs):
        if alpha < 0:
            raise ValueError("Slope coefficient for LeakyReLU must be no less than 0.")
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="leaky", slope=self._alpha, name="fwd")

    def __repr__(self):
        return "{name}({alpha})".format(name=type(self).__name__, alpha=self._alpha)


class PReLU(HybridBlock):
    """Leaky ReLU with a learned slope ``alpha`` per channel (axis 1), or one shared slope."""

    _plan_step = "op"

    def __init__(self, alpha_initializer=_init.Constant(0.25), in_channels=1, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.alpha = self.params.get("alpha", shape=(in_channels,), init=alpha_initializer)

    def hybrid_forward(self, F, x, alpha):
        return F.LeakyReLU(x, gamma=alpha, act_type="prelu", name="fwd")


class ELU(HybridBlock):
    """``x`` for ``x > 0``, ``alpha * (exp(x) - 1)`` otherwise."""

    _plan_step = "op"

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="elu", slope=self._alpha)


class SELU(HybridBlock):
    """Scaled ELU with the self-normalizing constants."""

    _plan_step = "op"

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="selu", name="fwd")


class GELU(HybridBlock):
    """``x * Phi(x)`` with the exact normal CDF (erf), as MXNet."""

    _plan_step = "op"

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="gelu", name="fwd")


class Swish(HybridBlock):
    """``x * sigmoid(beta * x)``."""

    _plan_step = "op"

    def __init__(self, beta=1.0, **kwargs):
        super().__init__(**kwargs)
        self._beta = beta

    def hybrid_forward(self, F, x):
        if F is _nd:
            fused = _nd_nn.swish_f32(x, self._beta)     # one operation: the same bits
            if fused is not None:
                return fused
        return x * F.sigmoid(self._beta * x, name="fwd")
