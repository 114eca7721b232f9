"""``trainer run ... --workers N``: run a command as N MPI ranks under this environment's mpiexec.

The ``dist`` extra (``pip install -e .[dist]``) brings mpi4py and the ``mpich`` wheel, which puts
``mpiexec`` (hydra) beside ``sys.executable``; that one is used, never one from ``PATH``, so that
the ranks run the same Python and the same MPI library as mpi4py was loaded against.

When a rank is killed (OOM killer, ``kill -9``), mpiexec stops the others at once, but its banner
names only the PID. So :func:`launch` listens on a Unix socket named by ``TRAINER_DIST_MONITOR``;
each rank connects when it starts joining the job (:func:`trainer_cli.kvstore.mpi.job`, just
before MPI_Init), says "joined" after MPI_Init, "bye" when it exits normally and "abort" before it
aborts the job. A rank whose connection drops without "bye" or "abort" died; one that leaves
before "joined" left the others spinning inside MPI_Init, which mpiexec does not notice. Either
way the launcher names the rank and, if mpiexec has not stopped the job within 3 s, stops it.

Signals: mpiexec runs in a session of its own, so a terminal's Ctrl-C reaches only the launcher,
and the launcher passes each stop signal on exactly once, to mpiexec, which forwards it to every
rank: SIGTERM as itself, SIGHUP (which mpiexec would die of) as SIGTERM, and SIGINT as SIGUSR1,
which the ranks take for SIGINT (``TRAINER_DIST_SIGINT_AS_SIGUSR1``: mpiexec answers a SIGINT
with a banner on stdout, which must stay clean for ``--json``, and kills the ranks on a second
one). The ranks agree on a step, rank 0 saves a checkpoint and the job exits 130 (SIGINT) or 143
(SIGTERM, SIGHUP). A second signal, a second or more after the first, goes on too and makes the
ranks abort the job at once with the same code; if the job has not ended 3 s later the launcher
kills mpiexec and the ranks it knows, and exits with the same code. If the launcher itself dies
(kill -9), mpiexec gets SIGTERM from the kernel (``PR_SET_PDEATHSIG``) and the ranks stop as for
a scheduler's SIGTERM.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from .run.signals import ENV_RELAY, REPEAT_WINDOW_S, STOP_SIGNALS, exit_code

__all__ = ["launch", "find_mpiexec", "DistLaunchError"]

_HINT = "Install the dist extra: pip install -e .[dist]   (mpi4py and the mpich runtime)"
_POLL_S = 0.2
_GRACE_S = 3.0


class DistLaunchError(RuntimeError):
    """mpiexec or mpi4py is missing, or the request makes no sense."""


def find_mpiexec() -> str:
    """The mpiexec beside ``sys.executable`` (where the mpich wheel installs it)."""
    folder = os.path.dirname(os.path.abspath(sys.executable))
    for name in ("mpiexec", "mpiexec.hydra", "mpirun"):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise DistLaunchError("--workers needs mpiexec next to %s, and there is none. %s"
                          % (sys.executable, _HINT))


def _check_mpi4py():
    if importlib.util.find_spec("mpi4py") is None:
        raise DistLaunchError("--workers needs mpi4py in %s, which is not installed. %s"
                              % (sys.executable, _HINT))


def launch(argv: list[str], workers: int) -> int:
    """Run ``argv`` as ``workers`` ranks (``mpiexec -n workers argv...``) and return its exit code.

    ``argv[0]`` is run as is by mpiexec (give a path, or ``sys.executable`` and ``-m ...``).
    Stop signals go to mpiexec, which forwards them to the ranks (see the module's docstring).
    When the job fails, one line on stderr names the rank that died or aborted first.
    """
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise DistLaunchError("--workers must be a positive integer, got %r" % (workers,))
    if not argv:
        raise DistLaunchError("no command to run under mpiexec")
    mpiexec = find_mpiexec()
    _check_mpi4py()
    folder = tempfile.mkdtemp(prefix="trainer-dist-")
    path = os.path.join(folder, "monitor.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(max(16, workers))
    monitor = _Monitor(listener)
    env = dict(os.environ)
    env["TRAINER_DIST_MONITOR"] = path
    env[ENV_RELAY] = "1"
    cmd = [mpiexec, "-n", str(workers)] + [str(a) for a in argv]
    relay = _SignalRelay()
    try:
        with relay:
            # Its own session: the terminal's Ctrl-C reaches the launcher only (which passes it
            # on once); no stdin, which a process outside the terminal's foreground cannot read.
            proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL,
                                    start_new_session=True,
                                    preexec_fn=_death_signal_setter())
            relay.proc = proc
            relay.pass_on_pending()
            stopped = False
            while proc.poll() is None:
                monitor.poll(_POLL_S)
                now = time.monotonic()
                if not stopped and monitor.bad and now - monitor.first_bad_at > _GRACE_S:
                    # mpiexec stops the job itself when a rank is killed or aborts, but not when
                    # a rank exits before MPI_Init while the others wait inside it.
                    stopped = True
                    _stop(proc, monitor)
                if relay.forced_at is not None and now - relay.forced_at > _GRACE_S:
                    _stop(proc, monitor, at_once=True)
                    break
            code = proc.wait()
        monitor.drain()
        if relay.forced_at is not None:
            return exit_code(relay.signame)
        # 130/143: stopped by a signal that the ranks got and have reported themselves.
        if code != 0 and (code not in (130, 143) or monitor.bad):
            sys.stderr.write(monitor.report(code, workers) + "\n")
            sys.stderr.flush()
        return code
    finally:
        monitor.close()
        shutil.rmtree(folder, ignore_errors=True)


def _death_signal_setter():
    """A function for mpiexec's child side of the fork: ask the kernel for SIGTERM when the
    launcher dies (Linux ``PR_SET_PDEATHSIG``); None elsewhere. Looked up here, in the parent:
    the child may only call it (no imports between fork and exec)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)
    return lambda: prctl(pr_set_pdeathsig, sigterm)


