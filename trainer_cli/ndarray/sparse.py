"""``nd.sparse``: MXNet's row_sparse and CSR storage.

- :class:`RowSparseNDArray`: a table of which only some rows are stored: ``indices`` (sorted,
  unique int64 row ids) and ``data`` (one row of values per index). Absent rows are zeros.
- :class:`CSRNDArray`: a 2-D matrix in compressed sparse row form: ``indptr`` (row starts),
  ``indices`` (int64 column ids) and ``data`` (the stored values).

Which operator keeps which storage is decided in one place, ``storage.py`` (MXNet's storage
inference and fallback); this module holds the arrays, their conversions and the sparse kernels
it dispatches to. A sparse array's stored values are ``_values``; its ``_data`` is the dense form
(so a dense operator never computes on the stored values). "Stored" is structural, as in MXNet:
an explicitly stored zero stays stored (``dot(csr.T, x)`` keeps every stored column of the csr),
while ``tostype`` from a dense array stores only the rows or entries that are not zero.

Gradients: ``nd.sparse.dot(csr, w)`` inside ``autograd.record()`` gives ``w`` a row_sparse
gradient (:class:`RowSparseGrad` on the tape) holding only the rows the csr's columns touch;
``w.attach_grad(stype='row_sparse')`` keeps it row_sparse, a dense gradient buffer receives it
scattered.
"""
from __future__ import annotations

import numpy

from ..base import StorageTypeError
from ..context import Context, current_context
from . import _embedding_kernels
from . import fallback_log as _fallback
from .mxnet_format import SparseRecord
from .ndarray import (NDArray, _Node, _recording_for, _recorded, _scatter_add, _transfer, _wrap,
                      _xp_of)

__all__ = ["BaseSparseNDArray", "RowSparseNDArray", "CSRNDArray", "RowSparseGrad", "RowsAndValues",
           "row_sparse_array", "csr_matrix", "zeros", "empty", "array", "retain", "csr_dot", "cast_storage",
           "all_rows", "clear", "embedding_grad", "embedding_of_rows"]
# The operators of ``nd.sparse`` (add, elemwise_*, abs, square, ...) are the dispatched ``nd``
# operators, added to this module by ``storage.py``.

_INDEX = numpy.int64

# nd.sparse also holds MXNet's ``slice`` operator (installed from the dispatch point): Python's
# own is kept under this name.
_py_slice = slice


def _dtype(dtype, default=numpy.float32):
    return numpy.dtype(default if dtype is None else dtype)


def _host(data):
    return data if type(data) is numpy.ndarray else data.get()


def _raw(x, ctx, dtype=None):
    """A backend array on ``ctx`` from an NDArray, NumPy array or nested list."""
    if isinstance(x, NDArray):
        data = x._data
    else:
        data = numpy.asarray(x)
    if dtype is not None and data.dtype != dtype:
        data = data.astype(dtype)
    return _transfer(data, ctx)


class BaseSparseNDArray(NDArray):
    """What row_sparse and csr arrays share: a logical ``shape`` over stored values.

    The stored values live in ``_values``. ``_data``, the field through which every dense
    operator reads an array, gives the *dense* array here (MXNet's storage fallback): an
    operator without a sparse kernel computes on the right values and never sees the stored
    ones by accident. Writing ``_data`` is refused, so that an in-place dense write cannot be
    lost in a temporary."""

    __slots__ = ("_shape", "_indices", "_values")
    stype_name = None
    _sparse = True

    @property
    def _data(self):
        if _fallback.verbose:
            _fallback.note(self)
        return self._dense_raw()

    @_data.setter
    def _data(self, value):
        if value is not None:
            raise TypeError("a %s array's values cannot be replaced through the dense field; "
                            "write its stored values (_values) or copy into it" % self.stype_name)

    @property
    def _xp(self):
        return _xp_of(self._values)

    @property
    def shape(self):
        return self._shape

    @property
    def dtype(self):
        return self._values.dtype.type

    @property
    def size(self):
        return int(numpy.prod(self._shape, dtype=numpy.int64))

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def stype(self):
        return self.stype_name

    @property
    def data(self) -> NDArray:
        """The stored values (a dense NDArray sharing this array's memory)."""
        return _wrap(self._values, self._ctx)

    @property
    def indices(self) -> NDArray:
        return _wrap(self._indices, self._ctx)

    def __len__(self):
        return self._shape[0]

    def __repr__(self):
        return "\n<%s %s @%s>" % (type(self).__name__, "x".join(map(str, self._shape)), self._ctx)

    __str__ = __repr__

    def asnumpy(self) -> numpy.ndarray:
        return _host(self._dense_raw())

    def astype(self, dtype, copy=True):
        if not copy and numpy.dtype(dtype) == self._values.dtype:
            return self
        out = self.copy()
        out._values = out._values.astype(dtype)
        return out

    def tostype(self, stype):
        return cast_storage(self, stype)

    def as_in_context(self, context: Context):
        return self if context == self._ctx else self.copyto(context)

    as_in_ctx = as_in_context

    def detach(self):
        out = self._moved(self._ctx, copy=False)
        return out

    def wait_to_read(self):
        if type(self._values) is not numpy.ndarray:
            self._xp.cuda.get_current_stream().synchronize()

    def copyto(self, other):
        if isinstance(other, Context):
            return self._moved(other, copy=True)
        if isinstance(other, BaseSparseNDArray):
            if other is self:
                return other
            src = self if other.stype == self.stype else cast_storage(self._dense(), other.stype)
            moved = src._moved(other.context, copy=True)
            other._values = moved._values.astype(other._values.dtype, copy=False)
            other._indices, other._shape = moved._indices, moved._shape
            if isinstance(other, CSRNDArray):
                other._indptr = moved._indptr
            return other
        if isinstance(other, NDArray):
            other[:] = _wrap(_transfer(self._dense_raw(), other.context), other.context)
            return other
        raise TypeError("copyto does not support type %s" % type(other))

    def copy(self):
        return _passing_gradient(self, self._moved(self._ctx, copy=True))

    def __setitem__(self, key, value):
        if not (isinstance(key, _py_slice) and key == _py_slice(None)):
            raise ValueError("assigning to part of a %s array is not supported (only [:])"
                             % self.stype)
        if isinstance(value, NDArray):
            src = value
        elif isinstance(value, (int, float, numpy.number)):
            src = _wrap(self._xp.full(self._shape, value, dtype=self._values.dtype), self._ctx)
        else:
            src = _wrap(_raw(value, self._ctx, self._values.dtype), self._ctx)
        if tuple(src.shape) != self._shape:
            raise ValueError("cannot assign an array of shape %s to a %s array of shape %s"
                             % (tuple(src.shape), self.stype, self._shape))
        src.copyto(self)

    def _dense(self) -> NDArray:
        return _wrap(self._dense_raw(), self._ctx)

    def reshape(self, *shape, **kwargs):
        raise ValueError("reshape is not supported for a %s array (MXNet: only for NDArray); "
                         "use tostype('default') first" % self.stype)

    # MXNet: ``x += y`` on a sparse array is ``(x + y).copyto(x)``.
    def __iadd__(self, other):
        return (self + other).copyto(self)

    def __isub__(self, other):
        return (self - other).copyto(self)

    def __imul__(self, other):
        return (self * other).copyto(self)

    def __itruediv__(self, other):
        return (self / other).copyto(self)

    __idiv__ = __itruediv__


