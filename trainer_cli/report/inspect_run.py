"""``trainer inspect RUN_DIR``: a run's checkpoints (each verified against its meta.json), where
the latest pointer points, the last metrics, and the optimizer states of the latest checkpoint.

Damage is collected, not raised at the first file: the report says which checkpoints are intact,
and ``errors`` lists every damaged file (the CLI prints the report, then exits 2 naming them).
"""
from __future__ import annotations

import collections
import os
from datetime import datetime, timezone
from pathlib import Path

import numpy

from .._bounded import open_regular
from ..config import ConfigError, load_config, resolved_dict
from ..gluon.param_file import ParamFileError, load_arrays
from ..optimizer.state_file import StateFileError
from ..run import layout
from ..run.logs import metric_lines, row_of
from .inspect_states import inspect_states_file, states_summary

__all__ = ["inspect_path", "inspect_run_dir", "inspect_checkpoint", "metrics_tail"]

# meta.json keys that may hold the save time (the run writes saved_at).
_TIME_KEYS = ("saved_at", "time")


def inspect_path(path) -> dict:
    """A run directory, one checkpoint folder, or a states file, whichever ``path`` is."""
    p = Path(path)
    if p.is_dir():
        if (p / layout.META_FILE).exists() or (p / layout.STATES_FILE).exists():
            return inspect_checkpoint(p)
        return inspect_run_dir(p)
    if not p.exists():
        raise layout.RunDirError("%s: no such run directory or states file" % p)
    return inspect_states_file(p)


def _iso(seconds) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _saved_at(meta: dict | None, folder: Path):
    for key in _TIME_KEYS:
        value = (meta or {}).get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                return _iso(value)
            except (OverflowError, ValueError, OSError):  # NaN, or no date (a damaged file)
                continue
        if isinstance(value, str):
            return value
    try:
        return _iso((folder / layout.META_FILE).stat().st_mtime)
    except OSError:
        return None


def _folder_size(folder: Path) -> int:
    total = 0
    for child in folder.iterdir():
        try:
            if child.is_file():
                total += child.stat().st_size
        except OSError:
            pass
    return total


def _checkpoint_entry(step: int, folder: Path) -> dict:
    entry = {"name": folder.name, "step": step, "path": str(folder), "epoch": None,
             "batch_in_epoch": None, "finished": None, "time": None,
             "size": _folder_size(folder), "intact": True, "error": None}
    meta = None
    try:
        meta = layout.verify_checkpoint(folder)
        if meta["step"] != step:
            raise layout.RunDirError("%s: says step %d, but the folder is %s"
                                     % (folder / layout.META_FILE, meta["step"], folder.name))
    except layout.RunDirError as exc:
        entry.update(intact=False, error=str(exc))
        try:  # a damaged data file leaves meta.json readable: keep its epoch and time
            meta = layout.read_meta(folder)
        except layout.RunDirError:
            meta = None
    for key in ("epoch", "batch_in_epoch", "finished"):  # epoch: epochs completed (run/state.py)
        value = (meta or {}).get(key)
        # A damaged meta.json's field of another type is shown as unknown, not printed raw.
        fits = (type(value) is bool if key == "finished"
                else type(value) is int and value >= 0)
        entry[key] = value if fits else None
    entry["time"] = _saved_at(meta, folder)
    return entry


def _params_summary(path: Path) -> list:
    out = []
    for name, array in load_arrays(path).items():
        norm = float(numpy.sqrt(numpy.sum(numpy.square(array, dtype=numpy.float64)))) if array.size else 0.0
        out.append({"name": name, "shape": list(array.shape), "dtype": array.dtype.name, "norm": norm})
    return out


def _contents(folder: Path, errors: list) -> dict:
    """States and parameters of one verified checkpoint; problems go to ``errors``."""
    out = {"states": None, "parameters": None}
    states_path = folder / layout.STATES_FILE
    try:
        with open_regular(states_path) as f:
            data = f.read()
        out["states"] = states_summary(data, str(states_path))
    except StateFileError as exc:
        errors.append(str(exc))
    except OSError as exc:
        errors.append("%s: cannot read (%s)" % (states_path, exc.strerror or exc))
    try:
        out["parameters"] = _params_summary(folder / layout.PARAMS_FILE)
    except ParamFileError as exc:
        errors.append(str(exc))
    return out


