"""Parameter files: a plain ``.npz`` of name -> array, or MXNet's own binary format (``.params``
files written by real MXNet), written atomically, read without pickle."""
from __future__ import annotations

import os

from .._atomic import atomic_write
from .._bounded import open_regular
from .._npz import NpzError, read_npz, write_npz
from ..base import MXNetError
from ..ndarray.mxnet_format import MXNetFileError, is_mxnet_file, read_mxnet_file, write_mxnet_file

__all__ = ["save_arrays", "load_arrays", "ParamFileError"]


class ParamFileError(MXNetError, ValueError):
    """A parameter file is missing, truncated, corrupted or not a parameter file (MXNet raises
    MXNetError there)."""


FORMATS = ("npz", "mxnet")


def save_arrays(filename, arrays: dict, format="npz") -> None:  # noqa: A002 - MXNet-style keyword
    """Write ``arrays`` atomically as an ``.npz`` that ``numpy.load(allow_pickle=False)`` reads
    (``format='npz'``) or in MXNet's binary format, which real MXNet loads (``format='mxnet'``)."""
    if format not in FORMATS:
        raise ValueError("format must be one of %s, not %r"
                         % (", ".join(map(repr, FORMATS)), format))
    with atomic_write(filename) as f:
        if format == "mxnet":
            write_mxnet_file(f, list(arrays.values()), list(arrays))
        else:
            write_npz(f, arrays)


_ZIP_MAGIC = b"PK\x03\x04"
_NPY_MAGIC = b"\x93NUMPY"


def load_arrays(filename) -> dict:
    """Read a parameter file (``.npz`` or MXNet's binary format) as name -> numpy array; any
    unreadable file is a ParamFileError."""
    path = os.fspath(filename)
    try:
        f = open_regular(path)
    except FileNotFoundError:
        raise ParamFileError("%s: no such parameter file" % path) from None
    except OSError as exc:
        raise ParamFileError("%s: cannot open parameter file (%s)" % (path, _reason(exc))) from None
    with f:
        head = f.read(8)
        # Sniffed first so that a foreign file is reported as such.
        if not head:
            raise ParamFileError("%s: the parameter file is empty" % path)
        if is_mxnet_file(head):
            return _load_mxnet(path)
        head = head[:len(_ZIP_MAGIC)]
        if _NPY_MAGIC.startswith(head):
            raise ParamFileError("%s: not a parameter file (a single .npy array, expected an .npz "
                                 "archive of named arrays)" % path)
        if head != _ZIP_MAGIC:
            raise ParamFileError("%s: not a parameter file (expected an .npz archive or MXNet's "
                                 "binary format of named arrays)" % path)
        f.seek(0)
        try:
            arrays = read_npz(f)
        except NpzError as exc:
            raise ParamFileError("%s: cannot read parameter file (%s); it may be truncated or "
                                 "corrupted" % (path, exc)) from None
    return _strip_nd_save_keys(path, arrays)


def _load_mxnet(path):
    try:
        arrays, names = read_mxnet_file(path)
    except MXNetFileError as exc:
        raise ParamFileError(str(exc)) from None
    if names is None:
        if arrays:
            raise ParamFileError("%s: holds a list of %d arrays saved by nd.save, not named "
                                 "parameters" % (path, len(arrays)))
        return {}  # MXNet writes an empty dict as an empty list
    return dict(zip(names, arrays))


def _strip_nd_save_keys(path, arrays):
    """Accept what ``nd.save`` wrote for a dict (keys ``k:name``); its lists are not parameters."""
    if arrays and all(key.startswith("k:") for key in arrays):
        return {key[2:]: value for key, value in arrays.items()}
    if arrays and all(key.startswith("i:") for key in arrays):
        raise ParamFileError("%s: holds a list of arrays saved by nd.save, not named parameters"
                             % path)
    return arrays


def _reason(exc):
    text = str(exc).strip()
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__
