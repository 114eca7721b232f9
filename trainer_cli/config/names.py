"""The names a config may use that the library defines: optimizers, schedulers, losses, metrics,
initializers and models.

Each kind's registry (``names()``, ``lookup(name)``, ``create(name, **kw)``) lives with the
library module that defines it; this module imports that module when a name is first needed, so
that validating a config imports nothing it does not check and ``trainer --help`` stays fast.
"""
from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from pathlib import Path

from .._naming import snake_case

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


# Metrics where larger is better; every other metric (and the loss) is minimised.
_MAXIMISED = {"accuracy", "top_k_accuracy", "f1", "mcc", "pearson_correlation",
              "binary_accuracy", "acc", "top_k_acc"}


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


# ---------------------------------------------------------------------------------------------
# Registries: each kind's library module, imported on first use.

def _registry(kind: str):
    if kind == "optimizer":
        from .. import optimizer as registry
    elif kind == "lr_scheduler":
        from .. import lr_scheduler as registry
    elif kind == "loss":
        from ..gluon import loss as registry
    elif kind == "metric":
        from .. import metric as registry
    elif kind == "initializer":
        from .. import initializer as registry
    else:
        raise KeyError("no registry of %r" % (kind,))
    return registry


def lookup(kind: str, name: str):
    """The library class a config name stands for (``lookup('loss', 'l2')``), or None."""
    return _registry(kind).lookup(name)


def _names(kind: str) -> list[str]:
    return _registry(kind).names()


def _params(kind: str, name: str) -> ParamSpec | None:
    cls = lookup(kind, name)
    return None if cls is None else _spec(cls)


def optimizer_names() -> list[str]:
    return _names("optimizer")


def optimizer_params(name: str) -> ParamSpec | None:
    return _params("optimizer", name)


def scheduler_names() -> list[str]:
    return _names("lr_scheduler")


def scheduler_params(name: str) -> ParamSpec | None:
    return _params("lr_scheduler", name)


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
