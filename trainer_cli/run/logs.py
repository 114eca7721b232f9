"""A run's logs: ``metrics.jsonl`` (one JSON object per row), ``metrics.csv`` (the same rows) and
``train.log`` (human-readable lines).

A row is ``{"kind": "train" | "val" | "epoch", "step": N, "epoch": E, ...metric keys...,
"lr": ..., "time": unix seconds}``; ``epoch`` is 1-based (the epoch the step belongs to). The
rows of a step are all in metrics.jsonl before that step's checkpoint, so on resume the rows past
the checkpoint's step are dropped (:func:`truncate_metrics`, which rebuilds metrics.csv from
them) and the log ends up row for row the one an uninterrupted run writes (``time`` aside).

Rows and lines are kept in memory and written by :class:`LogWriter`'s thread within
``FLUSH_DELAY_S``, and at once on a message and at the end; before a checkpoint, metrics.jsonl's
rows are written at once (the other two files follow on the thread). An append waits
for the file system's journal while a checkpoint's fsyncs commit it (tens of microseconds on a
local disk, far more on a network file system), and that wait belongs on another thread than
the training loop's.
"""
from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import threading
import time
from pathlib import Path

from .._atomic import atomic_write, write_text_atomic
from .._bounded import FileRefused, load_json, open_append, open_regular
from . import layout

__all__ = ["CSV_FIELDS", "FLUSH_DELAY_S", "MAX_ROW_BYTES", "LogWriter", "MetricsLog", "TrainLog",
           "metric_lines", "row_of", "truncate_metrics"]

CSV_FIELDS = ("kind", "step", "epoch", "lr")
_TAIL_FIELDS = ("skipped", "time")

# The longest a row or line waits in memory before its file has it (a live `tail -f` or plot).
FLUSH_DELAY_S = 0.1
_CLOSE_WAIT_S = 10.0


def csv_header(metric_keys) -> list[str]:
    return list(CSV_FIELDS) + list(metric_keys) + list(_TAIL_FIELDS)


