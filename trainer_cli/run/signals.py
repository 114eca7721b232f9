"""Stop signals during a run: SIGINT (Ctrl-C), SIGTERM (what a scheduler sends) and SIGHUP (a
closed terminal; treated as SIGTERM).

The first one finishes the current step and saves a checkpoint; the run then exits 130 (SIGINT)
or 143 (SIGTERM, SIGHUP). A second one stops at once with the same code (the previous checkpoint
stays). Copies of one stop that arrive together count once: a scheduler signals every process of
a job and mpiexec forwards the signal to the ranks as well, so a rank can get the same SIGTERM two
or three times within milliseconds; only a signal :data:`REPEAT_WINDOW_S` or more after the first
is a second one.

Under MPI the ranks must stop after the same step (rank 0 saves the checkpoint, the others take
part in its collectives): :class:`AgreedStop` combines every rank's request with a small
non-blocking allreduce at each step.

Handlers only record the signal (or raise, for a second one); everything else (the log line,
the MPI exchange) happens in the loop's own flow.
"""
from __future__ import annotations

import os
import signal
import threading
import time

__all__ = ["StopOnSignal", "AgreedStop", "CheckpointClock", "Interrupted", "exit_code", "exit_on_signal",
           "run_stopped", "STOP_SIGNALS", "REPEAT_WINDOW_S", "ENV_RELAY"]

STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))
_EXIT_CODES = {"SIGINT": 130, "SIGTERM": 143, "SIGHUP": 143}
# Forwarding (scheduler -> launcher -> mpiexec -> proxy -> rank) takes milliseconds, a few
# hundred under load; a person pressing Ctrl-C again after seeing the first take effect, longer.
REPEAT_WINDOW_S = 1.0


# Set by ``trainer run --workers`` for its ranks: it passes a Ctrl-C on to mpiexec as SIGUSR1,
# because mpiexec answers a SIGINT with a banner on stdout (which must stay JSON under --json).
ENV_RELAY = "TRAINER_DIST_SIGINT_AS_SIGUSR1"


def _signals() -> dict:
    """signal number -> the stop it means, in this process."""
    names = {sig: signal.Signals(sig).name for sig in STOP_SIGNALS}
    if os.environ.get(ENV_RELAY) == "1" and hasattr(signal, "SIGUSR1"):
        names[signal.SIGUSR1] = "SIGINT"
    return names


def exit_code(signame) -> int:
    """The exit code of a run stopped by ``signame`` ("SIGINT" -> 130, "SIGTERM"/"SIGHUP" -> 143)."""
    return _EXIT_CODES.get(signame, 130)


class Interrupted(KeyboardInterrupt):
    """A stop signal that ends the run at once (a second one, or one before training started)."""

    def __init__(self, signame):
        super().__init__(signame)
        self.signame = signame
        self.exit_code = exit_code(signame)


