"""Writing and reading ``.npz`` archives without pickle, and without trusting their headers.

``numpy.load`` allocates what an ``.npy`` header claims before reading the data (a 300-byte
member can claim 4 TB: MemoryError, or worse under memory overcommit), and its error for an
object array advises ``allow_pickle=True``. :func:`read_npz` reads each member's header itself,
refuses object dtypes, and allocates an array only after checking that the member really holds
the bytes its header claims.
"""
from __future__ import annotations

import errno
import hashlib
import functools
import io
import math
import os
import struct
import threading
import zipfile
import zlib

import numpy
from numpy.lib import format as _npy_format

from ._atomic import reserve
from ._stepwise import run_to_end

__all__ = ["write_npz", "write_npz_deferred", "DeferredNpz", "read_npz", "read_npy_header",
           "NpzError", "check_declared_sizes", "MAX_INFLATED_BYTES"]

# Deflate cannot expand data more than about 1032-fold: a member claiming more is lying.
_MAX_DEFLATE_RATIO = 1100
_MAX_MEMBERS = 1 << 20
# What the compressed members of one archive may inflate to, together, checked from their
# declared sizes before any is inflated (a 1 MB archive can declare a GiB of zeros per member).
# Stored members need no such bound: their bytes are in the file.
MAX_INFLATED_BYTES = 1 << 30
_WRITE_SLICE = 64 << 20


class NpzError(ValueError):
    """The archive is not a readable ``.npz`` of plain arrays; the text says why (no file name)."""


def write_npz(fileobj, arrays: dict) -> None:
    """Write ``arrays`` (name -> array) into ``fileobj`` as an uncompressed ``.npz``, front to back
    (``fileobj`` needs only ``write``).

    Member by member rather than through ``numpy.savez``, whose own keyword arguments (``file``,
    ``allow_pickle``) would swallow arrays of those names and which pickles object arrays. The
    bytes are those ``zipfile`` writes into a stream it cannot seek.
    """
    members, end = _write_members(fileobj, arrays, crc=True)
    _write_all(fileobj, _central_directory(members, end))


class DeferredNpz:
    """An ``.npz`` whose array bytes are in the file but whose CRCs and central directory are not
    yet: :func:`write_npz_deferred` writes what ``numpy.save`` would (a checkpoint's arrays leave
    the training thread at that speed), :meth:`finish` completes the file from what it holds."""

    def __init__(self, members, end):
        self._members = members
        self._end = end

    def finish(self, file) -> tuple:
        """Read ``file`` (an unbuffered binary file open for reading and writing) once, front to
        back: each member's CRC goes into its data descriptor, the central directory after the last.
        Returns the finished file's size and SHA-256, taken from the bytes in the file (the arrays
        may have changed since)."""
        return run_to_end(self.finish_steps(file))

    def finish_steps(self, file):
        """:meth:`finish` as a generator, one step per piece read (``_stepwise``)."""
        digest = hashlib.sha256()
        buffer = memoryview(bytearray(min(_READ_PIECE, self._end)))
        if self._end <= len(buffer) and _fd_of(file) is not None:
            return (yield from self._finish_small(file, buffer, digest))
        for member in self._members:
            for piece in _read_range(file, buffer, member.offset, member.content_offset):
                digest.update(piece)
            crc = 0
            for piece in _read_range(file, buffer, member.content_offset, member.data_end):
                crc = _crc_and_digest(piece, crc, digest)
                yield
            member.crc = crc
            descriptor = member.descriptor()
            _write_at(file, descriptor, member.data_end)
            digest.update(descriptor)
        tail = _central_directory(self._members, self._end)
        _write_at(file, tail, self._end)
        digest.update(tail)
        return self._end + len(tail), digest.hexdigest()

    def _finish_small(self, file, buffer, digest):
        """``finish_steps`` of an archive that fits the read buffer: read in one call, each
        descriptor and the central directory written in one (n members: n + 2 system calls,
        where reading member by member took 6 n)."""
        fd = _fd_of(file)
        _read_all_at(fd, buffer, 0)
        for member in self._members:
            digest.update(buffer[member.offset:member.content_offset])
            member.crc = _crc_and_digest(buffer[member.content_offset:member.data_end], 0, digest)
            descriptor = member.descriptor()
            _write_all_at(fd, descriptor, member.data_end)
            digest.update(descriptor)
            yield
        tail = _central_directory(self._members, self._end)
        _write_all_at(fd, tail, self._end)
        digest.update(tail)
        return self._end + len(tail), digest.hexdigest()


