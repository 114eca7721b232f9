"""Evaluation metrics (MXNet's ``mx.metric`` names and API: ``update(labels, preds)``, ``get()``,
``reset()``), plus ``get_state``/``set_state`` so that a resumed run logs the same numbers.

Additions to MXNet 1.9, whose defaults stay MXNet's:

- ``mae``, ``mse``, ``rmse`` and ``f1`` take ``average``: ``'macro'`` (the default, MXNet's)
  averages each update's value, so a short last batch weighs as much as a full one; ``'micro'``
  counts every sample (the runner's choice: its logged values are over everything seen).
- ``cross_entropy`` and ``perplexity`` take ``from_logits``: the runner feeds them raw model
  outputs (the loss applies the softmax), so it passes ``from_logits=True`` unless a config sets
  it; the class default, probabilities, is MXNet's.
- ``f1`` of more than two classes (MXNet refuses them) is the mean over classes of each
  class's F1.

MXNet's other metrics (``MCC``, ``PCC``, ``NegativeLogLikelihood``/``NLL``,
``PearsonCorrelation``, ``Loss``, ``CustomMetric`` and ``np()``, ``CompositeEvalMetric``) are
here for Python code, with MXNet's numbers; ``create`` takes MXNet's lists and callables too,
and the names of metrics a program adds with ``register``/``alias``.

Config names are the snake-case class names (``TopKAccuracy`` -> ``top_k_accuracy``): ``create``,
``names`` and ``lookup`` are the registry (the runner and :mod:`trainer_cli.config.names` use
them).
"""
from __future__ import annotations

import inspect
import itertools
import math
import warnings

import numpy

from . import _metric_counts
from ._naming import snake_case

__all__ = ["EvalMetric", "Accuracy", "TopKAccuracy", "MAE", "MSE", "RMSE", "CrossEntropy",
           "Perplexity", "F1", "MCC", "PCC", "NegativeLogLikelihood", "NLL",
           "PearsonCorrelation", "Loss", "Torch", "Caffe", "CustomMetric", "np",
           "CompositeEvalMetric", "create", "names", "lookup", "register", "alias",
           "check_label_shapes"]


def _host(x) -> numpy.ndarray:
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    if hasattr(x, "get"):  # a cupy array
        return x.get()
    return numpy.asarray(x)


def _pairs(labels, preds):
    labels = labels if isinstance(labels, (list, tuple)) else [labels]
    preds = preds if isinstance(preds, (list, tuple)) else [preds]
    if len(labels) != len(preds):
        raise ValueError("labels and preds must have the same number of arrays, got %d and %d"
                         % (len(labels), len(preds)))
    return [(_host(y), _host(p)) for y, p in zip(labels, preds)]


class Batches(list):
    """``(label, pred)`` pairs that several metrics read in turn (``update_batches``): their
    joined arrays are made once, for the first metric that asks, and kept with the list."""

    joined = ()


def _stacked(batches):
    """``(labels, preds, sizes)``: the batches' labels and predictions joined along the first
    axis, and each batch's label count; None when their shapes do not line up."""
    if type(batches) is Batches:
        if batches.joined == ():
            batches.joined = _join(batches)
        return batches.joined
    return _join(batches)


def _join(batches):
    labels = [y if type(y) is numpy.ndarray else _host(y) for y, _ in batches]
    preds = [p if type(p) is numpy.ndarray else _host(p) for _, p in batches]
    first = _layout(labels[0], preds[0])
    for label, pred in zip(labels, preds):
        if _layout(label, pred) != first or pred.shape[:1] != label.shape[:1]:
            return None
    return numpy.concatenate(labels), numpy.concatenate(preds), [label.size for label in labels]


def _layout(label, pred) -> tuple:
    """What batches must share to be joined: all but the first axis, and the predictions' dtype."""
    return label.ndim, label.shape[1:], pred.ndim, pred.shape[1:], pred.dtype


