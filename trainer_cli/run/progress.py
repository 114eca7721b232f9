"""What a run shows while it trains. The loop reports to a ``Reporter``; the CLI picks one:

- :class:`Reporter`: shows nothing (``--quiet``, ``--json``, library use);
- :class:`LineReporter`: plain lines on stderr (stderr is not a terminal: CI, pipes);
- :class:`RichReporter`: a rich progress bar on stderr with step, epoch, smoothed loss, lr, throughput
  and ETA, with validation results and messages printed above it.
"""
from __future__ import annotations

import math
import sys
import threading
import time

from .._printable import printable

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
    """Rows and messages as lines; no bar (nothing redraws in a log file). Rows are formatted and
    written by a thread of their own within 0.1 s (``logs.LogWriter``: a write to a pipe, or to
    a file on a network file system, can wait); the headline and messages at once."""

    def __init__(self, stream=None):
        from .logs import LogWriter

        self.stream = stream or sys.stderr
        self._throttle = _EpochThrottle()
        self._out = LogWriter()
        self._to = self._out.attach(self.stream, getattr(self.stream, "name", "<stream>"))

    def _line(self, text):
        self._out.add(self._to, printable(text, keep_newlines=True) + "\n")
        self._out.flush()

    def start(self, info):
        self._throttle.start(info)
        self._line(info["headline"])

    def row(self, row):
        if self._throttle.wants(row):
            self._out.add(self._to, row, _row_line)

    def message(self, text):
        self._line(text)

    def close(self):
        self._out.close()


def _row_line(row) -> str:
    return format_row(row) + "\n"


def _duration(seconds) -> str:
    if seconds is None or seconds != seconds or seconds == float("inf"):
        return "-:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return "%d:%02d:%02d" % (hours, *divmod(rest, 60)) if hours else "%d:%02d" % divmod(rest, 60)


def status_fields(step, total, epoch, loss, lr, speed, elapsed, eta) -> list[tuple[str, str]]:
    """The progress line's fields as ``(name, text)``, most useful first: step, loss and ETA
    stay when a narrow terminal drops the rest (see :func:`fit_status`)."""
    return [
        ("step", "step %d/%s" % (step, total if total is not None else "?")),
        ("loss", "loss %s" % _num(loss)),
        ("eta", "ETA %s" % _duration(eta)),
        ("epoch", "epoch %s" % epoch),
        ("lr", "lr %s" % _num(lr)),
        ("speed", "%.0f samples/s" % speed if speed else ""),
        ("elapsed", "%s elapsed" % _duration(elapsed)),
    ]


def fit_status(fields, width: int, bar_min: int = 10) -> tuple[list[str], int]:
    """Which fields fit in ``width`` columns, in display order, and the width left for the bar
    (0: no bar). Fields are dropped from the least useful end; the bar goes before the ETA."""
    order = ["epoch", "step", "loss", "lr", "speed", "elapsed", "eta"]
    texts = {name: text for name, text in fields if text}
    kept = [name for name, _ in fields if name in texts]
    while kept:
        used = sum(len(texts[n]) for n in kept) + 2 * (len(kept) - 1)
        if used + 2 + bar_min <= width:
            return [texts[n] for n in order if n in kept], width - used - 2
        if used <= width and len(kept) <= 3:
            return [texts[n] for n in order if n in kept], 0
        kept.pop()
    return [], 0


# The weight of the past in the live line's loss (about the last 50 steps count).
LOSS_SMOOTHING = 0.98