class LogWriter:
    """Append-only text files written from memory: what :meth:`add` is given reaches its file
    within ``delay`` seconds, from a thread of its own, or at once on :meth:`flush`. Each file
    gets its texts in the order they were added. A write error is raised in the caller's thread
    by the next ``add``, ``flush`` or ``close``."""

    def __init__(self, delay: float = FLUSH_DELAY_S):
        self.delay = delay
        self._files = []
        self._paths = []
        self._owned = []
        self._pending = []                       # (file index, item, make), in order
        self._lock = threading.Lock()            # _pending, _due, _closed
        self._wake = threading.Condition(self._lock)
        self._io = threading.Lock()              # one writer at a time keeps each file in order
        self._due = None                         # when the oldest pending text must be written
        self._closed = False
        self._error = None
        self._thread = None

    def open(self, path, **text_args) -> int:
        """Open ``path`` for appending (``open_append``'s checks); returns its handle. A link,
        a FIFO or a device in a run directory's place for a log is a RunDirError naming it."""
        try:
            f = open_append(path, **text_args)
        except FileRefused as exc:
            raise layout.RunDirError("%s: cannot append to it: %s" % (path, exc)) from None
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.EISDIR):
                raise
            raise layout.RunDirError("%s: cannot append to it: %s" % (
                path, "a symbolic link" if exc.errno == errno.ELOOP else "a directory")) from None
        return self._keep(f, str(path), owned=True)

    def attach(self, stream, name: str) -> int:
        """Write to ``stream``, open already (stderr), which :meth:`close` leaves open."""
        return self._keep(stream, name, owned=False)

    def _keep(self, f, name, owned) -> int:
        self._files.append(f)
        self._paths.append(name)
        self._owned.append(owned)
        return len(self._files) - 1

    def add(self, handle: int, item, make=None):
        """Append ``item`` (a str) to file ``handle``; with ``make``, the str ``make(item)``,
        made on the writing thread (a row's JSON: its formatting is off the caller's thread
        too, and an error in it is raised as a write error is)."""
        if self._error is not None:
            self._raise()
        with self._lock:
            self._pending.append((handle, item, make))
            if self._due is None:
                self._due = time.monotonic() + self.delay
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="trainer-logs",
                                                    daemon=True)
                    self._thread.start()
                self._wake.notify()

    def flush(self, handles=None):
        """Write what is pending now, in this thread: for every file, or for those of
        ``handles`` only (the others' texts stay pending, in their order)."""
        self._write_out(handles)
        if self._error is not None:
            self._raise()

    def close(self):
        """Write what is pending, end the thread and close the files it opened (each one even
        when writing failed; the first error is raised)."""
        with self._lock:
            self._closed = True
            self._wake.notify()
        if self._thread is not None:
            self._thread.join(_CLOSE_WAIT_S)
        try:
            self.flush()
        finally:
            files, self._files = self._files, []
            for f, owned in zip(files, self._owned):
                try:
                    if owned:
                        f.close()
                except OSError as exc:
                    self._error = self._error or exc
        if self._error is not None:
            self._raise()

    def _raise(self):
        error, self._error = self._error, None
        raise error

    def _run(self):
        while True:
            with self._lock:
                while not self._closed:
                    if self._due is not None:
                        left = self._due - time.monotonic()
                        if left <= 0:
                            break
                        self._wake.wait(left)
                    else:
                        self._wake.wait()
                if self._closed:
                    return
            self._write_out()

    def _write_out(self, handles=None):
        with self._io:
            with self._lock:
                if handles is None:
                    pending, self._pending, self._due = self._pending, [], None
                else:
                    pending = [entry for entry in self._pending if entry[0] in handles]
                    if len(pending) == len(self._pending):
                        self._pending, self._due = [], None
                    else:
                        self._pending = [entry for entry in self._pending
                                         if entry[0] not in handles]
            if not pending:
                return
            texts = {}
            try:
                for handle, item, make in pending:
                    texts.setdefault(handle, []).append(item if make is None else make(item))
            except Exception as exc:     # noqa: BLE001 - a bug in a formatter, raised there
                self._error = self._error or exc
                return
            for handle, parts in texts.items():
                f = self._files[handle]
                try:
                    f.write("".join(parts))
                    f.flush()
                except OSError as exc:   # a full disk, a quota, a file system gone read-only
                    # Raised by the caller's next call, naming the file.
                    self._error = self._error or OSError(exc.errno, exc.strerror or str(exc),
                                                         self._paths[handle])


class MetricsLog:
    """Appends rows to metrics.jsonl and metrics.csv through ``writer`` (they are rebuilt on
    resume)."""

    def __init__(self, run_dir, metric_keys, writer: LogWriter):
        self.run_dir = Path(run_dir)
        self.header = csv_header(metric_keys)
        csv_path = self.run_dir / layout.METRICS_CSV
        if not csv_path.exists():
            write_text_atomic(csv_path, _csv_text([self.header]))
        self._writer = writer
        self._jsonl = writer.open(self.run_dir / layout.METRICS_FILE, encoding="utf-8")
        self._csv = writer.open(csv_path, encoding="utf-8", newline="")
        self._cells = io.StringIO()     # used on the writing thread only
        self._rows = csv.writer(self._cells)

    def write(self, row: dict):
        """Append ``row`` (not to be changed afterwards: it is formatted on the writing thread)."""
        self._writer.add(self._jsonl, row, _json_line)
        self._writer.add(self._csv, row, self._csv_line)

    def flush_rows(self):
        """metrics.jsonl's pending rows written now, in this thread: the file a resume keeps
        rows of (``truncate_metrics`` rebuilds metrics.csv from it), complete before a
        checkpoint; metrics.csv and train.log follow on the writing thread."""
        self._writer.flush((self._jsonl,))

    def _csv_line(self, row) -> str:
        self._cells.seek(0)
        self._cells.truncate()
        self._rows.writerow(_csv_cells(self.header, layout.json_safe(row)))
        return self._cells.getvalue()


def _json_line(row) -> str:
    # JSON has no NaN/Infinity; a diverged loss is logged as null rather than breaking parsers.
    return json.dumps(layout.json_safe(row), separators=(",", ":")) + "\n"


