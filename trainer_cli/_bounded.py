"""Reading files that someone else may have put there: regular files only, never unbounded.

A FIFO in place of a run directory's file would block ``open()`` forever, and a symlink to
``/dev/zero`` would read until memory runs out. :func:`open_regular` opens with ``O_NONBLOCK``
(so a FIFO without a writer opens at once), checks with ``fstat`` that what it opened is a
regular file, then clears ``O_NONBLOCK``; :func:`read_regular` reads at most ``limit + 1`` bytes
of it, so a file larger than its limit is refused without being read whole.
"""
from __future__ import annotations

import errno
import json
import os
import stat

__all__ = ["FileRefused", "open_regular", "read_regular", "read_regular_text", "open_append",
           "load_json", "file_kind", "MiB"]

MiB = 1 << 20


class FileRefused(OSError):
    """Not a regular file, or larger than its limit. An ``OSError``, so the callers' usual
    "cannot read FILE (...)" handling applies; ``str()`` is the reason alone."""

    def __init__(self, path, reason, err=errno.EINVAL):
        super().__init__(err, reason, os.fspath(path))
        self.reason = reason

    def __str__(self):
        return self.reason


def open_regular(path, mode="rb", follow_symlinks=True):
    """``open(path, mode)`` for a regular file (following symlinks unless told not to), without
    blocking on a FIFO or a device; FileRefused for anything else."""
    path = os.fspath(path)
    nofollow = 0 if follow_symlinks else getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | nofollow | getattr(os, "O_CLOEXEC", 0))
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory", path)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(path, "not a regular file (%s)" % file_kind(info.st_mode))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def open_append(path, **text_args):
    """``open(path, "a", ...)`` for a regular file or a new one: never through a symbolic link
    (a hostile run directory's ``train.log -> ~/.bashrc``), never blocking on a FIFO."""
    path = os.fspath(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK
                     | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: a FIFO that no process reads
            raise
        raise FileRefused(path, "not a regular file (%s)" % file_kind(os.lstat(path).st_mode)) \
            from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FileRefused(path, "not a regular file (%s)" % file_kind(info.st_mode))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "a", **text_args)
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, limit: int) -> bytes:
    """The bytes of the regular file ``path``; FileRefused when it is not one or holds more than
    ``limit`` bytes (never more than ``limit + 1`` bytes are read)."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise FileRefused(path, "%d bytes, more than the %s this file may hold"
                              % (size, _size_text(limit)), errno.EFBIG)
        # Asked for the size it has (and one byte to see it grew): a read of limit + 1 bytes
        # would first allocate that much, tens of microseconds for every small file.
        data = f.read(min(size, limit) + 1)
        if len(data) > size:   # it grew since the fstat: the rest, up to the limit
            data += f.read(limit + 1 - len(data))
    if len(data) > limit:  # it grew while we read
        raise FileRefused(path, "more than the %s this file may hold" % _size_text(limit),
                          errno.EFBIG)
    return data


def read_regular_text(path, limit: int) -> str:
    """:func:`read_regular` decoded as UTF-8 (UnicodeDecodeError when it is not)."""
    return read_regular(path, limit).decode("utf-8")


def load_json(text):
    """``json.loads(text)`` of a file someone else may have written: JSON nested too deep for the
    parser (a few hundred kilobytes of ``[``) is a ValueError like any other damage, not a
    RecursionError that no reader expects."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def file_kind(mode) -> str:
    """'a FIFO', 'a character device', ... for a ``st_mode`` that is not a file or folder."""
    for test, name in ((stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def _size_text(limit: int) -> str:
    if limit >= MiB and limit % MiB == 0:
        return "%d MiB" % (limit // MiB)
    if limit >= 1024 and limit % 1024 == 0:
        return "%d KiB" % (limit // 1024)
    return "%d bytes" % limit