def write_npz_deferred(fileobj, arrays: dict) -> DeferredNpz:
    """Write ``arrays`` as :func:`write_npz` would, with zero CRCs and no central directory
    yet: call :meth:`DeferredNpz.finish` with the file. The arrays may change once this
    returns (their bytes are in the file)."""
    return DeferredNpz(*_write_members(fileobj, arrays, crc=False))


def _write_members(fileobj, arrays, crc):
    """Each member's local header, ``.npy`` bytes and data descriptor (whose CRC stays 0 without
    ``crc``); returns the members and where the central directory goes."""
    members, end = _plan(fileobj, arrays)
    # An unbuffered file takes up to _IOV_MAX pieces a system call (an archive of 12 small
    # members: one call, where a write a piece took 37); any other file object, a write each.
    fd = _fd_of(fileobj) if type(fileobj) is io.FileIO else None
    pieces = []
    for member in members:
        pieces.append(member.local_header)
        for piece in member.content():
            if crc:
                member.crc = zlib.crc32(piece, member.crc)
            pieces.append(piece)
        pieces.append(member.descriptor())
        if fd is None:
            for piece in pieces:
                _write_all(fileobj, piece)
            pieces = []
    if fd is not None:
        _writev_all(fd, pieces)
    for member in members:
        member.data = None      # the file holds the bytes now; the array may change
    return members, end


def _plan(fileobj, arrays):
    """The members of ``arrays`` with their places in the file, and where the central directory
    goes. A real file gets its whole size reserved first, as ``numpy.save`` does: writing into
    reserved blocks is about 1.4x faster on ext4, and a full disk shows before any byte is
    written."""
    members = []
    end = 0
    for name, arr in arrays.items():
        members.append(_Member(name, numpy.asarray(arr), end))
        end = members[-1].end
    try:
        fd = fileobj.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last
        fd = None
    if fd is not None:
        reserve(fd, end + len(_central_directory(members, end)))
    return members, end


# The zip format as zipfile writes it into an unseekable stream with force_zip64: a local header
# whose CRC and sizes are zero (they follow the data, in a zip64 data descriptor), stored data,
# the central directory; zip64 end records only where counts or offsets need them.
_ZIP64_LIMIT = (1 << 31) - 1
_COUNT_LIMIT = (1 << 16) - 1
_VERSION = 45                      # zip64
_UNIX = 3
_DATA_DESCRIPTOR_FLAG = 0x08
_UTF8_FLAG = 0x800
_DOS_DATE = 1 << 5 | 1             # 1980-01-01 00:00, zipfile's default
_PERMISSIONS = 0o600 << 16
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_CENTRAL_HEADER = struct.Struct("<4s4B4HL2L5H2L")
_DESCRIPTOR = struct.Struct("<4sLQQ")
_END64 = struct.Struct("<4sQ2H2L4Q")
_END64_LOCATOR = struct.Struct("<4sLQL")
_END = struct.Struct("<4s4H2LH")
_READ_PIECE = 16 << 20
# The most pieces one writev takes (the POSIX minimum of IOV_MAX; Linux allows 1024).
_IOV_MAX = 1024
_THREAD_PIECE = 1 << 20


