"""Losses with MXNet's weighting: ``weight`` scales every element, ``sample_weight`` broadcasts
against the loss, and the result is averaged over every axis except ``batch_axis``."""
from __future__ import annotations

import math
import numbers

import numpy

from .._naming import snake_case
from ..base import numeric_types
from ..ndarray import NDArray
from .. import ndarray as _nd
from ..ndarray import ops as F
from ..ndarray.interop import needs_grad as _needs_grad
from ..ndarray.losses import l2_loss_batch_mean, softmax_ce_batch_mean
from .block import HybridBlock

__all__ = ["Loss", "L2Loss", "L1Loss", "SoftmaxCrossEntropyLoss", "SoftmaxCELoss",
           "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss", "HuberLoss", "KLDivLoss", "CTCLoss",
           "HingeLoss", "SquaredHingeLoss", "LogisticLoss", "TripletLoss", "PoissonNLLLoss",
           "CosineEmbeddingLoss", "SDMLLoss", "create", "names", "lookup"]


def _weighting(loss, weight=None, sample_weight=None):
    if sample_weight is not None:
        loss = loss * sample_weight
    if weight is not None:
        if not isinstance(weight, (numbers.Number, numpy.generic)):
            raise TypeError("weight must be a number")
        loss = loss * weight
    return loss


def _shaped_like(x, y):
    return x if x.shape == y.shape else F.reshape(x, y.shape)


# MXNet's own helpers, with its signatures: losses written outside MXNet (GluonCV's, GluonNLP's,
# the examples') import them and pass the ``F`` their ``hybrid_forward`` got, an ``nd`` or a
# ``sym`` module, so they must work through that module.
def _apply_weighting(F, loss, weight=None, sample_weight=None):  # noqa: N803 - MXNet's argument
    """``loss`` times ``sample_weight`` (broadcast) and times the number ``weight``."""
    if sample_weight is not None:
        loss = F.broadcast_mul(loss, sample_weight)
    if weight is not None:
        assert isinstance(weight, numeric_types), "weight must be a number"
        loss = loss * weight
    return loss


def _reshape_like(F, x, y):  # noqa: N803 - MXNet's argument
    """``x`` reshaped to ``y``'s shape."""
    if F is _nd:
        return x.reshape(y.shape)
    return F.reshape_like(x, y)


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
        label = _shaped_like(label, pred)
        loss = F.square(label - pred)
        loss = _weighting(loss, half_weight, sample_weight)
        return self._batch_mean(loss)