class RowSparseNDArray(BaseSparseNDArray):
    stype_name = "row_sparse"
    __slots__ = ()

    def _dense_raw(self):
        xp = _xp_of(self._values)
        out = xp.zeros(self._shape, dtype=self._values.dtype)
        if len(self._indices):
            out[self._indices] = self._values
        return out

    def _moved(self, ctx, copy):
        return _rsp(_transfer(self._values, ctx, copy), _transfer(self._indices, ctx, copy),
                    self._shape, ctx)

    def retain(self, indices):
        return retain(self, indices)

    def __getitem__(self, key):
        if isinstance(key, _py_slice) and key == _py_slice(None):
            return self
        raise ValueError("a row_sparse array only supports [:] for indexing (MXNet); use "
                         "retain or tostype('default') first")


class CSRNDArray(BaseSparseNDArray):
    stype_name = "csr"
    __slots__ = ("_indptr",)

    @property
    def indptr(self) -> NDArray:
        return _wrap(self._indptr, self._ctx)

    def _rows(self):
        """The row id of every stored entry."""
        xp = _xp_of(self._values)
        return xp.repeat(xp.arange(self._shape[0], dtype=_INDEX), xp.diff(self._indptr))

    def _dense_raw(self):
        xp = _xp_of(self._values)
        out = xp.zeros(self._shape, dtype=self._values.dtype)
        if len(self._indices):
            # Duplicates cannot occur in a valid csr; assignment keeps the stored values.
            out[self._rows(), self._indices] = self._values
        return out

    def _moved(self, ctx, copy):
        return _csr(_transfer(self._values, ctx, copy), _transfer(self._indices, ctx, copy),
                    _transfer(self._indptr, ctx, copy), self._shape, ctx)

    def asscipy(self):
        """This matrix as a ``scipy.sparse.csr_matrix`` (SciPy is optional: needed for this
        call only)."""
        try:
            import scipy.sparse as spsp
        except ImportError as exc:
            raise ImportError("asscipy needs SciPy (pip install scipy)") from exc
        return spsp.csr_matrix((_host(self._values), _host(self._indices), _host(self._indptr)),
                               shape=self._shape)

    def __getitem__(self, key):
        """``[:]`` (this array) or a row slice ``[start:stop]`` (a csr array, as MXNet);
        anything else is refused as in MXNet."""
        if isinstance(key, (int, numpy.integer)):
            key = _py_slice(int(key), int(key) + 1)
        if isinstance(key, _py_slice) and key.step in (None, 1):
            if key == _py_slice(None):
                return self
            start, stop, _ = key.indices(self._shape[0])
            return csr_row_slice(self, start, max(stop, start))
        raise ValueError("a csr array supports only [:] and row slices [start:stop] for "
                         "indexing (MXNet); use tostype('default') first")


def _new(cls, ctx):
    out = cls.__new__(cls)
    out._ctx = ctx
    out._node = None
    out._grad = None
    out._grad_req = "null"
    out._fresh_grad = False
    return out


def _rsp(data, indices, shape, ctx) -> RowSparseNDArray:
    out = _new(RowSparseNDArray, ctx)
    out._values, out._indices, out._shape = data, indices, tuple(int(s) for s in shape)
    return out


def _csr(data, indices, indptr, shape, ctx) -> CSRNDArray:
    out = _new(CSRNDArray, ctx)
    out._values, out._indices, out._indptr = data, indices, indptr
    out._shape = tuple(int(s) for s in shape)
    return out


