"""Writing and reading ``.npz`` archives without pickle, and without trusting their headers.

``numpy.load`` allocates what an ``.npy`` header claims before reading the data (a 300-byte
member can claim 4 TB: MemoryError, or worse under memory overcommit), and its error for an
object array advises ``allow_pickle=True``. :func:`read_npz` reads each member's header itself,
refuses object dtypes, and allocates an array only after checking that the member really holds
the bytes its header claims.
"""
from __future__ import annotations

import math
import zipfile

import numpy
from numpy.lib import format as _npy_format

__all__ = ["write_npz", "read_npz", "NpzError"]

# Deflate cannot expand data more than about 1032-fold: a member claiming more is lying.
_MAX_DEFLATE_RATIO = 1100
_MAX_MEMBERS = 1 << 20
_WRITE_SLICE = 64 << 20


class NpzError(ValueError):
    """The archive is not a readable ``.npz`` of plain arrays; the text says why (no file name)."""


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
                _write_array(member, arr)


def _write_array(member, arr):
    """``numpy.lib.format.write_array``, but a contiguous array's memory goes out as it is, in
    large slices (write_array copies it into bytes chunk by chunk when the target is not a real
    file, as a zip member is not)."""
    if not (arr.flags.c_contiguous or arr.flags.f_contiguous) or arr.dtype.hasobject:
        _npy_format.write_array(member, arr, allow_pickle=False)
        return
    header = _npy_format.header_data_from_array_1_0(arr)
    try:
        _npy_format.write_array_header_1_0(member, header)
    except ValueError:  # a header too large for format 1.0
        _npy_format.write_array_header_2_0(member, header)
    data = memoryview(arr.ravel(order="A")).cast("B")  # a view: the array is contiguous
    for start in range(0, len(data), _WRITE_SLICE):
        member.write(data[start:start + _WRITE_SLICE])


def read_npz(fileobj) -> dict:
    """``{name: array}`` from an ``.npz`` (a seekable binary file object), every member checked
    before its array is allocated; NpzError when anything is wrong."""
    try:
        with zipfile.ZipFile(fileobj) as zf:
            infos = zf.infolist()
            if len(infos) > _MAX_MEMBERS:
                raise NpzError("%d members, more than an archive of arrays has" % len(infos))
            out = {}
            for info in infos:
                name = info.filename[:-4] if info.filename.endswith(".npy") else None
                if name is None:
                    raise NpzError("member %r is not an .npy array" % info.filename[:80])
                if name in out:
                    raise NpzError("member %r appears twice" % info.filename[:80])
                out[name] = _read_member(zf, info)
            return out
    except NpzError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
            NotImplementedError, RuntimeError) as exc:  # RuntimeError: an encrypted member
        raise NpzError("damaged archive (%s)" % (_reason(exc),)) from None


def _read_member(zf, info):
    label = info.filename[:80]
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        raise NpzError("member %r uses an unsupported compression method" % label)
    if info.file_size > _MAX_DEFLATE_RATIO * info.compress_size + 4096:
        raise NpzError("member %r claims %d bytes from %d compressed ones"
                       % (label, info.file_size, info.compress_size))
    with zf.open(info) as member:
        try:
            version = _npy_format.read_magic(member)
            if version == (1, 0):
                shape, fortran, dtype = _npy_format.read_array_header_1_0(member)
            elif version == (2, 0):
                shape, fortran, dtype = _npy_format.read_array_header_2_0(member)
            else:
                raise NpzError("member %r has .npy format version %s, which is not read"
                               % (label, version))
        except NpzError:
            raise
        except ValueError as exc:  # numpy's text; never its advice about pickle
            text = str(exc)
            if "pickle" in text.lower():
                text = "a header that needs pickle"
            raise NpzError("member %r has an unreadable .npy header (%s)" % (label, text)) from None
        if dtype.hasobject:
            raise NpzError("member %r holds Python objects (pickled data), which are never loaded"
                           % label)
        count = math.prod(shape)
        nbytes = count * dtype.itemsize
        if nbytes > info.file_size:
            raise NpzError("member %r: its header claims shape %s of %s (%d bytes), but the "
                           "member holds %d bytes" % (label, list(shape), dtype.str, nbytes,
                                                      info.file_size))
        array = numpy.empty(count, dtype=dtype)
        if nbytes:
            view = memoryview(array.view(numpy.uint8))
            got = 0
            while got < nbytes:
                n = member.readinto(view[got:])
                if not n:
                    break
                got += n
            if got != nbytes:
                raise NpzError("member %r is truncated (%d of %d data bytes)" % (label, got, nbytes))
        if member.read(1):
            raise NpzError("member %r has data after its array" % label)
    if fortran:
        return array.reshape(shape[::-1]).transpose()
    return array.reshape(shape)


def _reason(exc):
    text = str(exc).strip()
    return "%s: %s" % (type(exc).__name__, text) if text else type(exc).__name__
