"""``start_run`` and ``resume_run``: a whole run, from a config or a run directory to a summary.

Start: load the config, seed, build, create the run directory (``config.yaml`` first), train.
Resume: read the run directory's ``config.yaml`` (only that: nothing there is executed), pick
the checkpoint (``latest`` or ``--from``; a damaged one is an error naming the file and the
newest intact checkpoint), seed and build exactly as the run did, load parameters, trainer
states, kvstore residuals and the random state, set aside checkpoints newer than the one
resumed from, cut ``metrics.jsonl`` back to it, and train on.

Under a dist kvstore every rank trains; only rank 0 writes the run directory, and the other
ranks hand it their gradient-compression residuals at each checkpoint. Every rank resumes from the
same files.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy

from .. import __version__, _jit
from .. import random as _random
from .._bounded import read_regular_text
from ..config import ConfigError, ConfigIssue, load_config, validate_config_text
from ..config.load import CONFIG_LIMIT
from .._atomic import write_text_atomic
from .._stepwise import run_to_end
from . import checkpoint as _ckpt
from . import extend as _extend
from . import model_record as _model_record
from . import kvstate, layout, threads
from .background import BackgroundJob
from .save_process import SaveProcess, WriterGone, can_share
from .save_process import available as save_available
from .build import build
from .env_record import env_changes, write_env_record
from .data import CSRRows, is_mapped
from .layout import RunDirError
from .logs import LogWriter, MetricsLog, TrainLog, truncate_metrics
from . import user_code as _user_code
from .model import ModelCodeError, model_source, parameter_bytes
from .preload import preload_kernels
from .loop import NonFiniteError, TrainingLoop
from .progress import Reporter
from .rundir import RunLock, create_run_dir
from .scaling import write_scaling
from .signals import AgreedStop, CheckpointClock, StopOnSignal, run_stopped
from .signals import exit_code as _signal_exit_code
from .state import Accumulator, EarlyStopping, LoopState

__all__ = ["RunResult", "RunFailed", "start_run", "resume_run", "EXIT_CODES"]

EXIT_CODES = {"finished": 0, "early_stopped": 0, "interrupted": 130, "failed": 1}


class RunFailed(RuntimeError):
    """Training started and failed (NaN/Inf under nan_policy stop, an error in the model...)."""

    def __init__(self, message, summary=None):
        super().__init__(message)
        self.summary = summary or {}


@dataclass
class RunResult:
    status: str                      # finished | early_stopped | interrupted
    summary: dict = field(default_factory=dict)
    signal: str | None = None        # what interrupted it: SIGINT (exit 130), SIGTERM/SIGHUP (143)

    @property
    def exit_code(self) -> int:
        if self.status == "interrupted":
            return _signal_exit_code(self.signal)
        return EXIT_CODES[self.status]


# --------------------------------------------------------------------------------------------

def start_run(config_path, overrides=(), *, name=None, run_root=None, reporter=None,
              handle_signals=True) -> RunResult:
    """Train from the config at ``config_path`` into a new run directory under ``run_root``
    (default: the config's ``run_dir``)."""
    config = load_config(config_path, overrides)
    if name is not None:
        _check_name(name)
        config.name = name
    if run_root is not None:
        config.run_dir = str(run_root)
    _random.seed(config.seed)
    with _capture_warnings() as caught:
        parts = build(config, config_file=config_path, model_dir=Path(config_path).resolve().parent)
    run_dir = None
    if parts.rank == 0:
        run_dir = create_run_dir(config.run_dir, config.name, config.resolved_yaml())
        write_env_record(run_dir, config.env_values)
        if parts.scaling is not None:
            write_scaling(run_dir, parts.scaling)
        _model_record.write_record(run_dir, _model_record.record_for(config.model.name,
                                                                     parts.model_file))
    return _train(parts, run_dir, LoopState(), reporter, handle_signals, caught,
                  resumed_from=None, notes=list(parts.notes))


def resume_run(run_dir, from_step: int | None = None, *, reporter=None,
               handle_signals=True, overrides=(), force=False,
               trust_model_file=False) -> RunResult:
    """Continue the run in ``run_dir`` from its latest checkpoint (or ``from_step``).

    ``overrides`` may set only ``epochs`` / ``steps``: they extend a finished or stopped run
    (see :mod:`.extend`; ``force`` where the result is not the run configured that long).
    The model file is imported only when it is the one the run recorded (:mod:`.model_record`)
    or ``trust_model_file``."""
    run_dir = Path(run_dir)
    config = read_run_config(run_dir, _extend.check_overrides(overrides))
    model_file, _ = model_source(config.model, forbid=run_dir)  # found, not yet imported
    trusted = _model_record.check_record(run_dir, config.model.name, model_file, trust_model_file)
    _random.seed(config.seed)
    # model.init_from only starts a run: once it has a checkpoint, that is what it continues from
    # (the source may have changed or gone since).
    warm_start = from_step is None and not layout.list_checkpoints(run_dir)
    with _capture_warnings() as caught:
        parts = build(config, config_file=run_dir / layout.CONFIG_FILE, run_dir=run_dir,
                      warm_start=warm_start)
    # The lock first: a run still writing here could otherwise prune the checkpoint chosen.
    lock = RunLock(run_dir).acquire() if parts.rank == 0 else None
    try:
        point = _ckpt.resume_point(run_dir, from_step)
        notes = ([trusted] if trusted else []) + parts.notes
        notes += ["warning: %s" % text for text in env_changes(run_dir, config.env_values)]
        if trusted and lock is not None:  # the user vouched for it: later resumes need not
            _model_record.write_record(run_dir, _model_record.record_for(config.model.name,
                                                                         model_file))
        state = LoopState()
        step = 0
        recorded_threads = None
        if point is not None:
            step, path = point
            with _capture_warnings() as loading:  # e.g. the optimizer's, on its states header
                meta, kv_notes = _ckpt.load_checkpoint(path, parts.net, parts.trainer,
                                                       parts.kvstore, parts.contexts)
            caught += loading
            _check_data(meta, parts, path)
            state = _loop_state(meta, step, path, parts, extending=bool(overrides))
            recorded_threads = threads.recorded(meta)
            notes.append("resuming from %s (%s)" % (path.name, state.position_text()))
            if state.finished and not overrides:
                notes.append("the run had finished there: nothing to train (-o epochs=N or "
                             "-o steps=N extends it)")
            notes += ["note: %s" % text for text in kv_notes]
        else:
            notes.append("no checkpoint yet: starting again from step 0")
        if overrides:
            total = parts.order.total_updates(config.epochs, config.steps, config.grad_accumulation)
            notes += _extend.plan_extension(config, state, total, force)
            state.finished, state.stop_reason = False, None
        if lock is not None:
            with _disk_errors(run_dir, point):
                _ckpt.clean_leftovers(run_dir)
                moved, where = _ckpt.set_aside_after(run_dir, step)
                if moved:
                    notes.append("moved checkpoints after step %d (%s) to %s"
                                 % (step, ", ".join(moved), where.relative_to(run_dir)))
                if point is not None:
                    _ckpt.point_latest(run_dir, step)
                    best = state.best.get("step")
                    if not _ckpt.point_best(run_dir, best) and best is not None:
                        notes.append("note: the best checkpoint as of step %d (%s) is gone; "
                                     "checkpoints/best is removed until a new best is found"
                                     % (step, layout.checkpoint_name(best)))
                if overrides:  # later resumes continue to the new length
                    write_text_atomic(run_dir / layout.CONFIG_FILE, config.resolved_yaml())
                dropped = truncate_metrics(run_dir, step, config.metric_keys())
                if dropped:
                    notes.append("dropped %d metrics rows logged after step %d" % (dropped, step))
        best_dir = layout.checkpoint_dir(run_dir, state.best["step"]) if state.best else None
        return _train(parts, run_dir if lock is not None else None, state, reporter,
                      handle_signals, caught, resumed_from=step, notes=notes, lock=lock,
                      best_dir=best_dir, recorded_threads=recorded_threads)
    finally:
        if lock is not None:
            lock.release()


@contextlib.contextmanager
def _disk_errors(run_dir, point):
    """A write that fails while a resume prepares the run directory (a disk still full, a
    read-only one) as a RunDirError naming the file and saying what is kept: each of those
    writes is atomic, so the checkpoints are as they were."""
    try:
        yield
    except RunDirError:
        raise
    except OSError as exc:
        kept = ("the checkpoint %s is kept and intact" % point[1].name if point is not None
                else "nothing was changed")
        # A rename names its temporary source first: the file meant is its destination.
        where = getattr(exc, "filename2", None) or exc.filename or run_dir
        cure = ("Remove the folder in its place" if exc.errno == errno.EISDIR
                else "Free some space (or make it writable)")
        raise RunDirError("cannot write %s: %s; %s. %s and resume again"
                          % (where, exc.strerror or exc, kept, cure)) from None


def read_run_config(run_dir, overrides=()):
    """The run directory's resolved config (with ``overrides``), validated; never anything
    else from the folder."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError("%s: no such run directory" % run_dir)
    path = run_dir / layout.CONFIG_FILE
    try:
        text = read_regular_text(path, CONFIG_LIMIT)
    except FileNotFoundError:
        raise RunDirError("%s: missing; is %s a run directory?" % (path, run_dir)) from None
    except OSError as exc:
        raise RunDirError("%s: cannot read (%s)" % (path, exc.strerror or exc)) from None
    except UnicodeDecodeError as exc:
        raise RunDirError("%s: cannot read (not UTF-8 text: %s)" % (path, exc.reason)) from None
    # No config_dir: models are looked up in the working folder and the installation, never
    # in (or next to) the run directory.
    return validate_config_text(text, filename=str(path), config_name=run_dir.name,
                                overrides=overrides, env_references=True)


# --------------------------------------------------------------------------------------------

def _check_name(name):
    from ..config.schema.run import _RUN_NAME

    if not _RUN_NAME.match(name):
        raise ConfigError([ConfigIssue("expected letters, digits, '.', '_' or '-' (it names a "
                                       "folder), got %r" % name, key="name", override="--name %s" % name)])


def _loop_state(meta, step, path, parts, extending=False) -> LoopState:
    """The loop state and random state a checkpoint holds, checked (types, ranges, and against
    the config) before anything uses them. (``extending``: epochs/steps overrides change the
    length, which :mod:`.extend` checks itself.)"""
    where = path / layout.META_FILE
    loop = meta.get("loop")
    if not isinstance(loop, dict) or not isinstance(meta.get("rng"), dict):
        raise RunDirError("%s: no loop or random state; not a checkpoint of trainer run" % where)
    try:
        state = LoopState.from_dict(loop)
    except ValueError as exc:
        raise RunDirError("%s: %s" % (where, exc)) from None
    if meta["step"] != step or state.step != step:
        raise RunDirError("%s: says step %s, but the folder is %s" % (where, meta["step"], path.name))
    config = parts.config
    if not extending and config.epochs is not None and state.epoch > config.epochs:
        raise RunDirError("%s: loop.epoch: %d epochs done, but the config trains %d"
                          % (where, state.epoch, config.epochs))
    batches = len(parts.order.batches(state.epoch))
    if state.batch_in_epoch > batches:
        raise RunDirError("%s: loop.batch_in_epoch: %d, but epoch %d has %d batches"
                          % (where, state.batch_in_epoch, state.epoch + 1, batches))
    try:
        Accumulator(parts.metrics).set_state(state.train)
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        raise RunDirError("%s: loop.train: unusable running metrics (%s)" % (where, exc)) from None
    if config.early_stopping:
        try:
            EarlyStopping(config.early_stopping).set_state(state.early_stopping)
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
            raise RunDirError("%s: loop.early_stopping: unusable (%s)" % (where, exc)) from None
    try:
        _random.set_state(meta["rng"])
    except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as exc:
        raise RunDirError("%s: rng: unusable random state (%s)" % (where, exc)) from None
    return state


# Rows of mapped features that the data fingerprint reads.
SAMPLED_ROWS = 4096


def data_fingerprint(parts, sampled: bool | None = None) -> str:
    """SHA-256 of the training set; of its labels and evenly spaced rows of its features when
    they are memory-mapped (``sampled``; None: whenever they are), so that neither a start nor a
    resume reads a data set of several GB whole."""
    train = parts.train
    if callable(getattr(train.x, "fingerprint", None)):    # images: their files' bytes
        digest = hashlib.sha256(train.x.fingerprint())
        digest.update(memoryview(numpy.ascontiguousarray(train.y)).cast("B"))
        return digest.hexdigest()
    if isinstance(train.x, CSRRows):
        digest = hashlib.sha256()
        x = train.features(slice(None))
        for arr in (x.data, x.indices, x.indptr, numpy.asarray(x.shape), train.y):
            digest.update(str((arr.dtype.str, arr.shape)).encode())
            digest.update(memoryview(numpy.ascontiguousarray(arr)).cast("B"))
        return digest.hexdigest()
    if sampled is None:
        sampled = is_mapped(train.x)
    n = len(train)
    if sampled:
        rows = numpy.unique(numpy.linspace(0, n - 1, min(n, SAMPLED_ROWS)).astype(numpy.int64))
        x = numpy.ascontiguousarray(train.features(rows))
        shape = (n,) + x.shape[1:]
    else:
        x = numpy.ascontiguousarray(train.features(slice(None)))
        shape = x.shape
    digest = hashlib.sha256()
    for arr, arr_shape in ((x, shape), (train.y, train.y.shape)):
        digest.update(str((arr.dtype.str, arr_shape)).encode())
        digest.update(memoryview(arr).cast("B"))
    return digest.hexdigest()


def _check_data(meta, parts, path):
    data = meta.get("data") or {}
    saved = data.get("sha256")
    if saved is not None and saved != data_fingerprint(parts, data.get("fingerprint") == "sampled"):
        raise RunDirError("%s: the training data differs from when this checkpoint was saved (a "
                          "data file changed?); resuming would not continue the same run"
                          % (path / layout.META_FILE))


@contextlib.contextmanager
def _capture_warnings():
    """Library warnings become log messages instead of tracebacks-looking stderr lines."""
    caught = []
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = lambda message, category, *a, **k: caught.append(
            "warning: %s" % message)
        yield caught


# Checkpoints up to this size are copied and written on a background thread; larger ones have
# their bytes written from the live arrays in the training thread (a copy would double their
# memory), and are finished on the background thread.
BACKGROUND_SAVE_BYTES = 256 << 20

# A checkpoint up to this size may be handed to the writer process while the one before it is
# still being written (two shared copies of it then); a larger one waits for that save first.
SECOND_SAVE_BYTES = 64 << 20

# A run expected to save at least this many checkpoints in the background writes them from a
# child process (run/save_process.py): starting one costs about 0.2 s of the other core's time,
# and it saves the training thread several milliseconds a save. Dist jobs keep the thread
# (forking an MPI rank is not safe everywhere).
PROCESS_SAVES = 16

# How often a progress display is given a fresh epoch, learning rate and speed (the step and the
# loss are fresh at every step).
PROGRESS_FIELDS_HZ = 16


class _Recorder:
    """Rank 0's view of the run: rows, messages and checkpoints into the run directory."""

    def __init__(self, run_dir, parts, reporter: Reporter, resumed_from=None):
        self.run_dir = Path(run_dir)
        self.parts = parts
        self.reporter = reporter
        # A reporter that ignores progress (plain lines in a log file) is not given it: working
        # out the speed and rate costs a small model's step about 1%.
        self._wants_progress = type(reporter).progress is not Reporter.progress
        self.sinks = []     # first: one that cannot start leaves no log file open
        if parts.config.logging.tensorboard:
            from .tensorboard_sink import TensorBoardSink

            self.sinks.append(TensorBoardSink(run_dir, parts.config.resolved_yaml(), resumed_from))
        self.files = LogWriter()
        self.metrics = MetricsLog(run_dir, parts.config.metric_keys(), self.files)
        self.log = TrainLog(run_dir, self.files)
        self.fingerprint = data_fingerprint(parts)
        self.last_checkpoint = None
        self._saving = BackgroundJob()
        self._writer = None          # a SaveProcess, when start_writer chose one
        self._session_samples0 = None
        self._slow_due = 0.0         # when progress next works out its slow fields
        self._slow_fields = None
        self.threads = None          # the count the steps run on, once chosen

    def start_writer(self, expected_saves: int, lock=None):
        """Write background saves from a child process when the run will make enough of them
        and they are small enough to be copied (larger ones are finished on a thread)."""
        if expected_saves < PROCESS_SAVES or self.parts.num_workers > 1 or not save_available():
            return
        if parameter_bytes(self.parts.net) > BACKGROUND_SAVE_BYTES:
            return
        try:
            self._writer = SaveProcess(lock_fd=lock.fileno() if lock is not None else None)
        except (OSError, WriterGone) as exc:
            self.log.write("note: the checkpoint writer process %s; checkpoints are written on a "
                           "thread of this process" % _writer_trouble(exc))

    def row(self, row):
        with self._log_errors():
            self.metrics.write(row)
            self.log.write_row(row)
        with self._log_errors():  # a sink's failed write: the run's own message, naming it
            for sink in self.sinks:
                sink.row(row)
        self.reporter.row(row)

    def message(self, text):
        with self._log_errors():
            self.log.write(text)
            self.files.flush()     # a warning or an error is in train.log when it is shown
        self.reporter.message(text)

    @contextlib.contextmanager
    def _log_errors(self):
        """A log file that cannot be written (its thread's error, raised here) as a RunDirError
        that says what is kept, as a failed save's does."""
        try:
            yield
        except OSError as exc:
            raise RunDirError("cannot write %s: %s. %s" % (exc.filename or "the run's logs",
                                                           exc.strerror or exc, self._kept_text())
                              ) from None

    def progress(self, loop, loss):
        if not self._wants_progress:
            return
        st = loop.state
        now = time.monotonic()
        if now >= self._slow_due:
            # The epoch, rate and speed at most PROGRESS_FIELDS_HZ times a second (a display
            # redraws 8 times): working them out at every step cost a small model 1%.
            self._slow_due = now + 1.0 / PROGRESS_FIELDS_HZ
            if self._session_samples0 is None:
                self._session_samples0 = (st.samples, loop.elapsed())
            samples0, t0 = self._session_samples0
            dt = loop.elapsed() - t0
            speed = (st.samples - samples0) / dt if dt > 0 else 0.0
            self._slow_fields = (loop._row_epoch(), loop.learning_rate, speed)
        epoch, lr, speed = self._slow_fields
        self.reporter.progress(st.step, loop.total_steps, epoch, loss, lr, speed)

    def checkpoint(self, loop):
        st, parts, config = loop.state, self.parts, self.parts.config
        # First, and on every rank (see _NullRecorder): a dist store gathers them here.
        residuals = kvstate.get_residuals(parts.kvstore)
        with self._log_errors():
            for sink in self.sinks:
                sink.request_flush()
        meta = {
            "epoch": st.epoch, "batch_in_epoch": st.batch_in_epoch, "finished": st.finished,
            "stop_reason": st.stop_reason, "num_update": int(parts.trainer.optimizer.num_update),
            "lr": loop.learning_rate, "rng": _random.get_state(),
            "data": {"seed": config.seed, "shuffle": config.data.shuffle,
                     "last_batch": config.data.last_batch, "batch_size": config.data.batch_size,
                     "num_samples": len(parts.train), "sha256": self.fingerprint,
                     # what evaluate and predict check an input's samples against
                     "features": list(parts.train.x.shape[1:]),
                     "fingerprint": "sampled" if is_mapped(parts.train.x) else "full",
                     "carry": parts.order.carry(st.epoch).tolist()},
            "loop": st.to_dict(), "metrics": dict(st.latest),
            # The best evaluation so far; a checkpoint whose step it names becomes `best`.
            "best": {k: v for k, v in st.best.items() if k != "values"} or None,
            "restored_best": loop.restored_best,
            "threads": self.threads,
            "trainer_cli": __version__,
        }
        # The live arrays first: a save too large to copy is written from them, without a copy
        # that would double the model's memory.
        files = _ckpt.snapshot(parts.net, parts.trainer, residuals, copy=False)
        nbytes = _nbytes(files) if files is not None else 0
        to_writer = (files is not None and not st.finished and self._writer is not None
                     and nbytes <= BACKGROUND_SAVE_BYTES and can_share(files))
        if to_writer:
            # The writer saves in order: one save may still be going on while this one is
            # handed over (see save_process.DEPTH), unless the copies would take much memory.
            self._make_room(1 if nbytes <= SECOND_SAVE_BYTES else 0)
        else:
            self.flush()  # the saves before first: their errors, log lines and pruning in order
        with self._log_errors():
            self.metrics.flush_rows()   # the rows of this step before its checkpoint (logs.py)
        writer = self._writer
        if files is None or st.finished:
            files = files or _ckpt.file_writers(parts.net, parts.trainer, residuals)
            self._finished_save(self._save(st.step, files, meta))
        elif nbytes > BACKGROUND_SAVE_BYTES:
            # The arrays' bytes go to the files now, in numpy.save's time; the CRCs, digests,
            # fsyncs and `latest` follow from the files while training goes on.
            self._saving.start_steps(self._finish_steps(self._begin(st.step, files, meta)))
        elif to_writer and writer is not None:
            try:
                writer.start(self.run_dir, st.step, files, meta, config.checkpoint.keep_last,
                             config.checkpoint.keep_best)
            except WriterGone as gone:
                # Its unanswered saves, this one last, are in the shared copies: written here.
                self._writer_lost(gone)
            except OSError as exc:   # no shared memory to be had: nothing of it was handed over
                self.flush()
                if self._writer is not None:
                    self._drop_writer(exc)
                # ``files`` are the live arrays: saved here, before training goes on.
                self._finished_save(self._save(st.step, files, meta))
        else:
            # Files, fsyncs and pruning take longer than the steps of a small model: they go on
            # while training does, from a copy taken now (a kill -9 meanwhile leaves `latest` on
            # the previous checkpoint, as a kill during a save in this thread would).
            files = {name: {key: array.copy() for key, array in arrays.items()}
                     for name, arrays in files.items()}
            self._saving.start(self._save, st.step, files, meta)

    def _save(self, step, files, meta) -> Path:
        return run_to_end(self._finish_steps(self._begin(step, files, meta)))

    def _begin(self, step, files, meta) -> _ckpt.PendingCheckpoint:
        try:
            return _ckpt.begin_checkpoint(self.run_dir, step, files, meta)
        except OSError as exc:  # a full disk, a quota, a read-only remount
            raise self._save_error(step, exc) from None

    def _finish_steps(self, pending):
        config = self.parts.config
        try:
            path = yield from pending.finish_steps()
        except OSError as exc:
            raise self._save_error(pending.step, exc) from None
        _ckpt.prune(self.run_dir, config.checkpoint.keep_last, config.checkpoint.keep_best)
        return path

    def _save_error(self, step, exc) -> RunDirError:
        return RunDirError("cannot save checkpoint %s in %s: %s. %s"
                           % (layout.checkpoint_name(step), self.run_dir / layout.CHECKPOINTS,
                              exc.strerror or exc, self._kept_text()))

    def _finished_save(self, path):
        self.last_checkpoint = path
        self.log.write("checkpoint %s saved" % path.name)

    def flush(self):
        """Wait for the checkpoints being saved in the background; raise their errors. (A run
        with a writer process still finishes its large checkpoints on the thread.)"""
        while self._writer is not None and self._writer.busy:
            self._take_answer()
        path = self._saving.wait()
        if path is not None:
            self._finished_save(path)

    def _make_room(self, keep: int):
        """Wait until at most ``keep`` saves are in flight in the writer process; the answers
        already there are taken too, so that errors and log lines come without delay."""
        while self._writer is not None and (self._writer.busy > keep or self._writer.answered()):
            self._take_answer()
        path = self._saving.wait()
        if path is not None:
            self._finished_save(path)

    def _take_answer(self):
        """The writer's answer to its oldest save: its log line, or its error."""
        step = self._writer.oldest_step
        try:
            path = self._writer.wait()
        except OSError as exc:
            raise self._save_error(step, exc) from None
        except WriterGone as gone:
            self._writer_lost(gone)
            return
        self._finished_save(path)

    def _writer_lost(self, gone):
        # Its saves are still in the shared copies: written here, in order, and so are those
        # after them.
        self._drop_writer(gone)
        for step, files, meta in gone.pending or ():
            self._finished_save(self._save(step, files, meta))

    def _drop_writer(self, why):
        writer, self._writer = self._writer, None
        writer.close()
        self.message("warning: the checkpoint writer process %s; checkpoints are written by "
                     "this process from now on" % _writer_trouble(why))

    def _kept_text(self) -> str:
        step = _safe_latest(self.run_dir)
        if step is None:
            return "No earlier checkpoint exists; nothing was lost on disk"
        return ("The previous checkpoint %s is kept and intact; free some space, then continue "
                "with: trainer resume %s" % (layout.checkpoint_name(step), self.run_dir))

    def close(self, quiet=False):
        try:
            self.flush()
        except RunDirError:
            if not quiet:
                raise
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None
        files_failed = None
        try:
            with self._log_errors():
                self.files.close()
        except RunDirError as exc:
            files_failed = exc
        self._close_sinks(quiet or files_failed is not None)
        if files_failed is not None and not quiet:
            raise files_failed

    def _close_sinks(self, quiet):
        """Close every sink; the first failure is raised as the run's message unless ``quiet``
        (an error already on its way, which a sink on the same full disk must not hide)."""
        failed = None
        for sink in self.sinks:
            try:
                with self._log_errors():
                    sink.close()
            except RunDirError as exc:
                failed = failed or exc
        self.sinks = []
        if failed is not None and not quiet:
            raise failed


class _NullRecorder:
    """Ranks other than 0 write nothing; at a checkpoint they hand rank 0 their share of it."""

    last_checkpoint = None

    def __init__(self, parts):
        self.parts = parts

    def row(self, row):
        pass

    def message(self, text):
        pass

    def progress(self, loop, loss):
        pass

    def checkpoint(self, loop):
        kvstate.get_residuals(self.parts.kvstore)  # the gather that rank 0's checkpoint starts with

    def flush(self):
        pass

    def close(self, quiet=False):
        pass


def _train(parts, run_dir, state, reporter, handle_signals, caught, resumed_from, notes,
           lock=None, best_dir=None, recorded_threads=None) -> RunResult:
    # Ranks other than 0 stay silent: rank 0 speaks for the job.
    reporter = reporter if reporter is not None and run_dir is not None else Reporter()
    own_lock = None
    if run_dir is not None and lock is None:
        own_lock = lock = RunLock(run_dir).acquire()
    try:
        with _disk_errors(run_dir, None if not resumed_from or run_dir is None  # 0: none
                          else (resumed_from, layout.checkpoint_dir(run_dir, resumed_from))):
            recorder = (_Recorder(run_dir, parts, reporter, resumed_from) if run_dir is not None
                        else _NullRecorder(parts))
    except BaseException:       # logs or a sink that cannot start: the lock is not kept
        if own_lock is not None:
            own_lock.release()
        raise
    restore_threads = _nothing
    compiling = _jit.on_first_compile(lambda: reporter.message(_jit.COMPILING))
    # Everything after the recorder inside the try: a failure before training (a model that
    # cannot be set up, an MPI job that cannot start) still closes the logs and the writer
    # process and releases the lock.
    try:
        signals = StopOnSignal(on_first=lambda name: recorder.message(
            "%s: finishing this step and saving a checkpoint (again to stop at once)" % name))
        stop = signals.requested
        every_s = parts.config.checkpoint.every_seconds
        clock = CheckpointClock(every_s) if every_s is not None else None
        checkpoint_due = None
        if parts.num_workers > 1 and (handle_signals or clock is not None):
            # Every rank gets the signal (mpiexec forwards it), but not at the same step; the
            # ranks' clocks, too, pass a checkpoint's time at different steps.
            from ..kvstore import mpi

            stop = AgreedStop(signals, mpi.job(), clock)
            checkpoint_due = stop.checkpoint_due
        # numba's one-time start-up (import, code generator, BLAS bindings) before the training
        # clock starts, so that elapsed time, steps/s and the ETA measure training alone.
        warm_start = time.monotonic()
        _jit.warm_up()
        compiling.__enter__()
        preload_note = preload_kernels(parts)
        warm_s = time.monotonic() - warm_start
        if run_dir is not None:
            recorder.start_writer(_background_saves(parts, state), lock)
        loop = TrainingLoop(parts, state, recorder, stop_requested=stop, clock=clock,
                            checkpoint_due=checkpoint_due)
        loop.best_dir = best_dir
        samples = parts.config.data.batch_size // max(1, parts.num_workers * len(parts.contexts))
        thread_plan = threads.plan(parts.config.threads, threads.local_ranks(parts.num_workers),
                                   layer_work=threads.layer_work(loop.params, samples),
                                   recorded=recorded_threads)
        restore_threads = threads.apply(thread_plan)
        recorder.threads = thread_plan.count
        headline = _headline(parts, run_dir, resumed_from)
        if run_dir is not None:
            recorder.log.write(headline)
            recorder.log.write("threads: %s" % thread_plan.how)
            recorder.log.write("kernels loaded in %.2f s (before the training clock%s)" % (
                warm_s, "; compiled first, not yet in numba's cache" if compiling.told else ""))
            if preload_note:
                recorder.log.write("note: " + preload_note)
        reporter.start({"headline": headline, "total_steps": loop.total_steps, "step": state.step,
                        "log_every": parts.config.log_every})
        for text in caught + notes:
            recorder.message(text)
        # NumPy's floating-point warnings (overflow in a cast, an invalid value in a matmul)
        # only repeat what the run's own non-finite check says, with its step and nan_policy.
        with (signals if handle_signals else contextlib.nullcontext()), \
                _capture_warnings() as more, numpy.errstate(all="ignore"):
            try:
                status = loop.run()
                if status == "interrupted":
                    run_stopped()   # late copies of the stop are not a second one
                recorder.flush()
                if isinstance(stop, AgreedStop):
                    stop.close()
            except NonFiniteError as exc:
                if isinstance(stop, AgreedStop):
                    stop.close()   # every rank stops here: the reduced gradients are the same
                recorder.message("error: %s" % exc)
                recorder.flush()  # the last good checkpoint, possibly still being written
                raise RunFailed(str(exc), _summary(loop, run_dir, recorder, "failed")) from None
            except KeyboardInterrupt as exc:
                recorder.message("stopped at once by a second %s; the last checkpoint stays"
                                 % getattr(exc, "signame", "signal"))
                raise
            except Exception as exc:
                # An error of the user's model code is told with its block and file:line.
                told = _user_code.explain(exc, parts.model_file)
                text = told or "%s: %s" % (type(exc).__name__, exc)
                with contextlib.suppress(OSError):  # the disk that failed may fail this too
                    recorder.message("error at step %d: %s" % (state.step, text))
                if told is not None:
                    raise ModelCodeError("after step %d: %s" % (state.step, told)) from exc
                raise
            finally:
                for text in more:
                    recorder.message(text)
        summary = _summary(loop, run_dir, recorder, status)
        recorder.message("%s after step %d: %s" % (status, state.step, _metric_text(summary)))
        stopped_by = getattr(stop, "signame", None) or signals.signame
        return RunResult(status, summary, stopped_by if status == "interrupted" else None)
    finally:
        restore_threads()
        compiling.__exit__(None, None, None)
        with contextlib.suppress(OSError):    # a terminal or pipe gone: nobody left to tell
            reporter.close()
        # While an error propagates, a log that cannot be flushed (a full disk) must not hide it.
        recorder.close(quiet=sys.exc_info()[0] is not None)
        if own_lock is not None:
            own_lock.release()


def _nothing():
    pass


def _writer_trouble(exc) -> str:
    if isinstance(exc, OSError):
        return "could not be used (%s)" % (exc.strerror or exc)
    return str(exc)


def _background_saves(parts, state) -> int:
    """How many checkpoints the run will save while it trains, as configured."""
    config = parts.config
    total = parts.order.total_updates(config.epochs, config.steps, config.grad_accumulation)
    saves = 0
    if config.checkpoint.every_steps:
        saves += max(0, total - state.step) // config.checkpoint.every_steps
    if config.checkpoint.every_epoch and config.epochs is not None:
        saves += max(0, config.epochs - state.epoch)
    return saves


def _headline(parts, run_dir, resumed_from) -> str:
    config = parts.config
    where = str(run_dir) if run_dir is not None else "(rank %d: not writing)" % parts.rank
    verb = "resuming" if resumed_from is not None else "training"
    model = Path(parts.model_file).name if ":" in config.model.name \
        and not config.model.name.startswith("zoo:") else config.model.name
    workers = " x %d workers" % parts.num_workers if parts.num_workers > 1 else ""
    val = ", %d validation" % len(parts.val) if parts.val is not None else ""
    return "%s %s: model %s on %s%s, %d training samples%s -> %s" % (
        verb, config.name, model, ", ".join(config.context), workers, len(parts.train), val, where)


def _summary(loop, run_dir, recorder, status) -> dict:
    st = loop.state
    latest = None
    if recorder.last_checkpoint is not None:
        latest = str(recorder.last_checkpoint)
    elif run_dir is not None:
        step = _safe_latest(run_dir)
        latest = str(layout.checkpoint_dir(run_dir, step)) if step is not None else None
    return layout.json_safe({
        "status": status, "run_dir": str(run_dir) if run_dir is not None else None,
        "name": loop.config.name, "steps": st.step, "epochs": st.epoch,
        "batch_in_epoch": st.batch_in_epoch, "stop_reason": st.stop_reason,
        "skipped_steps": st.skipped, "checkpoint": latest,
        "best_checkpoint": (str(layout.checkpoint_dir(run_dir, st.best["step"]))
                            if st.best and run_dir is not None else None),
        "restored_best": loop.restored_best,
        "metrics": {k: st.latest[k] for k in loop.config.metric_keys() if k in st.latest},
        "elapsed_s": round(loop.elapsed(), 3),
        # This session's: the seconds of its steps, and of those the wait for data.
        "step_s": round(loop.step_s, 3), "data_wait_s": round(loop.data_wait_s, 3),
    })


def _nbytes(files: dict) -> int:
    return sum(a.nbytes for arrays in files.values() for a in arrays.values())


def _safe_latest(run_dir):
    try:
        return layout.read_latest(run_dir)
    except RunDirError:
        return None


def _metric_text(summary) -> str:
    items = ["%s %.4g" % (k, v) for k, v in summary["metrics"].items() if isinstance(v, float)]
    return "  ".join(items) or "no metrics"
