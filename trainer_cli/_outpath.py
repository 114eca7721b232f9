"""Where a command may write a file a user names: a regular file (replaced atomically) or a new
name in an existing folder. A symbolic link, FIFO, device or folder in its place is refused,
never followed, opened or replaced: ``--output /dev/sda`` or a link into someone's home must not
become a write."""
from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["OutputRefused", "check_output_path", "write_output_text", "write_failure", "STDOUT"]


class OutputRefused(ValueError):
    """An output path that is not a regular file or a new name (the CLI exits 2)."""


def check_output_path(path, what="output") -> Path:
    """``path`` when a command may write it; OutputRefused saying why not."""
    path = Path(path)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise OutputRefused("%s: %s: the folder %s does not exist" % (path, what, folder)) from None
        return path
    if stat.S_ISLNK(info.st_mode):
        raise OutputRefused("%s: %s: a symbolic link (to %s); name a regular file or a new path"
                            % (path, what, os.readlink(path)))
    if stat.S_ISDIR(info.st_mode):
        raise OutputRefused("%s: %s: a folder; name a file" % (path, what))
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else \
            "a device" if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode) else \
            "a socket" if stat.S_ISSOCK(info.st_mode) else "not a regular file"
        raise OutputRefused("%s: %s: %s; name a regular file or a new path" % (path, what, kind))
    return path


STDOUT = "-"


def write_output_text(path, text: str, what="output") -> None:
    """Write ``text`` atomically to ``path`` (checked by :func:`check_output_path` first), or to
    stdout for ``-``. A folder that cannot be written is an OutputRefused naming it."""
    import sys

    from ._atomic import write_bytes_atomic

    if os.fspath(path) == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    check_output_path(path, what)
    try:
        write_bytes_atomic(path, text.encode("utf-8"))
    except OSError as exc:
        raise write_failure(path, exc, what) from None


def write_failure(path, exc: OSError, what="output") -> OSError:
    """What to raise for ``exc``, an OSError writing the output ``path``: an OutputRefused when
    the folder cannot take the file (read-only, not ours, gone), else an OSError naming
    ``path`` (a full disk, say) rather than a temporary file's name."""
    import errno

    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOENT, errno.EISDIR):
        return OutputRefused("%s: %s: cannot write there (%s)"
                             % (path, what, exc.strerror or exc))
    return OSError(exc.errno, "cannot write %s: %s" % (path, exc.strerror or exc))
