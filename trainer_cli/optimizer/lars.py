"""LARS (``lars``, You et al. 2017): SGD with a per-layer learning rate from weight/gradient norms."""
from __future__ import annotations

import math

import numpy

from .optimizer import SparseRows, raw, register
from .sgd import SGD

__all__ = ["LARS", "lars_lr"]


def lars_lr(w, g, *, lr, wd, eta, eps, rescale):
    """``lr*eta*||w|| / (||g||*rescale + wd*||w|| + eps)`` when both norms are positive, else ``lr``.

    Computed in float32 from the unclipped gradient, as MXNet's multi_lars kernel does."""
    f = numpy.float32
    w_norm = f(math.sqrt(_sum_sq(w)))
    g_sum_sq = f(_sum_sq(g))
    if not (w_norm > 0 and g_sum_sq > 0):
        return lr
    return float(f(lr) * f(eta) * w_norm / (f(math.sqrt(g_sum_sq)) * f(rescale) + f(wd) * w_norm
                                             + f(eps)))


def _sum_sq(a):
    if type(a) is SparseRows:  # a row_sparse gradient's norm is its stored values'
        a = a.values
    flat = a.reshape(-1).astype(numpy.float32, copy=False)
    return flat.dot(flat).item()      # on CuPy: the one transfer, explicit


@register
class LARS(SGD):
    """LARS. Parameters whose name (``param_idx2name``, else ``str(index)``) ends in gamma, beta or
    bias keep the plain lr; under the Gluon Trainer no names are given, so every parameter is
    scaled. ``momentum_correction`` scales momentum by ``lr_now/lr_before`` when a scheduler
    changes the global lr. State: momentum or None (as SGD)."""

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True, **kwargs):
        super().__init__(momentum=momentum, lazy_update=lazy_update, **kwargs)
        self.momentum_correction = momentum_correction
        self.eta = eta
        self.eps = eps
        self.skip = 0
        self.last_lr = None
        self.cur_lr = None

    def set_wd_mult(self, args_wd_mult):
        """Only names ending in _weight keep weight decay."""
        self.wd_mult = {n: 0.0 for n in self.idx2name.values() if not n.endswith("_weight")}
        self.wd_mult.update(args_wd_mult)

    def _global_lr(self):
        # cur_lr/last_lr are the global lrs of this call and the previous one (per chunk).
        lr = super()._global_lr()
        self.last_lr = lr if self.cur_lr is None else self.cur_lr
        self.cur_lr = lr
        return lr

    def _skips_lars(self, index):
        name = self.idx2name.get(index, str(index))
        return name.endswith("gamma") or name.endswith("beta") or name.endswith("bias")

    def _lrs_wds(self, indices, weights, grads):
        lrs, wds = self._rates(indices)
        return [lr if self._skips_lars(i) else
                lars_lr(raw(w), raw(g), lr=lr, wd=wd, eta=self.eta, eps=self.eps,
                        rescale=self.rescale_grad)
                for i, w, g, lr, wd in zip(indices, weights, grads, lrs, wds)], wds

    def _momentum(self):
        momentum = super()._momentum()
        if momentum and self.momentum_correction and self.last_lr != 0:
            momentum *= self.cur_lr / self.last_lr
        return momentum

    def _extra_state(self):
        return {"last_lr": self.last_lr, "cur_lr": self.cur_lr}, {}

    def _set_extra_state(self, scalars, arrays):
        self.last_lr, self.cur_lr = scalars["last_lr"], scalars["cur_lr"]
