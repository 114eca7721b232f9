"""A run directory read back as a history: metric series, checkpoints, events and status.

Everything here reads; nothing imports the run's model or unpickles anything. The files are
read with size limits, a torn last line of ``metrics.jsonl`` (a writer killed mid-line, or a run
still writing) is skipped, and a run directory that is half there (no metrics yet, no
checkpoints) still gives a history: ``trainer report`` opens runs in progress.

The status of a run comes from three places, strongest first: a held ``.lock`` means a process
is writing there now (``running``); otherwise the last status line the session wrote to
``train.log`` (``finished``, ``early_stopped``, ``interrupted``, or an ``error``) unless a later
``resuming`` headline superseded it; a run with neither died without a word (``killed`` by a
signal it could not catch, or a machine that went away).
"""
from __future__ import annotations

import errno
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .._bounded import load_json, open_regular
from ..run import layout
from ..run.logs import row_of

__all__ = ["RunHistory", "load_history", "is_run_dir", "find_runs", "lock_held", "run_status",
           "metric_mode", "MAX_METRICS_BYTES"]

MAX_METRICS_BYTES = 256 << 20     # metrics.jsonl beyond this is read only up to it
_MAX_CONFIG_BYTES = 4 << 20
_MAX_LOG_TAIL = 64 << 10          # the status lines are at the end of train.log
_MAX_META_BYTES = 4 << 20

_STATUS_LINE = re.compile(r"^\S+ \S+  (finished|early_stopped|interrupted) after step (\d+)")
_ERROR_LINE = re.compile(r"^\S+ \S+  error(?: at step (\d+))?: (.*)$")
_RESUME_LINE = re.compile(r"^\S+ \S+  resuming ")
_START_LINE = re.compile(r"^(\S+ \S+)  (?:training|resuming) ")
_EARLY_LINE = re.compile(r"^\S+ \S+  early stopping: ")

# Public names of the statuses, as `trainer runs` shows them.
STATUS_NAMES = {"finished": "finished", "early_stopped": "early-stopped",
                "interrupted": "stopped", "failed": "failed", "killed": "killed",
                "running": "running", "new": "new"}

def metric_mode(key: str) -> str:
    """'max' when larger is better for a logged key (``val_accuracy``), else 'min'."""
    from ..config import names

    return names.metric_mode(key.split("_", 1)[1] if key.startswith(("train_", "val_")) else key)


