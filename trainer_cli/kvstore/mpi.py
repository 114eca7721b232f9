"""MPI plumbing for the ``dist_*`` kvstores: the lazy mpi4py import, the job, waits, failing loudly.

Three rules keep a job of several ranks from hanging when one of them goes wrong:

1. An uncaught exception on any rank (main thread or any other) prints the traceback and one
   paragraph naming the rank, then calls ``MPI_Abort`` on ``COMM_WORLD`` (what ``python -m mpi4py``
   does): mpiexec then stops every rank within a second. Without it the failed rank would sit in
   ``MPI_Finalize`` and the others would wait forever in their next collective.
2. A rank that leaves normally (``sys.exit``, end of script) tells every other rank so from an
   ``atexit`` hook. A rank that is waiting for it raises at once instead of waiting for a message
   that cannot come (uneven data shards end this way: one rank runs out of batches first).
3. Every wait is a non-blocking request polled by :func:`wait`: a short spin (a transfer in
   progress needs this rank to drive it), then sleeps that back off to 1 ms (10 ms after a second)
   so that a rank waiting for a slow peer does not burn a core the way MPICH's blocking calls do
   (about 1% of one instead), and a deadline (``TRAINER_DIST_TIMEOUT`` seconds, default 300)
   after which it raises a :class:`DistributedTimeoutError` naming what it waited for and which
   ranks.

A rank killed by a signal is handled by mpiexec (hydra), which kills the others at once; its
banner names only the PID. Under :func:`trainer_cli.dist_launch.launch` each rank also holds a
connection to the launcher (``TRAINER_DIST_MONITOR``), which therefore sees which rank went first
and names it.

mpi4py is imported here, lazily, and nowhere else.
"""
from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import traceback

import numpy

__all__ = [
    "DistributedError", "DistributedTimeoutError", "load_mpi", "job", "wait", "timeout",
    "install_abort_hook", "abort", "end_job_after_failure", "job_broken", "launched_by_mpiexec",
    "ENV_TIMEOUT", "ENV_MONITOR", "RANK_VARIABLES",
]

ENV_TIMEOUT = "TRAINER_DIST_TIMEOUT"
ENV_MONITOR = "TRAINER_DIST_MONITOR"
DEFAULT_TIMEOUT = 300.0

_INSTALL_HINT = "Install the dist extra: pip install -e .[dist]   (mpi4py and the mpich runtime)"

# Spinning this long covers a chunk's transfer; past it the peer is late and sleeping costs nothing.
_SPIN_S = 0.002
_MIN_NAP_S = 50e-6
_MAX_NAP_S = 1e-3
_LONG_WAIT_S = 1.0
_LONG_NAP_S = 1e-2
# How often a wait looks at the clock's deadline and at departed peers while spinning.
_CHECK_EVERY_S = 0.02

_TAG_EXIT = 1
_ABORT_GRACE_S = 0.5
_DEPARTED_GRACE_S = 0.5


class DistributedError(RuntimeError):
    """Something went wrong between the ranks of a distributed job."""


class DistributedTimeoutError(DistributedError):
    """A wait for other ranks ran past ``TRAINER_DIST_TIMEOUT`` seconds."""


_MPI = None


