"""Atomic file writes: a temp file in the target's folder, flushed and fsynced, then renamed.

Temp files and folders are created with ``os.open``/``os.mkdir`` and modes 0666/0777, so the
umask applies as it does to ``open()`` (``tempfile.mkstemp``/``mkdtemp`` force 0600/0700, which
would keep a shared run directory's files from the teammates the umask lets read them).
"""
from __future__ import annotations

import contextlib
import os
import secrets

__all__ = ["atomic_write", "fsync_dir", "write_bytes_atomic", "write_text_atomic", "make_temp_dir",
           "write_new_file"]

_TRIES = 100
# Create, never open an existing file, never follow a link.
_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NOFOLLOW", 0))


@contextlib.contextmanager
def atomic_write(path, mode="wb"):
    """Yield a file object; on success the data appears at ``path`` all at once, or not at all."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = _make_temp_file(folder, ".tmp-" + os.path.basename(path) + "-")
    try:
        with os.fdopen(fd, mode) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(folder)


def _make_temp_file(folder, prefix):
    for _ in range(_TRIES):
        name = os.path.join(folder, prefix + secrets.token_hex(6))
        try:
            fd = os.open(name, _NEW_FILE, 0o666)
        except FileExistsError:
            continue
        return fd, name
    raise FileExistsError("%s: no free temporary name %s*" % (folder, prefix))


def make_temp_dir(folder, prefix) -> str:
    """A new, empty folder ``<folder>/<prefix><random>`` (mode 0777 less the umask)."""
    for _ in range(_TRIES):
        name = os.path.join(os.fspath(folder), prefix + secrets.token_hex(6))
        try:
            os.mkdir(name, 0o777)
        except FileExistsError:
            continue
        return name
    raise FileExistsError("%s: no free temporary name %s*" % (folder, prefix))


def fsync_dir(folder):
    """Make a rename inside ``folder`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_new_file(path, data: bytes):
    """Create ``path`` (which must not exist, and is never followed as a link), write ``data`` and
    fsync it. Atomic only inside a folder that is itself renamed into place afterwards."""
    fd = os.open(path, _NEW_FILE, 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def write_bytes_atomic(path, data: bytes):
    with atomic_write(path, "wb") as f:
        f.write(data)


def write_text_atomic(path, text: str):
    write_bytes_atomic(path, text.encode("utf-8"))
