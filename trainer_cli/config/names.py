"""The names a config may use that the library defines: optimizers, schedulers, losses, metrics,
initializers and models.

Each lookup imports the library lazily, so validating a config costs nothing until it needs a
name, and the config package works while a library module is missing: only when the import
fails do the literal lists below (MXNet 1.9's names) stand in.
"""
from __future__ import annotations

import importlib
import inspect
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ParamSpec", "optimizer_names", "optimizer_params", "scheduler_names", "scheduler_params",
    "loss_names", "loss_params", "metric_names", "metric_params", "metric_mode",
    "initializer_names", "initializer_params", "lookup", "model_dirs", "model_files", "snake_case",
]


@dataclass(frozen=True)
class ParamSpec:
    """The keyword arguments a constructor takes: ``accepted`` is None when it cannot be told."""

    accepted: frozenset | None
    required: frozenset = frozenset()


# ---------------------------------------------------------------------------------------------
# Fallbacks: used only when the library module cannot be imported.

_OPT_BASE = ("learning_rate", "wd", "rescale_grad", "clip_gradient", "lr_scheduler",
             "begin_num_update", "multi_precision", "param_idx2name", "sym", "param_dict")
_OPT_FALLBACK = {
    "sgd": ("momentum", "lazy_update"), "ccsgd": ("momentum", "lazy_update"),
    "signum": ("momentum", "wd_lh"), "ftml": ("beta1", "beta2", "epsilon"),
    "lars": ("momentum", "lazy_update", "eta", "eps", "momentum_correction"),
    "lbsgd": ("momentum", "warmup_strategy", "warmup_epochs", "batch_scale", "updates_per_epoch",
              "begin_epoch", "num_epochs"),
    "dcasgd": ("momentum", "lamda"), "nag": ("momentum",), "sgld": (), "test": (),
    "adam": ("beta1", "beta2", "epsilon", "lazy_update"), "adagrad": ("eps",),
    "rmsprop": ("gamma1", "gamma2", "epsilon", "centered", "clip_weights"),
    "adadelta": ("rho", "epsilon"), "ftrl": ("lamda1", "beta"), "adamax": ("beta1", "beta2"),
    "nadam": ("beta1", "beta2", "epsilon", "schedule_decay"),
    "lamb": ("beta1", "beta2", "epsilon", "lower_bound", "upper_bound", "bias_correction"),
    "groupadagrad": ("eps",),
}
_SCHED_BASE = ("base_lr", "warmup_steps", "warmup_begin_lr", "warmup_mode")
_SCHED_FALLBACK = {
    "factor": (("step",), ("factor", "stop_factor_lr")),
    "multifactor": (("step",), ("factor",)),
    "poly": (("max_update",), ("pwr", "final_lr")),
    "cosine": (("max_update",), ("final_lr",)),
}
_LOSS_FALLBACK = ("l2", "l1", "softmax_cross_entropy", "sigmoid_binary_cross_entropy", "huber",
                  "hinge", "squared_hinge", "logistic", "kl_div", "ctc", "triplet", "poisson_nll",
                  "cosine_embedding", "sdml")
_METRIC_FALLBACK = ("accuracy", "top_k_accuracy", "mae", "mse", "rmse", "cross_entropy",
                    "perplexity", "f1")
_INIT_FALLBACK = ("zero", "zeros", "one", "ones", "constant", "uniform", "normal", "xavier",
                  "msraprelu", "orthogonal")
# Metrics where larger is better; every other metric (and the loss) is minimised.
_MAXIMISED = {"accuracy", "top_k_accuracy", "f1", "mcc", "pearson_correlation",
              "binary_accuracy", "acc", "top_k_acc"}


