"""MXNet's own binary array-list format (``mx.nd.save`` / ``save_parameters``), read and written
without MXNet.

Layout (little-endian; mxnet-1.9-semantics.md §11): ``uint64 0x112``, ``uint64 0``, ``uint64 n``,
n array records, ``uint64 k`` and k names (``uint64`` length + UTF-8 bytes), k being 0 (a list) or
n (a dict). A record is a ``uint32`` magic (V2, or V3 for numpy-shape saves; V1 and magic-less
records come from old MXNet), the storage type, the shape (``int32`` ndim, ``int64`` sizes), the
device (two ``int32``), the dtype code and the raw data; sparse records add their stored shape
and index arrays.

MXNet trusts every size in the file. Here each size is checked against the bytes the file still
has before anything is allocated, so a truncated or hostile file is an ``MXNetFileError`` naming the
file and the byte offset, never a huge allocation.
"""
from __future__ import annotations

import os
import struct
from typing import NamedTuple

import numpy

from .._bounded import open_regular
from ..base import MXNetError

__all__ = ["MXNetFileError", "is_mxnet_file", "read_mxnet_file", "write_mxnet_file",
           "LIST_MAGIC", "SparseRecord"]

LIST_MAGIC = 0x112
_V1_MAGIC, _V2_MAGIC, _V3_MAGIC = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
_BFLOAT16 = 12
_CODE_TO_DTYPE = {0: numpy.float32, 1: numpy.float64, 2: numpy.float16, 3: numpy.uint8,
                  4: numpy.int32, 5: numpy.int8, 6: numpy.int64, 7: numpy.bool_}
_DTYPE_TO_CODE = {numpy.dtype(dt): code for code, dt in _CODE_TO_DTYPE.items()}
_DEVICE_TYPES = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
_DENSE, _ROW_SPARSE, _CSR = 0, 1, 2
_MAX_NDIM = 32
# A sparse record expands to a dense array whose size the file does not bound: the dense sizes
# of all the sparse records of one file together may not pass this (64 records of 1 GiB each
# fit in a few kilobytes).
MAX_DENSE_FROM_SPARSE_BYTES = 1 << 30
# Kept sparse, a record costs what the file holds, but any dense use would allocate its full
# size: a logical size past this is a hostile or damaged file, not a table.
MAX_SPARSE_LOGICAL_BYTES = 1 << 40


class SparseRecord(NamedTuple):
    """A row_sparse or csr array as the file holds it (host arrays): ``stype``, the full
    ``shape``, the stored ``values`` and the ``indices`` (row_sparse: ``(rows,)``, sorted
    unique int64 row ids; csr: ``(indptr, cols)``, int64)."""

    stype: str
    shape: tuple
    values: numpy.ndarray
    indices: tuple


class MXNetFileError(MXNetError, ValueError):
    """A file in MXNet's array format is truncated, corrupted or holds something not loadable
    (MXNet raises MXNetError there)."""


def is_mxnet_file(head: bytes) -> bool:
    """Whether the first 8 bytes of a file are MXNet's array-list magic."""
    return len(head) >= 8 and struct.unpack("<Q", head[:8])[0] == LIST_MAGIC