@dataclass
class RunHistory:
    """What a run directory says about its run."""

    path: Path
    name: str
    config: dict | None                       # the resolved config as plain data (None: unreadable)
    rows: list = field(default_factory=list)  # metrics.jsonl rows, in order
    checkpoints: list = field(default_factory=list)   # [{"step", "epoch", "finished"}]
    latest: int | None = None                 # the step the `latest` pointer names
    best_checkpoint: int | None = None        # the step the `best` pointer names
    status: str = "new"
    status_step: int | None = None
    error: str | None = None
    early_stop_step: int | None = None
    started: str | None = None                # "YYYY-mm-dd HH:MM:SS" UTC of the first headline
    problems: list = field(default_factory=list)      # files that could not be read, and why

    # -- series -------------------------------------------------------------------------------
    def metric_keys(self) -> list[str]:
        """Every logged metric key (``train_loss``, ``val_accuracy``, ...), in first-seen order."""
        keys: dict[str, None] = {}
        for row in self.rows:
            for k in row:
                if k.startswith(("train_", "val_")):
                    keys.setdefault(k, None)
        return list(keys)

    def series(self, key: str, kind: str | None = None) -> list[tuple[int, int, float]]:
        """``[(step, epoch, value)]`` of ``key``: validation keys from ``val`` rows, training
        keys from the per-step ``train`` rows (``kind='epoch'`` for the epoch means)."""
        if kind is None:
            kind = "val" if key.startswith("val_") else "train"
        out = []
        for row in self.rows:
            value = _number(row.get(key))
            if row.get("kind") == kind and value is not None:
                out.append((row["step"], row.get("epoch"), value))
        if not out and kind == "train":  # runs that log only at epoch ends
            return self.series(key, "epoch")
        return sorted(out, key=_by_step)  # a row out of order (an edited file) is drawn in place

    def lr_series(self) -> list[tuple[int, int, float]]:
        return sorted(((r["step"], r.get("epoch"), _number(r.get("lr"))) for r in self.rows
                       if r.get("kind") == "train" and _number(r.get("lr")) is not None),
                      key=_by_step)

    def samples_per_second(self) -> list[tuple[int, int, float]]:
        """Throughput between consecutive ``train`` rows: steps x batch size over the time
        between them (a gap across a resume, where the clock jumped, is left out)."""
        batch = _batch_size(self.config)
        rows = [(r, _time(r)) for r in self.rows if r.get("kind") == "train"]
        rows = [(r, t) for r, t in rows if t is not None]
        out = []
        for (prev, prev_time), (row, row_time) in zip(rows, rows[1:]):
            steps, seconds = row["step"] - prev["step"], row_time - prev_time
            if steps > 0 and 0 < seconds and batch:
                out.append((row["step"], row.get("epoch"), steps * batch / seconds))
        if len(out) > 2:  # a resume shows up as one long gap; drop gaps 20x the median
            typical = sorted(v for _, _, v in out)[len(out) // 2]
            out = [p for p in out if p[2] * 20 >= typical]
        return out

    def best(self, key: str):
        """``(step, value)`` of the best value of ``key`` (by its mode), or None."""
        points = self.series(key)
        if not points:
            return None
        pick = max if metric_mode(key) == "max" else min
        step, _, value = pick(points, key=lambda p: (p[2], -p[0]) if pick is max else (p[2], p[0]))
        return step, value

    def last(self, key: str):
        points = self.series(key)
        return (points[-1][0], points[-1][2]) if points else None

    @property
    def step(self) -> int:
        steps = [r["step"] for r in self.rows] + [c["step"] for c in self.checkpoints]
        return max(steps) if steps else 0

    @property
    def epoch(self):
        epochs = [r.get("epoch") for r in self.rows if isinstance(r.get("epoch"), int)]
        return max(epochs) if epochs else None

    def duration(self) -> float | None:
        times = [t for t in map(_time, self.rows) if t is not None]
        return (max(times) - min(times)) if len(times) >= 2 else None

    def headline_metric(self) -> str | None:
        """The key a summary leads with: keep_best / early stopping's metric, else a validation
        accuracy or loss, else the training loss."""
        config = self.config or {}
        for section, sub in (("checkpoint", "keep_best"), ("early_stopping", None)):
            value = config.get(section)
            if sub is not None and isinstance(value, dict):
                value = value.get(sub)
            if isinstance(value, dict):
                value = value.get("metric")
            if isinstance(value, str):
                return value
        keys = self.metric_keys()
        for candidate in ("val_accuracy", "val_loss", "train_accuracy", "train_loss"):
            if candidate in keys:
                return candidate
        return keys[0] if keys else None


def _number(value):
    """A logged value as a float, or None: not a number, a bool, or an integer too large for a
    float (a hostile row's 400-digit ``1000...``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:
        return None


def _time(row):
    """A row's ``time`` (unix seconds), or None when it is not a finite number."""
    value = _number(row.get("time"))
    return value if value is not None and math.isfinite(value) else None


def _by_step(point):
    return point[0]


def _batch_size(config):
    data = (config or {}).get("data")
    if isinstance(data, dict) and isinstance(data.get("batch_size"), int):
        return data["batch_size"]
    return None


# ---------------------------------------------------------------------------------------------
# Reading, bounded

def _read_bounded(path: Path, limit: int, tail: bool = False) -> bytes | None:
    """At most ``limit`` bytes of a regular file, not a symlink (its end with ``tail``: a long
    run's log is read in part, not refused); None when missing. FIFOs, devices and other
    non-files are refused without blocking (``_bounded.open_regular``)."""
    try:
        f = open_regular(path, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError("a symbolic link") from None
        raise
    with f:
        size = os.fstat(f.fileno()).st_size
        if tail and size > limit:
            f.seek(size - limit)
        return f.read(limit)


def _rows(path: Path, problems: list) -> list[dict]:
    try:
        data = _read_bounded(path, MAX_METRICS_BYTES)
    except OSError as exc:
        problems.append("%s: %s" % (path, exc))
        return []
    if data is None:
        return []
    # A torn line (the writer was killed, or is writing it now) or a foreign one is no row.
    rows = (row_of(line) for line in data.splitlines())
    return [row for row in rows if row is not None]


def _config(path: Path, problems: list):
    from ..config.yamlio import parse_yaml

    try:
        data = _read_bounded(path, _MAX_CONFIG_BYTES)
    except OSError as exc:
        problems.append("%s: %s" % (path, exc))
        return None
    if data is None:
        problems.append("%s: missing" % path)
        return None
    try:
        parsed, _, issues = parse_yaml(data.decode("utf-8"), str(path))
    except Exception as exc:  # a hostile file: report it, never fail the whole report
        problems.append("%s: %s" % (path, exc))
        return None
    if issues or not isinstance(parsed, dict):
        problems.append("%s: not a readable config" % path)
        return parsed if isinstance(parsed, dict) else None
    return parsed


def _checkpoints(run_dir: Path, problems: list) -> tuple[list, int | None, int | None]:
    found = []
    try:
        listed = layout.list_checkpoints(run_dir)
    except layout.RunDirError as exc:
        problems.append(str(exc))
        listed = []
    for step, folder in listed:
        entry = {"step": step, "epoch": None, "finished": False}
        try:
            data = _read_bounded(folder / layout.META_FILE, _MAX_META_BYTES)
            meta = load_json(data) if data else None
        except (OSError, ValueError):
            meta = None
        if isinstance(meta, dict):
            if isinstance(meta.get("epoch"), int):
                entry["epoch"] = meta["epoch"]
            entry["finished"] = meta.get("finished") is True
        found.append(entry)
    pointers = []
    for read in (layout.read_latest, layout.read_best):
        try:
            pointers.append(read(run_dir))
        except layout.RunDirError as exc:
            problems.append(str(exc))
            pointers.append(None)
    return found, pointers[0], pointers[1]


def lock_held(run_dir) -> bool:
    """True when a process holds the run's write lock (a run in progress)."""
    path = Path(run_dir) / ".lock"
    try:
        import fcntl
    except ImportError:
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        import stat

        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    finally:
        os.close(fd)


def run_status(log_tail: str, locked: bool) -> dict:
    """The status a run's ``train.log`` tail and lock give (see the module's docstring)."""
    out = {"status": "running" if locked else "new", "step": None, "error": None,
           "started": None, "early_stop": False}
    seen_start = False
    for line in log_tail.splitlines():
        start = _START_LINE.match(line)
        if start:
            seen_start = True
            if out["started"] is None:
                out["started"] = start.group(1)
            if not locked:
                out.update(status="killed", step=None, error=None)
            continue
        if locked:
            continue
        match = _STATUS_LINE.match(line)
        if match:
            out.update(status=match.group(1), step=int(match.group(2)), error=None)
            continue
        match = _ERROR_LINE.match(line)
        if match:
            out.update(status="failed", error=match.group(2).strip(),
                       step=int(match.group(1)) if match.group(1) else None)
    if not seen_start and not locked:
        out["status"] = "new"
    return out


def load_history(run_dir) -> RunHistory:
    """Read a run directory; a RunDirError when it is not one."""
    run_dir = Path(run_dir)
    try:
        found = _is_run_dir(run_dir)
    except OSError as exc:
        raise layout.RunDirError("%s: cannot read the run directory (%s)"
                                 % (run_dir, exc.strerror or exc)) from None
    if not found:
        raise layout.RunDirError("%s: not a run directory (no %s)" % (run_dir, layout.CONFIG_FILE))
    problems: list = []
    config = _config(run_dir / layout.CONFIG_FILE, problems)
    rows = _rows(run_dir / layout.METRICS_FILE, problems)
    checkpoints, latest, best_checkpoint = _checkpoints(run_dir, problems)
    try:
        tail = (_read_bounded(run_dir / layout.LOG_FILE, _MAX_LOG_TAIL, tail=True) or b"").decode(
            "utf-8", errors="replace")
        head = (_read_bounded(run_dir / layout.LOG_FILE, 4096) or b"").decode("utf-8", errors="replace")
    except OSError as exc:
        problems.append("%s: %s" % (run_dir / layout.LOG_FILE, exc))
        tail = head = ""
    status = run_status(tail, lock_held(run_dir))
    first = run_status(head.splitlines()[0] if head else "", False)
    name = (config or {}).get("name")
    history = RunHistory(path=run_dir, name=name if isinstance(name, str) and name else run_dir.name,
                         config=config, rows=rows, checkpoints=checkpoints, latest=latest,
                         best_checkpoint=best_checkpoint,
                         status=status["status"], status_step=status["step"],
                         error=status["error"], started=first["started"] or status["started"],
                         problems=problems)
    if any(_EARLY_LINE.match(line) for line in tail.splitlines()) or status["status"] == "early_stopped":
        history.early_stop_step = status["step"] or history.step
    return history


def _is_run_dir(path: Path) -> bool:
    """Whether ``path`` is a run directory; OSError when that cannot be told (no permission)."""
    if not path.is_dir() or path.is_symlink():
        return False
    for name, test in ((layout.CONFIG_FILE, stat.S_ISREG), (layout.CHECKPOINTS, stat.S_ISDIR)):
        try:
            if not test(os.stat(path / name).st_mode):
                return False
        except (FileNotFoundError, NotADirectoryError):
            return False
    return True


def is_run_dir(path, strict: bool = False) -> bool:
    """Whether ``path`` is a run directory; one that cannot be looked into is not, or with
    ``strict`` raises the OSError that says why."""
    try:
        return _is_run_dir(Path(path))
    except OSError:
        if strict:
            raise
        return False


def find_runs(root, unreadable: bool = False) -> list[Path]:
    """The run directories directly under ``root``, oldest first by name's time then name;
    with ``unreadable``, also the folders that cannot be looked into (``trainer runs`` lists
    them as such, rather than failing or hiding them)."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = []
    try:
        children = list(root.iterdir())
    except OSError as exc:
        raise layout.RunDirError("%s: cannot list the runs here (%s)"
                                 % (root, exc.strerror or exc)) from None
    for path in children:
        try:
            if _is_run_dir(path):
                found.append(path)
        except OSError:
            if unreadable:
                found.append(path)
    return sorted(found, key=lambda p: (_stamp(p.name), p.name))


_STAMP = re.compile(r"-(\d{8}-\d{6})(?:-\d+)?$")


def _stamp(name: str) -> str:
    match = _STAMP.search(name)
    return match.group(1) if match else ""
