"""Losses with MXNet's weighting: ``weight`` scales every element, ``sample_weight`` broadcasts
against the loss, and the result is averaged over every axis except ``batch_axis``."""
from __future__ import annotations

import numbers

import numpy

from .._naming import snake_case
from ..ndarray import NDArray
from ..ndarray import ops as F
from ..ndarray.interop import needs_grad as _needs_grad
from ..ndarray.losses import l2_loss_batch_mean, softmax_ce_batch_mean
from .block import HybridBlock

__all__ = ["Loss", "L2Loss", "L1Loss", "SoftmaxCrossEntropyLoss", "SoftmaxCELoss",
           "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss", "HuberLoss", "create", "names",
           "lookup"]


def _apply_weighting(loss, weight=None, sample_weight=None):
    if sample_weight is not None:
        loss = loss * sample_weight
    if weight is not None:
        if not isinstance(weight, (numbers.Number, numpy.generic)):
            raise TypeError("weight must be a number")
        loss = loss * weight
    return loss


def _reshape_like(x, y):
    return x if x.shape == y.shape else F.reshape(x, y.shape)


class Loss(HybridBlock):
    """Base class: ``weight`` (a number or None) and ``batch_axis``."""

    def __init__(self, weight, batch_axis, **kwargs):
        super().__init__(**kwargs)
        self._weight = weight
        self._batch_axis = batch_axis

    def __repr__(self):
        return "%s(batch_axis=%s, w=%s)" % (type(self).__name__, self._batch_axis, self._weight)

    def _batch_mean(self, loss):
        return F.mean(loss, axis=self._batch_axis, exclude=True)


class L2Loss(Loss):
    """Half the squared error: ``weight/2 * (label - pred)^2``, averaged over non-batch axes."""

    def __init__(self, weight=1.0, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        half_weight = self._weight / 2
        if sample_weight is None and type(half_weight) is float and type(pred) is NDArray \
                and type(label) is NDArray and not _needs_grad(label) and 0 not in pred.shape:
            return l2_loss_batch_mean(pred, label, half_weight, self._batch_axis)
        label = _reshape_like(label, pred)
        loss = F.square(label - pred)
        loss = _apply_weighting(loss, half_weight, sample_weight)
        return self._batch_mean(loss)


class L1Loss(Loss):
    def __init__(self, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        label = _reshape_like(label, pred)
        loss = F.abs(label - pred)
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy on logits (stable form) or, with ``from_sigmoid``, on probabilities."""

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F_, pred, label, sample_weight=None, pos_weight=None):
        label = _reshape_like(label, pred)
        if not self._from_sigmoid:
            if pos_weight is None:
                # max(x, 0) - x*z + log(1 + exp(-|x|)) never overflows.
                loss = F.relu(pred) - pred * label + F.softrelu(-F.abs(pred))
            else:
                log_weight = 1 + (pos_weight - 1) * label
                loss = pred - pred * label + log_weight * (F.softrelu(-F.abs(pred)) + F.relu(-pred))
        else:
            eps = 1e-12
            if pos_weight is None:
                loss = -(F.log(pred + eps) * label + F.log(1.0 - pred + eps) * (1.0 - label))
            else:
                loss = -(F.log(pred + eps) * label * pos_weight + F.log(1.0 - pred + eps) * (1.0 - label))
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class SoftmaxCrossEntropyLoss(Loss):
    """Cross-entropy of softmax(pred) against class indices (``sparse_label``) or distributions."""

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None, batch_axis=0,
                 **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._axis = axis
        self._sparse_label = sparse_label
        self._from_logits = from_logits

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        if sample_weight is None and self._weight is None and self._sparse_label \
                and not self._from_logits and type(pred) is NDArray:
            return softmax_ce_batch_mean(pred, label, self._axis, self._batch_axis)
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        if self._sparse_label:
            loss = -F.pick(pred, label, axis=self._axis, keepdims=True)
        else:
            label = _reshape_like(label, pred)
            loss = -F.sum(pred * label, axis=self._axis, keepdims=True)
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class HuberLoss(Loss):
    """Squared error below ``rho``, absolute error above it (smooth L1)."""

    def __init__(self, rho=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        label = _reshape_like(label, pred)
        loss = F.abs(label - pred)
        loss = F.where(loss > self._rho, loss - 0.5 * self._rho, (0.5 / self._rho) * F.square(loss))
        loss = _apply_weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


SoftmaxCELoss = SoftmaxCrossEntropyLoss
SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


# ----------------------------------------------------------------------------- the registry
def _by_name() -> dict:
    # Every public Loss class of this module, by the snake-case name of each of its names without
    # "Loss" (``L2Loss`` -> ``l2``, ``SoftmaxCELoss`` -> ``softmax_ce``); read at each call, so a
    # class defined or aliased anywhere in the module counts.
    out = {}
    for attr, obj in globals().items():
        if (isinstance(obj, type) and issubclass(obj, Loss) and obj is not Loss
                and not attr.startswith("_") and attr.endswith("Loss")):
            out[snake_case(attr[: -len("Loss")])] = obj
    return out


def names() -> list:
    """The loss names a config uses (``l2``, ``softmax_cross_entropy``, ...), sorted."""
    return sorted(_by_name())


def lookup(name):
    """The Loss class of a config name (any case), or None."""
    return _by_name().get(str(name).lower())


def create(name, **kwargs) -> Loss:
    """A loss by config name: ``create("huber", rho=2)``."""
    cls = lookup(name)
    if cls is None:
        raise ValueError("unknown loss %r; expected one of %s" % (name, ", ".join(names())))
    return cls(**kwargs)
