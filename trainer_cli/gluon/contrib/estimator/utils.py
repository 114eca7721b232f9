"""Checks shared by the Estimator and its handlers."""
from __future__ import annotations

from ....metric import Accuracy, CompositeEvalMetric, EvalMetric
from ...loss import SoftmaxCrossEntropyLoss


def _check_metrics(metrics):
    if isinstance(metrics, CompositeEvalMetric):
        return [m for metric in metrics.metrics for m in _check_metrics(metric)]
    if isinstance(metrics, EvalMetric):
        return [metrics]
    metrics = list(metrics or [])
    if not all(isinstance(metric, EvalMetric) for metric in metrics):
        raise ValueError("metrics must be a Metric or a list of Metric, refer to "
                         "metric.EvalMetric: {}".format(metrics))
    return metrics


def _check_handler_metric_ref(handler, known_metrics):
    for attribute in dir(handler):
        if "metric" in attribute:
            reference = getattr(handler, attribute)
            if not reference or callable(reference):
                continue
            for metric in reference if isinstance(reference, list) else [reference]:
                if isinstance(metric, EvalMetric) and metric not in known_metrics:
                    raise ValueError(
                        "Event handler {} refers to a metric instance {} outside of the known "
                        "training and validation metrics. Please use the metrics from "
                        "estimator.train_metrics and estimator.val_metrics instead.".format(
                            type(handler).__name__, metric))


def _suggest_metric_for_loss(loss):
    if isinstance(loss, SoftmaxCrossEntropyLoss):
        return Accuracy()
    return None
