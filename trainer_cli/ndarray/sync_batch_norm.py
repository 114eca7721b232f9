"""``nd.contrib.SyncBatchNorm``: MXNet 1.9.1's synchronized batch normalization, on one device.

Its arithmetic is not BatchNorm's, and the numbers follow it: the batch variance is
``E[x^2] - E[x]^2`` (each mean a sum times ``channels / size`` in float), the output
``gamma * (x - mean) / sqrt(var + eps) + beta``, predicting ``gamma / sqrt(moving_var + eps) * x
+ (beta - gamma * moving_mean / sqrt(moving_var + eps))``; the backward pass updates the moving
statistics with the batch variance itself and takes the input's gradient from the sums of the
head gradient and of its product with ``x - mean``, as MXNet's does.

The statistics of several devices meet in MXNet's operator while its engine runs their forward
passes side by side; here each call runs to its end before the next device's starts, so one
waiting for the others would never return. ``ndev`` above 1 is refused, naming ``num_devices``.
"""
from __future__ import annotations

from .. import autograd as _ag
from .ndarray import _recording_for, _result, _wrap, _xp_of

__all__ = ["SyncBatchNorm"]


def SyncBatchNorm(data=None, gamma=None, beta=None, moving_mean=None,  # noqa: N802
                  moving_var=None, eps=1e-3, momentum=0.9, fix_gamma=True,
                  use_global_stats=False, output_mean_var=False, ndev=1, key=None, **kwargs):
    """Batch normalization over axis 1 with MXNet's SyncBatchNorm arithmetic, on one device
    (``ndev`` 1). With ``output_mean_var`` the batch mean and variance follow the output
    (training), or the moving ones (predicting, where MXNet leaves those outputs unwritten)."""
    if int(ndev) != 1:
        raise NotImplementedError(
            "SyncBatchNorm with ndev=%d (key %r): statistics synchronized across devices are "
            "not available here (each device's forward pass runs to its end before the next "
            "starts, so waiting for the others would never return); give num_devices=1, or use "
            "gluon.nn.BatchNorm, which normalizes each device's batch on its own"
            % (int(ndev), key))
    x = data._data
    xp = _xp_of(x)
    t = x.dtype.type
    n, c = x.shape[0], (x.shape[1] if x.ndim > 1 else 1)
    x3 = x.reshape(n, c, -1)
    per = (1, c, 1)
    scale = t(c) / t(x.size)       # MXNet's ``real_t`` quotient
    if fix_gamma:
        gamma._data[...] = 1
    slope = gamma._data.reshape(per)
    bias = beta._data.reshape(per)
    eps, momentum = t(eps), t(momentum)
    training = _ag._state.training and not use_global_stats
    if training:
        mean = scale * x3.sum(axis=(0, 2), keepdims=True)
        var = scale * (x3 * x3).sum(axis=(0, 2), keepdims=True) - mean * mean
        centered = x3 - mean
        out = slope * centered / xp.sqrt(var + eps) + bias
        stats = (mean, var)
    else:
        mm = moving_mean._data.reshape(per)
        mv = moving_var._data.reshape(per)
        root = xp.sqrt(mv + eps)
        out = slope / root * x3 + (bias - slope * mm / root)
        stats = (mm, mv)
    out = out.reshape(x.shape)
    result = _node(data, gamma, beta, x3, out, stats, slope, scale, eps, training,
                   (moving_mean, moving_var, momentum) if training else None, fix_gamma)
    if output_mean_var:
        mean, var = stats
        return [result, _wrap(xp.array(mean.reshape(-1)), data._ctx),
                _wrap(xp.array(var.reshape(-1)), data._ctx)]
    return result


def _node(data, gamma, beta, x3, out, stats, slope, scale, eps, training, moving, fix_gamma):
    if not _recording_for(data, gamma, beta):
        return _wrap(out, data._ctx)
    xp = _xp_of(x3)
    mean, var = stats
    t = x3.dtype.type

    def vjp(g, needs):
        g3 = g.reshape(x3.shape)
        centered = x3 - mean
        root = xp.sqrt(var + eps)
        sum_grad = g3.sum(axis=(0, 2), keepdims=True)
        ggamma = gx = None
        if training:
            moving_mean, moving_var, momentum = moving
            rest = t(1) - momentum
            moving_mean._data[...] = (moving_mean._data * momentum
                                      + mean.reshape(-1).astype(moving_mean._data.dtype) * rest)
            moving_var._data[...] = (moving_var._data * momentum
                                     + var.reshape(-1).astype(moving_var._data.dtype) * rest)
            if needs[0]:
                sum_prod = (g3 * centered).sum(axis=(0, 2), keepdims=True)
                gvar = t(-1) * sum_prod * slope * xp.power(var + eps, t(-1.5))
                gmean = sum_grad * slope
                gmean *= t(-1) / root
                gx = (g3 * slope) * (t(1) / root) + gvar * scale * centered + gmean * scale
        elif needs[0]:
            gx = (g3 * slope) * (t(1) / root)
        if needs[1]:
            ggamma = (xp.zeros(gamma._data.shape, gamma._data.dtype) if fix_gamma else
                      (g3 * centered / root).sum(axis=(0, 2)).reshape(gamma._data.shape))
        gbeta = sum_grad.reshape(beta._data.shape) if needs[2] else None
        return (None if gx is None else gx.reshape(data.shape)), ggamma, gbeta
    return _result(out, data._ctx, (data, gamma, beta), vjp)
