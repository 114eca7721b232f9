"""``InstanceNorm``, ``GroupNorm`` and ``LRN`` with MXNet 1.9.1's operator semantics. On the CPU
the first two normalize rows (a sample's channel, a sample's group: contiguous stretches) with
closed-form gradients, in one loop each way (``_layer_norm_kernels``, LayerNorm's) or its NumPy
body; on other array libraries they are composed of the differentiable ``nd`` ops, whose
gradients come from those ops' own. LRN has MXNet's own gradient.

Both normalize with the biased variance and ``1 / sqrt(var + eps)``. InstanceNorm normalizes each
(sample, channel) over the spatial axes and applies per-channel ``gamma``/``beta``; GroupNorm
normalizes each (sample, group of channels) over the group's channels and spatial axes and, as
MXNet 1.x's operator does, applies ``gamma``/``beta`` of shape ``(num_groups,)``, one per group.
"""
from __future__ import annotations

import numpy

from .. import autograd as _ag
from ..base import ShapeError
from . import _layer_norm_kernels as _ln_kernels
from . import ops
from .ndarray import _recording_for, _result, _wrap, _xp_of

__all__ = ["InstanceNorm", "GroupNorm", "LRN", "rows_loop_grads"]


def _normalize(x, axes, eps):
    mean = ops.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    var = ops.mean(ops.square(centered), axis=axes, keepdims=True)
    return centered * ops.rsqrt(var + eps)


def rows_loop_grads(data, gamma, beta, gout, x, g, mean, invstd, per_row, needs):
    """The gradients of a normalization of rows (LayerNorm's, ``per_row`` 0; GroupNorm's and
    InstanceNorm's) by ``_ln_kernels.backward`` on the rows ``x`` that its ``forward`` took with
    ``g``, shaped as ``data``, ``gamma`` and ``beta``; the input's written straight into its
    gradient buffer where it may be (``autograd.WRITTEN``). None where the loop does not apply."""
    buf = _ag.direct_grad_buffer(data) if needs[0] else None
    made = _ln_kernels.backward(gout, x, g, mean, invstd, per_row, needs,
                                None if buf is None else buf.reshape(x.shape))
    if made is None:
        return None
    gx, ggamma, gbeta = made
    if buf is not None:
        gx = _ag.WRITTEN
    elif gx is not None:
        gx = gx.reshape(data.shape)
    return (gx, None if ggamma is None else ggamma.reshape(gamma.shape),
            None if gbeta is None else gbeta.reshape(beta.shape))


