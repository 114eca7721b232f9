"""Where a run is, as JSON-able data stored in each checkpoint's meta.json.

Position: ``step`` optimizer steps done; ``epoch`` epochs completed; ``batch_in_epoch`` batches
of epoch ``epoch`` (0-based) already used. Checkpoints are only taken between steps, so the
position is always at an accumulation boundary. The rest is what makes the logs and decisions of
a resumed run those of an uninterrupted one: the running train metrics of the epoch, the latest
value of every metric key, early-stopping progress, and the count of skipped steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy

from .. import metric as _metric

__all__ = ["LoopState", "Accumulator", "EarlyStopping", "BestTracker"]


def _copied(value):
    # The fields hold JSON-able values: containers are copied, scalars are immutable (a
    # checkpoint takes this at every save; dataclasses.asdict deep-copies every float).
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    return value


@dataclass
class LoopState:
    step: int = 0
    epoch: int = 0
    batch_in_epoch: int = 0
    samples: int = 0
    skipped: int = 0
    finished: bool = False
    stop_reason: str | None = None
    last_val_step: int | None = None
    elapsed_s: float = 0.0
    latest: dict = field(default_factory=dict)
    train: dict = field(default_factory=dict)          # Accumulator state of the running epoch
    early_stopping: dict = field(default_factory=dict)  # EarlyStopping state
    amp: dict = field(default_factory=dict)  # precision float16: the loss scaler and its skips
    # The best evaluation so far (early_stopping or keep_best): metric, mode, step, value and
    # the evaluation's values; its checkpoint is the one ``checkpoints/best`` names.
    best: dict = field(default_factory=dict)
    # Text for a language model: the recurrent state carried into the next batch, per device
    # (run/recurrent.py's encoding); empty at an epoch's start and for other data.
    carried: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {f.name: _copied(getattr(self, f.name)) for f in fields(self)}

    def position_text(self) -> str:
        """Where the run stands, in the epoch numbers the log and the progress line use (an
        epoch is numbered from 1 while it runs; ``epoch`` here counts completed ones)."""
        if self.batch_in_epoch:
            return "step %d, epoch %d, %d batches into it" % (self.step, self.epoch + 1,
                                                              self.batch_in_epoch)
        return "step %d, end of epoch %d" % (self.step, self.epoch)

    @classmethod
    def from_dict(cls, data: dict) -> "LoopState":
        """The state saved by :meth:`to_dict`, every field checked for type and range (a
        ValueError naming the field: ``loop.epoch: expected ...``)."""
        if not isinstance(data, dict):
            raise ValueError("loop: expected a mapping")
        for name, check in _CHECKS.items():
            if name in data:
                wrong = check(data[name])
                if wrong is not None:
                    raise ValueError("loop.%s: expected %s, got %s"
                                     % (name, wrong, _shown(data[name])))
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        state = cls(**known)
        for name, upper in (("skipped", "step"), ("last_val_step", "step")):
            value = getattr(state, name)
            if value is not None and value > getattr(state, upper):
                raise ValueError("loop.%s: %d is more than loop.%s (%d)"
                                 % (name, value, upper, getattr(state, upper)))
        if state.best and state.best["step"] > state.step:
            raise ValueError("loop.best.step: %d is more than loop.step (%d)"
                             % (state.best["step"], state.step))
        return state


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value):
    return None if _is_int(value) and value >= 0 else "an integer, 0 or more"


def _opt_count(value):
    return None if value is None else _count(value)


def _flag(value):
    return None if isinstance(value, bool) else "true or false"


def _seconds(value):
    return None if _is_number(value) and value >= 0 else "a number of seconds, 0 or more"


def _reason(value):
    return None if value is None or value in STOP_REASONS else \
        "null or one of %s" % ", ".join(STOP_REASONS)


def _values(value):
    ok = isinstance(value, dict) and all(
        isinstance(k, str) and (v is None or _is_number(v)) for k, v in value.items())
    return None if ok else "a mapping of metric names to numbers or null"


def _mapping(value):
    return None if isinstance(value, dict) else "a mapping"


def _best(value):
    if value == {}:
        return None
    ok = (isinstance(value, dict) and isinstance(value.get("metric"), str)
          and value.get("mode") in ("min", "max") and _is_int(value.get("step"))
          and value["step"] >= 0 and _is_number(value.get("value"))
          and _values(value.get("values", {})) is None)
    return None if ok else "an empty mapping, or metric, mode, step, value and values"


STOP_REASONS = ("epochs", "steps", "early_stopping")
_CHECKS = {"step": _count, "epoch": _count, "batch_in_epoch": _count, "samples": _count,
           "skipped": _count, "finished": _flag, "stop_reason": _reason,
           "last_val_step": _opt_count, "elapsed_s": _seconds, "latest": _values,
           "train": _mapping, "early_stopping": _mapping, "best": _best,
           "carried": lambda value: _carried(value)}


def _carried(value):
    from .recurrent import check_encoded
    return check_encoded(value)


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# Outputs kept for the metrics are handed over once they hold this much (a model with large
# outputs, such as per-pixel predictions, must not keep a whole log window of them).
PENDING_BYTES = 8 << 20


def _host_view(out):
    """The host array ``out`` (an NDArray on the CPU, or a NumPy array) reads from, or None."""
    if type(out) is numpy.ndarray:
        return out
    data = getattr(out, "_data", None) if getattr(out, "stype", "default") == "default" else None
    return data if type(data) is numpy.ndarray else None


class Accumulator:
    """Mean loss and metrics over the samples seen since the last reset."""

    def __init__(self, metrics: dict, loss=None):
        self.metrics = metrics  # config name -> EvalMetric
        self.loss = loss        # the loss block whose per-sample values add_outputs is given
        self._pending = []      # (label, output) host arrays the metrics have not seen yet
        self._pending_bytes = 0
        self._split_of = None   # the metrics dict _split was made for
        self._pending_for = metrics  # the metrics the kept outputs are for (all, or the rest)
        self._per_sample = {}   # _labels_per_sample of one pair, by its shapes and dtype
        self.reset()

    def reset(self):
        self.loss_sum = 0.0
        self.count = 0
        self._pending = []
        self._pending_bytes = 0
        for m in self.metrics.values():
            m.reset()

    def add_loss(self, total: float, count: int):
        self.loss_sum += total
        self.count += count

    def add_outputs(self, pairs, loss_sum=None):
        """A step's ``(label, output)`` pairs, for the metrics: kept (as host copies, so that no
        output holds on to its step's graph) until the values are read or they hold
        ``PENDING_BYTES``, then given to each metric in one pass (``update_batches``: the same
        sums as one update per batch, wherever the passes begin). ``loss_sum``: the sum of the
        step's per-sample losses (``loss``'s), which the metrics that are the mean of that very
        loss take instead of the outputs (see :func:`loss_is_metric`). Accuracy counts a single
        host pair at once instead (``Accuracy._count_host``: one compiled pass, no copy kept)."""
        if not self.metrics:
            return
        same, rest = self._split()
        targets = self.metrics
        per_sample = self._labels_per_sample(pairs) if same and loss_sum is not None else 0
        if per_sample:
            # Each sample's loss is the mean of its labels' cross-entropies.
            total = loss_sum if per_sample == 1 else loss_sum * per_sample
            count = sum(out.shape[0] for _, out in pairs) * per_sample
            for metric in same.values():
                metric.sum_metric += total
                metric.num_inst += count
            targets = rest
        if len(pairs) == 1 and targets:
            # Accuracy counts a host batch at once, in one compiled pass: cheaper than keeping a
            # copy of the outputs for a joined count later. The others keep theirs.
            quick, later = self._quick[id(targets)]
            label, out = pairs[0]
            host = _host_view(out) if quick else None
            count = quick[0]._count_host(label, host) if host is not None else None
            if count is not None:
                count = float(count)
                for metric in quick:    # the same arrays and checks: the same count
                    metric.sum_metric += count
                    metric.num_inst += label.size
                targets = later
        if targets is not self._pending_for:
            self._flush()       # the outputs kept so far are for the other set of metrics
            self._pending_for = targets
        if not targets:
            return
        for label, out in pairs:
            host = _host_view(out)
            if host is not None and host.nbytes >= PENDING_BYTES:
                # Read now, in place: a copy of a word model's logits costs 7 ms a step.
                self._flush()
                self._pending.append((label, host))
                self._flush()
                continue
            out = out.asnumpy() if hasattr(out, "asnumpy") else out
            self._pending.append((label, out))
            self._pending_bytes += getattr(out, "nbytes", 0) + getattr(label, "nbytes", 0)
        if self._pending_bytes >= PENDING_BYTES:
            self._flush()

    def _labels_per_sample(self, pairs) -> int:
        """:func:`_labels_per_sample`, remembered for one pair's shapes and dtype (a training
        step's are the same every time)."""
        if len(pairs) != 1:
            return _labels_per_sample(pairs)
        label, out = pairs[0]
        key = (out.shape, out.dtype, getattr(label, "size", -1))
        found = self._per_sample.get(key)
        if found is None:
            if len(self._per_sample) >= 64:
                self._per_sample.clear()
            found = self._per_sample[key] = _labels_per_sample(pairs)
        return found

    def _flush(self):
        self._pending_bytes = 0
        if self._pending:
            pending, self._pending = _metric.Batches(self._pending), []
            for metric in self._pending_for.values():
                metric.update_batches(pending)

    def _split(self):
        """``(the metrics that are the loss's mean, the others)``, worked out once per metrics
        dict."""
        if self._split_of is not self.metrics:
            same = {name: m for name, m in self.metrics.items() if loss_is_metric(self.loss, m)}
            rest = {name: m for name, m in self.metrics.items() if name not in same}
            self._split_pair = (same, rest)
            self._quick = {id(targets): _quick_split(targets) for targets in (self.metrics, rest)}
            self._split_of = self.metrics
        return self._split_pair

    def values(self, prefix: str) -> dict:
        self._flush()
        out = {prefix + "loss": self.loss_sum / self.count if self.count else float("nan")}
        for name, metric in self.metrics.items():
            out[prefix + name] = float(metric.get()[1])
        return out

    def get_state(self) -> dict:
        self._flush()
        return {"loss_sum": self.loss_sum, "count": self.count,
                "metrics": {k: m.get_state() for k, m in self.metrics.items()}}

    def set_state(self, state: dict):
        self.reset()
        if not state:
            return
        self.loss_sum = float(state["loss_sum"])
        self.count = int(state["count"])
        for name, metric_state in state.get("metrics", {}).items():
            if name in self.metrics:
                self.metrics[name].set_state(metric_state)