class L1Loss(Loss):
    def __init__(self, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        label = _shaped_like(label, pred)
        loss = F.abs(label - pred)
        loss = _weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class SigmoidBinaryCrossEntropyLoss(Loss):
    """Binary cross-entropy on logits (stable form) or, with ``from_sigmoid``, on probabilities."""

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F_, pred, label, sample_weight=None, pos_weight=None):
        label = _shaped_like(label, pred)
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
        loss = _weighting(loss, self._weight, sample_weight)
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
            label = _shaped_like(label, pred)
            loss = -F.sum(pred * label, axis=self._axis, keepdims=True)
        loss = _weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class HuberLoss(Loss):
    """Squared error below ``rho``, absolute error above it (smooth L1)."""

    def __init__(self, rho=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        label = _shaped_like(label, pred)
        loss = F.abs(label - pred)
        loss = F.where(loss > self._rho, loss - 0.5 * self._rho, (0.5 / self._rho) * F.square(loss))
        loss = _weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class KLDivLoss(Loss):
    """``label * (log(label + 1e-12) - pred)`` summed over the non-batch axes; ``pred`` holds
    log-probabilities, or with ``from_logits=False`` scores that get a log-softmax over ``axis``."""

    def __init__(self, from_logits=True, axis=-1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._axis = axis

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        loss = label * (F.log(label + 1e-12) - pred)
        loss = _weighting(loss, self._weight, sample_weight)
        return F.sum(loss, axis=self._batch_axis, exclude=True)


class CTCLoss(Loss):
    """Connectionist temporal classification on unnormalised scores, the last class being the
    blank and labels padded with -1 (``nd.CTCLoss`` with ``blank_label='last'``).

    ``layout`` is the scores' ('NTC' or 'TNC'), ``label_layout`` the labels' ('NT' or 'TN');
    optional ``pred_lengths`` / ``label_lengths`` give each sample's lengths."""

    def __init__(self, layout="NTC", label_layout="NT", weight=None, **kwargs):
        if layout not in ("NTC", "TNC"):
            raise ValueError("Only 'NTC' and 'TNC' layouts for pred are supported. Got: %s" % layout)
        if label_layout not in ("NT", "TN"):
            raise ValueError("Only 'NT' and 'TN' layouts for label are supported. Got: %s"
                             % label_layout)
        self._layout = layout
        self._label_layout = label_layout
        super().__init__(weight, label_layout.find("N"), **kwargs)

    def hybrid_forward(self, F_, pred, label, pred_lengths=None, label_lengths=None,
                       sample_weight=None):
        if self._layout == "NTC":
            pred = F.swapaxes(pred, 0, 1)
        if self._batch_axis == 1:
            label = F.swapaxes(label, 0, 1)
        loss = _nd.CTCLoss(pred, label, pred_lengths, label_lengths,
                         use_data_lengths=pred_lengths is not None,
                         use_label_lengths=label_lengths is not None, blank_label="last")
        return _weighting(loss, self._weight, sample_weight)


class HingeLoss(Loss):
    """``max(0, margin - pred * label)`` for labels -1/1, averaged over the non-batch axes."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        label = _shaped_like(label, pred)
        loss = F.relu(self._margin - pred * label)
        loss = _weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class SquaredHingeLoss(Loss):
    """``max(0, margin - pred * label)^2`` for labels -1/1, averaged over the non-batch axes."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        label = _shaped_like(label, pred)
        loss = F.square(F.relu(self._margin - pred * label))
        loss = _weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class LogisticLoss(Loss):
    """``log(1 + exp(-pred * label))`` in its stable form, for labels -1/1 (``label_format=
    'signed'``) or 0/1 (``'binary'``), averaged over the non-batch axes."""

    def __init__(self, weight=None, batch_axis=0, label_format="signed", **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        if label_format not in ("signed", "binary"):
            raise ValueError("label_format can only be signed or binary, received %s."
                             % label_format)
        self._label_format = label_format

    def hybrid_forward(self, F_, pred, label, sample_weight=None):
        label = _shaped_like(label, pred)
        if self._label_format == "signed":
            label = (label + 1.0) / 2.0
        loss = F.relu(pred) - pred * label + F.softrelu(-F.abs(pred))
        loss = _weighting(loss, self._weight, sample_weight)
        return self._batch_mean(loss)


class TripletLoss(Loss):
    """``max(0, |positive - pred|^2 - |negative - pred|^2 + margin)``, the squared distances
    summed over the non-batch axes. Called as ``loss(pred, positive, negative)``."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F_, pred, positive, negative):
        positive = _shaped_like(positive, pred)
        negative = _shaped_like(negative, pred)
        loss = F.sum(F.square(positive - pred) - F.square(negative - pred),
                     axis=self._batch_axis, exclude=True)
        loss = F.relu(loss + self._margin)
        return _weighting(loss, self._weight, None)


class PoissonNLLLoss(Loss):
    """Poisson negative log-likelihood, averaged over every element (shape (1,), as MXNet):
    ``exp(pred) - target * pred`` on log-rates (``from_logits``), else ``pred - target *
    log(pred + epsilon)``; ``compute_full`` adds Stirling's approximation of ``log(target!)``
    where ``target > 1``."""

    def __init__(self, weight=None, from_logits=True, batch_axis=0, compute_full=False, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._compute_full = compute_full

    def hybrid_forward(self, F_, pred, target, sample_weight=None, epsilon=1e-08):
        target = _shaped_like(target, pred)
        if self._from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + epsilon)
        if self._compute_full:
            # MXNet multiplies the factor by (target > 1), which leaves NaN where a target is 0
            # (0 * log 0), and does it in place, which fails under autograd.record(); the factor
            # is taken only where target > 1 instead (elsewhere it is 0, as intended).
            above_one = target > 1
            safe = F.where(above_one, target, F.ones_like(target))
            stirling = safe * F.log(safe) - safe + 0.5 * F.log(2 * safe * math.pi)
            loss = loss + stirling * above_one
        loss = _weighting(loss, self._weight, sample_weight)
        return F.mean(loss)


class CosineEmbeddingLoss(Loss):
    """``1 - cos(input1, input2)`` where ``label`` is 1 and ``max(0, cos - margin)`` where it
    is -1, the cosine taken over the last axis; shape (batch, 1) as MXNet's. Called as
    ``loss(input1, input2, label[, sample_weight])``."""

    def __init__(self, weight=None, batch_axis=0, margin=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F_, input1, input2, label, sample_weight=None):
        input1 = _shaped_like(input1, input2)
        label = F.reshape(label, (-1, 1))
        cos_sim = self._cosine_similarity(input1, input2)
        y_1 = label == 1
        y_minus_1 = label == -1
        cos_sim_a = (1 - cos_sim) * y_1
        zero = F.zeros_like(cos_sim)  # on the inputs' device, whatever its array module
        cos_sim_b = F.maximum(zero, y_minus_1 * (cos_sim - self._margin))
        loss = cos_sim_a + cos_sim_b
        return _weighting(loss, self._weight, sample_weight)

    @staticmethod
    def _cosine_similarity(x, y, axis=-1):
        x_norm = F.reshape(F.norm(x, axis=axis), (-1, 1))
        y_norm = F.reshape(F.norm(y, axis=axis), (-1, 1))
        x_dot_y = F.reshape(F.sum(x * y, axis=axis), (-1, 1))
        eps = F.ones_like(x_norm) * 1e-12  # on the inputs' device, whatever its array module
        return x_dot_y / F.maximum(x_norm * y_norm, eps)


class SDMLLoss(Loss):
    """Batch-wise smoothed deep metric learning (Bonadiman et al. 2019): ``x1[i]`` and ``x2[i]``
    are a positive pair and every other row of the batch a negative; the KL divergence between
    the log-softmax of the negative squared distances and the identity smoothed by
    ``smoothing_parameter``. Called as ``loss(x1, x2)`` on (batch, dim) arrays; as in MXNet,
    ``weight`` is not applied."""

    def __init__(self, smoothing_parameter=0.3, weight=1.0, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self.kl_loss = KLDivLoss(from_logits=True)
        self.smoothing_parameter = smoothing_parameter

    def _compute_labels(self, batch_size, like):
        gold = _nd.eye(batch_size, ctx=like.context, dtype=like.dtype)
        return gold * (1 - self.smoothing_parameter) \
            + (1 - gold) * self.smoothing_parameter / (batch_size - 1)

    def hybrid_forward(self, F_, x1, x2):
        if x1.shape != x2.shape or x1.ndim != 2:
            raise ValueError("SDMLLoss takes two arrays of the same shape (batch_size, dim), "
                             "got %s and %s" % (x1.shape, x2.shape))
        batch_size, dim = x1.shape
        x1_ = F.broadcast_to(F.expand_dims(x1, 1), (batch_size, batch_size, dim))
        x2_ = F.broadcast_to(F.expand_dims(x2, 0), (batch_size, batch_size, dim))
        distances = F.sum(F.square(x1_ - x2_), axis=2)
        log_probabilities = F.log_softmax(-distances, axis=1)
        return self.kl_loss(log_probabilities, self._compute_labels(batch_size, distances))


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
