"""The sections that say how parameters are updated: optimizer, lr_scheduler, kvstore,
compression."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Optional

from pydantic import Field, field_validator

from ... import lr_scheduler
from .. import names
from ..describe import Expect
from .base import Section, detail, fail, named_shorthand, problem, spelling_details
from .component import Component, NamedComponent
from .hyperparams import MULTIFACTOR_STEP, OPTIMIZER, OPTIMIZER_RESERVED, SCHEDULER, check_value

__all__ = ["OptimizerSection", "LRSchedulerSection", "KVStoreSection", "CompressionSection",
           "KVSTORE_TYPES", "COMPRESSION_TYPES"]

KVSTORE_TYPES = ("local", "device", "dist_sync", "dist_device_sync", "dist_async",
                 "dist_device_async", "none")
COMPRESSION_TYPES = ("2bit", "1bit", "none")
# MXNet's LRScheduler default, which is what a warmup is checked against when the scheduler
# is given no base_lr of its own.
_DEFAULT_BASE_LR = lr_scheduler.DEFAULT_LEARNING_RATE


class OptimizerSection(NamedComponent):
    """An optimizer from the library's registry and its hyper-parameters."""

    expect_text: ClassVar[str] = "an optimizer name or a mapping with name and params"
    what: ClassVar[str] = "optimizer"
    choices: ClassVar = staticmethod(names.optimizer_names)
    spec: ClassVar = staticmethod(names.optimizer_params)
    types: ClassVar[dict] = OPTIMIZER
    reserved: ClassVar[dict] = OPTIMIZER_RESERVED

    name: str = Field(description="registered optimizer name: sgd, adam, ...")
    params: dict[str, Any] = Field(default_factory=dict, validate_default=True,
                                   description="keyword arguments of the optimizer")


class LRSchedulerSection(Component):
    """A learning-rate schedule, a pure function of the update count."""

    expect_text: ClassVar[str] = "a scheduler type or a mapping with type and params"
    key: ClassVar[str] = "type"
    what: ClassVar[str] = "lr_scheduler"
    choices: ClassVar = staticmethod(names.scheduler_names)
    spec: ClassVar = staticmethod(names.scheduler_params)
    types: ClassVar[dict] = SCHEDULER

    type: str = Field(description="factor, multifactor, poly or cosine")
    params: dict[str, Any] = Field(
        default_factory=dict, validate_default=True,
        description="scheduler arguments, e.g. step, factor, max_update, warmup_steps")

    @field_validator("type")
    @classmethod
    def _check_type(cls, value):
        return cls.check_name(value)

    @field_validator("params")
    @classmethod
    def _check_params(cls, value, info):
        return cls.check_params(info.data.get("type"), value)

    @classmethod
    def value_type(cls, name, key):
        if name == "multifactor" and key == "step":
            return MULTIFACTOR_STEP
        return cls.types.get(key)

    @classmethod
    def extra_checks(cls, name, params):
        out = []
        if any(check_value(cls.value_type(name, k), params[k]) for k in params if cls.value_type(name, k)):
            return out  # the type errors already say it
        step = params.get("step")
        if name == "multifactor" and isinstance(step, list) and any(b <= a for a, b in zip(step, step[1:])):
            out.append(detail(("step",), "expected strictly increasing steps, got "
                              + str(step), step))
        warmup = params.get("warmup_steps", 0)
        max_update = params.get("max_update")
        if name in ("poly", "cosine") and max_update is not None and warmup >= max_update:
            out.append(detail(("warmup_steps",), f"expected fewer warmup steps than max_update "
                              f"({max_update}), got {warmup}", warmup))
        begin = params.get("warmup_begin_lr")
        base = params.get("base_lr", _DEFAULT_BASE_LR)
        if begin is not None and begin > base:
            out.append(detail(("warmup_begin_lr",), f"expected at most base_lr ({base}), got {begin}",
                              begin))
        return out


class _ChosenByType(Section):
    """A section chosen by its ``type``: a plain string is the type, ``name`` is accepted for it."""

    @classmethod
    def normalize(cls, raw):
        return named_shorthand(raw, "type")

    @classmethod
    def precheck(cls, raw):
        details = spelling_details(raw, "type")
        if details:
            fail(cls.__name__, details)


class KVStoreSection(_ChosenByType):
    """How gradients are aggregated across devices and processes."""

    expect_text: ClassVar[str] = "a kvstore type or a mapping with type and update_on_kvstore"

    type: Literal[KVSTORE_TYPES] = Field(
        "device", description="local, device, dist_sync, dist_device_sync, dist_async, "
                              "dist_device_async, or none for no kvstore")
    update_on_kvstore: Annotated[Optional[bool], Expect("true, false, or null to let the Trainer "
                                                        "decide")] = Field(
        None, description="update weights on the kvstore; null lets the Trainer decide")

    @classmethod
    def normalize(cls, raw):
        if raw is None:
            return {"type": "none"}, []
        return super().normalize(raw)


class CompressionSection(_ChosenByType):
    """Gradient compression with error feedback, applied by the kvstore."""

    expect_text: ClassVar[str] = "a compression type or a mapping with type and threshold"

    type: Literal[COMPRESSION_TYPES] = Field(description="2bit, 1bit, or none")
    threshold: float = Field(0.5, description="quantization threshold; > 0 for 2bit")

    @field_validator("threshold")
    @classmethod
    def _threshold(cls, value, info):
        if value != value or value in (float("inf"), float("-inf")):
            raise problem(f"expected a finite number, got {value}")
        if info.data.get("type") == "2bit" and not value > 0:
            raise problem(f"expected a number > 0 for 2bit compression, got {value}")
        return value