def load_mpi():
    """The ``mpi4py.MPI`` module (initializing MPI), or a clear error naming the dist extra."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as exc:
            raise DistributedError(
                "dist kvstores need mpi4py, which is not installed. " + _INSTALL_HINT) from exc
        except RuntimeError as exc:
            # mpi4py's ABI wheels load libmpi at import time; without a runtime this fails here.
            raise DistributedError(
                "mpi4py could not load an MPI library (%s). %s" % (exc, _INSTALL_HINT)) from exc
        _MPI = MPI
    return _MPI


# What mpiexec (MPICH/hydra, Open MPI, Intel MPI, Slurm) sets in each rank's environment.
RANK_VARIABLES = ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def launched_by_mpiexec() -> bool:
    """Whether this process is a rank started by mpiexec (any of :data:`RANK_VARIABLES` set).

    Reads the environment only, so that the CLI can decide whether to install the abort hook and
    whether ``--workers`` must start mpiexec, without importing mpi4py.
    """
    return any(k in os.environ for k in RANK_VARIABLES)


_TIMEOUT_CACHE = [None, DEFAULT_TIMEOUT]


def timeout() -> float:
    """Seconds a wait may last (``TRAINER_DIST_TIMEOUT``, default 300)."""
    raw = os.environ.get(ENV_TIMEOUT)
    if raw == _TIMEOUT_CACHE[0]:
        return _TIMEOUT_CACHE[1]
    value = _parse_timeout(raw)
    _TIMEOUT_CACHE[:] = [raw, value]
    return value


def _parse_timeout(raw) -> float:
    if raw is None or raw.strip() == "":
        return DEFAULT_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        raise DistributedError("%s=%r is not a number of seconds" % (ENV_TIMEOUT, raw)) from None
    if not value > 0:
        raise DistributedError("%s=%r must be > 0 seconds" % (ENV_TIMEOUT, raw))
    return value


# --------------------------------------------------------------------------------------------
# The job: one per process, created by the first dist store (or the CLI, before it reads data).


class Job:
    """This process's place in the MPI job, and the hooks that keep a failure from hanging it."""

    def __init__(self, MPI):
        self.MPI = MPI
        world = MPI.COMM_WORLD
        self.rank = world.Get_rank()
        self.size = world.Get_size()
        self.host = MPI.Get_processor_name()
        self.pid = os.getpid()
        self.departed: set = set()
        self._lock = threading.Lock()
        self._closers: list = []
        self._comms: list = []
        self._closed = False
        # Set when a wait timed out or found a peer gone: the job cannot finish normally then
        # (MPI_Finalize would wait for the stuck peer), so leaving the process aborts the job.
        self.broken = None
        self.ctl = None
        if self.size > 1:
            install_abort_hook()
        self.ctl = self.dup(world, "setting up the job")
        atexit.register(self._at_exit)

    def describe(self) -> str:
        return "rank %d of %d (pid %d on %s)" % (self.rank, self.size, self.pid, self.host)

    def dup(self, comm, what):
        """A private copy of ``comm`` (collective over its ranks, waited on with the timeout)."""
        new, req = comm.Idup()
        wait(req, "creating a communicator while " + what, job=self)
        self._comms.append(new)
        return new

    def on_exit(self, fn):
        """Run ``fn()`` when the process exits normally (after the departure notices went out)."""
        self._closers.append(fn)

    def poll_departures(self):
        """Take in every departure notice that has arrived (thread-safe: matched probes)."""
        if self.ctl is None:
            return
        MPI = self.MPI
        with self._lock:
            while True:
                status = MPI.Status()
                msg = self.ctl.Improbe(MPI.ANY_SOURCE, _TAG_EXIT, status)
                if msg is None:
                    return
                msg.Recv(numpy.empty(1, dtype=numpy.uint8))
                self.departed.add(status.Get_source())

    def peers_gone(self, peers):
        """The ranks among ``peers`` (None: every other rank) that have left the job."""
        self.poll_departures()
        if not self.departed:
            return []
        wanted = [r for r in range(self.size) if r != self.rank] if peers is None else peers
        return sorted(set(wanted) & self.departed)

    def check_peers(self, peers, what):
        """Raise if one of ``peers`` (None: every other rank) has left the job."""
        gone = self.peers_gone(peers)
        if gone:
            self.broken = "%s left the job while %s waited" % (_ranks(gone), _ranks([self.rank]))
            raise DistributedError(
                "%s was waiting in %s, but %s exited before taking part: the ranks ran different "
                "code (e.g. a different number of batches or steps per rank) or %s stopped early."
                % (self.describe(), what, _ranks(gone), "it" if len(gone) == 1 else "they"))

    def _at_exit(self):
        MPI = self.MPI
        if self._closed or MPI.Is_finalized():
            return
        self._closed = True
        if self.broken is not None and self.size > 1:
            abort("leaving after an error (%s)" % self.broken)
        if self.size > 1:
            # Notices first: a peer blocked in a collective with us must fail now, not after our
            # closers (the parameter server waits for every worker to finish) have run.
            one = numpy.zeros(1, dtype=numpy.uint8)
            reqs = [self.ctl.Isend(one, dest=r, tag=_TAG_EXIT)
                    for r in range(self.size) if r != self.rank]
            # One-byte sends complete at once; a peer that is gone must not stop us leaving.
            deadline = time.monotonic() + 5.0
            while not MPI.Request.Testall(reqs) and time.monotonic() < deadline:
                time.sleep(_MIN_NAP_S)
        for fn in reversed(self._closers):
            fn()
        self.poll_departures()
        for comm in reversed(self._comms):
            # MPICH warns at finalize about communicators still allocated.
            try:
                comm.Free()
            except Exception:
                pass
        self._comms.clear()
        self.ctl = None


