"""Creating a run directory, and making sure only one process writes to it at a time."""
from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

from .._atomic import fsync_dir, write_text_atomic
from . import layout

__all__ = ["create_run_dir", "RunLock", "timestamp"]

_LOCK_FILE = ".lock"


def timestamp(now: float | None = None) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))


def create_run_dir(root, name: str, config_text: str, now: float | None = None) -> Path:
    """Make a new ``root/<name>-<UTC YYYYMMDD-HHMMSS>/`` holding ``config.yaml``.

    ``mkdir`` without ``exist_ok`` is the claim: when the folder exists (a run started in the
    same second, or a concurrent one) the next suffix ``-2``, ``-3``, ... is tried, so an existing
    run directory is never reused.
    """
    root = Path(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise layout.RunDirError("%s: cannot create the runs folder (%s)" % (root, exc.strerror or exc)) from None
    base = "%s-%s" % (name, timestamp(now))
    for n in range(1, 10000):
        path = root / (base if n == 1 else "%s-%d" % (base, n))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise layout.RunDirError("%s: cannot create the run directory (%s)"
                                     % (path, exc.strerror or exc)) from None
        break
    else:
        raise layout.RunDirError("%s: too many run directories named %s-*" % (root, base))
    (path / layout.CHECKPOINTS).mkdir()
    write_text_atomic(path / layout.CONFIG_FILE, config_text)
    fsync_dir(root)
    return path


class RunLock:
    """An exclusive ``flock`` on ``<run_dir>/.lock`` for as long as a run writes there.

    The kernel drops the lock when the process dies (even by ``kill -9``), so a stale lock never
    blocks a resume; a live writer makes a second ``resume`` fail instead of interleaving.
    """

    def __init__(self, run_dir):
        self.path = Path(run_dir) / _LOCK_FILE
        self._fd = None

    def acquire(self):
        try:
            import fcntl
        except ImportError:  # not POSIX: no locking, as before
            return self
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK
                         | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
        except OSError as exc:
            raise layout.RunDirError(
                "%s: cannot create the run lock (%s); the run directory must be writable"
                % (self.path, exc.strerror or exc)) from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise layout.RunDirError("%s: not a regular file; the run lock cannot be taken"
                                     % self.path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise layout.RunDirError("%s: another trainer process is writing to this run "
                                         "directory; wait for it to finish or stop it first"
                                         % self.path.parent) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, b"%d\n" % os.getpid())
        self._fd = fd
        return self

    def fileno(self):
        """The locked descriptor (None without locking): a child process that inherits it holds
        the lock until it exits too."""
        return self._fd

    def release(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
