"""``RunConfig``: the whole config file, and the checks that span sections."""
from __future__ import annotations

import re
from typing import Annotated, Literal, Optional, Union

import annotated_types as at
from pydantic import (Field, PrivateAttr, ValidationError, ValidationInfo, WithJsonSchema,
                      field_validator, model_validator)
from pydantic_core import InitErrorDetails, PydanticCustomError

from .. import names
from ..describe import Expect
from .base import Seed, Section, Shorthand, ctx_value, detail, fail, problem
from ..suggest import choice_list, did_you_mean
from .data import DataSection
from .model import ModelSection
from .objective import LossSection, MetricSection
from .optim import CompressionSection, KVStoreSection, LRSchedulerSection, OptimizerSection
from .training import (CheckpointSection, Device, EarlyStoppingSection, LoggingSection,
                       ValidateEvery)

__all__ = ["RunConfig"]

_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Other spellings of precision's values (what AMP and Lightning users write).
_PRECISION_ALIASES = {"fp16": "float16", "half": "float16", "16": "float16",
                      "fp32": "float32", "single": "float32", "32": "float32"}


def default_run_name(stem: str | None) -> str:
    """A run-directory-safe name from a config file's stem."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", stem or "").strip("-.")
    return name or "run"


class RunConfig(Section):
    """A training run, as written in a YAML config.

    ``epochs`` and ``steps`` may both be given: training stops at whichever is reached first.
    ``steps`` counts optimizer updates, each of which consumes ``grad_accumulation`` batches;
    ``log_every``, ``validate_every`` and ``checkpoint.every_steps`` count the same steps.
    """

    name: Optional[Annotated[str, at.MinLen(1)]] = Field(
        None, description="run name, the prefix of the run directory; default: the config file's stem")
    run_dir: Annotated[str, at.MinLen(1)] = Field("runs", description="root folder of run directories")
    seed: Seed = Field(0, description="seed of initialization, shuffling and every random draw")
    context: Annotated[list[Device], at.MinLen(1),
                       Expect("a device such as cpu, gpu or gpu:0, or a list of devices")] = Field(
        default_factory=lambda: ["cpu:0"], description="device or list of devices, e.g. cpu, gpu:0")

    model: Annotated[ModelSection, Shorthand()]
    data: Annotated[DataSection, Shorthand("train")]
    loss: Annotated[LossSection, Shorthand()]
    metrics: Annotated[list[Annotated[MetricSection, Shorthand()]],
                       Expect("a metric name, or a list of metric names or mappings with name "
                              "and params")] = Field(
        default_factory=list, description="metrics logged for train and val")

    optimizer: Annotated[OptimizerSection, Shorthand()] = Field(
        default_factory=lambda: OptimizerSection(name="sgd"))
    lr_scheduler: Optional[Annotated[LRSchedulerSection, Shorthand("type")]] = None
    kvstore: Annotated[KVStoreSection, Shorthand("type")] = Field(default_factory=KVStoreSection)
    compression: Optional[Annotated[CompressionSection, Shorthand("type")]] = None

    epochs: Optional[Annotated[int, at.Ge(1)]] = Field(None, description="passes over the training set")
    steps: Optional[Annotated[int, at.Ge(1)]] = Field(None, description="optimizer updates")
    grad_clip: Optional[Annotated[float, at.Gt(0)]] = Field(
        None, description="clip gradients to this global L2 norm")
    grad_accumulation: Annotated[int, at.Ge(1)] = Field(1, description="batches per optimizer update")
    threads: Union[Literal["auto"], Annotated[int, at.Ge(1)]] = Field(
        "auto", description="threads for BLAS and the optimizer update: a count, or auto (the "
                            "usable cores shared among this host's ranks, less those other work "
                            "keeps busy, when the run starts; resume, evaluate and predict keep "
                            "the count its checkpoint was made with)")
    precision: Annotated[Literal["float32", "float16"], WithJsonSchema(
        {"enum": ["float32", "float16", *_PRECISION_ALIASES, 16, 32]})] = Field(
        "float32", description="float16 (or fp16): float16 parameters with float32 master weights "
                               "(optimizer multi_precision) and AMP's dynamic loss scaling; "
                               "float32 (or fp32). bfloat16 is not supported")
    nan_policy: Literal["stop", "skip"] = Field(
        "stop", description="on a NaN/Inf loss or gradient: stop the run, or skip that update")
    log_every: Annotated[int, at.Ge(1)] = Field(10, description="steps between progress log lines")
    validate_every: ValidateEvery = Field("epoch", description="steps between validations, or epoch")
    early_stopping: Optional[EarlyStoppingSection] = None
    checkpoint: CheckpointSection = Field(default_factory=CheckpointSection)
    logging: LoggingSection = Field(default_factory=LoggingSection)

    @classmethod
    def normalize(cls, raw):
        if not isinstance(raw, dict):
            return raw, []
        moves = []
        raw = dict(raw)
        if isinstance(raw.get("context"), str):
            raw["context"] = [raw["context"]]
            moves.append((("context",), ("context", 0)))
        if isinstance(raw.get("early_stopping"), bool):  # true: with the defaults; false: off
            raw["early_stopping"] = {} if raw["early_stopping"] else None
        if isinstance(raw.get("metrics"), (str, dict)):
            raw["metrics"] = [raw["metrics"]]
            moves.append((("metrics",), ("metrics", 0)))
        return raw, moves

    @field_validator("precision", mode="before")
    @classmethod
    def _precision_alias(cls, value):
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)      # precision: 16, as Lightning writes it
        if isinstance(value, str) and value.lower() in _PRECISION_ALIASES:
            return _PRECISION_ALIASES[value.lower()]
        if isinstance(value, str) and value.lower() in ("bf16", "bfloat16"):
            raise problem(f"{value} is not supported: NumPy has no bfloat16 type, so neither the "
                          "CPU arrays nor the checkpoints could hold it; use float16 (with loss "
                          "scaling) or float32")
        return value

    @model_validator(mode="wrap")
    @classmethod
    def _all_at_once(cls, raw, handler, info: ValidationInfo):
        # Checks on the raw input run even when some section is invalid, so that they are
        # reported together with that section's errors instead of after it is fixed.
        early = _raw_checks(raw)
        try:
            config = handler(raw)
        except ValidationError as exc:
            if not early:
                raise
            fail("RunConfig", _rebuild(exc) + early)
        late = config._across_sections(info)
        if early or late:
            fail("RunConfig", early + late)
        return config

    def _across_sections(self, info: ValidationInfo) -> list:
        """Fill defaults that depend on other sections; return problems spanning sections."""
        if self.name is None:
            self.name = default_run_name(ctx_value(info, "config_name"))
        details = []
        if not _RUN_NAME.match(self.name):
            details.append(detail(("name",), "expected letters, digits, '.', '_' or '-' "
                                  f"(it names a folder), got {self.name!r}", self.name))
        return details + self._metric_refs() + self._device_checks() + self._precision()

    def _precision(self) -> list:
        """``precision: float16`` makes the parameters float16 and, unless the config says
        otherwise, gives the optimizer float32 master weights: both show in the resolved config."""
        if self.precision != "float16":
            return []
        if "dtype" in self.model.model_fields_set and self.model.dtype != "float16":
            return [detail(("model", "dtype"), "precision float16 trains float16 parameters; "
                           f"expected float16 or no model.dtype, got {self.model.dtype}",
                           self.model.dtype)]
        self.model.dtype = "float16"
        self.optimizer.params.setdefault("multi_precision", True)
        return []

    def metric_keys(self) -> list[str]:
        """Keys a run logs and that early stopping and keep_best may name."""
        base = ["loss"] + [m.name for m in self.metrics]
        splits = ["train"] + (["val"] if self.data.has_validation else [])
        return list(dict.fromkeys(f"{s}_{b}" for s in splits for b in base))

    def best_by(self):
        """The section (keep_best, else early_stopping) whose metric and mode choose the run's
        best checkpoint, or None: a run without either selects none."""
        return self.checkpoint.keep_best or self.early_stopping

    def _metric_refs(self) -> list:
        details = []
        seen = {}
        for i, metric in enumerate(self.metrics):
            if metric.name in seen:
                details.append(detail(("metrics", i), f"metric {metric.name!r} is listed twice "
                                      f"(also item {seen[metric.name]})", metric.name))
            seen.setdefault(metric.name, i)
        valid = self.metric_keys()
        for loc, section in ((("early_stopping",), self.early_stopping),
                             (("checkpoint", "keep_best"), self.checkpoint.keep_best)):
            if section is None:
                continue
            key = section.metric
            if key not in valid:
                if key.startswith("val_") and not self.data.has_validation:
                    why = "needs validation data: add data.val or data.split"
                else:
                    why = f"unknown metric {key!r}{did_you_mean(key, valid)} (choices: {choice_list(valid)})"
                details.append(detail(loc + ("metric",), why, key))
            elif section.mode is None:
                section.mode = names.metric_mode(key.split("_", 1)[1])
        early, keep = self.early_stopping, self.checkpoint.keep_best
        if early is not None and early.restore_best and keep is not None \
                and keep.metric != early.metric:
            details.append(detail(("early_stopping", "restore_best"), "restores the checkpoint "
                                  f"checkpoint.keep_best chooses (by {keep.metric}), but early "
                                  f"stopping watches {early.metric}: give both the same metric",
                                  True))
        return details

    def _device_checks(self) -> list:
        details = []
        seen = set()
        for i, device in enumerate(self.context):
            if device in seen:
                details.append(detail(("context", i), f"{device} is listed twice", device))
            seen.add(device)
        kv = self.kvstore.type
        if kv.endswith("_async") and self.kvstore.update_on_kvstore is False:
            details.append(detail(("kvstore", "update_on_kvstore"), f"{kv} updates on the kvstore; "
                                  "expected true or null, got false", False))
        compression = self.compression
        if compression is not None and compression.type != "none":
            if "dist" not in kv and "device" not in kv:
                details.append(detail(("compression", "type"), "gradient compression needs a "
                                      f"device or dist_* kvstore; kvstore {kv!r} cannot apply it",
                                      compression.type))
            elif "dist" not in kv and len(self.context) < 2:
                details.append(detail(("compression", "type"), "gradient compression with a "
                                      "single device and a local kvstore would never be applied; "
                                      "use several devices in context or a dist_* kvstore",
                                      compression.type))
        return details

    # Values from ${env:...}: shown and recorded as the reference, never the value ------------

    _recorded: dict = PrivateAttr(default_factory=dict)  # canonical path -> recorded form
    _env: dict = PrivateAttr(default_factory=dict)       # variable -> value read (None: unset)

    def record_env(self, recorded: dict, env: dict) -> None:
        """Remember which values came from ``${env:...}`` (``recorded``: their canonical paths
        and the form with the references kept) and what each variable held."""
        self._recorded, self._env = dict(recorded), dict(env)

    @property
    def recorded_env(self) -> dict:
        return dict(self._recorded)

    @property
    def env_values(self) -> dict:
        """``{variable: value or None}`` of every ``${env:...}`` the config read."""
        return dict(self._env)

    # Conveniences for the run loop -----------------------------------------------------------

    def resolved_yaml(self) -> str:
        """This config with every default filled in, as YAML; loading it gives an equal config."""
        from ..resolved import resolved_yaml

        return resolved_yaml(self)

    def contexts(self):
        """The devices as ``trainer_cli.Context`` objects."""
        from ...context import Context

        return [Context(d.split(":")[0], int(d.split(":")[1])) for d in self.context]

    @property
    def kvstore_type(self) -> str | None:
        """The Trainer's ``kvstore`` argument: the type, or None for no kvstore."""
        return None if self.kvstore.type == "none" else self.kvstore.type

    @property
    def compression_params(self) -> dict | None:
        """The Trainer's ``compression_params`` argument, or None."""
        c = self.compression
        return None if c is None or c.type == "none" else {"type": c.type, "threshold": c.threshold}


def _raw_checks(raw) -> list:
    if not isinstance(raw, dict):
        return []
    if raw.get("epochs") is None and raw.get("steps") is None:
        return [detail((), "give epochs or steps (or both: training stops at whichever comes "
                           "first)", None, "key")]
    return []


def _rebuild(exc: ValidationError) -> list:
    # Keeps each error's type and context, which is all the report reads.
    return [InitErrorDetails(type=PydanticCustomError(err["type"], err["msg"], err.get("ctx")),
                             loc=err["loc"], input=err.get("input"))
            for err in exc.errors(include_url=False)]
