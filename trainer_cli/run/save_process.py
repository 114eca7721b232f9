"""Checkpoints written by a child process, so that a small model's frequent saves cost its
training thread a copy and a message, not a share of the GIL.

A save on a thread of this process costs the training thread more than the thread's own work:
its zip writing and its returns from each write and fsync take the GIL in turn with training
(a 3 ms save cost a 0.2 ms step loop about 9 ms). Here the training thread copies the arrays into
a shared memory file (``memfd``), writes the request (run folder, step, meta.json's fields, each
array's place) at its head, and sends the file's descriptor over a socket; arrays inside meta (a
language model's carried state) go into the file too, and the child encodes them into meta.json.
The child writes the checkpoint with :func:`.checkpoint.write_checkpoint` and prunes, exactly as
the thread would, then answers ``ok`` or the error; :meth:`SaveProcess.wait` takes the answers in
order, and errors surface where a thread's would. Up to ``DEPTH`` saves are in flight, each in a
shared file of its own, which the child writes one after another: a save whose fsyncs outlast
the steps to the next checkpoint holds up training only when the one before it is not done
either.

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
from types import SimpleNamespace

import numpy

from .._own_python import module_argv
from . import layout

__all__ = ["SaveProcess", "WriterGone", "can_share", "available"]

_ALIGN = 64
_HEAD_ROUND = 4096
# The key of an array's place in a request's meta: a NUL, which no name of meta's own (fields,
# options, metrics) holds.
_ARRAY = "\u0000array"
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
    return all(isinstance(a, numpy.ndarray) and _shareable(a)
               for arrays in files.values() for a in arrays.values())


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _head(request_len: int) -> int:
    """Where a request of ``request_len`` bytes puts its arrays: a multiple of ``_HEAD_ROUND``,
    so that the request's few bytes more or less from one save to the next move nothing."""
    return (request_len + _HEAD_ROUND - 1) // _HEAD_ROUND * _HEAD_ROUND


def _copies(places, views) -> dict:
    """``files`` as :meth:`SaveProcess.start` was given them, from their shared copies."""
    found = iter(views)
    return {name: {member: next(found) for member, *_ in members} for name, members in places}


def _shareable(a) -> bool:
    return a.dtype.kind in "biufc" and not a.dtype.fields


class _Shared:
    """A shared memory file and its mapping in this process."""

    __slots__ = ("fd", "map", "size", "_places", "_head", "_views")

    def __init__(self, size: int):
        self.fd = os.memfd_create("trainer-checkpoint", os.MFD_CLOEXEC)
        try:
            os.ftruncate(self.fd, size)
            self.map = mmap.mmap(self.fd, size)
        except BaseException:
            os.close(self.fd)
            raise
        self.size = size
        self._places, self._head, self._views = None, None, None

    def views(self, places, head: int) -> list:
        """Arrays over this file where ``places`` (a request's ``files``) puts its members after
        ``head`` bytes, in order: those of the last call when both are the same."""
        if head != self._head or places != self._places:
            self._views = [numpy.ndarray(shape, numpy.dtype(dtype), buffer=self.map,
                                         offset=head + at)
                           for _, members in places for _, at, dtype, shape in members]
            self._places, self._head = places, head
        return self._views

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
                module_argv(__name__) + [str(theirs.fileno())], pass_fds=keep,
                stdin=subprocess.DEVNULL, start_new_session=True)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._sock = ours
        self._buffers = []      # _Shared files, at most DEPTH
        self._places, self._places_json = None, None   # the last request's arrays, and as text
        # (step, run folder, places, views, meta, buffer) of each save, in order
        self._pending = collections.deque()
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
        to the child; fewer than DEPTH saves may be in flight (wait() for one first). Arrays
        inside ``meta`` (a carried recurrent state) travel in the shared file too; the child
        encodes them into meta.json."""
        assert len(self._pending) < DEPTH, "wait() for a save first"
        places, offset = [], 0
        for name, arrays in files.items():
            members = []
            for member, a in arrays.items():
                members.append([member, offset, a.dtype.str, a.shape])
                offset = _aligned(offset + a.nbytes)
            places.append([name, members])
        in_meta = []

        def shared_array(value):
            nonlocal offset
            if not isinstance(value, numpy.ndarray) or not _shareable(value):
                raise TypeError("meta holds a %s, which cannot be handed over"
                                % type(value).__name__)
            in_meta.append((offset, value))
            place = {_ARRAY: [offset, value.dtype.str, value.shape]}
            offset = _aligned(offset + value.nbytes)
            return place

        if places != self._places:
            # The same arrays at every save of a run: their places' text is made once.
            self._places, self._places_json = places, json.dumps(places)
        request = ('{"run_dir": %s, "step": %d, "keep_last": %d, "keep_best": %s, "files": %s, '
                   '"meta": %s}' % (
                       json.dumps(str(run_dir)), step, keep_last,
                       "null" if keep_best is None else json.dumps(
                           {"metric": keep_best.metric, "mode": keep_best.mode}),
                       self._places_json, json.dumps(meta, default=shared_array))
                   ).encode("utf-8")
        # The arrays' place moves only when a request outgrows its page-rounded head: the
        # views into a shared file are kept and used again while it stays put.
        head = _head(len(request))
        shared = self._reserve(head + offset)
        shared.map[:len(request)] = request
        views = shared.views(places, head)
        for view, a in zip(views, (a for arrays in files.values() for a in arrays.values())):
            view[...] = a   # of a's own dtype and shape (places): a copy, faster than copyto's
        for at, value in in_meta:
            numpy.copyto(numpy.ndarray(value.shape, value.dtype, buffer=shared.map,
                                       offset=head + at), value, casting="no")
        self._pending.append((step, run_dir, places, views, meta, shared))
        try:
            socket.send_fds(self._sock, [b"%d %d" % (len(request), head)], [shared.fd])
        except OSError as exc:
            raise self._gone("could not be reached (%s)" % (exc.strerror or exc)) from None

    def _reserve(self, size: int) -> _Shared:
        """A shared file of at least ``size`` bytes that no save in flight uses."""
        used = [entry[5] for entry in self._pending]
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
        step, run_dir = self._pending.popleft()[:2]
        folder = layout.checkpoint_dir(run_dir, step)
        if reply == _OK:
            return folder
        answer = json.loads(reply)
        if "oserror" in answer:
            code, text, filename = answer["oserror"]
            raise OSError(code, text, filename)
        raise RuntimeError(answer["error"])

    def _gone(self, what) -> WriterGone:
        pending = [(step, _copies(places, views), meta)
                   for step, _, places, views, meta, _ in self._pending] or None
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
            request_len, head = (int(n) for n in msg.split())
            reply = _save(checkpoint, fds[0], request_len, head)
        finally:
            os.close(fds[0])
        try:
            sock.send(reply)
        except OSError:  # the parent is gone; the checkpoint is complete (or was never begun)
            return


def _save(checkpoint, fd, request_len, head) -> bytes:
    with mmap.mmap(fd, 0, prot=mmap.PROT_READ) as mapped:
        def array_in_meta(entry):
            if len(entry) != 1 or _ARRAY not in entry:
                return entry
            at, dtype, shape = entry[_ARRAY]
            # A copy: meta outlives the mapping's views (`del files` below).
            return numpy.ndarray(tuple(shape), numpy.dtype(dtype), buffer=mapped,
                                 offset=head + at).copy()

        request = json.loads(bytes(mapped[:request_len]), object_hook=array_in_meta)
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