# ---------------------------------------------------------------------------------------------
# Constructors


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None) -> RowSparseNDArray:
    """``(data, indices)`` with ``shape``, or a dense array / RowSparseNDArray to convert."""
    ctx = ctx or current_context()
    if isinstance(arg1, RowSparseNDArray):
        out = arg1.as_in_context(ctx).copy()
        return out.astype(dtype) if dtype is not None else out
    if isinstance(arg1, tuple) and len(arg1) == 2:
        if _is_shape(arg1):
            return zeros("row_sparse", arg1, ctx, dtype)
        data, indices = arg1
        values = _raw(data, ctx, _data_dtype(data, dtype))
        rows = _raw(indices, ctx, _INDEX).reshape(-1)
        if shape is None:
            if not len(rows):
                raise ValueError("row_sparse_array: give shape for an array with no stored rows")
            shape = (int(_host(rows).max()) + 1,) + tuple(values.shape[1:])
        shape = tuple(int(s) for s in shape)
        if values.ndim == 0 or values.shape[0] != rows.shape[0] or tuple(values.shape[1:]) != shape[1:]:
            if not (rows.shape[0] == 0 and values.size == 0):
                raise ValueError("row_sparse_array: data of shape %s does not fit %d indices and shape %s"
                                 % (tuple(values.shape), rows.shape[0], shape))
            values = values.reshape((0,) + shape[1:])
        host = _host(rows)
        if len(host) and (host.min() < 0 or host.max() >= shape[0] or (numpy.diff(host) <= 0).any()):
            raise ValueError("row_sparse_array: indices must be sorted, unique and within [0, %d)"
                             % shape[0])
        return _rsp(values, rows, shape, ctx)
    return cast_storage(_checked_dense(arg1, shape, ctx, dtype), "row_sparse")


def _is_shape(arg):
    return all(isinstance(n, (int, numpy.integer)) for n in arg)


def _data_dtype(data, dtype):
    """MXNet: the values keep a NumPy array's or NDArray's dtype; other data is float32."""
    if dtype is not None:
        return numpy.dtype(dtype)
    if isinstance(data, (NDArray, numpy.ndarray)):
        return numpy.dtype(data.dtype)
    return numpy.dtype(numpy.float32)


def _checked_dense(arg1, shape, ctx, dtype):
    dense = _as_dense(arg1, ctx, dtype)
    if shape is not None and tuple(int(n) for n in shape) != tuple(dense.shape):
        raise ValueError("Shape mismatch detected. %s v.s. %s" % (tuple(dense.shape), tuple(shape)))
    return dense


def _scipy_csr(arg1):
    """``arg1`` as a SciPy csr matrix when it is any SciPy sparse matrix (SciPy is optional:
    without it nothing is one)."""
    import sys
    spsp = sys.modules.get("scipy.sparse")
    if spsp is None or not spsp.issparse(arg1):
        return None
    # A copy, as MXNet's: sum_duplicates() works in place and the caller's matrix stays as given.
    out = arg1.tocsr(copy=True)
    out.sum_duplicates()          # sorted, unique column ids per row
    return out