def _quick_split(metrics: dict) -> tuple:
    """``([the metrics that count a host batch at once], {the others})``: MXNet's Accuracy over
    the class axis of 2-D scores (``Accuracy._count_host``), not a subclass with its own update."""
    quick = [m for m in metrics.values() if type(m) is _metric.Accuracy and m.axis in (1, -1)]
    return quick, ({name: m for name, m in metrics.items() if all(m is not q for q in quick)}
                   if quick else metrics)


def loss_is_metric(loss, metric) -> bool:
    """Whether ``metric``'s sum is that of ``loss``'s per-sample values (times the labels a
    sample has): the cross-entropy (or perplexity) of logits over their last axis, with the loss
    softmax cross-entropy of class indices over the last axis, unweighted. Such a metric takes
    the losses the step computed (float32 for float32 logits, summed exactly) instead of a
    second log-softmax of the logits in float64: the same quantity to float32's precision,
    without a pass over the outputs (a character model's perplexity took 4% of its step)."""
    from ..gluon.loss import SoftmaxCrossEntropyLoss

    return (type(loss) is SoftmaxCrossEntropyLoss and loss._sparse_label and not loss._from_logits
            and loss._weight is None and loss._batch_axis == 0 and loss._axis == -1
            and type(metric) in (_metric.CrossEntropy, _metric.Perplexity)
            and metric.from_logits and metric.axis == -1
            and getattr(metric, "ignore_label", None) is None)


