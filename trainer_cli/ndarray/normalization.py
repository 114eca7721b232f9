"""``InstanceNorm`` and ``GroupNorm`` with MXNet 1.9.1's operator semantics, written with the
differentiable ``nd`` ops (their gradients come from those ops' own).

Both normalize with the biased variance and ``1 / sqrt(var + eps)``. InstanceNorm normalizes each
(sample, channel) over the spatial axes and applies per-channel ``gamma``/``beta``; GroupNorm
normalizes each (sample, group of channels) over the group's channels and spatial axes and, as
MXNet 1.x's operator does, applies ``gamma``/``beta`` of shape ``(num_groups,)``, one per group.
"""
from __future__ import annotations

from ..base import ShapeError
from . import ops

__all__ = ["InstanceNorm", "GroupNorm"]


def _normalize(x, axes, eps):
    mean = ops.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = ops.mean(ops.square(centered), axis=axes, keepdims=True)
    return centered * ops.rsqrt(var + eps)


def InstanceNorm(data=None, gamma=None, beta=None, eps=1e-3, **kwargs):
    """``(N, C, ...)``: each sample's channel normalized over its spatial axes."""
    if data.ndim < 3:
        raise ShapeError("InstanceNorm needs data with at least 3 axes (N, C, ...), got shape %s"
                         % (data.shape,))
    channels = data.shape[1]
    if gamma.shape != (channels,) or beta.shape != (channels,):
        raise ShapeError("InstanceNorm: gamma %s and beta %s must have shape (%d,)"
                         % (gamma.shape, beta.shape, channels))
    norm = _normalize(data, tuple(range(2, data.ndim)), eps)
    shape = (1, channels) + (1,) * (data.ndim - 2)
    return norm * gamma.reshape(shape) + beta.reshape(shape)


def GroupNorm(data=None, gamma=None, beta=None, num_groups=1, eps=1e-5, output_mean_var=False,
              **kwargs):
    """``(N, C, ...)`` in ``num_groups`` groups of ``C / num_groups`` channels."""
    if output_mean_var:
        raise NotImplementedError("GroupNorm's output_mean_var is not supported")
    n, channels = data.shape[:2]
    if channels % num_groups:
        raise ShapeError("GroupNorm: %d channels cannot be split into %d groups"
                         % (channels, num_groups))
    if gamma.shape != (num_groups,) or beta.shape != (num_groups,):
        raise ShapeError("GroupNorm: gamma %s and beta %s must have shape (%d,), one per group"
                         % (gamma.shape, beta.shape, num_groups))
    grouped = data.reshape((n, num_groups, -1))
    norm = _normalize(grouped, (2,), eps)
    norm = norm * gamma.reshape((1, num_groups, 1)) + beta.reshape((1, num_groups, 1))
    return norm.reshape(data.shape)
