"""SGD with momentum and weight decay (``sgd``; ``ccsgd`` is MXNet's deprecated alias)."""
from __future__ import annotations

import os

from ..context import array_module_of
from .optimizer import Optimizer, raw, raw_state, register, zeros_like

__all__ = ["SGD", "ccSGD", "sgd_rule"]


def sgd_rule(w, g, mom, *, lr, wd, momentum, rescale, clip):
    """MXNet's multi_sgd(_mom)_update kernel.

    ``mom = momentum*mom - lr*wd*w - lr*clip(rescale*g); w += mom``. The state is the NEGATIVE
    velocity (MXNet's convention); without a state the same step is applied directly."""
    xp = array_module_of(w)
    t = w.dtype.type
    lr, wd = t(lr), t(wd)
    # The kernel rounds (lr*rescale)*g when not clipping and lr*clip(rescale*g) when clipping.
    if clip is None:
        step = xp.multiply(g, lr * t(rescale), dtype=t)
    else:
        step = xp.multiply(g, t(rescale), dtype=t)
        xp.clip(step, t(-clip), t(clip), out=step)
        step *= lr
    if mom is None:
        if wd:
            step += w * (lr * wd)
        w -= step
        return
    mom *= t(momentum)
    if wd:
        mom -= w * (lr * wd)
    mom -= step
    w += mom


@register
class SGD(Optimizer):
    """SGD: ``w += mom`` with ``mom = momentum*mom - lr*(clip(rescale*g) + wd*w)``.

    Updates run aggregated (``aggregate_num`` tensors per call, as the Updater groups them), which
    matters only for the order of scheduler calls; every tensor gets the same rule."""

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update      # row-sparse gradients only; all arrays here are dense
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))

    def create_state(self, index, weight):
        return zeros_like(weight) if self.momentum != 0.0 else None

    def _mp_pack(self, weight32, state):
        return (state, weight32)

    def _mp_unpack(self, state):
        return state[1], state[0]

    def _lrs_wds(self, indices, weights, grads):
        return self._get_lrs(indices), self._get_wds(indices)

    def _momentum(self):
        # MXNet passes momentum to the kernel only when > 0 (a negative one creates a state but
        # runs without momentum).
        return self.momentum if self.momentum > 0 else 0.0

    def update(self, index, weight, grad, state):
        many = isinstance(index, (list, tuple))
        indices, weights, grads, states = (index, weight, grad, state) if many else \
            ([index], [weight], [grad], [state])
        self._update_count(indices)
        lrs, wds = self._lrs_wds(indices, weights, grads)
        momentum, clip = self._momentum(), self._clip
        for w, g, s, lr, wd in zip(weights, grads, states, lrs, wds):
            sgd_rule(raw(w), raw(g), raw_state(s), lr=lr, wd=wd, momentum=momentum,
                     rescale=self.rescale_grad, clip=clip)


@register
class ccSGD(SGD):  # noqa: N801  (the registry name is the lower-cased class name)
    """[DEPRECATED] Same as ``SGD``; kept for backward compatibility."""