def _install(handler) -> dict:
    """Install ``handler(signame)`` for every stop signal; returns the handlers it replaced."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    names = _signals()
    return {sig: signal.signal(sig, lambda signum, frame: handler(names[signum]))
            for sig in names}


def _restore(old: dict):
    for sig, handler in old.items():
        signal.signal(sig, handler)


# When this process's run last ended on a stop signal: see exit_on_signal.
_stopped_at = None


def run_stopped():
    """The run ended on a stop signal, this process's own or, under MPI, another rank's (see
    :class:`exit_on_signal`)."""
    global _stopped_at
    _stopped_at = time.monotonic()


class exit_on_signal:
    """Around a whole run (its setup, training under :class:`StopOnSignal`, and what follows):
    outside training any stop signal raises :class:`Interrupted` at once (nothing to save yet),
    so that SIGTERM and SIGHUP also end with their exit code and a message.

    After a run that ended on a stop signal (:func:`run_stopped`) the process's own copy of that
    stop may still be on its way. Under MPI the ranks stop together as soon as one of them has
    a signal, and on a loaded machine another rank's copy, forwarded by mpiexec's proxy, can
    come after that rank's run has ended, while it closes its logs or writes the summary: a
    raise there would abort the job without its summary, the default action kill the rank (the
    launcher then reports it as died). For :data:`REPEAT_WINDOW_S` from the stop a signal counts
    as such a copy and is ignored; a later one raises as before. In an MPI rank the handlers
    then stay until the process exits (MPI_Finalize and the launcher's "bye" come after the
    block); elsewhere the block gives the previous handlers back."""

    def __init__(self):
        self._old = {}

    def _handle(self, signame):
        if _stopped_at is not None and time.monotonic() - _stopped_at < REPEAT_WINDOW_S:
            return
        raise Interrupted(signame)

    def __enter__(self):
        global _stopped_at
        _stopped_at = None
        self._old = _install(self._handle)
        return self

    def __exit__(self, *exc):
        if _stopped_at is None or not _in_mpi_rank():
            _restore(self._old)
        self._old = {}
        return False


def _in_mpi_rank() -> bool:
    from ..kvstore.mpi import launched_by_mpiexec   # the environment alone, no mpi4py
    return launched_by_mpiexec()


class StopOnSignal:
    """Context manager; ``requested()`` turns true after the first stop signal. Outside the main
    thread (where handlers cannot be installed) it never does, and signals act as usual."""

    def __init__(self, on_first=None):
        self.signame = None             # the first signal's name, once one came
        self._first_at = None
        self._on_first = on_first
        self._old = {}

    @property
    def exit_code(self) -> int:
        return exit_code(self.signame)

    def requested(self) -> bool:
        """Whether a signal came; the first call that sees it runs ``on_first(name)``. That
        happens here, in the loop's own flow, not in the handler: a handler that writes to a
        log the interrupted code was writing to meets a reentrant call on its buffer."""
        if self.signame is None:
            return False
        self.announce(self.signame)
        return True

    def announce(self, signame):
        """Run ``on_first(signame)`` unless it ran already (also for a stop another rank asked)."""
        if self._on_first is not None:
            on_first, self._on_first = self._on_first, None
            on_first(signame)

    def _handle(self, signame):
        now = time.monotonic()
        if self.signame is None:
            self.signame, self._first_at = signame, now
        elif now - self._first_at >= REPEAT_WINDOW_S:
            raise Interrupted(self.signame)

    def __enter__(self):
        self._old = _install(self._handle)
        return self

    def __exit__(self, *exc):
        _restore(self._old)
        self._old = {}
        return False


class CheckpointClock:
    """``checkpoint.every_seconds``: whether that long has passed since the last checkpoint (or
    the start of training), by this process's monotonic clock."""

    def __init__(self, every_seconds: float):
        self.every_seconds = float(every_seconds)
        self._since = time.monotonic()

    def reset(self):
        """A checkpoint was saved (or training starts): the interval starts again now."""
        self._since = time.monotonic()

    def due(self) -> bool:
        return time.monotonic() - self._since >= self.every_seconds


class AgreedStop:
    """Every rank's stop requests, combined: called once after each step on every rank (the same
    steps everywhere), it turns true on all ranks after the same step.

    With a :class:`CheckpointClock` the same exchange carries whether this rank's clock says a
    checkpoint is due; :meth:`checkpoint_due` then answers the same on every rank, after the same
    step, so that rank 0's save and the other ranks' part in it (the residual gather) meet.

    The call after step ``t`` completes the MAX-allreduce started after step ``t - 1`` (long done
    by then: the step's own gradient exchange came after it, so this costs no wait) and starts
    the next one with this rank's request. A signal that reaches any rank before its check of
    step ``t`` therefore stops every rank after step ``t + 1``. The allreduce runs on a private
    communicator and waits with the job's timeout like every other exchange.
    """

    _CODES = {None: 0, "SIGINT": 1, "SIGTERM": 2, "SIGHUP": 3}
    _NAMES = {v: k for k, v in _CODES.items()}

    def __init__(self, local: StopOnSignal, job, clock: CheckpointClock | None = None):
        import numpy

        from ..kvstore import mpi

        self._local = local
        self._job = job
        self._clock = clock
        self._wait = mpi.wait
        self._max = job.MPI.MAX
        self._comm = job.dup(job.MPI.COMM_WORLD, "setting up the stop-request exchange")
        # [stop code, checkpoint due]: one allreduce for both.
        self._send = numpy.zeros(2, dtype=numpy.int32)
        self._recv = numpy.zeros(2, dtype=numpy.int32)
        self._pending = None
        self._due = False
        self.signame = None

    @property
    def exit_code(self) -> int:
        return exit_code(self.signame)

    def __call__(self) -> bool:
        if self._pending is not None:
            self._finish_pending()
            self._due = bool(self._recv[1])
            if self._recv[0]:
                self.signame = self._NAMES[int(self._recv[0])]
                self._local.announce(self.signame)
                return True
        self._send[0] = self._CODES[self._local.signame] if self._local.requested() else 0
        self._send[1] = 1 if self._clock is not None and self._clock.due() else 0
        self._pending = self._comm.Iallreduce(self._send, self._recv, op=self._max)
        return False

    def checkpoint_due(self) -> bool:
        """Whether some rank's clock said a checkpoint is due, as the exchange completed by the
        last call agreed (the same answer on every rank)."""
        due, self._due = self._due, False
        return due

    def _finish_pending(self):
        req, self._pending = self._pending, None
        self._wait(req, "the exchange of stop requests (Ctrl-C / SIGTERM) between steps",
                   job=self._job)

    def close(self):
        """Complete the last exchange (every rank started it, so it completes)."""
        if self._pending is not None:
            self._finish_pending()
