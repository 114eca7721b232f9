"""Large-batch SGD (``lbsgd``): gradients accumulated over ``batch_scale`` calls, warmup of lr."""
from __future__ import annotations

import logging
import math

from ..context import array_module_of
from .optimizer import Optimizer, raw, raw_state, register, zeros_like
from .sgd import sgd_rule

__all__ = ["LBSGD"]


@register
class LBSGD(Optimizer):
    """LBSGD. Every ``batch_scale``-th call per parameter applies SGD with the mean of the
    accumulated gradients and ``lr * multiplier``, the multiplier warming up from 1 to
    ``batch_scale`` over ``warmup_epochs * updates_per_epoch`` updates (``linear``, ``power2``,
    ``sqrt``) or coming from the norms (``lars``); the calls in between change nothing.

    The lr is read BEFORE the update is counted, so with a scheduler it lags one update (MXNet).
    State: momentum or None; ``(weight32, momentum or None)`` under multi_precision (the base
    class's layout, which is what MXNet's Updater builds for LBSGD too)."""

    def __init__(self, momentum=0.0, multi_precision=False, warmup_strategy="linear",
                 warmup_epochs=5, batch_scale=1, updates_per_epoch=32, begin_epoch=0,
                 num_epochs=60, **kwargs):
        super().__init__(multi_precision=multi_precision, **kwargs)
        logging.info("Running Large-Batch SGD Algorithm")
        logging.info("(Batch_scale=%f, warmup_epochs=%d, warmup_strategy=%s, updates_per_epoch=%d)",
                     batch_scale, warmup_epochs, warmup_strategy, updates_per_epoch)
        self.momentum = momentum
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.begin_epoch = begin_epoch
        self.init_updates = begin_epoch * updates_per_epoch
        self.num_epochs = num_epochs
        self.lbmult = 1
        self.cumgrads = {}      # index -> {"cum_grad": raw array or 0, "num_cums": int}
        self.adaptive = False
        self.admult = 1

    def create_state(self, index, weight):
        return zeros_like(weight) if self.momentum != 0.0 else None

    def _get_lbmult(self, nup):
        nwup = self.warmup_epochs * self.updates_per_epoch
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        if self.warmup_strategy == "linear":
            return 1.0 + (maxmult - 1) * nup / nwup
        if self.warmup_strategy == "power2":
            return 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        if self.warmup_strategy == "sqrt":
            return 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        return 1.0

    @staticmethod
    def _get_lars(w, g, wd):
        w2, g2 = _sum_sq(w), _sum_sq(g)
        return min(max(math.sqrt(w2 / (g2 + wd * w2 + 1e-18)), 0.01), 100)

    def _cumulate_gradient(self, g, index):
        entry = self.cumgrads.get(index)
        if entry and entry["num_cums"] > 0:
            cum = entry["cum_grad"]
            if not isinstance(cum, (int, float)) and type(cum) is not type(g):
                cum = array_module_of(g).asarray(cum)     # loaded from a file onto the host
            entry["cum_grad"] = cum + g
            entry["num_cums"] += 1
        else:
            # A copy: MXNet keeps a reference to the caller's gradient buffer here.
            entry = {"cum_grad": g.copy(), "num_cums": self.init_updates + 1}
            self.cumgrads[index] = entry
        return entry

    def update(self, index, weight, grad, state):
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state):
                self.update(i, w, g, s)
            return
        lr, wd = self._get_lr(index), self._get_wd(index)
        self._update_count(index)
        w = raw(weight)
        entry = self._cumulate_gradient(raw(grad), index)
        if entry["num_cums"] % self.batch_scale != 0:
            return
        g = entry["cum_grad"] / self.batch_scale
        if self.warmup_strategy == "lars":
            lr *= self._get_lars(w, g, wd)
        else:
            lr *= self._get_lbmult(entry["num_cums"])
        momentum = self.momentum if self.momentum > 0 else 0.0
        sgd_rule(w, g, raw_state(state), lr=lr, wd=wd, momentum=momentum,
                 rescale=self.rescale_grad, clip=self._clip, single=True)
        entry["cum_grad"] = 0

    def _extra_state(self):
        scalars, arrays = {"cumgrads": []}, {}
        for k, (index, entry) in enumerate(self.cumgrads.items()):
            cum = entry["cum_grad"]
            has_array = not isinstance(cum, (int, float))
            scalars["cumgrads"].append([index, entry["num_cums"], has_array])
            if has_array:
                arrays["cumgrad%d" % k] = cum
        return scalars, arrays

    def _set_extra_state(self, scalars, arrays):
        self.cumgrads = {}
        for k, (index, num_cums, has_array) in enumerate(scalars["cumgrads"]):
            cum = arrays["cumgrad%d" % k] if has_array else 0
            self.cumgrads[index] = {"cum_grad": cum, "num_cums": int(num_cums)}


def _sum_sq(a):
    """Sum of squares in the array's precision, like MXNet's ``multiply(v, v).asnumpy().sum()``."""
    return (a * a).sum().item()      # on CuPy: the one transfer, explicit