class _Reader:
    """Sequential reads from a file whose size is known, each checked against what is left."""

    def __init__(self, f, path, size):
        self._f, self.path, self.size, self.pos = f, path, size, 0
        self.dense_from_sparse = 0   # bytes the sparse records so far expand to

    def fail(self, what):
        raise MXNetFileError("%s: not a loadable MXNet array file: %s (at byte %d of %d)"
                             % (self.path, what, self.pos, self.size))

    def left(self):
        return self.size - self.pos

    def take(self, nbytes, what):
        if nbytes > self.left():
            self.fail("%s needs %d bytes but only %d remain; the file is truncated or corrupted"
                      % (what, nbytes, self.left()))
        data = self._f.read(nbytes)
        if len(data) != nbytes:
            self.fail("the file changed while it was read")
        self.pos += nbytes
        return data

    def unpack(self, fmt, what):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def array(self, dtype_code, shape, what):
        count = 1
        for dim in shape:
            count *= dim
        if dtype_code == _BFLOAT16:
            raw = numpy.frombuffer(self.take(count * 2, what), dtype="<u2")
            # bfloat16 is the top half of a float32, so the widening is exact.
            return (raw.astype(numpy.uint32) << 16).view(numpy.float32).reshape(shape)
        dtype = numpy.dtype(_CODE_TO_DTYPE[dtype_code]).newbyteorder("<")
        raw = numpy.frombuffer(self.take(count * dtype.itemsize, what), dtype=numpy.uint8)
        if dtype == numpy.bool_:
            return (raw != 0).reshape(shape)
        return raw.view(dtype).astype(dtype.newbyteorder("="), copy=True).reshape(shape)


def _shape(r, what, ndim_format="i", dim_format="q", allow_none=True):
    (ndim,) = r.unpack(ndim_format, what + "'s number of dimensions")
    if ndim == -1 and allow_none:
        return None
    if not 0 <= ndim <= _MAX_NDIM:
        r.fail("%s has %d dimensions (at most %d)" % (what, ndim, _MAX_NDIM))
    dims = r.unpack(dim_format * ndim, what) if ndim else ()
    if any(d < 0 for d in dims):
        r.fail("%s %s has a negative size" % (what, tuple(dims)))
    return tuple(int(d) for d in dims)


def _dtype_code(r, what):
    (code,) = r.unpack("i", what + "'s dtype code")
    if code not in _CODE_TO_DTYPE and code != _BFLOAT16:
        r.fail("%s has dtype code %d, which is none of MXNet's loadable dtypes" % (what, code))
    return code


def _device(r, what):
    dev_type, _ = r.unpack("ii", what + "'s device")
    if dev_type not in _DEVICE_TYPES:
        r.fail("%s has device type %d, which MXNet does not have" % (what, dev_type))


def _record(r, index, sparse=False):
    what = "array %d" % index
    (magic,) = r.unpack("I", what + "'s header")
    if magic in (_V2_MAGIC, _V3_MAGIC):
        (stype,) = r.unpack("i", what + "'s storage type")
        if stype not in (_DENSE, _ROW_SPARSE, _CSR):
            r.fail("%s has storage type %d (0 dense, 1 row_sparse, 2 csr)" % (what, stype))
        stored = _shape(r, what + "'s stored shape", allow_none=False) if stype != _DENSE else None
        shape = _shape(r, what + "'s shape")
        # Before numpy-shape mode (V2) a 0-d shape meant "no array"; in V3 that is ndim -1.
        if shape is None or (magic == _V2_MAGIC and not shape):
            r.fail("%s is an empty (uninitialized) NDArray, which has no values to load" % what)
    elif magic == _V1_MAGIC or magic <= _MAX_NDIM:
        stype, stored = _DENSE, None
        if magic == _V1_MAGIC:
            shape = _shape(r, what + "'s shape", ndim_format="I", allow_none=False)
        else:  # the oldest records have no magic: it is the ndim, and sizes are uint32
            shape = tuple(int(d) for d in r.unpack("I" * magic, what + "'s shape"))
        if not shape:
            r.fail("%s is an empty (uninitialized) NDArray, which has no values to load" % what)
    else:
        r.fail("%s starts with 0x%08X, which is no MXNet array header" % (what, magic))
    _device(r, what)
    code = _dtype_code(r, what)
    if stype == _DENSE:
        return r.array(code, shape, what + "'s values")
    return _sparse_record(r, what, stype, stored, shape, code, sparse)


