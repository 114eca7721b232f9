"""Sections about how the loop runs: devices, validation cadence, early stopping, checkpoints."""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional

import annotated_types as at
from pydantic import AfterValidator, Field, PlainValidator, WithJsonSchema

from ..describe import Expect
from .base import Section, Shorthand, problem

__all__ = ["Device", "ValidateEvery", "EarlyStoppingSection", "KeepBestSection",
           "CheckpointSection", "LoggingSection"]

_DEVICE = re.compile(r"^\s*(cpu|gpu)\s*(?:(?::\s*(\d+))|\(\s*(\d*)\s*\))?\s*$", re.IGNORECASE)


def _device(value: str) -> str:
    match = _DEVICE.match(value)
    if match is None:
        raise problem(f"expected a device such as cpu, gpu, gpu:0 or cpu:1, got {value!r}")
    kind, index = match.group(1).lower(), match.group(2) or match.group(3) or "0"
    return f"{kind}:{int(index)}"


Device = Annotated[str, AfterValidator(_device), Expect("a device such as cpu, gpu, gpu:0 or cpu:1")]


def _validate_every(value):
    if value == "epoch":
        return value
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    raise problem(f"expected a number of steps >= 1 or 'epoch', got {value!r}")


ValidateEvery = Annotated[Any, PlainValidator(_validate_every), Expect("a number of steps or epoch"),
                          WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1},
                                                    {"const": "epoch"}]})]

MetricKey = Annotated[str, Field(description="train_loss, val_loss, or train_/val_ plus a metric "
                                             "name from metrics, e.g. val_accuracy")]


class EarlyStoppingSection(Section):
    """Stop when a validation metric stops improving."""

    metric: MetricKey = "val_loss"
    mode: Optional[Literal["min", "max"]] = Field(
        None, description="min or max; inferred from the metric when not given")
    patience: Annotated[int, at.Ge(1)] = Field(5, description="validations without improvement")
    min_delta: Annotated[float, at.Ge(0)] = Field(0.0, description="smallest change that counts")
    restore_best: bool = Field(
        False, description="end the run with the best weights: the final checkpoint holds the "
                           "parameters of the best evaluation (like Keras's "
                           "restore_best_weights)")


class KeepBestSection(Section):
    """Also keep the checkpoint with the best value of a metric."""

    metric: MetricKey
    mode: Optional[Literal["min", "max"]] = Field(
        None, description="min or max; inferred from the metric when not given")

    @classmethod
    def normalize(cls, raw):
        if isinstance(raw, str):
            return {"metric": raw}, [((), ("metric",))]
        return raw, []


class CheckpointSection(Section):
    """When checkpoints are written and which are kept. The last step is always saved."""

    every_steps: Optional[Annotated[int, at.Ge(1)]] = Field(None, description="save every N steps")
    every_seconds: Optional[Annotated[float, at.Gt(0)]] = Field(
        None, description="also save once this many seconds of training have passed since the "
                          "last checkpoint (under several workers, every rank at the same step)")
    every_epoch: bool = Field(True, description="save at the end of every epoch")
    keep_last: Annotated[int, at.Ge(1)] = Field(3, description="how many recent checkpoints to keep")
    keep_best: Optional[Annotated[KeepBestSection, Shorthand("metric")]] = Field(
        None, description="also keep the best checkpoint by a metric (a metric key or a mapping)")


def _tensorboard(value: bool) -> bool:
    if value:
        import importlib.util

        if importlib.util.find_spec("tensorboardX") is None:
            raise problem("TensorBoard event files need tensorboardX, which is not installed: "
                          "pip install -e '.[tensorboard]' (or set tensorboard: false)")
        try:  # what the sink imports, checked before a run directory is made for it
            import tensorboardX.event_file_writer  # noqa: F401
            import tensorboardX.proto.event_pb2  # noqa: F401
            import tensorboardX.summary  # noqa: F401
        except Exception as exc:  # noqa: BLE001 - an ImportError, or a broken dependency's own
            raise problem("TensorBoard event files need tensorboardX, which cannot be imported "
                          "(%s: %s): reinstall it with pip install -e '.[tensorboard]' (or set "
                          "tensorboard: false)" % (type(exc).__name__, exc)) from None
    return value


class LoggingSection(Section):
    """Where a run's metrics go besides metrics.jsonl, metrics.csv and train.log."""

    tensorboard: Annotated[bool, AfterValidator(_tensorboard)] = Field(
        False, description="also write TensorBoard event files into <run dir>/tensorboard "
                           "(needs the tensorboard extra)")