def _coo_to_csr(data, rows, cols, shape, ctx, dtype):
    """MXNet/SciPy's ``(data, (row, col))`` form: duplicates are summed."""
    values = numpy.asarray(_host(_raw(data, current_context(), _data_dtype(data, dtype)))).reshape(-1)
    r = numpy.asarray(_host(_raw(rows, current_context(), _INDEX))).reshape(-1)
    c = numpy.asarray(_host(_raw(cols, current_context(), _INDEX))).reshape(-1)
    if not (len(values) == len(r) == len(c)):
        raise ValueError("csr_matrix: data, row and col must have the same length, got %d, %d, %d"
                         % (len(values), len(r), len(c)))
    if shape is None:
        if not len(r):
            raise ValueError("csr_matrix: give shape for a matrix with no stored values")
        shape = (int(r.max()) + 1, int(c.max()) + 1)
    shape = tuple(int(n) for n in shape)
    if len(r) and (r.min() < 0 or c.min() < 0 or r.max() >= shape[0] or c.max() >= shape[1]):
        raise ValueError("csr_matrix: row and col indices must be within shape %s" % (shape,))
    keys = r * shape[1] + c
    unique, inverse = numpy.unique(keys, return_inverse=True)
    summed = numpy.zeros(len(unique), dtype=values.dtype)
    numpy.add.at(summed, inverse, values)
    counts = numpy.bincount(unique // shape[1], minlength=shape[0]) if len(unique) else \
        numpy.zeros(shape[0], _INDEX)
    indptr = numpy.concatenate([[0], numpy.cumsum(counts)]).astype(_INDEX)
    return csr_matrix((summed, (unique % shape[1]).astype(_INDEX), indptr), shape=shape, ctx=ctx)


def csr_matrix(arg1, shape=None, ctx=None, dtype=None) -> CSRNDArray:
    """``(data, indices, indptr)`` with ``shape``, or a dense 2-D array / CSRNDArray to convert."""
    ctx = ctx or current_context()
    if isinstance(arg1, CSRNDArray):
        out = arg1.as_in_context(ctx).copy()
        return out.astype(dtype) if dtype is not None else out
    scipy_csr = _scipy_csr(arg1)
    if scipy_csr is not None:
        if shape is not None and tuple(shape) != tuple(scipy_csr.shape):
            raise ValueError("Shape mismatch detected. %s v.s. %s" % (scipy_csr.shape, tuple(shape)))
        arg1, shape = (scipy_csr.data, scipy_csr.indices, scipy_csr.indptr), scipy_csr.shape
    if isinstance(arg1, tuple) and len(arg1) == 2 and _is_shape(arg1):
        return zeros("csr", arg1, ctx, dtype)
    if isinstance(arg1, tuple) and len(arg1) == 2 and isinstance(arg1[1], tuple) \
            and len(arg1[1]) == 2:
        return _coo_to_csr(arg1[0], arg1[1][0], arg1[1][1], shape, ctx, dtype)
    if isinstance(arg1, tuple) and len(arg1) == 3:
        data, indices, indptr = arg1
        values = _raw(data, ctx, _data_dtype(data, dtype)).reshape(-1)
        cols = _raw(indices, ctx, _INDEX).reshape(-1)
        starts = _raw(indptr, ctx, _INDEX).reshape(-1)
        host_cols, host_starts = _host(cols), _host(starts)
        if shape is None:
            if not len(host_cols):
                # MXNet: "invalid shape" (no column id to infer the width from)
                raise ValueError("csr_matrix: give shape for a matrix with no stored values")
            shape = (len(host_starts) - 1, int(host_cols.max()) + 1)
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or len(host_starts) != shape[0] + 1 or host_starts[0] != 0 \
                or host_starts[-1] != len(host_cols) or (numpy.diff(host_starts) < 0).any() \
                or len(values) != len(host_cols):
            raise ValueError("csr_matrix: indptr must start at 0, not decrease and end at the "
                             "number of stored values, for shape %s" % (shape,))
        if len(host_cols) and (host_cols.min() < 0 or host_cols.max() >= shape[1]):
            raise ValueError("csr_matrix: column indices must be within [0, %d)" % shape[1])
        return _csr(values, cols, starts, shape, ctx)
    return cast_storage(_checked_dense(arg1, shape, ctx, dtype), "csr")


def _as_dense(source, ctx, dtype) -> NDArray:
    if isinstance(source, BaseSparseNDArray):
        source = source._dense()
    if isinstance(source, NDArray):
        data = source._data if dtype is None else source._data.astype(dtype)
        return _wrap(_transfer(data, ctx), ctx)
    return _wrap(_raw(source, ctx, _dtype(dtype, getattr(source, "dtype", numpy.float32))), ctx)


def zeros(stype, shape, ctx=None, dtype=None):
    """An array of zeros with nothing stored (``stype`` ``'row_sparse'`` or ``'csr'``)."""
    ctx = ctx or current_context()
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    xp = ctx.xp
    dtype = _dtype(dtype)
    with ctx.device_scope():
        if stype == "row_sparse":
            return _rsp(xp.zeros((0,) + shape[1:], dtype=dtype), xp.zeros((0,), dtype=_INDEX), shape, ctx)
        if stype == "csr":
            if len(shape) != 2:
                raise ValueError("csr arrays are 2-D, got shape %s" % (shape,))
            return _csr(xp.zeros((0,), dtype=dtype), xp.zeros((0,), dtype=_INDEX),
                        xp.zeros((shape[0] + 1,), dtype=_INDEX), shape, ctx)
        if stype == "default":
            return _wrap(xp.zeros(shape, dtype=dtype), ctx)
    raise StorageTypeError("unknown storage type %r (row_sparse, csr or default)" % (stype,))


def to_record(x: BaseSparseNDArray):
    """``x`` as the host-side record MXNet's file format stores (``mxnet_format.SparseRecord``)."""
    if isinstance(x, RowSparseNDArray):
        return SparseRecord("row_sparse", x.shape, _host(x._values), (_host(x._indices),))
    return SparseRecord("csr", x.shape, _host(x._values), (_host(x._indptr), _host(x._indices)))


def from_record(record, ctx=None) -> BaseSparseNDArray:
    """The sparse array a file's ``SparseRecord`` holds (checked by the reader), on ``ctx``."""
    ctx = ctx or current_context()
    if record.stype == "row_sparse":
        return _rsp(_transfer(record.values, ctx, True), _transfer(record.indices[0], ctx, True),
                    record.shape, ctx)
    indptr, cols = record.indices
    return _csr(_transfer(record.values, ctx, True), _transfer(cols, ctx, True),
                _transfer(indptr, ctx, True), record.shape, ctx)


def empty(stype, shape, ctx=None, dtype=None):
    """A sparse array of ``stype`` storing nothing (MXNet's ``sparse.empty``)."""
    return zeros(stype, shape, ctx, dtype)


def array(source_array, ctx=None, dtype=None):
    """A sparse array from a sparse array or a SciPy csr matrix (keeping its dtype unless
    ``dtype`` is given); any other source: use the stype's constructor."""
    if isinstance(source_array, RowSparseNDArray):
        return row_sparse_array(source_array, ctx=ctx, dtype=dtype)
    if isinstance(source_array, CSRNDArray):
        return csr_matrix(source_array, ctx=ctx, dtype=dtype)
    # As MXNet, only the csr format: a coo or csc matrix is refused, not converted.
    if getattr(source_array, "format", None) == "csr":
        scipy_csr = _scipy_csr(source_array)
        if scipy_csr is not None:
            return csr_matrix(scipy_csr, ctx=ctx,
                              dtype=dtype if dtype is not None else scipy_csr.dtype)
    raise ValueError("nd.sparse.array: source_array must be a RowSparseNDArray, a CSRNDArray or "
                     "a scipy.sparse csr matrix, got %s (a dense array: use nd.array)"
                     % type(source_array).__name__)


def all_rows(source, ctx=None, dtype=None) -> RowSparseNDArray:
    """``source`` (dense, row_sparse or array-like) as a row_sparse array storing every row, zero
    rows included: how a row_sparse weight is held (MXNet's sparse optimizer kernels need every
    row of a row_sparse weight stored)."""
    if isinstance(source, RowSparseNDArray) and len(source._indices) == source._shape[0] \
            and (dtype is None or source._values.dtype == numpy.dtype(dtype)):
        dense = source._values      # stored rows are sorted and unique, so these are rows 0..n-1
        ctx = ctx or source.context
    else:
        ctx = ctx or (source.context if isinstance(source, NDArray) else current_context())
        dense = _as_dense(source, ctx, dtype)._data
    if dense.ndim == 0:
        raise ValueError("cannot store a 0-d array as row_sparse")
    with ctx.device_scope():
        values = _transfer(dense, ctx, True)
        rows = ctx.xp.arange(values.shape[0], dtype=_INDEX)
    return _rsp(values, rows, values.shape, ctx)


def clear(x: BaseSparseNDArray) -> None:
    """Make ``x`` store nothing (all zeros), in place: ``zero_grad`` of a sparse gradient."""
    empty = zeros(x.stype, x.shape, x.context, x.dtype)
    empty.copyto(x)


# ---------------------------------------------------------------------------------------------
# Operations


def cast_storage(x: NDArray, stype: str):
    """``x`` in storage ``stype`` (MXNet's ``tostype``): dense to row_sparse stores the rows
    that are not all zero, dense to csr the entries that are not zero; row_sparse and csr do not
    convert into each other (MXNet refuses, with the same message)."""
    have = x.stype
    if stype not in ("default", "row_sparse", "csr"):
        raise StorageTypeError("unknown storage type %r (default, row_sparse or csr)" % (stype,))
    if stype == have:
        # MXNet's cast_storage makes a new array even from dense to dense (and records it).
        return _passing_gradient(x, x.copy())
    if have != "default" and stype != "default":
        raise StorageTypeError("cast_storage from %s to %s is not supported" % (have, stype))
    if stype == "default":
        return _passing_gradient(x, x._dense())
    data = x._data
    xp = _xp_of(data)
    if stype == "row_sparse":
        if data.ndim == 0:
            raise ValueError("cannot store a 0-d array as row_sparse")
        flat = data.reshape(data.shape[0], -1) if data.ndim > 1 else data.reshape(-1, 1)
        rows = xp.nonzero((flat != 0).any(axis=1))[0].astype(_INDEX)
        out = _rsp(data[rows], rows, data.shape, x.context)
    else:
        if data.ndim != 2:
            raise ValueError("csr arrays are 2-D, got shape %s" % (tuple(data.shape),))
        rows, cols = xp.nonzero(data != 0)
        counts = xp.bincount(rows, minlength=data.shape[0]) if len(rows) else \
            xp.zeros(data.shape[0], _INDEX)
        indptr = xp.concatenate([xp.zeros(1, _INDEX), xp.cumsum(counts).astype(_INDEX)])
        out = _csr(data[rows, cols], cols.astype(_INDEX), indptr, data.shape, x.context)
    return _passing_gradient(x, out)


def _passing_gradient(x, out):
    """``out``, a copy of ``x``'s values in another storage, recorded as MXNet records a storage
    cast: the gradient passes through whole (into a sparse variable's own storage)."""
    if _recording_for(x) and out._node is None:
        out._node = _Node((x,), lambda g, needs: (g,))
    return out


def retain(data: RowSparseNDArray, indices):
    """The rows ``indices`` of ``data`` (sorted, unique ids): each requested id is stored, with
    zeros where ``data`` had no such row (MXNet's ``sparse.retain``)."""
    if not isinstance(data, RowSparseNDArray):
        raise TypeError("retain expects a RowSparseNDArray, got %s" % type(data).__name__)
    xp = _xp_of(data._values)
    want = xp.unique(_raw(indices, data.context, _INDEX).reshape(-1))
    values = xp.zeros((len(want),) + data._shape[1:], dtype=data._values.dtype)
    if len(want) and len(data._indices):
        pos = xp.searchsorted(data._indices, want)
        pos = xp.minimum(pos, len(data._indices) - 1)
        found = data._indices[pos] == want
        values[found] = data._values[pos[found]]
    out = _rsp(values, want, data._shape, data.context)
    if _recording_for(data):
        def vjp(g, needs):      # only the retained rows pass their gradient
            grad = xp.zeros(g.shape, dtype=g.dtype)
            grad[want] = g[want]
            return (grad,)
        out._node = _Node((data,), vjp)
    return out


def _union_add(a_idx, a_val, b_idx, b_val, xp):
    rows = xp.union1d(a_idx, b_idx).astype(_INDEX)
    values = xp.zeros((len(rows),) + tuple(a_val.shape[1:]), dtype=a_val.dtype)
    values[xp.searchsorted(rows, a_idx)] += a_val
    values[xp.searchsorted(rows, b_idx)] += b_val
    return rows, values


# ---------------------------------------------------------------------------------------------
# Sparse kernels. They compute on stored values only and record nothing: ``storage.py`` decides
# when one applies (MXNet's storage inference) and records the operator for autograd.


def map_values(x: BaseSparseNDArray, values) -> BaseSparseNDArray:
    """An array of ``x``'s storage and stored positions holding ``values`` (f(0) = 0)."""
    if isinstance(x, RowSparseNDArray):
        return _rsp(values, x._indices.copy(), x._shape, x._ctx)
    return _csr(values, x._indices.copy(), x._indptr.copy(), x._shape, x._ctx)


def _csr_keys(x):
    return x._rows() * x._shape[1] + x._indices


def union_op(lhs, rhs, fn):
    """``fn(lhs, rhs)`` elementwise for two arrays of one sparse storage and shape, over the
    union of their stored positions (a position one of them lacks reads 0 there)."""
    rhs = rhs.as_in_context(lhs.context)
    xp = _xp_of(lhs._values)
    dtype = lhs._values.dtype
    if isinstance(lhs, RowSparseNDArray):
        keys = xp.union1d(lhs._indices, rhs._indices).astype(_INDEX)
        width = (len(keys),) + tuple(lhs._values.shape[1:])
        l_keys, r_keys = lhs._indices, rhs._indices
    else:
        l_keys, r_keys = _csr_keys(lhs), _csr_keys(rhs)
        keys = xp.union1d(l_keys, r_keys).astype(_INDEX)
        width = (len(keys),)
    left, right = xp.zeros(width, dtype), xp.zeros(width, dtype)
    left[xp.searchsorted(keys, l_keys)] = lhs._values
    right[xp.searchsorted(keys, r_keys)] = rhs._values.astype(dtype, copy=False)
    values = fn(left, right).astype(dtype, copy=False)
    if isinstance(lhs, RowSparseNDArray):
        return _rsp(values, keys, lhs._shape, lhs.context)
    n_rows, n_cols = lhs._shape
    rows = keys // n_cols
    counts = xp.bincount(rows, minlength=n_rows) if len(rows) else xp.zeros(n_rows, _INDEX)
    indptr = xp.concatenate([xp.zeros(1, _INDEX), xp.cumsum(counts).astype(_INDEX)])
    return _csr(values, (keys % n_cols).astype(_INDEX), indptr, lhs._shape, lhs.context)


def dense_at_stored(x: BaseSparseNDArray, dense):
    """The values of the backend array ``dense`` (broadcastable to ``x``'s shape) at ``x``'s
    stored positions: one row per stored row (row_sparse) or one value per entry (csr)."""
    xp = _xp_of(x._values)
    dense = _transfer(dense, x.context)
    if dense.ndim < len(x._shape):
        dense = dense.reshape((1,) * (len(x._shape) - dense.ndim) + dense.shape)
    if isinstance(x, RowSparseNDArray):
        full = xp.broadcast_to(dense, x._shape)
        return full[x._indices]
    rows = x._rows()
    return dense[rows if dense.shape[0] != 1 else xp.zeros_like(rows),
                 x._indices if dense.shape[1] != 1 else xp.zeros_like(x._indices)]


def csr_slice(x, begin, end):
    """Rows ``begin[0]:end[0]`` and columns ``begin[1]:end[1]`` of a csr array (MXNet's
    ``slice`` kernel for csr); ``None`` bounds mean the whole axis."""
    n_rows, n_cols = x._shape
    r0, r1, _ = _py_slice(begin[0], end[0]).indices(n_rows)
    rows = csr_row_slice(x, r0, max(r1, r0))
    if len(begin) < 2 or (begin[1] in (None, 0) and end[1] in (None, n_cols)):
        return rows
    c0, c1, _ = _py_slice(begin[1], end[1]).indices(n_cols)
    c1 = max(c1, c0)
    xp = _xp_of(x._values)
    keep = (rows._indices >= c0) & (rows._indices < c1)
    counts = xp.zeros(rows._shape[0], _INDEX)
    if len(keep):
        counts = xp.bincount(rows._rows()[keep], minlength=rows._shape[0]).astype(_INDEX)
    indptr = xp.concatenate([xp.zeros(1, _INDEX), xp.cumsum(counts).astype(_INDEX)])
    return _csr(rows._values[keep], rows._indices[keep] - c0, indptr, (rows._shape[0], c1 - c0),
                x._ctx)


def csr_take_rows(x, ids):
    """Rows ``ids`` (int64, in range, repeats allowed) of a csr array, as a csr array."""
    xp = _xp_of(x._values)
    ptr = x._indptr
    counts = (ptr[1:] - ptr[:-1])[ids]
    indptr = xp.concatenate([xp.zeros(1, _INDEX), xp.cumsum(counts).astype(_INDEX)])
    total = int(indptr[-1])
    # Position of every output entry in the source: its row's start plus its rank in the row.
    rank = xp.arange(total, dtype=_INDEX) - xp.repeat(indptr[:-1], counts)
    src = xp.repeat(ptr[:-1][ids], counts) + rank
    return _csr(x._values[src], x._indices[src], indptr, (len(ids), x._shape[1]), x._ctx)


def csr_row_slice(x, start, stop):
    ptr = x._indptr
    lo, hi = int(ptr[start]), int(ptr[stop])
    return _csr(x._values[lo:hi].copy(), x._indices[lo:hi].copy(), ptr[start:stop + 1] - ptr[start],
                (stop - start, x._shape[1]), x._ctx)


class RowsAndValues:
    """Raw row_sparse data: ``rows`` (sorted unique int64 ids), ``values`` (one row of values
    per id, ``(len(rows),) + shape[1:]``) and the logical ``shape``."""

    __slots__ = ("rows", "values", "shape")

    def __init__(self, rows, values, shape):
        self.rows, self.values, self.shape = rows, values, tuple(shape)

    @property
    def dtype(self):
        return self.values.dtype

    def dense(self):
        """The full array, absent rows as zeros."""
        xp = _xp_of(self.values)
        out = xp.zeros(self.shape, dtype=self.values.dtype)
        if len(self.rows):
            out[self.rows] = self.values
        return out


class RowSparseGrad(RowsAndValues):
    """A row_sparse gradient on autograd's tape: ``rows`` (sorted unique ids) and ``values``.

    Summing with another gives the union; with a dense gradient, the dense sum. NumPy and CuPy
    defer to it (``__array_ufunc__ = None``) so that ``dense + sparse`` lands here too.
    ``owned``: ``values`` was made for this gradient alone, so the first buffer to receive it may
    keep it instead of a copy."""

    __array_ufunc__ = None
    __slots__ = ("owned",)

    def __init__(self, rows, values, shape, owned=False):
        super().__init__(rows, values, shape)
        self.owned = owned

    def __add__(self, other):
        if isinstance(other, RowSparseGrad):
            rows, values = _union_add(self.rows, self.values, other.rows, other.values,
                                      _xp_of(self.values))
            return RowSparseGrad(rows, values, self.shape, owned=True)
        out = other.copy()
        out[self.rows] += self.values
        return out

    __radd__ = __add__

    def receive_into(self, var: NDArray):
        """Write (or with ``grad_req='add'``, add) this gradient into ``var``'s buffer."""
        buf = var._grad
        if isinstance(buf, RowSparseNDArray):
            if var._grad_req == "add" and len(buf._indices):
                rows, values = _union_add(buf._indices, buf._values, self.rows, self.values,
                                          _xp_of(self.values))
            elif self.owned:
                rows, values = self.rows, self.values
                self.owned = False
            else:
                rows, values = self.rows, self.values.copy()
            buf._indices, buf._values = rows, values.astype(buf._values.dtype, copy=False)
        else:
            data = buf._data
            if var._grad_req != "add":
                data[...] = 0
            data[self.rows] += self.values
        var._fresh_grad = True


def embedding_grad(ids, grads, shape) -> RowSparseGrad:
    """The gradient of an embedding lookup of ``ids`` (flat int64 row ids, repeats allowed) whose
    output got ``grads`` (one row per id): each looked-up id stored once, sorted, holding the sum
    of its rows in lookup order. Structural, as in MXNet: an id whose rows sum to zero is stored."""
    xp = _xp_of(grads)
    width = tuple(shape[1:])
    if not len(ids):
        return RowSparseGrad(xp.zeros((0,), dtype=_INDEX), xp.zeros((0,) + width, grads.dtype), shape)
    if xp is not numpy:
        from . import _rows_cuda
        if grads.dtype.char in "fd":
            # Summed by a kernel in lookup order, not by atomic adds: the same bits every run.
            rows, values = _rows_cuda.row_group_sums(grads.reshape((len(ids),) + width),
                                                     ids.astype(_INDEX, copy=False))
            return RowSparseGrad(rows, values, shape, owned=True)
        rows, inverse = xp.unique(ids, return_inverse=True)
        values = xp.zeros((len(rows),) + width, dtype=grads.dtype)
        _scatter_add(values, inverse, grads)
        return RowSparseGrad(rows.astype(_INDEX, copy=False), values, shape, owned=True)
    # A stable sort keeps each id's rows in lookup order, and they are summed in that order.
    # (numpy.take gathers rows about twice as fast as fancy indexing.)
    grouped = _embedding_kernels.group_rows(ids, shape[0], grads.reshape(len(ids), -1))
    if grouped is not None:
        rows, values = grouped
        return RowSparseGrad(rows, values.reshape((len(rows),) + width), shape, owned=True)
    sorted_ids, order = _stable_sort(ids, shape[0])
    ordered = numpy.take(grads, order, axis=0)
    repeated = sorted_ids[1:] == sorted_ids[:-1]
    if not repeated.any():  # no id twice: the rows as they are (nothing to add)
        return RowSparseGrad(sorted_ids, ordered, shape, owned=True)
    # Each id's first row as it is, then its later rows added one at a time in lookup order
    # (add.at is unbuffered and in index order; reduceat would sum a run of single values
    # pairwise, in another order than the kernels and the GPU).
    first = numpy.concatenate(([True], ~repeated))
    starts = numpy.flatnonzero(first)
    values = ordered[starts]
    numpy.add.at(values, numpy.cumsum(first)[~first] - 1, ordered[~first])
    return RowSparseGrad(sorted_ids[starts], values, shape, owned=True)


def _stable_sort(ids, table_rows):
    """``(sorted ids, order)`` of non-negative int64 ``ids`` below ``table_rows``, equal ids in
    their given order. Each id is sorted with its position packed into its low bits (``id <<
    shift | position``): NumPy's default sort of int64 (SIMD, branch-free) takes about a third
    of a stable argsort's time on a batch of random ids, where timsort's branches mispredict.
    A table too large to pack into int64 takes the stable argsort."""
    count = len(ids)
    shift = count.bit_length()
    if table_rows > 1 << (62 - shift):
        order = numpy.argsort(ids, kind="stable")
        return numpy.take(ids, order), order
    keys = ids << shift
    keys |= numpy.arange(count, dtype=_INDEX)
    keys.sort()
    return keys >> shift, keys & ((1 << shift) - 1)


def embedding_of_rows(data: NDArray, weight: RowSparseNDArray, input_dim=None) -> NDArray:
    """``Embedding`` of a row_sparse ``weight``: each (float) id in ``data``, clipped to the
    table, picks its stored row, or zeros where ``weight`` stores none; ``weight`` gets the
    row_sparse gradient of the looked-up ids (MXNet's ``SparseEmbedding``)."""
    if not isinstance(weight, RowSparseNDArray):
        raise TypeError("Embedding takes a dense or row_sparse weight, not %s" % weight.stype)
    xp = _xp_of(weight._values)
    table, width = weight._shape[0], weight._shape[1:]
    rows = table if input_dim is None else int(input_dim)
    ids = data._data if _xp_of(data._data) is xp else xp.asarray(data._data)
    ids = xp.clip(ids.astype(_INDEX), 0, rows - 1)
    flat = ids.reshape(-1)
    stored = weight._indices
    out = xp.zeros((flat.shape[0],) + width, dtype=weight._values.dtype)
    if len(stored) and len(flat):
        pos = xp.minimum(xp.searchsorted(stored, flat), len(stored) - 1)
        found = stored[pos] == flat
        out[found] = weight._values[pos[found]]
    out = out.reshape(ids.shape + width)
    if not _recording_for(weight):
        return _wrap(out, weight.context)
    shape = weight.shape

    def vjp(g, needs):
        return (embedding_grad(flat, g.reshape((flat.shape[0],) + width), shape),)
    return _recorded(out, weight.context, (weight,), vjp)


def receive_dense_grad(var: NDArray, g) -> None:
    """A dense gradient ``g`` reaching a variable whose buffer is row_sparse (a dense op on a
    weight with ``grad_stype='row_sparse'``): the rows that are not all zero are stored, as
    MXNet's storage fallback casts the dense result. A csr buffer stores the entries that are
    not zero (added to what it holds with ``grad_req='add'``)."""
    xp = _xp_of(g)
    buf = var._grad
    if isinstance(buf, CSRNDArray):
        if var._grad_req == "add":
            g = g + buf._dense_raw()
        cast_storage(_wrap(g, buf.context), "csr").copyto(buf)
        var._fresh_grad = True
        return
    flat = g.reshape(g.shape[0], -1) if g.ndim > 1 else g.reshape(-1, 1)
    rows = xp.nonzero((flat != 0).any(axis=1))[0].astype(_INDEX)
    RowSparseGrad(rows, g[rows], g.shape, owned=True).receive_into(var)


def _check_2d(x, what):
    if x.ndim != 2:
        raise ValueError("dot: %s must be 2-D, got shape %s" % (what, x.shape))


def csr_dot(lhs, rhs, transpose_a=False):
    """The sparse kernel of ``dot`` for a csr left operand (``nd.dot`` dispatches here):
    ``dot(csr, dense)`` is dense, ``dot(csr.T, dense)`` (``transpose_a=True``) is row_sparse over
    the csr's stored columns, ``dot(csr, row_sparse)`` is dense. With ``rhs`` a dense variable
    inside ``autograd.record()``, ``rhs`` gets a row_sparse gradient."""
    _check_2d(rhs, "rhs")
    rows, cols = lhs._rows(), lhs._indices
    if transpose_a:
        src, dst, n_out = rows, cols, lhs.shape[1]
    else:
        src, dst, n_out = cols, rows, lhs.shape[0]
    inner = lhs.shape[0] if transpose_a else lhs.shape[1]
    if rhs.shape[0] != inner:
        raise ValueError("dot: shapes %s%s and %s do not align"
                         % (lhs.shape, ".T" if transpose_a else "", rhs.shape))
    if isinstance(rhs, RowSparseNDArray):
        if transpose_a:
            rhs = rhs._dense()  # MXNet: dot(csr.T, rsp) also falls back
        else:
            # A row_sparse weight pulled by ``row_sparse_data``: same gradient as a dense one.
            return _csr_dot_result(lhs, rhs, _csr_times_rsp(lhs, rhs, src, dst, n_out))
    if isinstance(rhs, BaseSparseNDArray):
        rhs = rhs._dense()
    b = rhs._data
    xp = _xp_of(b)
    contrib = lhs._values[:, None].astype(b.dtype) * b[src]
    if transpose_a:
        out_rows = xp.unique(cols)
        values = xp.zeros((len(out_rows), b.shape[1]), dtype=b.dtype)
        xp.add.at(values, xp.searchsorted(out_rows, dst), contrib)
        result = _rsp(values, out_rows.astype(_INDEX), (n_out, b.shape[1]), lhs.context)
        if _recording_for(rhs):
            weights = lhs._values

            def vjp(g, needs):
                # d(csr.T @ w)/dw = csr @ g
                grad = xp.zeros(b.shape, dtype=g.dtype)
                _scatter_add(grad, src, weights[:, None].astype(g.dtype) * g[dst])
                return (grad,)
            result._node = _Node((rhs,), vjp)
        return result
    out = xp.zeros((n_out, b.shape[1]), dtype=b.dtype)
    xp.add.at(out, dst, contrib)
    return _csr_dot_result(lhs, rhs, out)


def _csr_dot_result(csr, rhs, out):
    """``out = csr @ rhs`` as an NDArray, recorded when ``rhs`` needs a gradient."""
    if not _recording_for(rhs):
        return _wrap(out, csr.context)
    shape = rhs.shape

    def vjp(g, needs):
        # d(csr @ w)/dw = csr.T @ g: only the stored columns get rows (explicit zeros included).
        grad = csr_dot(csr, _wrap(g, csr.context), transpose_a=True)
        return (RowSparseGrad(grad._indices, grad._values, shape),)
    return _recorded(out, csr.context, (rhs,), vjp)


def _csr_times_rsp(csr, rsp, src, dst, n_out):
    """``csr @ w`` with ``w`` row_sparse: entries whose column ``w`` does not store add nothing."""
    xp = _xp_of(rsp._values)
    out = xp.zeros((n_out,) + rsp.shape[1:], dtype=rsp._values.dtype)
    if not len(rsp._indices) or not len(src):
        return out
    pos = xp.minimum(xp.searchsorted(rsp._indices, src), len(rsp._indices) - 1)
    hit = rsp._indices[pos] == src
    contrib = csr._values[hit][:, None].astype(rsp._values.dtype) * rsp._values[pos[hit]]
    xp.add.at(out, dst[hit], contrib)
    return out
