"""FTRL-Proximal (``ftrl``, McMahan et al. 2013)."""
from __future__ import annotations

import numpy

from ..context import array_module_of
from .optimizer import Optimizer, on_rows, register, scaled_grad, zeros_like

__all__ = ["Ftrl", "ftrl_rule"]


def ftrl_rule(w, g, z, n, *, lr, wd, lamda1, beta, rescale, clip):
    """MXNet's ftrl_update: with ``G = clip(rescale*g)``,
    ``z += G - (sqrt(n + G^2) - sqrt(n)) * w / lr; n += G^2``;
    ``w = (sign(z)*lamda1 - z) / ((beta + sqrt(n))/lr + wd) * (|z| > lamda1)``."""
    xp = array_module_of(w)
    t = w.dtype.type
    lr, wd, lamda1, beta = t(lr), t(wd), t(lamda1), t(beta)
    G = scaled_grad(g, rescale, clip, dtype=w.dtype)
    G2 = xp.square(G)
    sigma = n + G2
    xp.sqrt(sigma, out=sigma)
    sigma -= xp.sqrt(n)
    sigma *= w
    sigma /= lr
    xp.subtract(G, sigma, out=sigma)
    z += sigma
    n += G2
    xp.sqrt(n, out=G2)
    G2 += beta
    G2 /= lr
    G2 += wd                                  # the denominator
    xp.sign(z, out=G)
    G *= lamda1
    G -= z
    G /= G2
    G *= xp.abs(z) > lamda1
    w[...] = G


@register
class Ftrl(Optimizer):
    """FTRL. ``learning_rate`` defaults to 0.1 and is set after the base class, so a scheduler's
    base_lr is not overwritten (MXNet). State: ``(z, n)``, float32."""

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(**kwargs)
        self.lamda1 = lamda1
        self.beta = beta
        self.lr = learning_rate

    def create_state(self, index, weight):
        return (zeros_like(weight, numpy.float32), zeros_like(weight, numpy.float32))   # z, n

    def _sparse_step(self, index, w, grad, state, lr, wd, rsp_weight):
        # A row_sparse weight: MXNet's FtrlUpdateRspRspRsp, the rule on the present rows only.
        # A dense weight: no row_sparse kernel, so MXNet densifies (absent rows decay too).
        if not rsp_weight:
            return super()._sparse_step(index, w, grad, state, lr, wd, rsp_weight)
        on_rows(ftrl_rule, w, grad, list(state), lr=lr, wd=wd, lamda1=self.lamda1, beta=self.beta,
                rescale=self.rescale_grad, clip=self._clip)

    def _step(self, index, w, g, state, lr, wd):
        z, n = state
        ftrl_rule(w, g, z, n, lr=lr, wd=wd, lamda1=self.lamda1, beta=self.beta,
                  rescale=self.rescale_grad, clip=self._clip)