def metrics_tail(path: Path, count: int = 5) -> dict:
    """The last ``count`` rows of metrics.jsonl. Unreadable lines are counted, not fatal: a
    killed run may leave half a line."""
    out = {"path": str(path), "rows": 0, "skipped_lines": 0, "last": []}
    try:
        f = open_regular(path)
    except OSError:
        return {**out, "path": None}
    rows, last = 0, collections.deque(maxlen=count)
    with f:
        for line in metric_lines(f):  # streamed, each line bounded: a long log is never held
            if not line.strip():
                continue
            row = row_of(line)
            if row is not None:
                rows += 1
                last.append(row)
            else:
                out["skipped_lines"] += 1
    out.update(rows=rows, last=list(last))
    return out


def _config_summary(path: Path, errors: list):
    if not os.path.lexists(path):
        return None
    try:
        config = load_config(path, check_files=False)
    except ConfigError as exc:
        errors.append(str(exc))
        return None
    shown = resolved_dict(config)  # a value from ${env:...} as its reference, never the value
    scheduler = shown.get("lr_scheduler")
    return {"name": shown["name"], "model": shown["model"]["name"],
            "optimizer": shown["optimizer"]["name"],
            "optimizer_params": shown["optimizer"]["params"],
            "lr_scheduler": scheduler["type"] if isinstance(scheduler, dict) else None,
            "epochs": shown["epochs"], "steps": shown["steps"],
            "batch_size": shown["data"]["batch_size"], "context": shown["context"]}


def _lift(report: dict, states: dict | None) -> None:
    """The states' headline values at the top level, where scripts look for them."""
    for key in ("optimizer", "num_update", "learning_rate", "hyperparams", "lr_scheduler"):
        report[key] = None if states is None else states.get(key)


def inspect_run_dir(run_dir) -> dict:
    run_dir = Path(run_dir)
    if not (run_dir / layout.CONFIG_FILE).is_file() and not (run_dir / layout.CHECKPOINTS).is_dir():
        raise layout.RunDirError("%s: not a run directory (no %s and no %s/)"
                                 % (run_dir, layout.CONFIG_FILE, layout.CHECKPOINTS))
    errors, notes = [], []
    report = {"kind": "run_dir", "path": str(run_dir), "name": run_dir.name,
              "config": _config_summary(run_dir / layout.CONFIG_FILE, errors)}
    checkpoints = [_checkpoint_entry(step, folder) for step, folder in layout.list_checkpoints(run_dir)]
    errors += [c["error"] for c in checkpoints if not c["intact"]]
    by_step = {c["step"]: c for c in checkpoints}
    try:
        latest = layout.read_latest(run_dir)
    except layout.RunDirError as exc:
        errors.append(str(exc))
        latest = None
    if latest is not None and latest not in by_step:
        errors.append("%s: names %s, which does not exist"
                      % (run_dir / layout.CHECKPOINTS / layout.LATEST, layout.checkpoint_name(latest)))
    try:
        best = layout.read_best(run_dir)
    except layout.RunDirError as exc:
        errors.append(str(exc))
        best = None
    if best is not None and best not in by_step:
        errors.append("%s: names %s, which does not exist"
                      % (run_dir / layout.CHECKPOINTS / layout.BEST, layout.checkpoint_name(best)))
    intact = [c["step"] for c in checkpoints if c["intact"]]
    chosen = latest if latest in intact else (intact[-1] if intact else None)
    if chosen is not None and chosen != latest:
        notes.append("the latest checkpoint is not usable; showing %s, the newest intact one "
                     "(resume with --from %s)" % ((layout.checkpoint_name(chosen),) * 2))
    contents = {"states": None, "parameters": None}
    if chosen is not None:
        contents = _contents(Path(by_step[chosen]["path"]), errors)
    report.update(
        checkpoints=checkpoints, latest=latest, best=best, shown_checkpoint=chosen,
        resume_from=chosen,
        metrics=metrics_tail(run_dir / layout.METRICS_FILE),
        states=contents["states"], parameters=contents["parameters"],
        notes=notes, errors=errors)
    _lift(report, contents["states"])
    return report


def inspect_checkpoint(folder) -> dict:
    """One ``step-N`` folder: verified, then its states and parameters."""
    folder = Path(folder)
    meta = layout.verify_checkpoint(folder)
    errors = []
    contents = _contents(folder, errors)
    report = {"kind": "checkpoint", "path": str(folder), "step": meta["step"],
              "epoch": meta.get("epoch"), "batch_in_epoch": meta.get("batch_in_epoch"),
              "finished": meta.get("finished"), "time": _saved_at(meta, folder),
              "size": _folder_size(folder), "states": contents["states"],
              "parameters": contents["parameters"], "notes": [], "errors": errors}
    _lift(report, contents["states"])
    return report