def _sparse_record(r, what, stype, stored, shape, code, sparse=False):
    aux = []
    for i in range(1 if stype == _ROW_SPARSE else 2):
        aux_code = _dtype_code(r, "%s's index array %d" % (what, i))
        if aux_code not in (3, 4, 5, 6):
            r.fail("%s's index array %d has a non-integer dtype code %d" % (what, i, aux_code))
        aux.append((aux_code, _shape(r, "%s's index array %d shape" % (what, i), allow_none=False)))
    dense_bytes = numpy.dtype(numpy.float32 if code == _BFLOAT16 else _CODE_TO_DTYPE[code]).itemsize
    for dim in shape:
        dense_bytes *= dim
    limit = MAX_SPARSE_LOGICAL_BYTES if sparse else MAX_DENSE_FROM_SPARSE_BYTES
    if dense_bytes > limit:
        r.fail("%s is a sparse %s array that would expand to %d bytes when made dense (at most %d)"
               % (what, shape, dense_bytes, limit))
    r.dense_from_sparse += dense_bytes
    if r.dense_from_sparse > limit:
        r.fail("the sparse arrays up to %s would expand to %d bytes when made dense (at most %d "
               "for a file's sparse arrays together)" % (what, r.dense_from_sparse, limit))
    values = r.array(code, stored, what + "'s stored values")
    indices = [r.array(c, s, "%s's index array %d" % (what, i)).astype(numpy.int64)
               for i, (c, s) in enumerate(aux)]
    if stype == _ROW_SPARSE:
        (rows,) = indices
        if (len(shape) < 1 or rows.ndim != 1 or stored[:1] != rows.shape
                or tuple(stored[1:]) != tuple(shape[1:])):
            r.fail("%s: row_sparse shapes do not agree (shape %s, stored %s, %s row indices)"
                   % (what, shape, stored, rows.shape))
        if rows.size and (rows.min() < 0 or rows.max() >= shape[0]):
            r.fail("%s: a row index is outside 0..%d" % (what, shape[0] - 1))
        if sparse:
            if (numpy.diff(rows) <= 0).any():
                r.fail("%s: row_sparse row indices are not sorted and unique" % what)
            return SparseRecord("row_sparse", shape, values, (rows,))
        dense = numpy.zeros(shape, dtype=values.dtype)
        dense[rows] = values
        return dense
    indptr, cols = indices
    if (len(shape) != 2 or indptr.shape != (shape[0] + 1,) or cols.ndim != 1
            or stored != cols.shape):
        r.fail("%s: csr shapes do not agree (shape %s, stored %s, indptr %s, indices %s)"
               % (what, shape, stored, indptr.shape, cols.shape))
    if indptr[0] != 0 or indptr[-1] != cols.size or (numpy.diff(indptr) < 0).any():
        r.fail("%s: csr indptr is not a non-decreasing 0..%d" % (what, cols.size))
    if cols.size and (cols.min() < 0 or cols.max() >= shape[1]):
        r.fail("%s: a csr column index is outside 0..%d" % (what, shape[1] - 1))
    if sparse:
        return SparseRecord("csr", shape, values, (indptr, cols))
    dense = numpy.zeros(shape, dtype=values.dtype)
    dense[numpy.repeat(numpy.arange(shape[0]), numpy.diff(indptr)), cols] = values
    return dense