_MONITOR = None


def _env_rank():
    for name in ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK"):
        value = os.environ.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return -1


def _connect_monitor():
    """Report to the launcher's monitor socket, if there is one (see dist_launch).

    Done before MPI_Init: a rank that dies while the others wait inside MPI_Init (which spins and
    cannot time out) is then still seen by the launcher, which stops the job.
    """
    global _MONITOR
    path = os.environ.get(ENV_MONITOR)
    if not path or _MONITOR is not None:
        return
    import socket
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(2.0)
        sock.connect(path)
        sock.sendall(b"rank %d %d\n" % (_env_rank(), os.getpid()))
    except OSError:
        return  # another host, or the launcher is gone: never worth failing the job for
    _MONITOR = sock
    # A normal exit says so; a rank whose line drops without "bye" or "abort" died.
    atexit.register(_tell_monitor, "bye")


def _tell_monitor(word):
    if _MONITOR is None:
        return
    try:
        _MONITOR.sendall(word.encode() + b"\n")
    except OSError:
        pass


_JOB = None
_JOB_LOCK = threading.Lock()


def job() -> Job:
    """The process's :class:`Job`, created (with its hooks) on first use."""
    global _JOB
    with _JOB_LOCK:
        if _JOB is None:
            _connect_monitor()
            _JOB = Job(load_mpi())
            _tell_monitor("joined")
        return _JOB


def _ranks(ranks) -> str:
    ranks = list(ranks)
    if len(ranks) == 1:
        return "rank %d" % ranks[0]
    return "ranks " + ", ".join(str(r) for r in ranks)


# --------------------------------------------------------------------------------------------
# Waiting


def wait(requests, what, peers=None, job=None):
    """Complete ``requests`` (one or a list), polling; raise on a departed peer or the deadline.

    ``what`` says what is being waited for ("allreduce of key 3"), ``peers`` which ranks take part
    (None: all the others; ``()``: do not watch for departures, e.g. for the parameter server,
    which outlives every worker); both go into the error messages. Each request that completes
    restarts the spin: a transfer split into pieces keeps this rank driving it at full speed,
    and only a wait with nothing moving falls back to sleeping.
    """
    MPI = _MPI if _MPI is not None else load_mpi()
    reqs = list(requests) if isinstance(requests, (list, tuple)) else [requests]
    if MPI.Request.Testall(reqs):
        return
    j = job if job is not None else _JOB
    limit = timeout()
    start = time.monotonic()
    deadline = start + limit
    spin_until = start + _SPIN_S
    next_check = start + _CHECK_EVERY_S
    nap = _MIN_NAP_S
    gone_at = None
    testsome = MPI.Request.Testsome
    while True:
        done = testsome(reqs)
        if done is None:  # MPI_UNDEFINED: every request has completed
            return
        now = time.monotonic()
        if done:
            spin_until = now + _SPIN_S
            nap = _MIN_NAP_S
            continue
        if now >= next_check:
            next_check = now + _CHECK_EVERY_S
            if j is not None and peers != ():
                if gone_at is None and j.peers_gone(peers):
                    # What a peer sent before leaving may still be on its way (over another
                    # channel than the notice): only a wait that stays stuck is an error.
                    gone_at = now
                if gone_at is not None and now - gone_at > _DEPARTED_GRACE_S:
                    j.check_peers(peers, what)
            if now >= deadline:
                raise _timeout_error(MPI, j, limit, what, peers)
        if now >= spin_until:
            time.sleep(nap)
            # A peer that is a second late is busy (checkpointing, evaluating): 10 ms naps cost
            # nothing then and keep this rank's CPU use under 1%.
            nap = min(nap * 2, _MAX_NAP_S if now - start < _LONG_WAIT_S else _LONG_NAP_S)