def _nll_of_logits(pred, label):
    """Each row's ``-log softmax(row)[label]`` in float64, for 2-D ``pred`` (float logits, one row
    per label), to the bit the whole float64 log-softmax's entry at the label, negated: the same
    operations on the values a label reads, without the matrices no label reads (a character
    model's 400 x 65 logits: 248 -> 79 us)."""
    rows = numpy.arange(label.size)
    if pred.shape[1] <= FEW_CLASSES:
        # A row's maximum and sum column by column, in column order: NumPy reduces a short
        # last axis row by row, 5-10x slower (a log window of 800 rows of 4 logits: 65 ->
        # 20 us); the maximum is exact either way, the sum is each row's, left to right.
        columns = list(pred.T)
        top = columns[0].copy()
        for column in columns[1:]:
            numpy.maximum(top, column, out=top)
        picked = pred[rows, label].astype(numpy.float64) - top
        exps = numpy.exp(numpy.subtract(pred.T, top, dtype=numpy.float64))
        total = exps[0].copy()
        for column in exps[1:]:
            total += column
        return -(picked - numpy.log(total))
    # The maximum of the float32 logits is that of their float64 values; the subtraction
    # converts as it goes, into a float64 block of rows exponentiated in place: a word model's
    # 1120 x 10000 logits in blocks that stay in the cache, 40 -> 20 ms, 4 MB instead of 90.
    per_block = max(1, _BLOCK_VALUES // pred.shape[1])
    out = numpy.empty(label.size)
    block = numpy.empty((min(per_block, label.size), pred.shape[1]))
    for start in range(0, label.size, per_block):
        part = pred[start:start + per_block]
        shifted = block[:len(part)]
        numpy.subtract(part, part.max(axis=1)[:, None], out=shifted, dtype=numpy.float64)
        picked = shifted[rows[:len(part)], label[start:start + per_block]]
        numpy.exp(shifted, out=shifted)
        out[start:start + per_block] = -(picked - numpy.log(shifted.sum(axis=1)))
    return out


# Logits with at most this many classes are reduced column by column (``_nll_of_logits``).
FEW_CLASSES = 16
# Wider logits are worked in blocks of rows of about this many float64 values (4 MB).
_BLOCK_VALUES = 1 << 19


class EvalMetric:
    """Accumulates ``sum_metric`` over ``num_inst``; ``get()`` is ``(name, sum/num)``."""

    def __init__(self, name, output_names=None, label_names=None):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self.reset()

    def reset(self):
        self.sum_metric = 0.0
        self.num_inst = 0

    def update(self, labels, preds):
        raise NotImplementedError

    def get(self):
        value = self.sum_metric / self.num_inst if self.num_inst else float("nan")
        return self.name, value

    def update_batches(self, batches):
        """``update([label], [pred])`` for each ``(label, pred)`` of ``batches`` in order; a
        metric may do it in one pass, with the same sums to the bit."""
        for label, pred in batches:
            self.update([label], [pred])

    def get_config(self) -> dict:
        """MXNet's: what recreates this metric with ``create(**config)`` (its class, name and
        the arguments it was made with)."""
        config = {}
        for arg, param in inspect.signature(type(self).__init__).parameters.items():
            if arg in ("self", "name", "output_names", "label_names") or \
                    param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            for attr in (arg, "_" + arg):
                if attr in self.__dict__:
                    config[arg] = self.__dict__[attr]
                    break
        config.update(metric=type(self).__name__, name=self.name,
                      output_names=self.output_names, label_names=self.label_names)
        return config

    def get_name_value(self):
        """``[(name, value), ...]``: one pair, or one per metric of a composite."""
        name, value = self.get()
        if not isinstance(name, list):
            name, value = [name], [value]
        return list(zip(name, value))

    # MXNet's "global" statistics are those since the last reset(); here reset_local() is
    # reset() and the global values are the local ones (docs/compat.md).
    def reset_local(self):
        self.reset()

    def get_global(self):
        return self.get()

    def get_global_name_value(self):
        return self.get_name_value()

    # JSON-able accumulators, for checkpoints (floats round-trip exactly through JSON).
    def get_state(self) -> dict:
        return {"sum_metric": float(self.sum_metric), "num_inst": int(self.num_inst)}

    def set_state(self, state: dict):
        self.sum_metric = float(state["sum_metric"])
        self.num_inst = int(state["num_inst"])

    def __repr__(self):
        return "EvalMetric: %s" % dict([self.get()])


class Accuracy(EvalMetric):
    """Share of samples whose arg-max prediction (over ``axis``) equals the label."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        self.axis = axis
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            count = self._count_host(label, pred)
            if count is None:
                if pred.shape != label.shape:
                    pred = pred.argmax(axis=self.axis)
                pred = pred.astype(numpy.int64).reshape(-1)
                label = label.astype(numpy.int64).reshape(-1)
                count = (pred == label).sum()
            self.sum_metric += float(count)
            self.num_inst += label.size

    def _count_host(self, label, pred):
        """The count ``update([label], [pred])`` adds, by one compiled pass
        (:mod:`._metric_counts`) over host arrays of class scores on the last of two axes with one
        label a row; None elsewhere (NumPy's calls count then)."""
        if (self.axis not in (1, -1) or type(pred) is not numpy.ndarray or pred.ndim != 2
                or type(label) is not numpy.ndarray or label.shape == pred.shape):
            return None     # (the same shapes: the predictions are the classes themselves)
        if label.ndim != 1 and label.size == len(pred):
            label = label.reshape(-1)
        return _metric_counts.correct_count(pred, label)

    def update_batches(self, batches):
        # Counts are whole numbers: one sum over all the batches is each batch's sum, added up.
        joined = _stacked(batches) if self.axis >= 1 and len(batches) > 1 else None
        if joined is None:
            return super().update_batches(batches)
        self.update([joined[0]], [joined[1]])


class TopKAccuracy(EvalMetric):
    """Share of samples whose label is among the ``top_k`` highest predictions."""

    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        if top_k < 1:
            raise ValueError("top_k must be at least 1, got %r" % (top_k,))
        self.top_k = int(top_k)
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            label = label.astype(numpy.int64).reshape(-1)
            pred = pred.reshape(label.size, -1)
            k = min(self.top_k, pred.shape[1])
            top = numpy.argpartition(-pred, k - 1, axis=1)[:, :k]
            self.sum_metric += float((top == label[:, None]).any(axis=1).sum())
            self.num_inst += label.size


def _average(name, average):
    """``average``, checked: ``'macro'`` (MXNet's per-update mean) or ``'micro'``."""
    if average not in ("macro", "micro"):
        raise ValueError("%s: average must be 'macro' or 'micro', got %r" % (name, average))
    return average


class _Regression(EvalMetric):
    """A regression error: ``average='macro'`` (MXNet's) adds each update's value (a batch's
    mean) and counts the update once, as MXNet 1.9.1 does, on its float32 arithmetic; ``'micro'``
    sums the errors of every sample in float64 and divides by their count."""

    def __init__(self, name, output_names=None, label_names=None, average="macro"):
        self.average = _average(name, average)
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in _pairs(labels, preds):
            if self.average == "macro":
                # MXNet: 1-D arrays as columns, then the difference broadcast.
                label = label.reshape(label.shape[0], 1) if label.ndim == 1 else label
                pred = pred.reshape(pred.shape[0], 1) if pred.ndim == 1 else pred
                self.sum_metric += float(self._batch_value(label - pred))
                self.num_inst += 1
                continue
            if pred.size != label.size:
                raise ValueError("%s needs one prediction per label, got predictions of shape %s "
                                 "for labels of shape %s" % (self.name, pred.shape, label.shape))
            err = label.astype(numpy.float64) - pred.reshape(label.shape).astype(numpy.float64)
            self.sum_metric += float(self._total(err))
            self.num_inst += label.size


class MAE(_Regression):
    """Mean absolute error."""

    def __init__(self, name="mae", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names, label_names, average)

    _batch_value = staticmethod(lambda err: numpy.abs(err).mean())
    _total = staticmethod(lambda err: numpy.abs(err).sum())


class MSE(_Regression):
    """Mean squared error."""

    def __init__(self, name="mse", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names, label_names, average)

    _batch_value = staticmethod(lambda err: (err ** 2.0).mean())
    _total = staticmethod(lambda err: (err * err).sum())


class RMSE(MSE):
    """Root mean squared error: MXNet's mean of each update's root (``'macro'``), or the root
    of the mean squared error over every sample (``'micro'``)."""

    def __init__(self, name="rmse", output_names=None, label_names=None, average="macro"):
        _Regression.__init__(self, name, output_names, label_names, average)

    _batch_value = staticmethod(lambda err: numpy.sqrt((err ** 2.0).mean()))

    def get(self):
        name, value = super().get()
        return name, value if self.average == "macro" else float(numpy.sqrt(value))


class CrossEntropy(EvalMetric):
    """Mean of ``-log p(label)``; ``pred`` holds probabilities, or logits with ``from_logits``."""

    def __init__(self, eps=1e-12, from_logits=False, axis=-1, name="cross_entropy",
                 output_names=None, label_names=None):
        self.eps = eps
        self.from_logits = bool(from_logits)
        self.axis = axis
        super().__init__(name, output_names, label_names)

    def _nll(self, label, pred):
        label = label.astype(numpy.int64).reshape(-1)
        if self.axis not in (-1, pred.ndim - 1):
            pred = numpy.moveaxis(pred, self.axis, -1)
        pred = pred.reshape(label.size, -1)
        if self.from_logits:
            return _nll_of_logits(pred, label)
        return -numpy.log(pred[numpy.arange(label.size), label].astype(numpy.float64) + self.eps)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            nll = self._nll(label, pred)
            self.sum_metric += float(nll.sum())
            self.num_inst += nll.size

    def update_batches(self, batches):
        # Each row's -log p is computed row by row, so in one pass over all the rows; each
        # batch's sum is still added on its own, in order, as update() adds it.
        joined = _stacked(batches) if len(batches) > 1 else None
        if joined is None or joined[1].ndim < 2 or self.axis in (0, -joined[1].ndim) \
                or type(self).update is not CrossEntropy.update:
            return super().update_batches(batches)
        nll = self._nll(joined[0], joined[1])
        for size, total in zip(joined[2], _batch_sums(nll, joined[2])):
            self.sum_metric += total
            self.num_inst += size


def _batch_sums(values, sizes) -> list:
    """The sum of each batch's stretch of ``values`` (batches of ``sizes`` one after another),
    as each stretch's own ``sum()`` gives it: a run of equal sizes is summed as the rows of one
    2-D view (NumPy reduces each contiguous row pairwise, as it does the 1-D slice)."""
    totals, start = [], 0
    for size, run in itertools.groupby(sizes):
        count = len(list(run))
        block = values[start:start + size * count]
        if count > 1 and size > 0:
            totals += block.reshape(count, size).sum(axis=1).tolist()
        else:
            totals += [float(block[k * size:(k + 1) * size].sum()) for k in range(count)]
        start += size * count
    return totals


class Perplexity(CrossEntropy):
    """``exp`` of the mean cross-entropy; samples labelled ``ignore_label`` do not count."""

    def __init__(self, ignore_label=None, eps=1e-12, from_logits=False, axis=-1,
                 name="perplexity", output_names=None, label_names=None):
        self.ignore_label = ignore_label
        super().__init__(eps, from_logits, axis, name, output_names, label_names)

    def update(self, labels, preds):
        for label, pred in _pairs(labels, preds):
            nll = self._nll(label, pred)
            if self.ignore_label is not None:
                nll = nll[label.reshape(-1) != self.ignore_label]
            self.sum_metric += float(nll.sum())
            self.num_inst += nll.size

    def get(self):
        name, value = super().get()
        return name, float(numpy.exp(value))


class F1(EvalMetric):
    """F1 of the positive class 1 (predictions: the arg-max over ``axis`` of two columns, or
    0/1 labels), from precision and recall as MXNet 1.9.1 computes them: ``average='macro'``
    (MXNet's default) averages each ``update``'s F1, ``'micro'`` counts true and false
    positives and false negatives over everything seen. With more than two classes (MXNet
    refuses them) each class's F1 is taken in turn as the positive one, and the value is their
    mean."""

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro", axis=1):
        self.average, self.axis = _average("f1", average), axis
        super().__init__(name, output_names, label_names)

    def reset(self):
        super().reset()
        self._counts = {}  # class -> [tp, fp, fn] since the last reset ('micro') or update

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in _pairs(labels, preds):
            if pred.shape != label.shape:
                classes = pred.shape[self.axis]
                pred = pred.argmax(axis=self.axis)
            else:
                classes = 2
            pred = pred.astype(numpy.int64).reshape(-1)
            label = label.astype(numpy.int64).reshape(-1)
            for c in range(max(classes, int(label.max(initial=0)) + 1)):
                counts = self._counts.setdefault(c, [0, 0, 0])
                counts[0] += int(((pred == c) & (label == c)).sum())
                counts[1] += int(((pred == c) & (label != c)).sum())
                counts[2] += int(((pred != c) & (label == c)).sum())
            if self.average == "micro":
                self.num_inst += label.size
        if self.average == "macro":     # MXNet: one value per update
            self.sum_metric += self._score()
            self.num_inst += 1
            self._counts = {}

    def _score(self) -> float:
        classes = sorted(self._counts)
        if classes == [0, 1]:
            classes = [1]
        scores = [_f1(*self._counts[c]) for c in classes]
        return float(sum(scores) / len(scores)) if scores else 0.0

    def get(self):
        if self.average == "macro" or not self.num_inst:
            return super().get()
        # MXNet's 'micro': the score times the examples, over the examples.
        return self.name, self._score() * self.num_inst / self.num_inst

    def get_state(self) -> dict:
        return dict(super().get_state(),
                    counts=[[c, list(v)] for c, v in sorted(self._counts.items())])

    def set_state(self, state: dict):
        self.num_inst = int(state["num_inst"])
        self.sum_metric = float(state.get("sum_metric", 0.0))
        self._counts = {int(c): [int(x) for x in v] for c, v in state["counts"]}


def _f1(tp, fp, fn) -> float:
    """MXNet's F1 from counts: the harmonic mean of precision and recall (0 where undefined)."""
    precision = float(tp) / (tp + fp) if tp + fp > 0 else 0.0
    recall = float(tp) / (tp + fn) if tp + fn > 0 else 0.0
    if precision + recall > 0:
        return 2 * precision * recall / (precision + recall)
    return 0.0


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """MXNet's check: the same number of labels and predictions (or the same shapes with
    ``shape``); with ``wrap`` a single array becomes a list of one."""
    if not shape:
        label_shape, pred_shape = len(labels), len(preds)
    else:
        label_shape, pred_shape = labels.shape, preds.shape
    if label_shape != pred_shape:
        raise ValueError("Shape of labels {} does not match shape of predictions {}".format(
            label_shape, pred_shape))
    if wrap:
        if not isinstance(labels, (list, tuple)):
            labels = [labels]
        if not isinstance(preds, (list, tuple)):
            preds = [preds]
    return labels, preds


class MCC(EvalMetric):
    """Matthews correlation coefficient of binary predictions (the arg-max of 2 columns):
    ``average='macro'`` averages each ``update``'s value, ``'micro'`` counts over everything."""

    def __init__(self, name="mcc", output_names=None, label_names=None, average="macro"):
        self._average = average
        super().__init__(name, output_names, label_names)

    def reset(self):
        super().reset()
        self._counts = [0, 0, 0, 0]      # tp, fp, fn, tn since the last reset (or update, macro)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in _pairs(labels, preds):
            label = label.astype(numpy.int32)
            pred_label = numpy.argmax(pred, axis=1)
            check_label_shapes(label, pred)
            if len(numpy.unique(label)) > 2:
                raise ValueError("MCC currently only supports binary classification.")
            pred_true, label_true = pred_label == 1, label == 1
            self._counts[0] += int((pred_true & label_true).sum())
            self._counts[1] += int((pred_true & ~label_true).sum())
            self._counts[2] += int((~pred_true & label_true).sum())
            self._counts[3] += int((~pred_true & ~label_true).sum())
        if self._average == "macro":
            self.sum_metric += self._mcc()
            self.num_inst += 1
            self._counts = [0, 0, 0, 0]
        else:
            total = sum(self._counts)
            self.sum_metric = self._mcc() * total
            self.num_inst = total

    def _mcc(self):
        tp, fp, fn, tn = (float(c) for c in self._counts)
        if not tp + fp + fn + tn:
            return 0.0
        denom = 1.0
        for term in (tp + fp, tp + fn, tn + fp, tn + fn):
            if term != 0.0:
                denom *= term
        return (tp * tn - fp * fn) / math.sqrt(denom)

    def get_state(self) -> dict:
        return dict(super().get_state(), counts=list(self._counts))

    def set_state(self, state: dict):
        super().set_state(state)
        self._counts = [int(c) for c in state["counts"]]


class PCC(EvalMetric):
    """The multiclass Matthews correlation coefficient (Gorodkin's ``R_K``, the Pearson
    correlation of one-hot predictions and labels) of the confusion matrix of every update since
    the last reset; predictions are class indices, or scores whose arg-max is taken. NaN while
    every prediction or every label is one class."""

    def __init__(self, name="pcc", output_names=None, label_names=None, has_global_stats=True):
        self._has_global_stats = has_global_stats
        super().__init__(name, output_names, label_names)

    def reset(self):
        super().reset()
        self._matrix = numpy.zeros((2, 2))      # predicted class x true class

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in _pairs(labels, preds):
            label = label.astype(numpy.int32)
            pred = pred.argmax(axis=1) if pred.shape != label.shape else pred.astype(numpy.int32)
            size = int(max(pred.max(), label.max())) + 1
            if size > len(self._matrix):
                grown = numpy.zeros((size, size))
                grown[:len(self._matrix), :len(self._matrix)] = self._matrix
                self._matrix = grown
            numpy.add.at(self._matrix, (pred.ravel(), label.ravel()), 1)
        self.num_inst += 1
        self.sum_metric = self._coefficient() * self.num_inst

    def _coefficient(self):
        cmat = self._matrix
        n = cmat.sum()
        x, y = cmat.sum(axis=1), cmat.sum(axis=0)
        cov_xx, cov_yy = numpy.sum(x * (n - x)), numpy.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        return float(numpy.sum(cmat.diagonal() * n - x * y) / (cov_xx * cov_yy) ** 0.5)

    def get_state(self) -> dict:
        return dict(super().get_state(), matrix=self._matrix.tolist())

    def set_state(self, state: dict):
        super().set_state(state)
        self._matrix = numpy.asarray(state["matrix"], dtype=numpy.float64)


class NegativeLogLikelihood(EvalMetric):
    """Mean of ``-log(p[label] + eps)`` over the samples, ``pred`` holding probabilities."""

    def __init__(self, eps=1e-12, name="nll-loss", output_names=None, label_names=None):
        self.eps = eps
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in _pairs(labels, preds):
            label = label.ravel()
            num_examples = pred.shape[0]
            if label.shape[0] != num_examples:
                raise ValueError("NLL: %d labels for %d predictions" % (label.shape[0],
                                                                        num_examples))
            prob = pred[numpy.arange(num_examples, dtype=numpy.int64), numpy.int64(label)]
            self.sum_metric += float((-numpy.log(prob + self.eps)).sum())
            self.num_inst += num_examples


NLL = NegativeLogLikelihood


class PearsonCorrelation(EvalMetric):
    """Pearson correlation of predictions and labels: ``'macro'`` averages each batch's,
    ``'micro'`` is that of everything seen (running means and sums of squares, MXNet's)."""

    def __init__(self, name="pearsonr", output_names=None, label_names=None, average="macro"):
        self.average = average
        super().__init__(name, output_names, label_names)

    def reset(self):
        super().reset()
        self._label_stats = [0, 0.0, 0.0]      # count, mean, sum of squared deviations
        self._pred_stats = [0, 0.0, 0.0]
        self._cov = 0.0

    @staticmethod
    def _update_variance(values, stats):
        count, mean, m_2 = stats
        count += len(values)
        delta = values - mean
        mean += numpy.sum(delta / count)
        m_2 += numpy.sum(delta * (values - mean))
        return [count, mean, m_2]

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in _pairs(labels, preds):
            check_label_shapes(label, pred, False, True)
            label = label.ravel().astype(numpy.float64)
            pred = pred.ravel().astype(numpy.float64)
            self.num_inst += 1
            if self.average == "macro":
                self.sum_metric += float(numpy.corrcoef(pred, label)[0, 1])
            else:
                self._label_stats = self._update_variance(label, self._label_stats)
                self._cov += float(numpy.sum((label - self._label_stats[1])
                                             * (pred - self._pred_stats[1])))
                self._pred_stats = self._update_variance(pred, self._pred_stats)

    def get(self):
        if self.num_inst == 0:
            return self.name, float("nan")
        if self.average == "macro":
            return self.name, self.sum_metric / self.num_inst
        n = self._label_stats[0]
        return self.name, float(self._cov / ((n - 1) * numpy.sqrt(self._pred_stats[2] / (n - 1))
                                             * numpy.sqrt(self._label_stats[2] / (n - 1))))

    def get_state(self) -> dict:
        return dict(super().get_state(), label_stats=[float(v) for v in self._label_stats],
                    pred_stats=[float(v) for v in self._pred_stats], cov=float(self._cov))

    def set_state(self, state: dict):
        super().set_state(state)
        self._label_stats = [int(state["label_stats"][0])] + [float(v) for v in
                                                              state["label_stats"][1:]]
        self._pred_stats = [int(state["pred_stats"][0])] + [float(v) for v in
                                                            state["pred_stats"][1:]]
        self._cov = float(state["cov"])


class Loss(EvalMetric):
    """The mean of the values in ``preds`` (losses); the labels are ignored."""

    def __init__(self, name="loss", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    def update(self, _, preds):
        if not isinstance(preds, (list, tuple)):
            preds = [preds]
        for pred in preds:
            values = _host(pred)
            self.sum_metric += float(numpy.sum(values, dtype=values.dtype
                                               if values.dtype.kind == "f" else None))
            self.num_inst += values.size


class Torch(Loss):
    """MXNet's ``Loss`` under another name."""

    def __init__(self, name="torch", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


class Caffe(Loss):
    """MXNet's ``Loss`` under another name."""

    def __init__(self, name="caffe", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)


class CustomMetric(EvalMetric):
    """A metric from ``feval(label, pred)`` on NumPy arrays, returning a value (averaged over
    the updates) or a ``(sum, count)`` pair."""

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None,
                 label_names=None):
        if name is None:
            name = feval.__name__
            if name.find("<") != -1:
                name = "custom(%s)" % name
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs
        super().__init__(name, output_names, label_names)

    def update(self, labels, preds):
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        labels = labels if isinstance(labels, (list, tuple)) else [labels]
        preds = preds if isinstance(preds, (list, tuple)) else [preds]
        for pred, label in zip(preds, labels):
            reval = self._feval(_host(label), _host(pred))
            if isinstance(reval, tuple):
                sum_metric, num_inst = reval
                self.sum_metric += sum_metric
                self.num_inst += num_inst
            else:
                self.sum_metric += reval
                self.num_inst += 1

    def get_config(self):
        raise NotImplementedError("CustomMetric cannot be serialized")   # MXNet's words


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """A ``CustomMetric`` from a function of NumPy ``(label, pred)``."""
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)


class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` is ``([names], [values])``."""

    def __init__(self, metrics=None, name="composite", output_names=None, label_names=None):
        self.metrics = []
        super().__init__(name, output_names, label_names)
        self.metrics = [create(m) for m in (metrics or [])]

    def add(self, metric):
        self.metrics.append(create(metric))

    def get_config(self):
        return dict(super().get_config(), metrics=[m.get_config() for m in self.metrics])

    def get_metric(self, index):
        try:
            return self.metrics[index]
        except IndexError:
            raise ValueError("Metric index {} is out of range 0 and {}".format(
                index, len(self.metrics))) from None

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def update_batches(self, batches):
        for metric in self.metrics:
            metric.update_batches(batches)

    def reset(self):
        for metric in getattr(self, "metrics", ()):
            metric.reset()

    def get(self):
        names, values = [], []
        for metric in self.metrics:
            name, value = metric.get()
            names.extend(name if isinstance(name, list) else [name])
            values.extend(value if isinstance(value, list) else [value])
        return names, values

    def get_state(self) -> dict:
        return {"metrics": [m.get_state() for m in self.metrics]}

    def set_state(self, state: dict):
        for metric, sub in zip(self.metrics, state["metrics"]):
            metric.set_state(sub)


_BY_NAME = {"accuracy": Accuracy, "top_k_accuracy": TopKAccuracy, "mae": MAE, "mse": MSE,
            "rmse": RMSE, "cross_entropy": CrossEntropy, "perplexity": Perplexity, "f1": F1}


# MXNet 1.9.1's registry names for these classes: each lower-cased class name and its aliases.
_MXNET_NAMES = {"acc": Accuracy, "topkaccuracy": TopKAccuracy, "top_k_acc": TopKAccuracy,
                "crossentropy": CrossEntropy, "ce": CrossEntropy}
# MXNet's metrics for Python code only (a config's metrics are the ones above).
_MXNET_NAMES.update({
    "mcc": MCC, "pcc": PCC, "negativeloglikelihood": NegativeLogLikelihood, "nll_loss": NLL,
    "pearsoncorrelation": PearsonCorrelation, "pearsonr": PearsonCorrelation, "loss": Loss,
    "torch": Torch, "caffe": Caffe, "custommetric": CustomMetric,
    "compositeevalmetric": CompositeEvalMetric, "composite": CompositeEvalMetric})


# Metrics a program registered (they take precedence, as MXNet's override warns).
_REGISTERED: dict = {}


def register(klass, name=None):
    """MXNet's decorator: ``create(name)`` (default: the class's name, any case) makes
    ``klass``, an EvalMetric subclass; a name already taken warns and is overridden."""
    if not (isinstance(klass, type) and issubclass(klass, EvalMetric)):
        raise TypeError("Can only register subclass of EvalMetric, got %r" % (klass,))
    key = str(klass.__name__ if name is None else name).lower()
    taken = lookup(key)
    if taken is not None and taken is not klass:
        warnings.warn("New metric %s.%s registered with name %s is overriding existing metric "
                      "%s.%s" % (klass.__module__, klass.__name__, key, taken.__module__,
                                 taken.__name__))
    _REGISTERED[key] = klass
    return klass


def alias(*aliases):
    """MXNet's decorator: ``create`` makes the class by each of ``aliases`` too."""
    def reg(klass):
        for name in aliases:
            register(klass, name)
        return klass
    return reg


def lookup(name: str):
    """The metric class of a config name (``top_k_accuracy``), class name (``TopKAccuracy``) or
    MXNet's registry names and aliases (``acc``, ``top_k_acc``, ``ce``), or None."""
    key = str(name).lower()
    return (_REGISTERED.get(key) or _BY_NAME.get(key) or _MXNET_NAMES.get(key)
            or _BY_NAME.get(snake_case(str(name))))


def names() -> list[str]:
    """The config names of the metrics, sorted (``lookup`` and ``create`` also take MXNet's)."""
    return sorted(_BY_NAME)


def create(metric, *args, **kwargs) -> EvalMetric:
    """A metric by any name ``lookup`` takes (with its arguments), as MXNet's ``create``: an
    EvalMetric is returned as is, a callable ``feval(label, pred)`` becomes a CustomMetric, a
    list a CompositeEvalMetric of each created with the same arguments, a dict (``get_config``)
    the metric it describes."""
    if isinstance(metric, dict):       # a get_config()
        return create(**metric)
    if isinstance(metric, EvalMetric):
        if args or kwargs:
            raise ValueError("metric %r is already an instance; additional arguments are invalid"
                             % (metric.name,))
        return metric
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    if callable(metric) and not (isinstance(metric, type) and issubclass(metric, EvalMetric)):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, type):
        return metric(*args, **kwargs)
    cls = lookup(metric)
    if cls is None:
        raise ValueError("unknown metric %r; expected one of %s"
                         % (metric, ", ".join(sorted(set(_BY_NAME) | set(_MXNET_NAMES)
                                                     | set(_REGISTERED)))))
    return cls(*args, **kwargs)