def _stop(proc, monitor, at_once=False):
    """End mpiexec (SIGTERM, then SIGKILL), and with ``at_once`` also the ranks on this host."""
    if at_once:
        for pid in monitor.pids():
            _kill(pid, signal.SIGKILL)
        _kill(proc.pid, signal.SIGKILL)
    else:
        proc.terminate()
    try:
        proc.wait(_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


class _SignalRelay:
    """The launcher's SIGINT/SIGTERM/SIGHUP handlers: pass each stop on to mpiexec once."""

    def __init__(self):
        self.proc = None
        self.signame = None
        self._first_at = None
        self._pending = []
        self.forced_at = None
        self._old = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._old = {sig: signal.signal(sig, self._handle) for sig in STOP_SIGNALS}
        return self

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)
        return False

    def _handle(self, signum, frame):
        now = time.monotonic()
        if self.signame is None:
            self.signame, self._first_at = signal.Signals(signum).name, now
        elif now - self._first_at < REPEAT_WINDOW_S or self.forced_at is not None:
            return  # a copy of the first one (see trainer_cli.run.signals), or already forcing
        else:
            self.forced_at = now
        # See the module's docstring for why SIGINT goes as SIGUSR1 and SIGHUP as SIGTERM.
        self._pending.append(signal.SIGUSR1 if self.signame == "SIGINT" else signal.SIGTERM)
        self.pass_on_pending()

    def pass_on_pending(self):
        while self.proc is not None and self._pending:
            sig = self._pending.pop(0)
            if self.proc.returncode is None:
                _kill(self.proc.pid, sig)


class _Monitor:
    """The ranks' connections, and the order in which they ended badly."""

    def __init__(self, listener):
        self.listener = listener
        self.conns: dict = {}   # socket -> {"rank", "pid", "buf", "said"}
        self.bad: list = []     # (rank, pid, "died" | "abort"), first first
        self.first_bad_at = None

    def poll(self, timeout):
        ready, _, _ = select.select([self.listener] + list(self.conns), [], [], timeout)
        for sock in ready:
            if sock is self.listener:
                conn, _ = self.listener.accept()
                self.conns[conn] = {"rank": None, "pid": None, "buf": b"", "said": None,
                                    "joined": False}
                continue
            info = self.conns[sock]
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if data:
                info["buf"] += data
                *lines, info["buf"] = info["buf"].split(b"\n")
                for line in lines:
                    self._line(info, line.decode("utf-8", "replace").split())
                continue
            if not info["joined"]:
                self._bad(info["rank"], info["pid"], "never joined")
            elif info["said"] is None:
                self._bad(info["rank"], info["pid"], "died")
            del self.conns[sock]
            sock.close()

    def _line(self, info, words):
        if len(words) >= 3 and words[0] == "rank" and words[1].lstrip("-").isdigit():
            info["rank"], info["pid"] = int(words[1]), int(words[2])
        elif words and words[0] == "joined":
            info["joined"] = True
        elif words and words[0] in ("bye", "abort"):
            info["said"] = words[0]
            if words[0] == "abort":
                self._bad(info["rank"], info["pid"], "abort")

    def _bad(self, rank, pid, how):
        if not self.bad:
            self.first_bad_at = time.monotonic()
        self.bad.append((rank, pid, how))

    def drain(self):
        """Read what the ended ranks wrote last (their sockets are closed or about to be)."""
        for _ in range(20):
            if not self.conns:
                return
            self.poll(0.05)

    def report(self, code, workers) -> str:
        if not self.bad or self.bad[0][0] is None:
            return "trainer: the %d-rank job failed (mpiexec exit code %d)." % (workers, code)
        rank, pid, how = self.bad[0]
        if how == "never joined":
            return ("trainer: rank %d of %d (pid %d) ended before it joined the MPI job (its "
                    "error, if any, is above) and the other ranks were stopped; mpiexec exit "
                    "code %d."
                    % (rank, workers, pid, code))
        if how == "abort":
            return ("trainer: rank %d of %d (pid %d) failed and aborted the job (its error is "
                    "above); mpiexec exit code %d." % (rank, workers, pid, code))
        return ("trainer: rank %d of %d (pid %d) died (killed, crashed or exited without "
                "finishing) and the other ranks were stopped; mpiexec exit code %d."
                % (rank, workers, pid, code))

    def pids(self) -> list:
        """The ranks on this host that are still connected (their PIDs, as they reported)."""
        return [info["pid"] for info in self.conns.values() if info["pid"]]

    def close(self):
        for sock in list(self.conns):
            sock.close()
        self.conns.clear()
        self.listener.close()
