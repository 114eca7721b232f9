"""What a run shows while it trains. The loop reports to a ``Reporter``; the CLI picks one:

- :class:`Reporter`: shows nothing (``--quiet``, ``--json``, library use);
- :class:`LineReporter`: plain lines on stderr (stderr is not a terminal: CI, pipes);
- :class:`RichReporter`: a rich progress bar on stderr with step, epoch, loss, lr, throughput
  and ETA, with validation results and messages printed above it.
"""
from __future__ import annotations

import sys
import time

__all__ = ["Reporter", "LineReporter", "RichReporter", "format_row", "choose_reporter"]


def _num(value) -> str:
    if value is None:
        return "nan"
    if isinstance(value, float):
        return "%.4g" % value
    return str(value)


def format_row(row: dict) -> str:
    """One line for a metrics row, e.g. ``validation at step 60 (epoch 3)  val_loss 0.21``."""
    skip = {"kind", "step", "epoch", "time", "skipped"}
    values = "  ".join("%s %s" % (k, _num(v)) for k, v in row.items() if k not in skip)
    if row.get("skipped"):
        values += "  skipped %d" % row["skipped"]
    kind = row.get("kind")
    if kind == "epoch":
        head = "epoch %s done (step %s)" % (row.get("epoch"), row.get("step"))
    elif kind == "val":
        head = "validation at step %s (epoch %s)" % (row.get("step"), row.get("epoch"))
    else:
        head = "step %s (epoch %s)" % (row.get("step"), row.get("epoch"))
    return "%s  %s" % (head, values)


class _EpochThrottle:
    """Epoch summaries at most once per ``log_every`` steps: tiny epochs would flood the screen."""

    def __init__(self):
        self.every = 1
        self.last = None

    def start(self, info):
        self.every = info.get("log_every", 1)

    def wants(self, row) -> bool:
        if row.get("kind") != "epoch":
            return True
        if self.last is not None and row["step"] - self.last < self.every:
            return False
        self.last = row["step"]
        return True


class Reporter:
    def start(self, info: dict):
        pass

    def progress(self, step, total, epoch, loss, lr, samples_per_s):
        pass

    def row(self, row: dict):
        pass

    def message(self, text: str):
        pass

    def close(self):
        pass


class LineReporter(Reporter):
    """Rows and messages as lines; no bar (nothing redraws in a log file)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self._throttle = _EpochThrottle()

    def _line(self, text):
        self.stream.write(text + "\n")
        self.stream.flush()

    def start(self, info):
        self._throttle.start(info)
        self._line(info["headline"])

    def row(self, row):
        if self._throttle.wants(row):
            self._line(format_row(row))

    def message(self, text):
        self._line(text)


class RichReporter(Reporter):
    def __init__(self, stream=None):
        from rich.console import Console

        self.console = Console(file=stream or sys.stderr)
        self._throttle = _EpochThrottle()
        self._progress = None
        self._task = None
        self._last = 0.0

    def start(self, info):
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeElapsedColumn, TimeRemainingColumn)

        self._throttle.start(info)
        self.console.print(info["headline"], highlight=False, markup=False)
        self._progress = Progress(
            TextColumn("epoch {task.fields[epoch]}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"), TextColumn("lr {task.fields[lr]}"),
            TextColumn("{task.fields[speed]}"), TimeElapsedColumn(), TextColumn("ETA"),
            TimeRemainingColumn(), console=self.console, transient=False)
        self._progress.start()
        self._task = self._progress.add_task("train", total=info.get("total_steps"),
                                             completed=info.get("step", 0), epoch="-", loss="-",
                                             lr="-", speed="")

    def progress(self, step, total, epoch, loss, lr, samples_per_s):
        if self._progress is None:
            return
        now = time.monotonic()
        if now - self._last < 0.05 and step != total:
            return
        self._last = now
        self._progress.update(self._task, completed=step, total=total, epoch=epoch,
                              loss=_num(loss), lr=_num(lr),
                              speed="%.0f samples/s" % samples_per_s if samples_per_s else "")

    def row(self, row):
        if row.get("kind") != "train" and self._throttle.wants(row):
            self.console.print(format_row(row), highlight=False, markup=False)

    def message(self, text):
        self.console.print(text, highlight=False, markup=False)

    def close(self):
        if self._progress is not None:
            self._progress.stop()
            self._progress = None


def choose_reporter(quiet: bool, stream=None) -> Reporter:
    stream = stream or sys.stderr
    if quiet:
        return Reporter()
    if hasattr(stream, "isatty") and stream.isatty():
        return RichReporter(stream)
    return LineReporter(stream)