class _StatusColumn:
    """One rich renderable per refresh: the fields that fit the console's width, and a bar, as
    one line of styled text (a table grid with rich's ProgressBar took 0.4 ms to render, held
    the GIL that long 8 times a second, and cost a small model's run 3-4% of its speed)."""

    def __init__(self, reporter):
        self.reporter = reporter

    def __rich__(self):
        from rich.text import Text

        r = self.reporter
        width = r.console.width
        elapsed = time.monotonic() - r._t0
        done = r._step - r._step0
        eta = None
        if r._total is not None and done > 0:
            eta = elapsed / done * max(0, r._total - r._step)
        texts, bar = fit_status(status_fields(r._step, r._total, r._epoch, r._loss, r._lr,
                                              r._speed, elapsed + r._elapsed0, eta), width - 1)
        line = Text(no_wrap=True)
        for i, text in enumerate(texts):
            if i:
                line.append("  ")
            if bar and text.startswith("ETA"):  # the bar sits just before the ETA
                filled = min(bar, bar * r._step // r._total) if r._total else 0
                line.append("\u2501" * filled, style="green")
                line.append("\u2501" * (bar - filled), style="bar.back")
                line.append("  ")
            # Colour says one thing only: a NaN/Inf loss (rich's default bar colour, a pinkish
            # red, read as an alarm about the loss next to it).
            line.append(text, style="bold red" if text.startswith("loss") and r._bad_loss else None)
        return line


class RichReporter(Reporter):
    """A live status line on a terminal: step, loss and ETA first; epoch, a bar, lr, throughput
    and elapsed time as the width allows. It is transient: when the run ends (finished,
    stopped, failed) the line goes away and the run's own last messages are what stays."""

    def __init__(self, stream=None, force_terminal=None):
        from rich.console import Console

        self.console = Console(file=stream or sys.stderr, force_terminal=force_terminal)
        self._throttle = _EpochThrottle()
        self._live = None
        self._rows = []         # lines waiting for the next redraw (see row)
        self._rows_lock = threading.Lock()
        self._step = self._step0 = 0
        self._total = None
        self._epoch, self._loss, self._lr, self._speed = "-", None, None, None
        self._ema, self._ema_weight, self._bad_loss = 0.0, 0.0, False
        self._t0, self._elapsed0 = time.monotonic(), 0.0

    def start(self, info):
        self._throttle.start(info)
        self.console.print(printable(info["headline"], keep_newlines=True), highlight=False,
                           markup=False)
        self._step = self._step0 = info.get("step", 0)
        self._total = info.get("total_steps")
        self._t0 = time.monotonic()
        self._live = _live_with_rows(self._print_rows, _StatusColumn(self), console=self.console,
                                     transient=True, refresh_per_second=8,
                                     redirect_stdout=False, redirect_stderr=False)
        self._live.start()

    def progress(self, step, total, epoch, loss, lr, samples_per_s):
        self._step, self._total, self._epoch = step, total, epoch
        self._lr, self._speed = lr, samples_per_s
        self._smooth_loss(loss)

    def _smooth_loss(self, loss):
        """The line shows an exponential moving average of the steps' losses (bias-corrected,
        as fastai's and Lightning's bars do): one batch's loss jumps about too much to read. A
        NaN/Inf loss is shown as it is (in red) and left out of the average."""
        if loss is None:
            return
        if not math.isfinite(loss):
            self._loss, self._bad_loss = loss, True
            return
        self._ema = LOSS_SMOOTHING * self._ema + (1.0 - LOSS_SMOOTHING) * loss
        self._ema_weight = LOSS_SMOOTHING * self._ema_weight + (1.0 - LOSS_SMOOTHING)
        self._loss, self._bad_loss = self._ema / self._ema_weight, False

    def row(self, row):
        # Printed with the next redraw, from rich's refresh thread: above a live line each print
        # redraws it (about 0.8 ms), which a row every few steps must not cost the training loop.
        if row.get("kind") != "train" and self._throttle.wants(row):
            text = format_row(row)
            if self._live is None:
                self.console.print(text, highlight=False, markup=False)
            else:
                with self._rows_lock:
                    self._rows.append(text)

    def message(self, text):
        self._print_rows()      # the rows before it first
        self.console.print(printable(text, keep_newlines=True), highlight=False, markup=False)

    def _print_rows(self):
        with self._rows_lock:
            rows, self._rows = self._rows, []
        if rows:
            self.console.print("\n".join(rows), highlight=False, markup=False)

    def close(self):
        if self._live is not None:
            self._print_rows()
            self._live.stop()
            self._live = None


_LiveRows = None


def _live_with_rows(print_rows, renderable, **kwargs):
    """rich's ``Live`` that first prints the rows waiting in ``print_rows()`` at each redraw
    (rich is imported here, on first use)."""
    global _LiveRows
    if _LiveRows is None:
        from rich.live import Live

        class _LiveRows(Live):
            def __init__(self, print_rows, *args, **kwargs):
                self._print_rows = print_rows
                super().__init__(*args, **kwargs)

            def refresh(self):
                with self._lock:
                    if self._started:
                        self._print_rows()
                    super().refresh()

    return _LiveRows(print_rows, renderable, **kwargs)


TERMINAL_ENV = "TRAINER_PROGRESS_TERMINAL"


def choose_reporter(quiet: bool, stream=None) -> Reporter:
    """Nothing when quiet; the live line on a terminal; plain lines otherwise. Under ``trainer
    ... --workers N`` rank 0's stderr is mpiexec's pipe, so the launcher says in
    ``TRAINER_PROGRESS_TERMINAL`` when its own stderr is a terminal, and rank 0 draws for it."""
    import os

    stream = stream or sys.stderr
    if quiet:
        return Reporter()
    if hasattr(stream, "isatty") and stream.isatty():
        return RichReporter(stream)
    if os.environ.get(TERMINAL_ENV) == "1":
        return RichReporter(stream, force_terminal=True)
    return LineReporter(stream)
