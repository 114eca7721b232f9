"""Atomic file writes: a temp file in the target's folder, flushed and fsynced, then renamed.

Temp files and folders are created with ``os.open``/``os.mkdir`` and modes 0666/0777, so the
umask applies as it does to ``open()`` (``tempfile.mkstemp``/``mkdtemp`` force 0600/0700, which
would keep a shared run directory's files from the teammates the umask lets read them).
"""
from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import secrets

__all__ = ["atomic_write", "fsync_dir", "write_bytes_atomic", "write_text_atomic", "make_temp_dir",
           "open_new_file", "reserve", "start_writeback"]

_TRIES = 100
# Create, never open an existing file, never follow a link.
_NEW_FILE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NOFOLLOW", 0))


@contextlib.contextmanager
def atomic_write(path, mode="wb", **open_args):
    """Yield a file object (``open_args``: a text file's encoding, newline); on success the data
    appears at ``path`` all at once, or not at all."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = _make_temp_file(folder, ".tmp-" + os.path.basename(path) + "-")
    except FileNotFoundError:
        # The temporary file's name would mislead: say which file could not be written.
        raise FileNotFoundError(errno.ENOENT, "cannot write the file: its folder %s does not "
                                "exist" % folder, path) from None
    try:
        with os.fdopen(fd, mode, **open_args) as f:
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


def open_new_file(path, readable=False):
    """A new file at ``path`` (which must not exist, and is never followed as a link), open for
    unbuffered binary writing (and reading, with ``readable``). Atomic only inside a folder
    renamed into place afterwards."""
    if readable:
        flags = (_NEW_FILE & ~os.O_WRONLY) | os.O_RDWR
        return os.fdopen(os.open(path, flags, 0o666), "r+b", buffering=0)
    return os.fdopen(os.open(path, _NEW_FILE, 0o666), "wb", buffering=0)


def write_bytes_atomic(path, data: bytes):
    with atomic_write(path, "wb") as f:
        f.write(data)


def write_text_atomic(path, text: str):
    write_bytes_atomic(path, text.encode("utf-8"))


def _libc_function(name, *argtypes):
    """A Linux libc call that Python's ``os`` lacks, or None where there is no such call."""
    try:
        function = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError, TypeError):  # TypeError: Windows has no CDLL(None)
        return None
    function.argtypes = list(argtypes)
    function.restype = ctypes.c_int
    return function


_FALLOCATE = _libc_function("fallocate", ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                            ctypes.c_int64)
_SYNC_FILE_RANGE = _libc_function("sync_file_range", ctypes.c_int, ctypes.c_int64,
                                  ctypes.c_int64, ctypes.c_uint)
_KEEP_SIZE = 1  # FALLOC_FL_KEEP_SIZE: blocks reserved, the file's size unchanged
_WRITE = 2      # SYNC_FILE_RANGE_WRITE: start writing the dirty pages out, wait for none


def reserve(fd, nbytes: int):
    """Reserve ``nbytes`` of disk for the file at ``fd`` before writing them, as ``numpy.save``
    does (Linux's ``fallocate``, keeping the size). Raises OSError(ENOSPC) when the disk cannot
    hold them; does nothing where the file system or platform cannot reserve (``posix_fallocate``
    would then write zeros first, doubling the writes)."""
    if _FALLOCATE is None or nbytes <= 0:
        return
    if _FALLOCATE(fd, _KEEP_SIZE, 0, nbytes) != 0:
        code = ctypes.get_errno()
        if code == errno.ENOSPC:
            raise OSError(code, os.strerror(code))


def start_writeback(fd):
    """Have the disk start on the file's unwritten pages now (Linux's ``sync_file_range``), so
    that an fsync after other work finds little left; nothing elsewhere, and never an error (the
    fsync that follows is what makes the data durable)."""
    if _SYNC_FILE_RANGE is not None:
        _SYNC_FILE_RANGE(fd, 0, 0, _WRITE)
