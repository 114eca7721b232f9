"""Checkpoints written by a child process, so that a small model's frequent saves cost its
training thread a copy and a message, not a share of the GIL.

A save on a thread of this process costs the training thread more than the thread's own work:
its zip writing and its returns from each write and fsync take the GIL in turn with training
(a 3 ms save cost a 0.2 ms step loop about 9 ms). Here the training thread copies the arrays into
a shared memory file (``memfd``), writes the request (run folder, step, meta.json's fields, each
array's place) at its head, and sends the file's descriptor over a socket. The child writes the
checkpoint with :func:`.checkpoint.write_checkpoint` and prunes, exactly as the thread would, then
answers ``ok`` or the error; :meth:`SaveProcess.wait` takes the answers in order, and errors
surface where a thread's would. Up to ``DEPTH`` saves are in flight, each in a shared file of its
own, which the child writes one after another: a save whose fsyncs outlast the steps to the next
checkpoint holds up training only when the one before it is not done either.

Safety: the child ignores the stop signals (SIGINT, SIGTERM, SIGHUP: the parent decides when a
run stops, and says so by closing the socket) and sits in a session of its own, out of a
terminal's Ctrl-C. It holds the run directory's lock descriptor too, so a ``trainer resume``
cannot start while an orphaned save finishes after a ``kill -9`` of the parent; it exits as soon
as it reads the socket's end. A child that dies mid-save leaves a ``.tmp-step-*`` folder (removed
at the next resume) and ``latest`` on the previous checkpoint; the parent then writes that save
itself from the shared copy (:class:`WriterGone` carries it) and goes on without the child.
"""
from __future__ import annotations

import collections
import json
import mmap
import os
import select
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy

from . import layout

__all__ = ["SaveProcess", "WriterGone", "can_share", "available"]

_ALIGN = 64
_READY = b"ready"
_START_TIMEOUT_S = 60.0
_EXIT_TIMEOUT_S = 60.0
# Replies are "ok" or a short JSON error (its text cut at _ERROR_TEXT): a small receive buffer,
# which a training step's allocator hands out without a fresh mapping.
_REPLY_LIMIT = 1 << 16
_ERROR_TEXT = 4096
_OK = b"ok"
_STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1", "SIGUSR2")
# Saves handed over and not yet answered, at most.
DEPTH = 2


class WriterGone(RuntimeError):
    """The child ended without answering; ``pending`` lists the unanswered saves'
    ``(step, files, meta)`` in order (arrays still in this process's shared copies), None when
    idle."""

    def __init__(self, message, pending=None):
        super().__init__(message)
        self.pending = pending


def available() -> bool:
    """Whether this platform has what the hand-over needs (Linux: memfd, descriptor passing;
    an interpreter to start)."""
    return hasattr(os, "memfd_create") and hasattr(socket, "send_fds") and bool(sys.executable)


def can_share(files: dict) -> bool:
    """Whether every array of ``files`` (name -> {member: array}) can be rebuilt in the child from
    its dtype string (plain numeric and boolean types)."""
    return all(isinstance(a, numpy.ndarray) and a.dtype.kind in "biufc" and not a.dtype.fields
               for arrays in files.values() for a in arrays.values())


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


