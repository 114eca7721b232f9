"""What is minimised and what is reported: loss and metrics."""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field

from .. import names
from .component import NamedComponent
from .hyperparams import LOSS, METRIC

__all__ = ["LossSection", "MetricSection"]


class LossSection(NamedComponent):
    """A Gluon loss by snake-case name: l2, l1, softmax_cross_entropy, huber, ..."""

    expect_text: ClassVar[str] = "a loss name or a mapping with name and params"
    what: ClassVar[str] = "loss"
    choices: ClassVar = staticmethod(names.loss_names)
    spec: ClassVar = staticmethod(names.loss_params)
    types: ClassVar[dict] = LOSS
    reserved: ClassVar[dict] = {"prefix": "Block naming is internal", "params": "not a loss argument"}

    name: str = Field(description="l2, l1, softmax_cross_entropy, sigmoid_binary_cross_entropy, "
                                  "huber, ...")
    params: dict[str, Any] = Field(default_factory=dict, validate_default=True,
                                   description="keyword arguments of the loss")


class MetricSection(NamedComponent):
    """An evaluation metric; logged as ``train_<name>`` and ``val_<name>``. With the loss
    ``softmax_cross_entropy`` (of class indices, unweighted, last axis), ``cross_entropy`` and
    ``perplexity`` of logits are the loss's own per-sample values summed (float32 precision for
    float32 logits), not a second pass over the outputs."""

    expect_text: ClassVar[str] = "a metric name or a mapping with name and params"
    what: ClassVar[str] = "metric"
    choices: ClassVar = staticmethod(names.metric_names)
    spec: ClassVar = staticmethod(names.metric_params)
    types: ClassVar[dict] = METRIC

    name: str = Field(description="accuracy, top_k_accuracy, mae, mse, rmse, cross_entropy, ...")
    params: dict[str, Any] = Field(default_factory=dict, validate_default=True,
                                   description="keyword arguments of the metric, e.g. top_k")
