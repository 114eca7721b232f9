"""Stochastic Gradient Langevin Dynamics (``sgld``): half an SGD step plus Gaussian noise."""
from __future__ import annotations

import math

import numpy

from .. import random as _random
from ..context import array_module_of, cpu, gpu
from .optimizer import Optimizer, register, scaled_grad

__all__ = ["SGLD", "sgld_rule"]


def sgld_rule(w, g, noise, *, lr, wd, rescale, clip):
    """``w += -lr/2 * (clip(rescale*g) + wd*w)``, then ``w += noise`` (drawn with std sqrt(lr))."""
    G = scaled_grad(g, rescale, clip, dtype=w.dtype)
    G += w * wd
    G *= -lr / 2
    w += G
    w += noise


@register
class SGLD(Optimizer):
    """SGLD (Welling & Teh 2011). The noise comes from ``trainer_cli.random``'s generator for the
    weight's device, so ``trainer_cli.random.seed`` makes runs repeatable (MXNet's stream is not
    reproduced)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)

    def _step(self, index, w, g, state, lr, wd):
        sgld_rule(w, g, self._noise(w, math.sqrt(lr)), lr=lr, wd=wd, rescale=self.rescale_grad,
                  clip=self._clip)

    def _noise(self, w, std):
        """Normal(0, std) noise shaped and typed like ``w``, on its device: drawn in float64 for
        float64 weights (as MXNet draws in the weight's dtype), else in float32."""
        xp = array_module_of(w)
        ctx = cpu() if xp is numpy else gpu(w.device.id)
        draw = numpy.float64 if w.dtype == numpy.float64 else numpy.float32
        noise = _random.generator(ctx).standard_normal(w.shape, dtype=draw)
        noise *= draw(std)
        return noise.astype(w.dtype, copy=False)
