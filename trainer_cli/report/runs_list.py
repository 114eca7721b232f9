"""``trainer runs``: the run directories under a root, one summary each, and the newest one."""
from __future__ import annotations

from pathlib import Path

from ..run import layout
from .history import STATUS_NAMES, find_runs, is_run_dir, load_history

__all__ = ["list_runs", "run_summary", "newest_run"]


def run_summary(history) -> dict:
    key = history.headline_metric()
    best = history.best(key) if key else None
    return {
        "name": history.path.name,
        "path": str(history.path),
        "status": STATUS_NAMES.get(history.status, history.status),
        "step": history.step,
        "epoch": history.epoch,
        "best": {"metric": key, "value": best[1], "step": best[0]} if best else None,
        "last_checkpoint": "step-%d" % history.latest if history.latest is not None else None,
        "best_checkpoint": ("step-%d" % history.best_checkpoint
                            if history.best_checkpoint is not None else None),
        "started": history.started,
        "duration_s": None if history.duration() is None else round(history.duration(), 3),
        "error": history.error,
        "problems": history.problems,
    }


def list_runs(root) -> list[dict]:
    """Summaries of every run directory directly under ``root``, oldest first. A folder that is
    not readable as a run is listed with status ``unreadable`` rather than hidden. A ``root``
    that is not a folder is an error: a mistyped path must not look like a place without runs."""
    root_path = Path(root)
    if not root_path.is_dir():
        what = "not a folder" if root_path.exists() else "no such folder"
        raise layout.RunDirError("%s: %s; runs are written under the config's run_dir (runs/ in "
                                 "the working folder unless set, or --run-dir)" % (root, what))
    out = []
    for path in find_runs(root, unreadable=True):
        try:
            out.append(run_summary(load_history(path)))
        except (OSError, layout.RunDirError) as exc:
            out.append({"name": path.name, "path": str(path), "status": "unreadable",
                        "step": None, "epoch": None, "best": None, "last_checkpoint": None,
                        "best_checkpoint": None,
                        "started": None, "duration_s": None, "error": str(exc), "problems": []})
    return out


def newest_run(root) -> Path:
    """The run directory under ``root`` that started last (by the UTC time in its name).

    A newest folder that cannot be looked into is refused, not stepped over: resuming an older
    run in its place would extend the wrong run without a word. The error names it, why, and
    the newest readable run to give by path instead."""
    runs = find_runs(root, unreadable=True)
    if not runs:
        raise layout.RunDirError("%s: no run directories here (a run directory holds %s and %s/)"
                                 % (root, layout.CONFIG_FILE, layout.CHECKPOINTS))
    why = _unreadable(runs[-1])
    if why is None:
        return runs[-1]
    older = [path for path in runs[:-1] if _unreadable(path) is None]
    raise layout.RunDirError(
        "%s: the newest run there cannot be read (%s), so --last does not pick it, nor an older "
        "run in its place. Make it readable, or name the run to resume%s"
        % (runs[-1], why, ", e.g. the newest readable one: trainer resume %s" % older[-1]
           if older else ""))


def _unreadable(path):
    """Why ``path`` cannot be looked into, or None when it can."""
    try:
        is_run_dir(path, strict=True)
    except OSError as exc:
        return exc.strerror or str(exc)
    return None