class _Member:
    """One array's place in the archive: its headers, where its bytes go, its CRC once known."""

    def __init__(self, name, arr, offset):
        if arr.dtype.hasobject:
            raise TypeError("array %r has dtype object, which cannot be saved without pickle"
                            % (name,))
        if "\0" in name:
            raise ValueError("array name %r holds a NUL character" % (name,))
        self.filename = name + ".npy"
        try:
            self.encoded, self.flags = self.filename.encode("ascii"), _DATA_DESCRIPTOR_FLAG
        except UnicodeEncodeError:
            self.encoded = self.filename.encode("utf-8")
            self.flags = _DATA_DESCRIPTOR_FLAG | _UTF8_FLAG
        if len(self.encoded) > 0xFFFF:
            raise ValueError("array name %r is too long for a zip archive" % (name[:80],))
        if not (arr.flags.c_contiguous or arr.flags.f_contiguous):
            arr = numpy.ascontiguousarray(arr)
        self.data = arr.ravel(order="A").view(numpy.uint8)  # a view: the array is contiguous
        self.npy_header = _npy_header(arr)
        self.offset = offset
        self.local_header = self._local_header()
        self.content_offset = offset + len(self.local_header)
        self.size = len(self.npy_header) + self.data.nbytes
        self.data_end = self.content_offset + self.size
        self.end = self.data_end + _DESCRIPTOR.size
        self.crc = 0                # until the member's bytes are known

    def _local_header(self):
        extra = struct.pack("<HHQQ", 1, 16, 0, 0)
        return _LOCAL_HEADER.pack(b"PK\003\004", _VERSION, 0, self.flags, zipfile.ZIP_STORED, 0,
                                  _DOS_DATE, 0, 0xFFFFFFFF, 0xFFFFFFFF, len(self.encoded),
                                  len(extra)) + self.encoded + extra

    def content(self):
        """The member's ``.npy`` bytes, in large slices."""
        yield self.npy_header
        data = memoryview(self.data)
        for start in range(0, len(data), _WRITE_SLICE):
            yield data[start:start + _WRITE_SLICE]

    def descriptor(self):
        return _DESCRIPTOR.pack(b"PK\007\010", self.crc, self.size, self.size)

    def central_header(self):
        fields = []
        size = self.size
        if self.size > _ZIP64_LIMIT:
            fields += [self.size, self.size]
            size = 0xFFFFFFFF
        offset = self.offset
        if self.offset > _ZIP64_LIMIT:
            fields.append(self.offset)
            offset = 0xFFFFFFFF
        extra = struct.pack("<HH%dQ" % len(fields), 1, 8 * len(fields), *fields) if fields else b""
        return _CENTRAL_HEADER.pack(b"PK\001\002", _VERSION, _UNIX, _VERSION, 0, self.flags,
                                    zipfile.ZIP_STORED, 0, _DOS_DATE, self.crc, size, size,
                                    len(self.encoded), len(extra), 0, 0, 0, _PERMISSIONS,
                                    offset) + self.encoded + extra


def _npy_header(arr) -> bytes:
    # NumPy's header_data_from_array_1_0: C order unless only Fortran-contiguous.
    fortran = bool(arr.flags.f_contiguous and not arr.flags.c_contiguous)
    return _header_bytes(arr.dtype, fortran, arr.shape)


@functools.lru_cache(maxsize=1024)
def _header_bytes(dtype, fortran: bool, shape: tuple) -> bytes:
    """A member's ``.npy`` header, made once per dtype, order and shape: NumPy formats it in
    Python (a checkpoint of 20 tensors spent 0.27 ms of the writer's time on them)."""
    header = {"descr": _npy_format.dtype_to_descr(dtype), "fortran_order": fortran,
              "shape": shape}
    out = io.BytesIO()
    try:
        _npy_format.write_array_header_1_0(out, header)
    except ValueError:  # a header too large for format 1.0
        out = io.BytesIO()
        _npy_format.write_array_header_2_0(out, header)
    return out.getvalue()


def _central_directory(members, start) -> bytes:
    """The central directory of ``members`` at offset ``start``, and the end records."""
    directory = b"".join(m.central_header() for m in members)
    count, size, offset = len(members), len(directory), start
    tail = b""
    if count > _COUNT_LIMIT or offset > _ZIP64_LIMIT or size > _ZIP64_LIMIT:
        tail = (_END64.pack(b"PK\006\006", 44, _VERSION, _VERSION, 0, 0, count, count, size,
                            offset)
                + _END64_LOCATOR.pack(b"PK\006\007", 0, start + size, 1))
        count, size, offset = min(count, 0xFFFF), min(size, 0xFFFFFFFF), min(offset, 0xFFFFFFFF)
    return directory + tail + _END.pack(b"PK\005\006", 0, 0, count, count, size, offset, 0)


def _write_all(fileobj, data):
    view = memoryview(data).cast("B")
    done = 0
    while done < len(view):  # an unbuffered write may take less than it was given
        done += fileobj.write(view[done:])


def _fd_of(fileobj):
    try:
        return fileobj.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both of the last
        return None


def _writev_all(fd, pieces):
    """Write ``pieces`` (bytes-like) one after another at ``fd``'s position, in as few calls as
    ``writev`` takes (a call may write less than it was given: the rest follows)."""
    views = [memoryview(p).cast("B") for p in pieces if len(p)]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first:first + _IOV_MAX])
        if not written:
            raise OSError(errno.EIO, "the file took none of the %d bytes written to it"
                          % sum(map(len, views[first:])))
        while written >= len(views[first]):
            written -= len(views[first])
            first += 1
            if first == len(views):
                return
        views[first] = views[first][written:]