def snake_case(name: str) -> str:
    """``SoftmaxCrossEntropy`` -> ``softmax_cross_entropy``, ``TopKAccuracy`` -> ``top_k_accuracy``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _module(*candidates):
    for dotted in candidates:
        try:
            return importlib.import_module(dotted)
        except ImportError:
            continue
    return None


def _spec(cls) -> ParamSpec:
    """Keyword arguments of ``cls``, following ``**kwargs`` up the class hierarchy."""
    accepted: set = set()
    required: set = set()
    first = True
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        if klass is object:
            break
        try:
            params = list(inspect.signature(init).parameters.values())[1:]
        except (TypeError, ValueError):
            return ParamSpec(None)
        passes_on = False
        for p in params:
            if p.kind is p.VAR_KEYWORD:
                passes_on = True
            elif p.kind is not p.VAR_POSITIONAL:
                accepted.add(p.name)
                if first and p.default is p.empty:
                    required.add(p.name)
        first = False
        if not passes_on:
            break
    return ParamSpec(frozenset(accepted), frozenset(required))


def _subclasses(module, base_name: str, suffix: str = "") -> dict:
    """Public classes of ``module`` deriving from its ``base_name`` class, by attribute name."""
    base = getattr(module, base_name, None)
    if not isinstance(base, type):
        return {}
    out = {}
    for attr, obj in vars(module).items():
        if (isinstance(obj, type) and issubclass(obj, base) and obj is not base
                and not attr.startswith("_") and attr.endswith(suffix)):
            out[attr] = obj
    return out


# ---------------------------------------------------------------------------------------------
# Registries

def _optimizers() -> dict | None:
    mod = _module("trainer_cli.optimizer")
    registry = getattr(getattr(mod, "Optimizer", None), "opt_registry", None)
    return dict(registry) if isinstance(registry, dict) and registry else None


def _schedulers() -> dict | None:
    mod = _module("trainer_cli.lr_scheduler")
    if mod is None:
        return None
    found = _subclasses(mod, "LRScheduler", "Scheduler")
    return {attr[: -len("Scheduler")].lower(): cls for attr, cls in found.items()} or None


def _losses() -> dict | None:
    mod = _module("trainer_cli.gluon.loss")
    if mod is None:
        return None
    found = _subclasses(mod, "Loss", "Loss")
    return {snake_case(attr[: -len("Loss")]): cls for attr, cls in found.items()} or None


def _metrics() -> dict | None:
    mod = _module("trainer_cli.metric", "trainer_cli.gluon.metric")
    if mod is None:
        return None
    found = _subclasses(mod, "EvalMetric")
    skip = {"CompositeEvalMetric", "CustomMetric"}
    return {snake_case(attr): cls for attr, cls in found.items() if attr not in skip} or None


def _initializers() -> dict | None:
    mod = _module("trainer_cli.initializer")
    registry = getattr(mod, "registry", None)
    if not isinstance(registry, dict) or not registry:
        return None
    out = {k.lower(): v for k, v in registry.items()}
    out.update({k.lower(): v for k, v in getattr(mod, "_ALIASES", {}).items()})
    return out


_REGISTRIES = {
    "optimizer": (_optimizers, tuple(_OPT_FALLBACK)),
    "lr_scheduler": (_schedulers, tuple(_SCHED_FALLBACK)),
    "loss": (_losses, _LOSS_FALLBACK),
    "metric": (_metrics, _METRIC_FALLBACK),
    "initializer": (_initializers, _INIT_FALLBACK),
}


def lookup(kind: str, name: str):
    """The library class a config name stands for (``lookup('loss', 'l2')``), or None."""
    registry = _REGISTRIES[kind][0]()
    return None if registry is None else registry.get(str(name).lower())


def _names(kind: str) -> list[str]:
    load, fallback = _REGISTRIES[kind]
    registry = load()
    return sorted(registry) if registry is not None else sorted(fallback)


def _params(kind: str, name: str) -> ParamSpec | None:
    registry = _REGISTRIES[kind][0]()
    if registry is None:
        return None
    cls = registry.get(str(name).lower())
    return None if cls is None else _spec(cls)


def optimizer_names() -> list[str]:
    return _names("optimizer")


def optimizer_params(name: str) -> ParamSpec | None:
    spec = _params("optimizer", name)
    if spec is not None or _optimizers() is not None:
        return spec
    extra = _OPT_FALLBACK.get(str(name).lower())
    return None if extra is None else ParamSpec(frozenset(_OPT_BASE + extra))


def scheduler_names() -> list[str]:
    return _names("lr_scheduler")


def scheduler_params(name: str) -> ParamSpec | None:
    spec = _params("lr_scheduler", name)
    if spec is not None or _schedulers() is not None:
        return spec
    entry = _SCHED_FALLBACK.get(str(name).lower())
    if entry is None:
        return None
    required, optional = entry
    return ParamSpec(frozenset(_SCHED_BASE + required + optional), frozenset(required))


def loss_names() -> list[str]:
    return _names("loss")


def loss_params(name: str) -> ParamSpec | None:
    return _params("loss", name)


def metric_names() -> list[str]:
    return _names("metric")


def metric_params(name: str) -> ParamSpec | None:
    return _params("metric", name)


def metric_mode(name: str) -> str:
    """'max' for metrics where larger is better, else 'min'."""
    return "max" if name in _MAXIMISED else "min"


def initializer_names() -> list[str]:
    return _names("initializer")


def initializer_params(name: str) -> ParamSpec | None:
    return _params("initializer", name)


# ---------------------------------------------------------------------------------------------
# Models: files in a ``models/`` folder, found next to the config, beside its folder (a config in
# ``configs/`` next to ``models/``), in the working directory, or in the source checkout.

def model_dirs(config_dir=None) -> list[Path]:
    candidates = []
    if config_dir is not None:
        config_dir = Path(config_dir).resolve()
        candidates += [config_dir / "models", config_dir.parent / "models"]
    candidates.append(Path(os.getcwd()) / "models")
    candidates.append(Path(__file__).resolve().parents[2] / "models")
    out: list[Path] = []
    for c in candidates:
        if c.is_dir() and c not in out:
            out.append(c)
    return out


def model_files(config_dir=None) -> dict[str, Path]:
    """Model name -> file, the first folder in search order winning."""
    found: dict[str, Path] = {}
    for folder in model_dirs(config_dir):
        for f in sorted(folder.glob("*.py")):
            if not f.name.startswith("_"):
                found.setdefault(f.stem, f)
    return found
