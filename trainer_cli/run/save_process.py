"""Checkpoints written by a child process, so that a small model's frequent saves cost its
training thread a copy and a message, not a share of the GIL.

A save on a thread of this process costs the training thread more than the thread's own work:
its zip writing and its returns from each write and fsync take the GIL in turn with training
(a 3 ms save cost a 0.2 ms step loop about 9 ms). Here the training thread copies the arrays into
a shared memory file (``memfd``), writes the request (run folder, step, meta.json's fields, each
array's place) at its head, and sends the file's descriptor over a socket. The child writes the
checkpoint with :func:`.checkpoint.write_checkpoint` and prunes, exactly as the thread would, then
answers ``ok`` or the error; :meth:`SaveProcess.wait` takes that answer, so at most one
save is in flight and errors surface where a thread's would.

Safety: the child ignores the stop signals (SIGINT, SIGTERM, SIGHUP: the parent decides when a
run stops, and says so by closing the socket) and sits in a session of its own, out of a
terminal's Ctrl-C. It holds the run directory's lock descriptor too, so a ``trainer resume``
cannot start while an orphaned save finishes after a ``kill -9`` of the parent; it exits as soon
as it reads the socket's end. A child that dies mid-save leaves a ``.tmp-step-*`` folder (removed
at the next resume) and ``latest`` on the previous checkpoint; the parent then writes that save
itself from the shared copy (:class:`WriterGone` carries it) and goes on without the child.
"""
from __future__ import annotations

import json
import mmap
import os
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


class WriterGone(RuntimeError):
    """The child ended without answering; ``pending`` is the unanswered save's
    ``(step, files, meta)`` (arrays still in this process's shared copy), None when idle."""

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


class SaveProcess:
    """The parent's end: :meth:`start` hands a save over, :meth:`wait` takes its answer."""

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
        self._memfd, self._map, self._size = -1, None, 0
        self._pending = None
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

    def start(self, run_dir, step: int, files: dict, meta: dict, keep_last: int, keep_best=None):
        """Copy ``files`` (name -> {member: host array}) and hand the save of checkpoint ``step``
        to the child; the previous save must have been waited for."""
        assert self._pending is None, "wait() for the previous save first"
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
        self._reserve(head + offset)
        self._map[:len(request)] = request
        copies = {}
        for (name, members), arrays in zip(places, files.values()):
            copies[name] = {}
            for (member, at, _, shape), a in zip(members, arrays.values()):
                view = numpy.ndarray(a.shape, a.dtype, buffer=self._map, offset=head + at)
                numpy.copyto(view, a, casting="no")
                copies[name][member] = view
        self._pending = (step, copies, meta)
        self._folder = Path(run_dir) / layout.CHECKPOINTS / layout.checkpoint_name(step)
        try:
            socket.send_fds(self._sock, [b"%d" % len(request)], [self._memfd])
        except OSError as exc:
            raise self._gone("could not be reached (%s)" % (exc.strerror or exc)) from None

    def _reserve(self, size: int):
        if size <= self._size:
            return
        # A new file rather than a larger one: the child may still map the old one.
        size = max(size, 2 * self._size)
        fd = os.memfd_create("trainer-checkpoint", os.MFD_CLOEXEC)
        try:
            os.ftruncate(fd, size)
            mapped = mmap.mmap(fd, size)
        except BaseException:
            os.close(fd)
            raise
        if self._memfd >= 0:
            os.close(self._memfd)
        self._memfd, self._map, self._size = fd, mapped, size

    def wait(self):
        """The folder of the save in flight (None when there is none); its OSError re-raised, any
        other failure as RuntimeError, and WriterGone when the child ended without an answer."""
        if self._pending is None:
            return None
        try:
            reply = self._sock.recv(_REPLY_LIMIT)
        except OSError:
            reply = b""
        if not reply:
            raise self._gone("ended during a save")
        self._pending = None
        if reply == _OK:
            return self._folder
        answer = json.loads(reply)
        if "oserror" in answer:
            code, text, filename = answer["oserror"]
            raise OSError(code, text, filename)
        raise RuntimeError(answer["error"])

    def _gone(self, what) -> WriterGone:
        pending, self._pending = self._pending, None
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
        if self._memfd >= 0:
            os.close(self._memfd)
            self._memfd = -1


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
