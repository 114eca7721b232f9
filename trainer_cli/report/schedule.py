"""``trainer lr``: the learning rate of every step, read from the optimizer a run builds.

The optimizer comes from ``run.build.build_optimizer``, the function the run hands to its
``gluon.Trainer``, so the learning_rate/scheduler interplay is the run's by construction. The
schedule is then read by counting updates the way ``update`` does and asking the optimizer for
its ``learning_rate``: no formula is repeated here.
"""
from __future__ import annotations

import warnings
from pathlib import Path

from ..config import ConfigError, load_config
from ..run import layout
from .dataset_size import planned_steps

__all__ = ["LR_DEFINITION", "build_optimizer", "lr_values", "lr_report", "load_source"]

LR_DEFINITION = ("lr[k-1] is the optimizer's learning_rate once its update count is k: what "
                 "Trainer.learning_rate reports right after the k-th step, and the rate that "
                 "step applied (before lr_mult)")

# Where lr[k-1] is not the rate update k applied.
_LAGGING = {"lbsgd": "lbsgd reads the rate before counting its update, so update k applies the "
                     "rate at count k-1 (lr[k-2]), times its warmup multiplier"}


def build_optimizer(config, config_file=None):
    """``(optimizer, warnings)``: the optimizer a run of ``config`` starts from."""
    from ..run.build import build_optimizer as run_optimizer

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        optimizer = run_optimizer(config, config_file)
    return optimizer, [str(w.message) for w in caught]


def lr_values(optimizer, steps: int) -> list[float]:
    """The learning rate after each of ``steps`` updates (see ``LR_DEFINITION``); ``optimizer``
    is advanced by ``steps`` counts, so give it a fresh one."""
    out = []
    for _ in range(steps):
        # The count an update makes (index 0 stands for the parameters: every parameter of a
        # step sees the same num_update, and lr_mult is not part of the schedule).
        optimizer._update_count(0)
        out.append(float(optimizer.learning_rate))
    return out


def load_source(path, overrides=(), need_files=True):
    """``(config, kind, run_dir)`` for a config file or a run directory."""
    path = Path(path)
    if path.is_dir():
        config_file = path / layout.CONFIG_FILE
        if not config_file.is_file():
            raise layout.RunDirError("%s: not a run directory (no %s)" % (path, layout.CONFIG_FILE))
        return load_config(config_file, overrides, check_files=need_files), "run_dir", path
    return load_config(path, overrides), "config", None


def _recorded_train_size(run_dir):
    """The training-set size the run's latest checkpoint recorded: no need for its data files,
    which may have moved since. None when there is none to read."""
    try:
        step = layout.read_latest(run_dir)
        if step is None:
            return None
        n = layout.read_meta(layout.checkpoint_dir(run_dir, step)).get("data", {}).get("num_samples")
    except (layout.RunDirError, AttributeError):
        return None  # a damaged pointer is reported below, where the current step is read
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else None


def lr_report(path, steps: int | None = None, overrides=()) -> dict:
    """Everything ``trainer lr`` shows, as JSON-able values (``lr`` holds every step)."""
    is_run = Path(path).is_dir()
    recorded = None
    if is_run and not any(o.strip().startswith("data") for o in overrides):
        recorded = _recorded_train_size(Path(path))
    # A run directory's data may have moved; it is read only when nothing else gives the size.
    need_files = not is_run or (steps is None and recorded is None)
    config, kind, run_dir = load_source(path, overrides, need_files=need_files)
    source = run_dir / layout.CONFIG_FILE if run_dir is not None else Path(path)
    notes = []
    try:
        plan = planned_steps(config, n_train=recorded, source=source)
    except (ConfigError, OSError, ValueError, ImportError):
        # With --steps the data only adds epoch numbers; a run moved away from its data still
        # shows its schedule.
        if steps is None:
            raise
        plan = {"steps": None, "from": None, "train_samples": None, "updates_per_epoch": None}
    if steps is None:
        steps = plan["steps"]
    else:
        plan["from"] = "--steps"
    optimizer, caught = build_optimizer(config, source)
    notes += caught
    orig = getattr(optimizer.lr_scheduler, "base_lr_orig", None)
    if orig is not None and optimizer.lr is not None and orig != optimizer.lr:
        # MXNet's "overwritten" warning would mislead here: the decay ignores the overwrite.
        notes = [n for n in notes if "overwritten" not in n]
        notes.append("%s decays from its own base_lr (%s), not from the optimizer's "
                     "learning_rate (%s), as in MXNet; set lr_scheduler.params.base_lr to change "
                     "it" % (type(optimizer.lr_scheduler).__name__, orig, optimizer.lr))
    if optimizer.registry_name in _LAGGING:
        notes.append(_LAGGING[optimizer.registry_name])
    current = layout.read_latest(run_dir) if run_dir is not None else None
    scheduler = optimizer.lr_scheduler
    values = lr_values(optimizer, steps)
    return {
        "source": str(path),
        "kind": kind,
        "optimizer": optimizer.registry_name,
        "learning_rate": optimizer.lr,
        "lr_scheduler": None if scheduler is None else scheduler.to_dict(),
        "begin_num_update": optimizer.begin_num_update,
        "steps": steps,
        "steps_from": plan["from"],
        "train_samples": plan["train_samples"],
        "updates_per_epoch": plan["updates_per_epoch"],
        "current_step": current,
        "current_lr": values[current - 1] if current is not None and 1 <= current <= steps else None,
        "definition": LR_DEFINITION,
        "notes": notes,
        "lr": values,
    }
