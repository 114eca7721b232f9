"""FTRL-Proximal (``ftrl``, McMahan et al. 2013)."""
from __future__ import annotations

import numpy

from ..context import array_module_of
from .kernels import RowKernel, clip as _clip
from .optimizer import (Optimizer, in_float32, on_rows, param_type, register, scaled_grad,
                        zeros_like)

__all__ = ["Ftrl", "ftrl_rule", "ftrl_rows_rule"]


def ftrl_rule(w, g, z, n, *, lr, wd, lamda1, beta, rescale, clip):
    """MXNet's ftrl_update: with ``G = clip(rescale*g)``,
    ``z += G - (sqrt(n + G^2) - sqrt(n)) * w / lr; n += G^2``;
    ``w = (sign(z)*lamda1 - z) / ((beta + sqrt(n))/lr + wd) * (|z| > lamda1)``."""
    xp = array_module_of(w)
    t = param_type(w.dtype)
    lr, wd, lamda1, beta = t(lr), t(wd), t(lamda1), t(beta)
    G = scaled_grad(g, rescale, clip, dtype=w.dtype, params=t)
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


# ftrl_rule one element at a time, for the row_sparse loop on a row_sparse weight (numba): the
# same operations in the same order and precision, so the same bits (tests/test_optim_sparse.py).
# ``one`` and ``zero`` are the weight's dtype: sign(z) and the (|z| > lamda1) mask multiply in it.
_ROW_SCALARS = ("rescale", "lo", "hi", "clipping", "lr", "wd", "lamda1", "beta", "one", "zero")


def _ftrl_cpu(w, g, z, n, s):
    rescale, lo, hi, clipping, lr, wd, lamda1, beta, one, zero = s[0], s[1], s[2], s[3], s[4], \
        s[5], s[6], s[7], s[8], s[9]
    for i in range(w.shape[0]):
        G = g[i] * rescale
        if clipping:
            G = _clip(G, lo, hi)
        G2 = G * G
        ni = n[i]
        sigma = (numpy.sqrt(ni + G2) - numpy.sqrt(ni)) * w[i] / lr
        zi = z[i] + (G - sigma)
        z[i] = zi
        ni = ni + G2
        n[i] = ni
        den = (numpy.sqrt(ni) + beta) / lr + wd
        sign = one if zi > 0 else (-one if zi < 0 else (zero if zi == 0 else zi))
        w[i] = (sign * lamda1 - zi) / den * (one if abs(zi) > lamda1 else zero)


FTRL_ROWS_KERNEL = RowKernel("ftrl", scalars=_ROW_SCALARS, arrays=4, one=_ftrl_cpu, params=True)


def ftrl_rows_rule(w, grad, z, n, *, lr, wd, lamda1, beta, rescale, clip):
    """``ftrl_rule`` on the rows ``grad`` (``SparseRows``) holds, states included: the numba row
    loop where it takes the arrays, else the rule on the gathered rows."""
    rows = grad.rows
    if not len(rows):
        return
    if w.flags.c_contiguous and z.flags.c_contiguous and n.flags.c_contiguous:
        width = w.size // w.shape[0]
        w2 = w.reshape(w.shape[0], width)
        scalars = dict(rescale=rescale, lo=-clip if clip is not None else 0,
                       hi=clip if clip is not None else 0, clipping=clip is not None, lr=lr,
                       wd=wd, lamda1=lamda1, beta=beta, one=1, zero=0)
        if FTRL_ROWS_KERNEL.run(w2, rows, grad.values.reshape(len(rows), width),
                                (z.reshape(w2.shape), n.reshape(w2.shape)), scalars):
            return
    on_rows(ftrl_rule, w, grad, [z, n], lr=lr, wd=wd, lamda1=lamda1, beta=beta,
            rescale=rescale, clip=clip)


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
        ftrl_rows_rule(w, grad, *state, lr=lr, wd=wd, lamda1=self.lamda1, beta=self.beta,
                       rescale=self.rescale_grad, clip=self._clip)

    def _step(self, index, w, g, state, lr, wd):
        z, n = state
        in_float32(ftrl_rule, w, g, z, n, lr=lr, wd=wd, lamda1=self.lamda1, beta=self.beta,
                   rescale=self.rescale_grad, clip=self._clip)