def _labels_per_sample(pairs) -> int:
    """How many labels each sample of ``pairs`` has, where every output is float32/64 logits
    with one row of classes per label and all have the same count; else 0."""
    counts = set()
    for label, out in pairs:
        shape = out.shape
        if len(shape) < 2 or out.dtype not in _LOSS_DTYPES or shape[0] == 0 \
                or getattr(label, "size", -1) * shape[-1] != math.prod(shape):
            return 0
        counts.add(label.size // shape[0])
    return counts.pop() if len(counts) == 1 else 0


_LOSS_DTYPES = (numpy.float32, numpy.float64)


class EarlyStopping:
    """Stop after ``patience`` evaluations without an improvement larger than ``min_delta``."""

    def __init__(self, section):
        self.metric = section.metric
        self.mode = section.mode or "min"
        self.patience = section.patience
        self.min_delta = section.min_delta
        self.best = None
        self.bad = 0

    def update(self, value: float) -> bool:
        """Record one evaluation; True when training should stop."""
        if value is None or not math.isfinite(value):
            self.bad += 1
        elif self.best is None or (value > self.best + self.min_delta if self.mode == "max"
                                   else value < self.best - self.min_delta):
            self.best, self.bad = value, 0
        else:
            self.bad += 1
        return self.bad >= self.patience

    def get_state(self) -> dict:
        return {"best": self.best, "bad": self.bad}

    def set_state(self, state: dict):
        self.best = state.get("best")
        self.bad = int(state.get("bad", 0))


class BestTracker:
    """The best evaluation of a run by one metric (strictly better counts: ``min_delta`` is
    early stopping's patience rule, not the choice of the best weights)."""

    def __init__(self, metric: str, mode: str):
        self.metric, self.mode = metric, mode

    def improves(self, best: dict, values: dict) -> bool:
        value = values.get(self.metric)
        if value is None or not math.isfinite(value):
            return False
        if not best or best.get("metric") != self.metric:
            return True
        return value > best["value"] if self.mode == "max" else value < best["value"]

    def record(self, step: int, values: dict) -> dict:
        return {"metric": self.metric, "mode": self.mode, "step": step,
                "value": float(values[self.metric]),
                "values": {k: v for k, v in values.items() if v is None or math.isfinite(v)}}