class _Shared:
    """A shared memory file and its mapping in this process."""

    __slots__ = ("fd", "map", "size")

    def __init__(self, size: int):
        self.fd = os.memfd_create("trainer-checkpoint", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        self.size = size

    def close(self):
        # The mapping stays while arrays made from it (a lost writer's saves) are alive.
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class SaveProcess:
    """The parent's end: :meth:`start` hands a save over, :meth:`wait` takes the oldest
    answer."""

    def __init__(self, lock_fd=None):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        keep = [theirs.fileno()] + ([lock_fd] if lock_fd is not None else [])
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=keep,
                stdin=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._buffers = []      # _Shared files, at most DEPTH
        self._pending = collections.deque()   # (step, copies, meta, folder, buffer), in order
        try:
            ours.settimeout(_START_TIMEOUT_S)
            ready = ours.recv(16)
            ours.settimeout(None)
        except OSError:
            ready = b""
        if ready != _READY:
            self.close()
            raise WriterGone("did not start (exit code %s)" % self._proc.poll())

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def busy(self) -> int:
        """How many saves are handed over and not yet answered."""
        return len(self._pending)

    @property
    def oldest_step(self):
        """The step of the oldest save in flight (None when there is none)."""
        return self._pending[0][0] if self._pending else None

    def answered(self) -> bool:
        """Whether :meth:`wait` would return at once (an answer, or the child's end, is there)."""
        if not self._pending:
            return False
        return bool(select.select([self._sock], [], [], 0)[0])

    def start(self, run_dir, step: int, files: dict, meta: dict, keep_last: int, keep_best=None):
        """Copy ``files`` (name -> {member: host array}) and hand the save of checkpoint ``step``
        to the child; fewer than DEPTH saves may be in flight (wait() for one first)."""
        assert len(self._pending) < DEPTH, "wait() for a save first"
        places, offset = [], 0
        for name, arrays in files.items():
            members = []
            for member, a in arrays.items():
                members.append([member, offset, a.dtype.str, a.shape])
                offset = _aligned(offset + a.nbytes)
            places.append([name, members])
        request = json.dumps({
            "run_dir": str(run_dir), "step": int(step), "meta": meta, "files": places,
            "keep_last": keep_last,
            "keep_best": None if keep_best is None else {"metric": keep_best.metric,
                                                         "mode": keep_best.mode},
        }).encode("utf-8")
        head = _aligned(len(request))
        shared = self._reserve(head + offset)
        shared.map[:len(request)] = request
        copies = {}
        for (name, members), arrays in zip(places, files.values()):
            copies[name] = {}
            for (member, at, _, shape), a in zip(members, arrays.values()):
                view = numpy.ndarray(a.shape, a.dtype, buffer=shared.map, offset=head + at)
                numpy.copyto(view, a, casting="no")
                copies[name][member] = view
        folder = Path(run_dir) / layout.CHECKPOINTS / layout.checkpoint_name(step)
        self._pending.append((step, copies, meta, folder, shared))
        try:
            socket.send_fds(self._sock, [b"%d" % len(request)], [shared.fd])
        except OSError as exc:
            raise self._gone("could not be reached (%s)" % (exc.strerror or exc)) from None

    def _reserve(self, size: int) -> _Shared:
        """A shared file of at least ``size`` bytes that no save in flight uses."""
        used = [entry[4] for entry in self._pending]
        free = next((b for b in self._buffers if all(b is not u for u in used)), None)
        if free is not None and size <= free.size:
            return free
        # A new file rather than a larger one: the child may still map the old one.
        made = _Shared(max(size, 2 * free.size if free is not None else 0))
        if free is not None:
            self._buffers.remove(free)
            free.close()
        self._buffers.append(made)
        return made

    def wait(self):
        """The folder of the oldest save in flight (None when there is none); its OSError
        re-raised, any other failure as RuntimeError, and WriterGone when the child ended
        without an answer."""
        if not self._pending:
            return None
        try:
            reply = self._sock.recv(_REPLY_LIMIT)
        except OSError:
            reply = b""
        if not reply:
            raise self._gone("ended during a save")
        folder = self._pending.popleft()[3]
        if reply == _OK:
            return folder
        answer = json.loads(reply)
        if "oserror" in answer:
            code, text, filename = answer["oserror"]
            raise OSError(code, text, filename)
        raise RuntimeError(answer["error"])

    def _gone(self, what) -> WriterGone:
        pending = [(step, copies, meta) for step, copies, meta, _, _ in self._pending] or None
        self._pending.clear()
        self.close()
        return WriterGone("(pid %d) %s, exit code %s" % (self._proc.pid, what,
                                                         self._proc.returncode), pending)

    def close(self):
        """End the child (after the save in flight, which the caller waited for or abandons)."""
        if self._sock is not None:
            self._sock.close()     # the child reads the end and exits
            self._sock = None
        try:
            self._proc.wait(timeout=_EXIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for shared in self._buffers:
            shared.close()


# ---------------------------------------------------------------------------- the child
def _serve(sock):
    from . import checkpoint

    sock.send(_READY)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 32, 1)
        except ConnectionError:
            return
        if not msg:
            return
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return
        try:
            reply = _save(checkpoint, fds[0], int(msg))
        finally:
            os.close(fds[0])
        try:
            sock.send(reply)
        except OSError:  # the parent is gone; the checkpoint is complete (or was never begun)
            return


def _save(checkpoint, fd, request_len) -> bytes:
    with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mapped:
        request = json.loads(bytes(mapped[:request_len]))
        head = _aligned(request_len)
        files = {name: {member: numpy.ndarray(tuple(shape), numpy.dtype(dtype), buffer=mapped,
                                              offset=head + at)
                        for member, at, dtype, shape in members}
                 for name, members in request["files"]}
        keep_best = request["keep_best"]
        try:
            checkpoint.write_checkpoint(request["run_dir"], request["step"], files,
                                        request["meta"])
            checkpoint.prune(request["run_dir"], request["keep_last"],
                             None if keep_best is None else SimpleNamespace(**keep_best))
            return _OK
        except OSError as exc:
            answer = {"oserror": [exc.errno, (exc.strerror or str(exc))[:_ERROR_TEXT],
                                  exc.filename and str(exc.filename)[:_ERROR_TEXT]]}
        except Exception as exc:  # handed to the parent, which raises it where training is
            answer = {"error": ("%s: %s" % (type(exc).__name__, exc))[:_ERROR_TEXT]}
        finally:
            del files
        return json.dumps(answer).encode("utf-8")


def main(argv) -> int:
    for name in _STOP_SIGNALS:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    try:
        with socket.socket(fileno=int(argv[1])) as sock:
            _serve(sock)
    except Exception:  # the parent says what ended (WriterGone), not a traceback on its terminal
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