def _timeout_error(MPI, j, limit, what, peers):
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    who = j.describe() if j is not None else "rank %d of %d" % (rank, size)
    others = [r for r in range(size) if r != rank] if not peers else list(peers)
    if j is not None:
        j.broken = "a wait timed out after %g s" % limit
    return DistributedTimeoutError(
        "%s timed out after %g s waiting for %s in %s. A rank is stuck or runs different code "
        "(e.g. a different number of batches per rank); raise %s for longer pauses."
        % (who, limit, _ranks(others) if others else "itself", what, ENV_TIMEOUT))


# --------------------------------------------------------------------------------------------
# Failing: the whole job, quickly, with the rank named


_HOOK_INSTALLED = False


def install_abort_hook():
    """Make an uncaught exception in any thread of this rank abort the whole MPI job.

    Idempotent. The CLI calls it at start-up under mpiexec (so that a failure before the first
    kvstore exists cannot hang the others); the dist kvstores call it when they are created.
    """
    global _HOOK_INSTALLED
    if _HOOK_INSTALLED:
        return
    _HOOK_INSTALLED = True
    previous = sys.excepthook

    def excepthook(etype, value, tb):
        try:
            traceback.print_exception(etype, value, tb)
        except Exception:
            previous(etype, value, tb)
        abort("%s: %s" % (etype.__name__, value) if str(value) else etype.__name__)

    def thread_hook(args):
        if args.exc_type is SystemExit:
            return
        try:
            traceback.print_exception(args.exc_type, args.exc_value, args.exc_traceback)
        except Exception:
            pass
        where = " in thread %r" % args.thread.name if args.thread is not None else ""
        abort("%s%s: %s" % (args.exc_type.__name__, where, args.exc_value))

    sys.excepthook = excepthook
    threading.excepthook = thread_hook


def end_job_after_failure(code):
    """In a rank of a job of several ranks that must not finish normally (a wait timed out or a
    peer is gone, so MPI_Finalize could wait forever; or a forced stop, with peers anywhere):
    abort the whole job with ``code``. Elsewhere (one process, a healthy job whose peers will see
    this rank leave) do nothing and let the caller exit as usual."""
    j = _JOB
    if j is None or j.size < 2 or j._closed:
        return
    abort("ending the job after the error above", code)


def job_broken() -> bool:
    """Whether a wait in this process timed out or found a peer gone."""
    return _JOB is not None and _JOB.broken is not None


def abort(message, code=1):
    """Print one paragraph naming this rank and why, then ``MPI_Abort`` the whole job."""
    MPI = load_mpi()
    if MPI.Is_initialized() and not MPI.Is_finalized():
        world = MPI.COMM_WORLD
        rank, size = world.Get_rank(), world.Get_size()
    else:
        world, rank, size = None, 0, 1
    text = ("trainer-cli: rank %d of %d (pid %d) failed: %s -- aborting all %d rank(s) of the MPI "
            "job so that none of them waits forever.\n" % (rank, size, os.getpid(), message, size))
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
        sys.stdout.flush()
    except Exception:
        pass
    _tell_monitor("abort")
    if world is not None:
        # mpiexec forwards our stderr through a pipe and drops what is still in it when the job is
        # torn down; give it a moment to pass the message on.
        time.sleep(_ABORT_GRACE_S)
        _die_if_abort_hangs()
        world.Abort(code)
    os._exit(code)


_ABORT_HANG_S = 10


def _die_if_abort_hangs():
    """MPI_Abort asks the process manager to end the job; where it cannot be reached (its host
    is gone), the kernel ends this process a few seconds later (SIGALRM's default action, which
    needs neither the GIL nor MPI)."""
    import signal

    try:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(_ABORT_HANG_S)
    except (AttributeError, ValueError, OSError):
        pass
