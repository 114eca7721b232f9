"""Unpacking a data set's zip archive (MXNet's ``mnist.zip``, ``cifar10.zip``) into a folder,
refusing what ``zipfile.extractall`` would quietly rewrite or write outside it.

A member named with ``..``, an absolute path or a drive, a symlink, or a file over the size
limit is an error naming the archive and the member, before anything is written. Each file is
written under a temporary name and renamed into place (a crash leaves no half file under the
real name), reading at most its declared size.
"""
from __future__ import annotations

import os
import posixpath
import stat
import zipfile
import zlib

from ._atomic import atomic_write
from ._bounded import open_regular

__all__ = ["ArchiveError", "extract_zip", "MAX_TOTAL_BYTES"]

# The unpacked size an archive may declare (CIFAR-10's is 0.2 GB, MNIST's 55 MB).
MAX_TOTAL_BYTES = 8 << 30
_CHUNK = 1 << 20


class ArchiveError(ValueError):
    """A zip archive that cannot be unpacked safely, or at all."""


def _target(folder, archive, info):
    name = info.filename
    parts = name.replace("\\", "/").split("/")
    if posixpath.isabs(name) or "\\" in name or ":" in parts[0] or ".." in parts:
        raise ArchiveError("%s: member %r would be written outside %s" % (archive, name, folder))
    if stat.S_ISLNK(info.external_attr >> 16):
        raise ArchiveError("%s: member %r is a symbolic link" % (archive, name))
    return os.path.join(folder, *[p for p in parts if p not in ("", ".")])


def extract_zip(archive, folder, limit=MAX_TOTAL_BYTES):
    """Every member of the zip file ``archive`` under ``folder``; returns the files written."""
    try:
        raw = open_regular(archive, "rb")
    except OSError as exc:
        raise ArchiveError("%s: cannot read (%s)" % (archive, exc.strerror or exc)) from None
    written = []
    with raw:
        try:
            with zipfile.ZipFile(raw) as zf:
                infos = zf.infolist()
                targets = [_target(folder, archive, info) for info in infos]
                total = sum(info.file_size for info in infos)
                if total > limit:
                    raise ArchiveError("%s: unpacks to %d bytes, more than the %d this takes"
                                       % (archive, total, limit))
                for info, target in zip(infos, targets):
                    if info.is_dir():
                        os.makedirs(target, exist_ok=True)
                        continue
                    os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
                    with zf.open(info) as member, atomic_write(target) as out:
                        left = info.file_size
                        while left > 0:
                            chunk = member.read(min(_CHUNK, left))
                            if not chunk:
                                break
                            out.write(chunk)
                            left -= len(chunk)
                    written.append(target)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError,
                NotImplementedError) as exc:
            raise ArchiveError("%s: not a readable zip archive (%s)" % (archive, exc)) from None
    return written
