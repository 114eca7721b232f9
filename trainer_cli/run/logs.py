"""A run's logs: ``metrics.jsonl`` (one JSON object per row), ``metrics.csv`` (the same rows) and
``train.log`` (human-readable lines).

A row is ``{"kind": "train" | "val" | "epoch", "step": N, "epoch": E, ...metric keys...,
"lr": ..., "time": unix seconds}``; ``epoch`` is 1-based (the epoch the step belongs to). The
rows of a step are all written before that step's checkpoint, so on resume the rows past the
checkpoint's step are dropped (:func:`truncate_metrics`) and the log ends up row for row the one
an uninterrupted run writes (``time`` aside).
"""
from __future__ import annotations

import csv
import io
import json
import math
import time
from pathlib import Path

from .._atomic import write_text_atomic
from .._bounded import open_append, open_regular
from . import layout

__all__ = ["CSV_FIELDS", "MetricsLog", "TrainLog", "read_metrics", "truncate_metrics"]

CSV_FIELDS = ("kind", "step", "epoch", "lr")
_TAIL_FIELDS = ("skipped", "time")


def _jsonable(value):
    # JSON has no NaN/Infinity; a diverged loss is logged as null rather than breaking parsers.
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def csv_header(metric_keys) -> list[str]:
    return list(CSV_FIELDS) + list(metric_keys) + list(_TAIL_FIELDS)


class MetricsLog:
    """Appends rows to metrics.jsonl and metrics.csv (flushed per row; they are rebuilt on resume)."""

    def __init__(self, run_dir, metric_keys):
        self.run_dir = Path(run_dir)
        self.header = csv_header(metric_keys)
        csv_path = self.run_dir / layout.METRICS_CSV
        if not csv_path.exists():
            write_text_atomic(csv_path, _csv_text([self.header]))
        self._jsonl = open_append(self.run_dir / layout.METRICS_FILE, encoding="utf-8")
        self._csv = open_append(csv_path, encoding="utf-8", newline="")
        self._writer = csv.writer(self._csv)

    def write(self, row: dict):
        row = {k: _jsonable(v) for k, v in row.items()}
        self._jsonl.write(json.dumps(row, separators=(",", ":")) + "\n")
        self._jsonl.flush()
        self._writer.writerow(_csv_cells(self.header, row))
        self._csv.flush()

    def close(self):
        self._jsonl.close()
        self._csv.close()


class TrainLog:
    """``train.log``: timestamped lines, appended (a resume adds to it, never rewrites it)."""

    def __init__(self, run_dir):
        self._f = open_append(Path(run_dir) / layout.LOG_FILE, encoding="utf-8")

    def write(self, text: str):
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        for line in str(text).splitlines() or [""]:
            self._f.write("%s  %s\n" % (stamp, line))
        self._f.flush()

    def close(self):
        self._f.close()


def read_metrics(run_dir) -> list[dict]:
    """The rows of metrics.jsonl; a torn last line (a killed writer) is ignored."""
    path = Path(run_dir) / layout.METRICS_FILE
    try:
        f = open_regular(path)
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise layout.RunDirError("%s: cannot read (%s)" % (path, exc.strerror or exc)) from None
    rows = []
    with io.TextIOWrapper(f, encoding="utf-8", errors="replace") as text:
        for line in text:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict) and isinstance(row.get("step"), int):
                rows.append(row)
    return rows


def truncate_metrics(run_dir, step: int, metric_keys) -> int:
    """Keep the rows up to ``step`` in metrics.jsonl and rebuild metrics.csv from them; returns
    how many rows were dropped."""
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir)
    kept = [r for r in rows if r["step"] <= step]
    path = run_dir / layout.METRICS_FILE
    text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in kept)
    if len(kept) != len(rows) or _holds_other_than(path, text.encode("utf-8")):
        write_text_atomic(path, text)
    header = csv_header(metric_keys)
    write_text_atomic(run_dir / layout.METRICS_CSV,
                      _csv_text([header] + [_csv_cells(header, r) for r in kept]))
    return len(rows) - len(kept)


def _holds_other_than(path, data: bytes) -> bool:
    """Whether ``path`` holds anything but ``data`` (torn lines, another encoding)."""
    try:
        with open_regular(path) as f:
            return f.read(len(data) + 1) != data
    except OSError:
        return True


def _csv_cells(header, row) -> list:
    return ["" if row.get(k) is None else (repr(row[k]) if isinstance(row[k], float) else row[k])
            for k in header]


def _csv_text(rows) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    for r in rows:
        writer.writerow(r)
    return buf.getvalue()
