"""Signum and signSGD (``signum``): steps of size lr in the sign of the momentum or gradient."""
from __future__ import annotations

from ..context import array_module_of
from .optimizer import Optimizer, param_type, register, scaled_grad, zeros_like

__all__ = ["Signum", "signum_rule"]


def _sign(xp, x, t, out=None):
    """MXNet's sign: -1, 1, or +0.0 for zeros of either sign and for NaN (NumPy's gives -0.0
    and NaN there)."""
    return xp.subtract(x > 0, x < 0, dtype=t, out=out)


def signum_rule(w, g, mom, *, lr, wd, momentum, wd_lh, rescale, clip):
    """MXNet's signum_update (with a state) and signsgd_update (without).

    With momentum: ``mom = momentum*mom - (1-momentum)*(wd*w + clip(rescale*g))``,
    ``w = (1 - lr*wd_lh)*w + lr*sign(mom)``.
    Without: ``w = (1 - lr*wd - lr*wd_lh)*w - lr*sign(rescale*g)``."""
    xp = array_module_of(w)
    t = param_type(w.dtype)
    lr, wd, wd_lh = t(lr), t(wd), t(wd_lh)
    if mom is None:
        # signsgd_update ignores rescale_grad and clip; only rescale's sign can matter, so the
        # sign of rescale*g is taken (equal to MXNet for every rescale_grad > 0).
        step = _sign(xp, xp.multiply(g, t(rescale), dtype=t), t)
        step *= lr
        w *= t(1) - lr * wd - lr * wd_lh
        w -= step
        return
    momentum = t(momentum)
    kept = t(1) - momentum
    if clip is None:
        # MXNet's order, (1-momentum)*rescale_grad first: the other rounds otherwise
        G = xp.multiply(g, kept * t(rescale), dtype=t)
    else:
        G = scaled_grad(g, rescale, clip, dtype=w.dtype, params=t)
        G *= kept
    mom *= momentum
    # at wd=0 too, as MXNet: an infinite weight makes its momentum NaN
    mom -= w * (kept * wd)
    mom -= G
    _sign(xp, mom, t, out=G)
    G *= lr
    w *= t(1) - lr * wd_lh
    w += G


@register
class Signum(Optimizer):
    """Signum (Bernstein et al. 2018); ``momentum=0`` gives signSGD. ``wd_lh`` is decoupled decay."""

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index, weight):
        return zeros_like(weight) if self.momentum != 0.0 else None

    def _step(self, index, w, g, mom, lr, wd):
        momentum = self.momentum if self.momentum > 0 else 0.0
        signum_rule(w, g, mom if momentum else None, lr=lr, wd=wd, momentum=momentum,
                    wd_lh=self.wd_lh, rescale=self.rescale_grad, clip=self._clip)
