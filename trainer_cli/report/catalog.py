"""``trainer list``: every name a config can use, from the library's own registries."""
from __future__ import annotations

import ast
import importlib.util
import warnings
from pathlib import Path

from ..config import names
from ..config.schema.data import DATASET_TYPES, SKLEARN_SETS
from ..config.schema.files import factory_params
from ..config.schema.model import MODEL_FACTORY
from ..config.schema.optim import COMPRESSION_TYPES, KVSTORE_TYPES

__all__ = ["catalog", "optimizers", "schedulers", "models", "zoo_models", "datasets"]


def optimizers() -> list[dict]:
    from .. import optimizer as opt

    out = []
    for name in names.optimizer_names():
        klass = opt.Optimizer.opt_registry[name]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # Built, not read from signatures: some set their rate after the base class.
                default_lr = opt.create(name).learning_rate
        except Exception:  # an optimizer that needs arguments has no default rate to show
            default_lr = None
        out.append({"name": name, "default_lr": default_lr, "params": klass._own_params()})
    return out


def schedulers() -> list[dict]:
    out = []
    for name in names.scheduler_names():
        spec = names.scheduler_params(name)
        out.append({"name": name,
                    "required": sorted(spec.required) if spec else [],
                    "params": sorted(spec.accepted) if spec and spec.accepted else []})
    return out


def _model_entry(name: str, path: Path) -> dict:
    entry = {"name": name, "path": str(path), "args": None, "doc": None}
    try:  # read, never imported: listing must not run a user's file
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        doc = ast.get_docstring(tree)
        entry["doc"] = doc.strip().splitlines()[0] if doc else None
        entry["args"] = factory_params(str(path), MODEL_FACTORY)
    except Exception as exc:  # a broken file is listed with why, not a reason to fail the list
        entry["error"] = str(exc)
    return entry


def models(models_dir=None) -> list[dict]:
    """Models in ``models_dir``, or in the folders a config in the working directory searches."""
    if models_dir is not None:
        folder = Path(models_dir)
        found = {f.stem: f for f in sorted(folder.glob("*.py")) if not f.name.startswith("_")}
    else:
        found = names.model_files()
    return [_model_entry(name, path) for name, path in sorted(found.items())]


def zoo_models() -> list[str]:
    """The model-zoo networks a config names as ``zoo:NAME``."""
    from ..config.schema.zoo import ZOO_PREFIX, zoo_names
    return [ZOO_PREFIX + name for name in zoo_names()]


def transforms() -> list[str]:
    """The image transforms a data set's ``transforms`` list names."""
    from ..config.schema.images import TRANSFORMS
    return sorted(TRANSFORMS)


def datasets() -> dict:
    installed = importlib.util.find_spec("sklearn") is not None
    return {"types": list(DATASET_TYPES),
            "sklearn": list(SKLEARN_SETS) if installed else [],
            "sklearn_installed": installed}


def catalog(models_dir=None) -> dict:
    return {
        "optimizers": optimizers(),
        "schedulers": schedulers(),
        "models": models(models_dir),
        "zoo_models": zoo_models(),
        "transforms": transforms(),
        "losses": names.loss_names(),
        "metrics": names.metric_names(),
        "datasets": datasets(),
        "initializers": names.initializer_names(),
        "kvstore": [t for t in KVSTORE_TYPES if t != "none"],
        "compression": [t for t in COMPRESSION_TYPES if t != "none"],
    }
