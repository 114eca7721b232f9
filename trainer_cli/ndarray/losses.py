"""Fused loss ops: Gluon's commonest losses in their commonest form as one tape node each.

``gluon.loss`` calls these where they apply (see there) and its generic array operations
otherwise. Each runs the generic path's array operations in the same order, and their gradients in
reverse order, so the numbers are the same bit for bit (``tests/test_fused_losses.py``); the
per-op overhead of the small ops (noticeable on small batches) is paid once. The softmax
cross-entropy on class scores goes further, through the numba kernels of ``_loss_kernels`` (on
the GPU, the CUDA kernels of ``_loss_cuda``).
"""
from __future__ import annotations

import numpy

from .. import autograd as _ag
from . import _loss_cuda, _loss_kernels
from .ndarray import NDArray, _g_mul, _g_sub, _needs_grad, _recorded, _wrap, unbroadcast
from .ops import (_FLOAT_KINDS, _axes, _fix_scalar, _keep_shape, _log_softmax_grad,
                  _log_softmax_raw, _mean_grad, _mean_raw, _pick_grad, _pick_raw, _square_grad,
                  _square_raw)

__all__ = ["l2_loss_batch_mean", "softmax_ce_batch_mean"]

_np_ndarray = numpy.ndarray


def _fused_batch_mean(loss_raw, batch_axis):
    axes = _axes(loss_raw.ndim, batch_axis, True)
    if type(loss_raw) is _np_ndarray and loss_raw.dtype in _FLOAT_KINDS \
            and loss_raw.size == loss_raw.shape[batch_axis]:
        # One value per sample (a Dense(1) regression, say): NumPy's mean of one value is its
        # sum, +0.0 plus the value, divided by nothing; the same bits at a third of the cost.
        return loss_raw.reshape(-1) + 0.0, axes
    return _fix_scalar(_mean_raw(loss_raw, axes, False)), axes


def _batch_mean_grad(g, loss_raw, axes):
    return _mean_grad(g.reshape(_keep_shape(loss_raw.shape, axes)), loss_raw, None, axes)


def l2_loss_batch_mean(pred, label, half_weight, batch_axis):
    """``L2Loss``'s ``half_weight * (label - pred)**2`` averaged over every axis but ``batch_axis``
    (sub, square, scale, batch mean), for NDArrays ``pred`` (non-empty) and ``label`` (a constant:
    no gradient flows to it; reshaped to ``pred``'s shape) and a float ``half_weight``."""
    p = pred._data
    lab = label._data if label._data.shape == p.shape else label._data.reshape(p.shape)
    diff = lab - p
    sq = _square_raw(diff)
    scaled = sq * half_weight
    out, axes = _fused_batch_mean(scaled, batch_axis)
    if not (_ag._state.recording and _needs_grad(pred)):
        return _wrap(out, pred._ctx)
    pshape = p.shape

    def vjp(g, needs):
        g = _batch_mean_grad(g, scaled, axes)
        if g.shape == pshape:
            # Every array here has pred's shape (the label was reshaped to it), so the
            # unbroadcasts below are no-ops: the same operations, in the same order, inlined.
            return (-(2 * (g * half_weight) * diff),)
        g = unbroadcast(_g_mul(g, sq, half_weight, scaled, True, False)[0], sq.shape)
        g = _square_grad(g, diff, sq)
        return (unbroadcast(_g_sub(g, lab, p, diff, False, True)[1], pshape),)
    return _recorded(out, pred._ctx, (pred,), vjp)


def softmax_ce_batch_mean(pred, label, axis, batch_axis):
    """``SoftmaxCrossEntropyLoss`` of the NDArray ``pred`` (logits) against class indices
    ``label``, unweighted: log_softmax along ``axis``, pick, negate, mean over every axis but
    ``batch_axis``."""
    d = pred._data
    lab = label._data if isinstance(label, NDArray) else None
    if axis in (-1, 1) and batch_axis == 0:
        if _loss_kernels.applies(d, lab):
            # Class scores per row: the log-softmax, the pick, the mean and the gradient in
            # kernel passes around NumPy's own exp and log (the operations of _log_softmax_raw).
            shifted, log_sum = _loss_kernels.log_softmax_parts(d)
            return _fused_ce(pred, _loss_kernels.forward(shifted, log_sum, lab),
                             _loss_kernels.backward)
        if _loss_cuda.applies(d, lab):
            # The same on the GPU, one launch each way.
            return _fused_ce(pred, _loss_cuda.forward(d, lab), _loss_cuda.backward)
    logp = _log_softmax_raw(d, axis, None)
    picked, idx, ax = _pick_raw(logp, label, axis, True, "clip")
    neg = -picked
    out, axes = _fused_batch_mean(neg, batch_axis)
    if not (_ag._state.recording and _needs_grad(pred)):
        return _wrap(out, pred._ctx)

    def vjp(g, needs):
        g = -_batch_mean_grad(g, neg, axes)
        g = _pick_grad(g, logp, idx, ax)
        return (_log_softmax_grad(g, logp, axis, 1),)
    return _recorded(out, pred._ctx, (pred,), vjp)


def _fused_ce(pred, forward, backward):
    """The loss of ``forward`` (a fused kernel's ``(loss, logp, label indices)``) as a tape node
    whose gradient is ``backward(head, logp, indices)``, or the array operations where that
    returns None (a head gradient of another dtype)."""
    out, logp, idx = forward
    if not (_ag._state.recording and _needs_grad(pred)):
        return _wrap(out, pred._ctx)

    def vjp(g, needs):
        grad = backward(g, logp, idx)
        if grad is None:
            g = _pick_grad(-g.reshape(-1, 1), logp, idx.reshape(-1, 1), 1)
            grad = _log_softmax_grad(g, logp, 1, 1)
        return (grad,)
    return _recorded(out, pred._ctx, (pred,), vjp)