def _write_all_at(fd, data, offset):
    view = memoryview(data).cast("B")
    while len(view):
        done = os.pwrite(fd, view, offset)
        if not done:
            raise OSError(errno.EIO, "the file took none of the %d bytes written to it at byte %d"
                          % (len(view), offset))
        view, offset = view[done:], offset + done


def _read_all_at(fd, buffer, offset):
    """Fill ``buffer`` with the file's bytes from ``offset`` (an OSError if the file is shorter)."""
    done = 0
    while done < len(buffer):
        n = os.preadv(fd, [buffer[done:]], offset + done)
        if not n:
            raise OSError(errno.EIO, "the file ended at byte %d while it was being finished"
                          % (offset + done))
        done += n


def _write_at(file, data, offset):
    file.seek(offset)
    _write_all(file, data)


def _crc_and_digest(piece, crc, digest):
    """``piece``'s CRC, continuing ``crc``, while ``digest`` takes it on a second thread (both
    release the GIL; SHA-256 alone takes twice zlib's time). A thread of its own for each large
    piece runs at the priority of the thread that asks, whichever that is."""
    if len(piece) < _THREAD_PIECE:
        digest.update(piece)
        return zlib.crc32(piece, crc)
    hashing = threading.Thread(target=digest.update, args=(piece,), name="npz-digest")
    hashing.start()
    crc = zlib.crc32(piece, crc)
    hashing.join()
    return crc


def _read_range(file, buffer, start, stop):
    """The file's bytes ``[start, stop)`` in pieces read into ``buffer`` (each piece is valid until
    the next is read)."""
    file.seek(start)
    while start < stop:
        n = file.readinto(buffer[:min(len(buffer), stop - start)])
        if not n:
            raise OSError(errno.EIO, "the file ended at byte %d while it was being finished"
                          % start)
        yield buffer[:n]
        start += n


def read_npz(fileobj, stored_only: bool = False) -> dict:
    """``{name: array}`` from an ``.npz`` (a seekable binary file object), every member checked
    before its array is allocated; NpzError when anything is wrong. The members' declared sizes
    are checked before any is inflated: compressed ones may claim at most
    ``MAX_INFLATED_BYTES`` together, and none at all with ``stored_only`` (the archives this
    package writes, whose bytes are all in the file)."""
    try:
        with zipfile.ZipFile(fileobj) as zf:
            infos = zf.infolist()
            if len(infos) > _MAX_MEMBERS:
                raise NpzError("%d members, more than an archive of arrays has" % len(infos))
            check_declared_sizes(infos, stored_only)
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


def check_declared_sizes(infos, stored_only: bool = False) -> None:
    """NpzError when the members of an archive (``ZipFile.infolist()``) are compressed where
    ``stored_only`` says they are not, or declare more inflated bytes than a reader allows."""
    compressed = [info for info in infos if info.compress_type != zipfile.ZIP_STORED]
    if compressed and stored_only:
        raise NpzError("member %r is compressed, which this archive never is (written "
                       "uncompressed; a compressed member could inflate without bound)"
                       % compressed[0].filename[:80])
    declared = sum(info.file_size for info in compressed)
    if declared > MAX_INFLATED_BYTES:
        raise NpzError("its compressed members claim %d bytes in all once inflated, more than "
                       "the %d GiB an archive may inflate to" % (declared, MAX_INFLATED_BYTES >> 30))


def read_npy_header(f, version):
    """``(shape, fortran_order, dtype)`` of the .npy header at ``f`` (format ``version``); any
    damage a ValueError. NumPy's parser lets a hostile header's text escape as a tokenizer or
    syntax error (``tokenize.TokenError`` for an unclosed bracket)."""
    import tokenize

    read = (_npy_format.read_array_header_1_0 if version == (1, 0)
            else _npy_format.read_array_header_2_0)
    try:
        return read(f)
    except (SyntaxError, tokenize.TokenError, RecursionError, MemoryError) as exc:
        raise ValueError("cannot parse the header (%s)" % type(exc).__name__) from None


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
            if version in ((1, 0), (2, 0)):
                shape, fortran, dtype = read_npy_header(member, version)
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