def read_mxnet_file(path, sparse=False):
    """The arrays (numpy, host) and the names (None for a list) of an MXNet array file.

    Sparse arrays come back dense (at most ``MAX_DENSE_FROM_SPARSE_BYTES`` each), or with
    ``sparse`` as :class:`SparseRecord`; bfloat16 as float32 (exactly), 0-d arrays as 0-d.
    """
    path = os.fspath(path)
    try:
        f = open_regular(path)  # a FIFO or a device is refused, never waited on or read forever
    except FileNotFoundError:
        raise MXNetFileError("%s: no such file" % path) from None
    except OSError as exc:
        raise MXNetFileError("%s: cannot open (%s)" % (path, exc.strerror or exc)) from None
    with f:
        r = _Reader(f, path, os.fstat(f.fileno()).st_size)
        magic, _reserved = r.unpack("QQ", "the file header")
        if magic != LIST_MAGIC:
            r.fail("the file starts with 0x%X, not MXNet's array-list header 0x112" % magic)
        (count,) = r.unpack("Q", "the number of arrays")
        # Every record takes at least 12 bytes, so this loop ends within the file's size.
        arrays = [_record(r, i, sparse) for i in range(count)]
        (name_count,) = r.unpack("Q", "the number of names")
        if name_count not in (0, count):
            r.fail("%d names for %d arrays (a list has none, a dict one per array)"
                   % (name_count, count))
        names = []
        for i in range(name_count):
            (length,) = r.unpack("Q", "name %d's length" % i)
            raw = r.take(length, "name %d" % i)
            try:
                names.append(raw.decode("utf-8"))
            except UnicodeDecodeError:
                r.fail("name %d is not UTF-8" % i)
        if len(set(names)) != len(names):
            r.fail("a name appears twice")
        if r.left():
            r.fail("%d unexpected bytes follow the names" % r.left())
    return arrays, (names if name_count else None)


def write_mxnet_file(f, arrays, names=None, devices=None):
    """Write ``arrays`` (host arrays) to the binary file object ``f`` as MXNet's ``nd.save`` does.

    ``names`` makes it a dict (one per array); ``devices`` gives each array's ``(device type,
    device id)`` as MXNet records it (default cpu(0)). 0-d arrays are written with shape ``(1,)``,
    as MXNet's default (non-numpy) shape mode holds them.
    """
    if names is not None and len(names) != len(arrays):
        raise ValueError("%d names for %d arrays" % (len(names), len(arrays)))
    f.write(struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays)))
    for i, arr in enumerate(arrays):
        if isinstance(arr, SparseRecord):
            _write_sparse(f, arr, devices[i] if devices is not None else (1, 0),
                          names[i] if names is not None else i)
            continue
        arr = numpy.asarray(arr)
        code = _DTYPE_TO_CODE.get(arr.dtype.newbyteorder("="))
        if code is None:
            raise TypeError("MXNet's array format has no dtype %s (array %s)"
                            % (arr.dtype, names[i] if names is not None else i))
        shape = arr.shape or (1,)
        dev_type, dev_id = devices[i] if devices is not None else (1, 0)
        f.write(struct.pack("<Iii%dq" % len(shape), _V2_MAGIC, _DENSE, len(shape), *shape))
        f.write(struct.pack("<iii", dev_type, dev_id, code))
        f.write(numpy.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes())
    names = list(names) if names is not None else []
    f.write(struct.pack("<Q", len(names)))
    for name in names:
        raw = name.encode("utf-8")
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)


def _shape_bytes(shape):
    return struct.pack("<i%dq" % len(shape), len(shape), *shape)


def _write_sparse(f, record, device, label):
    """One row_sparse or csr record, byte for byte as MXNet 1.9.1 writes it: the stored shape,
    the full shape, the device and dtype, each index array's dtype and shape, the values, then
    the index arrays."""
    values = numpy.asarray(record.values)
    code = _DTYPE_TO_CODE.get(values.dtype.newbyteorder("="))
    if code is None:
        raise TypeError("MXNet's array format has no dtype %s (array %s)" % (values.dtype, label))
    stype = {"row_sparse": _ROW_SPARSE, "csr": _CSR}[record.stype]
    index_arrays = [numpy.asarray(a, dtype=numpy.int64).reshape(-1) for a in record.indices]
    f.write(struct.pack("<Ii", _V2_MAGIC, stype))
    f.write(_shape_bytes(values.shape))
    f.write(_shape_bytes(tuple(record.shape)))
    f.write(struct.pack("<iii", device[0], device[1], code))
    for index in index_arrays:
        f.write(struct.pack("<i", _DTYPE_TO_CODE[numpy.dtype(numpy.int64)]))
        f.write(_shape_bytes(index.shape))
    f.write(numpy.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).tobytes())
    for index in index_arrays:
        f.write(numpy.ascontiguousarray(index, dtype="<i8").tobytes())
