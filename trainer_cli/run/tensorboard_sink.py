"""TensorBoard event files beside ``metrics.jsonl`` (``logging: {tensorboard: true}``).

Written with tensorboardX, the standalone writer (the ``tensorboard`` extra), into
``<run dir>/tensorboard/``: a scalar per logged metric under ``train/<name>``, ``val/<name>`` and
``epoch/<name>`` (the epoch means), ``lr``, and the resolved config as text at step 0. A resume
starts its event file with the marks tensorboardX's ``purge_step`` writes for the step it resumes
from, so TensorBoard drops the events the stopped run logged after its checkpoint, as
:func:`.logs.truncate_metrics` drops those rows.

Events go through tensorboardX's event file writer (``EventsWriter``) from a thread of the
sink's own, a row's scalars in one event. Not through its ``SummaryWriter``: that hands every
event through a ``multiprocessing`` queue (pickled, a feeder thread and a writer thread), which
with an ``add_scalar`` per value cost ``configs/mlp_synthetic.yaml`` about a sixth of its speed.
The file is flushed every ``FLUSH_S`` and when the run ends.
"""
from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from pathlib import Path

from .layout import RunDirError

__all__ = ["TensorBoardSink", "TENSORBOARD_DIR", "FLUSH_S"]

TENSORBOARD_DIR = "tensorboard"
FLUSH_S = 10.0
_SKIP = ("kind", "step", "epoch", "time", "skipped")
_END = object()
_FLUSH = object()
_CLOSE_WAIT_S = 60.0


class TensorBoardSink:
    def __init__(self, run_dir, config_yaml: str, resumed_from: int | None = None):
        from tensorboardX.event_file_writer import EventsWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.summary import text

        logdir = Path(run_dir) / TENSORBOARD_DIR
        if logdir.is_symlink() or (logdir.exists() and not logdir.is_dir()):
            # A run directory's parts are its own: events are not written through a link.
            raise RunDirError("%s: not a folder (a symbolic link or a file); move it away to "
                              "write TensorBoard events there" % logdir)
        self.logdir = logdir
        self._events = None
        try:  # a read-only or full tensorboard/ is said before the first step, naming it
            logdir.mkdir(exist_ok=True)
            # Event files are named by the second they were opened in; a resume within the same
            # second as the run before it would overwrite that run's file without a suffix of
            # its own.
            suffix = ".%d.%d" % (os.getpid(), 0 if resumed_from is None else resumed_from)
            self._events = EventsWriter(str(logdir / "events"), suffix)
            now = time.time()
            if resumed_from is None:
                self._events.write_event(Event(wall_time=now, step=0, summary=text(
                    "config", "```yaml\n%s\n```" % config_yaml)))
            else:
                purge = resumed_from + 1     # what SummaryWriter(purge_step=...) writes first
                self._events.write_event(Event(wall_time=now, step=purge,
                                               file_version="brain.Event:2"))
                self._events.write_event(Event(wall_time=now, step=purge,
                                               session_log=SessionLog(status=SessionLog.START)))
            self._events.flush()
        except OSError as exc:
            if self._events is not None:
                with contextlib.suppress(OSError):
                    self._events.close()
            raise RunDirError("%s: cannot write TensorBoard events there (%s)"
                              % (logdir, exc.strerror or exc)) from None
        self._flushed = time.monotonic()
        self._rows = queue.SimpleQueue()
        self._thread = None
        self._error = None

    def row(self, row: dict):
        """Queue ``row`` (not to be changed afterwards) for the sink's thread."""
        self._raise()
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="trainer-tensorboard",
                                            daemon=True)
            self._thread.start()
        self._rows.put(row)

    def request_flush(self):
        """Have the sink's thread flush the event file after the rows queued so far (at each
        checkpoint: a full disk under tensorboard/ is then found within one checkpoint's
        steps, not only at the next timed flush); raises an earlier write's error."""
        self._raise()
        if self._thread is not None:
            self._rows.put(_FLUSH)

    def close(self):
        """Write the queued rows, then flush and close the event file."""
        if self._thread is not None:
            self._rows.put(_END)
            self._thread.join(_CLOSE_WAIT_S)   # a write stuck on a dead disk does not hang us
            self._thread = None
        try:
            self._events.close()
        except OSError as exc:
            self._error = self._error or exc
        self._raise()

    def _raise(self):
        """The sink thread's error, as an OSError naming the folder (the recorder turns it into
        the run's own message, with what is kept)."""
        if self._error is not None:
            error, self._error = self._error, None
            if isinstance(error, OSError):
                raise OSError(error.errno, "TensorBoard events: %s" % (error.strerror or error),
                              str(self.logdir)) from None
            raise error

    def _run(self):
        while True:
            row = self._rows.get()
            if row is _END:
                return
            if self._error is None:
                try:
                    if row is _FLUSH:
                        self._events.flush()
                        self._flushed = time.monotonic()
                        continue
                    self._write(row)
                except Exception as exc:  # noqa: BLE001 - raised by the next row() or close()
                    self._error = exc

    def _write(self, row):
        from tensorboardX.proto.event_pb2 import Event
        from tensorboardX.proto.summary_pb2 import Summary
        from tensorboardX.summary import scalar

        # What add_scalar writes for each value, in one event.
        values = [value for tag, number in _scalars(row) for value in scalar(tag, number).value]
        if values:
            self._events.write_event(Event(wall_time=row.get("time") or time.time(),
                                           step=int(row.get("step") or 0),
                                           summary=Summary(value=values)))
        if time.monotonic() - self._flushed >= FLUSH_S:
            self._events.flush()
            self._flushed = time.monotonic()


def _scalars(row):
    """``(tag, value)`` of each number in ``row``."""
    kind = row.get("kind")
    for key, value in row.items():
        if key in _SKIP or not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        if key == "lr":
            tag = "lr"
        elif kind == "epoch":
            tag = "epoch/" + key.split("_", 1)[1] if key.startswith("train_") else "epoch/" + key
        else:
            prefix, _, name = key.partition("_")
            tag = "%s/%s" % (prefix, name) if prefix in ("train", "val") else key
        yield tag, value
