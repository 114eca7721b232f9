"""Writing ``.npz`` archives that ``numpy.load(allow_pickle=False)`` reads, never with pickle."""
from __future__ import annotations

import zipfile

import numpy
from numpy.lib import format as _npy_format

__all__ = ["write_npz"]


def write_npz(fileobj, arrays: dict) -> None:
    """Write ``arrays`` (name -> array) into ``fileobj`` as an uncompressed ``.npz``.

    Member by member rather than through ``numpy.savez``, whose own keyword arguments (``file``,
    ``allow_pickle``) would swallow arrays of those names and which pickles object arrays.
    """
    with zipfile.ZipFile(fileobj, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, arr in arrays.items():
            arr = numpy.asarray(arr)
            if arr.dtype.hasobject:
                raise TypeError("array %r has dtype object, which cannot be saved without pickle"
                                % (name,))
            with zf.open(name + ".npy", mode="w", force_zip64=True) as member:
                _npy_format.write_array(member, arr, allow_pickle=False)