def _rows_normalized(data, gamma, beta, rows, per_row, eps):
    """On the CPU: ``data`` normalized as ``rows`` rows (each over its own values, a contiguous
    stretch), then row ``r`` scaled by ``gamma[r % per_row]`` and shifted by ``beta``'s; the
    gradients in closed form. One loop each way by ``_ln_kernels`` where it applies, else its
    NumPy body, here: the same bits. None for data it does not take (another array library,
    dtype or layout): the caller then composes the ``nd`` ops."""
    x, g, b = data._data, gamma._data, beta._data
    if type(x) is not numpy.ndarray or x.dtype.kind != "f" or x.dtype.itemsize < 4 \
            or not x.flags.c_contiguous or g.dtype != x.dtype or b.dtype != x.dtype \
            or not x.size:
        return None
    x2 = x.reshape(rows, -1)
    g, b = numpy.ascontiguousarray(g.reshape(-1)), numpy.ascontiguousarray(b.reshape(-1))
    made = _ln_kernels.forward(x2, g, b, eps, per_row)
    if made is None:
        xhat, invstd, _, _ = _ln_kernels.np_normalized(x2, -1, eps)
        g_rows, b_rows = (numpy.tile(v, rows // per_row).reshape(rows, 1) for v in (g, b))
        out, mean = xhat * g_rows + b_rows, None
    else:
        (out, mean, invstd), xhat = made, None
    inputs = (data, gamma, beta)
    if not _recording_for(*inputs):
        return _wrap(out.reshape(x.shape), data._ctx)
    groups = (rows // per_row, per_row, -1)

    def vjp(gout, needs):
        gout2 = numpy.ascontiguousarray(gout).reshape(rows, -1)
        if mean is not None:
            made = rows_loop_grads(data, gamma, beta, gout2, x2, g, mean, invstd, per_row, needs)
            if made is not None:
                return made
        rows_xhat = xhat if mean is None else _ln_kernels.np_xhat(x2, mean, invstd)
        rows_invstd = invstd if mean is None else invstd.reshape(rows, 1)
        gx = ggamma = gbeta = None
        if needs[0]:
            gh = gout2 * numpy.tile(g, rows // per_row).reshape(rows, 1)
            gx = _ln_kernels.np_input_grad(gh, rows_xhat, rows_invstd).reshape(x.shape)
        if needs[1]:
            ggamma = (gout2 * rows_xhat).reshape(groups).sum(axis=(0, 2)).reshape(gamma.shape)
        if needs[2]:
            gbeta = gout2.reshape(groups).sum(axis=(0, 2)).reshape(beta.shape)
        return gx, ggamma, gbeta
    return _result(out.reshape(x.shape), data._ctx, inputs, vjp)


def InstanceNorm(data=None, gamma=None, beta=None, eps=1e-3, **kwargs):
    """``(N, C, ...)``: each sample's channel normalized over its spatial axes."""
    if data.ndim < 3:
        raise ShapeError("InstanceNorm needs data with at least 3 axes (N, C, ...), got shape %s"
                         % (data.shape,))
    channels = data.shape[1]
    if gamma.shape != (channels,) or beta.shape != (channels,):
        raise ShapeError("InstanceNorm: gamma %s and beta %s must have shape (%d,)"
                         % (gamma.shape, beta.shape, channels))
    done = _rows_normalized(data, gamma, beta, data.shape[0] * channels, channels, eps)
    if done is not None:
        return done
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
    done = _rows_normalized(data, gamma, beta, n * num_groups, num_groups, eps)
    if done is not None:
        return done
    grouped = data.reshape((n, num_groups, -1))
    norm = _normalize(grouped, (2,), eps)
    norm = norm * gamma.reshape((1, num_groups, 1)) + beta.reshape((1, num_groups, 1))
    return norm.reshape(data.shape)


def _channel_window_sum(v, nsize):
    """Each channel's sum of ``v`` over the ``nsize`` channels centred on it (axis 1; channels
    past either end count as zero), added in channel order as MXNet's ``chpool`` adds them."""
    half = nsize // 2
    channels = v.shape[1]
    total = _xp_of(v).zeros_like(v)
    for offset in range(-half, half + 1):
        lo, hi = max(0, -offset), min(channels, channels - offset)
        if lo < hi:
            total[:, lo:hi] += v[:, lo + offset:hi + offset]
    return total


def LRN(data=None, alpha=1e-4, beta=0.75, knorm=2.0, nsize=None, **kwargs):  # noqa: N802
    """Local response normalisation across channels of (N, C, H, W) float32 ``data``:
    ``data * (knorm + alpha / nsize * sum of data**2 over the nsize channels around each)
    ** -beta`` (Krizhevsky et al., 2012), with MXNet's gradient. ``nsize`` must be odd."""
    if nsize is None or int(nsize) < 1 or int(nsize) % 2 != 1:
        raise ValueError("LRN: nsize must be a positive odd number, got %r" % (nsize,))
    if data.ndim != 4:
        raise ShapeError("LRN takes (N, C, H, W) data, got shape %s" % (data.shape,))
    if data.dtype != numpy.float32:
        raise TypeError("LRN takes float32 data (as MXNet's), got %s" % numpy.dtype(data.dtype))
    d = data._data
    xp = _xp_of(d)
    f = numpy.float32
    nsize = int(nsize)
    salpha = f(f(alpha) / f(nsize))
    norm = _channel_window_sum(d * d, nsize) * salpha + f(knorm)
    scale = xp.power(norm, f(-f(beta)))
    out = d * scale

    def vjp(g, needs):
        inner = _channel_window_sum(g * d * xp.power(norm, f(-f(beta) - f(1))), nsize)
        return (g * scale + f(f(-2) * f(beta) * salpha) * inner * d,)
    return _result(out, data._ctx, (data,), vjp)