class TrainLog:
    """``train.log``: timestamped lines, appended through ``writer`` (a resume adds to it, never
    rewrites it)."""

    def __init__(self, run_dir, writer: LogWriter):
        self._writer = writer
        self._f = writer.open(Path(run_dir) / layout.LOG_FILE, encoding="utf-8")

    def write(self, text: str):
        self._writer.add(self._f, (_now(), text), _stamped)

    def write_row(self, row: dict):
        """A metrics row as a line (``progress.format_row``), made on the writing thread."""
        self._writer.add(self._f, (_now(), row), _stamped_row)


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())


def _stamped(stamp_text) -> str:
    stamp, text = stamp_text
    return "".join("%s  %s\n" % (stamp, line) for line in str(text).splitlines() or [""])


def _stamped_row(stamp_row) -> str:
    from .progress import format_row

    stamp, row = stamp_row
    return _stamped((stamp, format_row(row)))


# A row a run writes is a few hundred bytes (a few KiB with many metrics). A longer line in
# metrics.jsonl is not one: it is passed over like a torn line, and never held whole in memory.
MAX_ROW_BYTES = 1 << 20


def row_of(line) -> dict | None:
    """The row one line of metrics.jsonl holds (bytes or str), or None: a torn or overlong line,
    JSON nested too deep to parse (a hostile file's ``[[[[...``), a negative step, anything but
    a row."""
    if len(line) > MAX_ROW_BYTES:
        return None
    try:
        row = load_json(line)
    except ValueError:
        return None
    return row if isinstance(row, dict) and type(row.get("step")) is int and row["step"] >= 0 \
        else None


def metric_lines(f):
    """The lines of a metrics.jsonl open as ``f`` (binary), each read at most ``MAX_ROW_BYTES +
    1`` bytes at a time; of a longer line only its first piece is yielded (which ``row_of``
    refuses) and the rest is read past."""
    while True:
        line = f.readline(MAX_ROW_BYTES + 1)
        if not line:
            return
        yield line
        while len(line) > MAX_ROW_BYTES and not line.endswith(b"\n"):
            line = f.readline(MAX_ROW_BYTES + 1)


def _lines_and_rows(path):
    """``(line, row or None)`` for each line of ``path``; none when it is missing."""
    try:
        f = open_regular(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise layout.RunDirError("%s: cannot read (%s)" % (path, exc.strerror or exc)) from None
    with f:
        for line in metric_lines(f):
            yield line, row_of(line)


def truncate_metrics(run_dir, step: int, metric_keys) -> int:
    """Keep the rows up to ``step`` in metrics.jsonl and rebuild metrics.csv from them; returns
    how many rows were dropped. Both files are streamed: a long run's log is never in memory
    whole. metrics.jsonl is rewritten only when a row goes or a line is not as a run writes it
    (torn, foreign)."""
    run_dir = Path(run_dir)
    path = run_dir / layout.METRICS_FILE
    dropped, rewrite = 0, False
    for line, row in _lines_and_rows(path):
        if row is None or row["step"] > step:
            dropped += row is not None
            rewrite = True
        elif not rewrite and line != _row_line(row):
            rewrite = True
    header = csv_header(metric_keys)
    with contextlib.ExitStack() as files:
        table = csv.writer(files.enter_context(
            atomic_write(run_dir / layout.METRICS_CSV, "w", encoding="utf-8", newline="")))
        table.writerow(header)
        jsonl = files.enter_context(atomic_write(path, "wb")) if rewrite else None
        for _, row in _lines_and_rows(path):
            if row is not None and row["step"] <= step:
                table.writerow(_csv_cells(header, row))
                if jsonl is not None:
                    jsonl.write(_row_line(row))
    return dropped


def _row_line(row) -> bytes:
    return (json.dumps(row, separators=(",", ":")) + "\n").encode("utf-8")


def _csv_cells(header, row) -> list:
    return ["" if row.get(k) is None else (repr(row[k]) if isinstance(row[k], float) else row[k])
            for k in header]


def _csv_text(rows) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf)
    for r in rows:
        writer.writerow(r)
    return buf.getvalue()
