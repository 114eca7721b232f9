"""Parameter files: a plain ``.npz`` of name -> array, written atomically, read without pickle."""
from __future__ import annotations

import os
import zipfile

import numpy

from .._atomic import atomic_write

__all__ = ["save_arrays", "load_arrays", "ParamFileError"]


class ParamFileError(ValueError):
    """A parameter file is missing, truncated, corrupted or not a parameter file."""


def save_arrays(filename, arrays: dict) -> None:
    with atomic_write(filename) as f:
        numpy.savez(f, **arrays)


def load_arrays(filename) -> dict:
    path = os.fspath(filename)
    try:
        npz = numpy.load(path, allow_pickle=False)
        if not isinstance(npz, numpy.lib.npyio.NpzFile):
            raise ParamFileError("%s: not a parameter file (expected an .npz archive of arrays)" % path)
        with npz:
            return {name: npz[name] for name in npz.files}
    except ParamFileError:
        raise
    except FileNotFoundError:
        raise ParamFileError("%s: no such parameter file" % path) from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as exc:
        raise ParamFileError("%s: cannot read parameter file (%s); it may be truncated or corrupted"
                             % (path, exc)) from None
