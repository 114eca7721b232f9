"""MXNet's test helpers (``mxnet.test_utils``) that work on arrays: tolerances by dtype, the
comparisons (``assert_almost_equal`` with MXNet's report of the worst mismatches), random shapes
and arrays (dense, ``row_sparse``, ``csr``), the default context, environment variables for a
block of code, and comparing two optimizers. Random draws come from ``numpy.random``, as MXNet's
do, so a seeded program gets the same shapes and values.

Nothing is downloaded: ``download`` returns a file already in place and otherwise says where to
put it, which is all ``get_mnist`` needs; ``get_mnist_ubyte`` and ``get_cifar10`` unpack MXNet's
archives once they are in place. The helpers that execute symbols (``check_numeric_gradient``,
``check_symbolic_forward``/``backward``, ``check_consistency``, ``simple_forward``), that read
pickles (``get_mnist_pkl``), and the statistical checks of random generators are not provided
(docs/porting.md).
"""
from __future__ import annotations

import functools
import logging
import numbers
import os
import platform
import sys
from contextlib import contextmanager

import numpy as np
import numpy.random as rnd
import numpy.testing as npt

from . import context as _context
from .base import MXNetError, NotDownloadedError, missing_attribute
from .gluon.data.vision.datasets import read_idx
from ._zip_extract import ArchiveError, extract_zip
from .io import DataIter, MNISTIter
from .ndarray import NDArray, creation
from .ndarray import random as _nd_random
from .ndarray import sparse as _sparse

__all__ = [
    "default_context", "set_default_context", "default_dtype", "default_rtols", "default_atols",
    "default_numeric_eps", "effective_dtype", "get_tolerance", "get_tols", "get_atol", "get_rtol",
    "get_etol", "random_arrays", "random_uniform_arrays", "random_sample", "assign_each",
    "assign_each2", "create_2d_tensor", "create_vector", "get_identity_mat",
    "get_identity_mat_batch", "shuffle_csr_column_indices", "rand_sparse_ndarray", "rand_ndarray",
    "create_sparse_array", "create_sparse_array_zd", "rand_shape_2d", "rand_shape_3d",
    "rand_shape_nd", "rand_coord_2d", "np_reduce", "same", "checkShapes", "almost_equal",
    "locationError", "assert_almost_equal", "assert_allclose", "assert_almost_equal_with_err",
    "assert_almost_equal_ignore_nan", "assert_exception", "retry", "list_gpus", "download",
    "NotDownloadedError", "get_mnist", "get_mnist_ubyte", "get_mnist_iterator", "get_cifar10",
    "same_array", "discard_stderr", "DummyIter",
    "compare_ndarray_tuple", "compare_optimizer", "environment", "collapse_sum_like",
    "is_cd_run", "is_aarch64_run", "check_gluon_hybridize_consistency",
]


# ----------------------------------------------------------------------------- context, dtypes
def default_context():
    """The context arrays go to when none is named (``with ctx:`` or ``set_default_context``)."""
    return _context.current_context()


def set_default_context(ctx):
    """Make ``ctx`` this thread's default context."""
    _context.Context._local.value = ctx


def default_dtype():
    return np.float32


_INTEGERS = (np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64)


def default_rtols():
    """Relative tolerance by dtype (MXNet's table)."""
    return {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4, np.dtype(np.float64): 1e-5,
            **{np.dtype(t): 0 for t in _INTEGERS}}


def default_atols():
    """Absolute tolerance by dtype (MXNet's table)."""
    return {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3, np.dtype(np.float64): 1e-20,
            **{np.dtype(t): 0 for t in _INTEGERS}}


def default_numeric_eps():
    """Finite-difference steps by dtype: powers of two, exact as input deltas."""
    return {np.dtype(np.float16): 1.0 / 2 ** 6, np.dtype(np.float32): 1.0 / 2 ** 9,
            np.dtype(np.float64): 1.0 / 2 ** 14}


def effective_dtype(dat):
    """The dtype whose tolerances apply to ``dat``: its own. (MXNet takes float16's for float32
    on GPUs that multiply in TF32; CuPy here does not, unless ``CUPY_TF32=1`` is set.)"""
    return np.dtype(dat.dtype)


def get_tolerance(dat, tol, default_tol):
    """``tol`` when it is a number; else its entry (a dict by dtype), else ``default_tol``'s,
    for ``dat``'s dtype."""
    if isinstance(tol, numbers.Number):
        return tol
    dtype = effective_dtype(dat)
    return ({} if tol is None else tol).get(dtype, default_tol[dtype])


def get_tols(x, y, rtol, atol):
    """``(rtol, atol)`` for comparing ``x`` and ``y``: given ones, else the larger default of
    the two dtypes."""
    x = np.array(x) if isinstance(x, numbers.Number) else x
    y = np.array(y) if isinstance(y, numbers.Number) else y
    return (max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols())),
            max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols())))


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    return default_atols()[dtype] if atol is None else atol


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    return default_rtols()[dtype] if rtol is None else rtol


def get_etol(etol=None):
    return 0 if etol is None else etol


# ----------------------------------------------------------------------------- random data
def random_arrays(*shapes):
    """Standard-normal float32 NumPy arrays of ``shapes`` (one array for one shape)."""
    arrays = [np.array(np.random.randn(), dtype=default_dtype()) if len(s) == 0
              else np.random.randn(*s).astype(default_dtype()) for s in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes, **kwargs):
    low, high = kwargs.pop("low", 0.0), kwargs.pop("high", 1.0)
    dtype = kwargs.pop("dtype", default_dtype())
    if kwargs:
        raise TypeError("Got unexpected argument/s : " + str(kwargs.keys()))
    return [np.random.uniform(low, high, size=s).astype(dtype) for s in shapes]


def random_sample(population, k):
    """``k`` elements of ``population`` in a random order."""
    assert 0 <= k <= len(population)
    chosen = population[:]
    np.random.shuffle(chosen)
    return chosen[0:k]


def _each(function, *inputs):
    if function is None:
        return np.array(inputs[0])
    assert all(x.shape == inputs[0].shape for x in inputs)
    out = np.zeros(inputs[0].shape)
    flat = out.reshape(-1, order="F")
    for k, values in enumerate(zip(*(x.reshape(-1, order="F") for x in inputs))):
        flat[k] = function(*values)
    return flat.reshape(inputs[0].shape, order="F")


def assign_each(the_input, function):
    """``function`` of each element of ``the_input``, as float64 (the input copied without one)."""
    return _each(function, the_input)


def assign_each2(input1, input2, function):
    """``function`` of each pair of elements, as float64 (``input1`` copied without one)."""
    return _each(function, input1, input2)


def create_2d_tensor(rows, columns, dtype=np.int64):
    a = creation.arange(0, rows, dtype=dtype).reshape(rows, 1)
    return a.broadcast_to((rows, columns))


def create_vector(size, dtype=np.int64):
    return creation.arange(0, size, dtype=dtype)


def get_identity_mat(size):
    return creation.array(np.eye(size, dtype=np.float32))


def get_identity_mat_batch(size):
    eye = np.eye(size, dtype=np.float32)
    return creation.array(np.stack([eye, eye]))


def shuffle_csr_column_indices(csr):
    """Shuffle the column indices within each row of a SciPy csr matrix, in place."""
    for i in range(len(csr.indptr) - 1):
        part = np.array(csr.indices[csr.indptr[i]:csr.indptr[i + 1]])
        np.random.shuffle(part)
        csr.indices[csr.indptr[i]:csr.indptr[i + 1]] = part


def _check_csr_request(num_rows, num_cols, density, distribution):
    if density < 0 or density > 1:
        raise ValueError("density has to be between 0 and 1")
    if num_rows <= 0 or num_cols <= 0:
        raise ValueError("num_rows or num_cols should be greater than 0")
    if distribution == "powerlaw" and int(num_rows * num_cols * density) < 2 * num_rows:
        raise ValueError("not supported for this density: %s for this shape (%s, %s) Please keep "
                         ": num_rows * num_cols * density >= 2 * num_rows"
                         % (density, num_rows, num_cols))


def _uniform_csr(num_rows, num_cols, density, dtype, data_init, shuffle_indices, ctx):
    """A csr matrix with about ``density`` of its entries stored: SciPy's ``sparse.rand`` where
    SciPy is installed (MXNet's draw), else a uniform dense draw masked below ``density``."""
    _check_csr_request(num_rows, num_cols, density, "uniform")
    try:
        from scipy import sparse as spsp
    except ImportError:
        if data_init is not None or shuffle_indices:
            raise ValueError("data_init and shuffle_csr_indices need SciPy (not installed)")
        dense = _nd_random.uniform(shape=(num_rows, num_cols), dtype=dtype, ctx=ctx)
        return (dense * (dense < density)).tostype("csr")
    csr = spsp.rand(num_rows, num_cols, density, dtype=dtype, format="csr")
    if data_init is not None:
        csr.data.fill(data_init)
    if shuffle_indices:
        shuffle_csr_column_indices(csr)
    return _sparse.csr_matrix((csr.data, csr.indices, csr.indptr), shape=(num_rows, num_cols),
                              dtype=dtype, ctx=ctx)


def _powerlaw_csr(num_rows, num_cols, density, dtype, ctx):
    """A csr matrix whose rows hold 1, 2, 4, ... entries (every row at least its first), until
    ``density`` of the entries are used (MXNet's layout)."""
    _check_csr_request(num_rows, num_cols, density, "powerlaw")
    unused = int(num_rows * num_cols * density)
    out = np.zeros((num_rows, num_cols), dtype=dtype)
    done = lambda: creation.array(out, ctx=ctx).tostype("csr")     # noqa: E731
    for row in range(num_rows):
        out[row][0] = 1 + rnd.uniform(0.001, 2)
        unused -= 1
        if unused <= 0:
            return done()
    col_max = 2
    for row in range(num_rows):
        col_limit = min(num_cols, col_max)
        if col_limit == num_cols and unused > col_limit:
            out[row] = 1 + rnd.uniform(0.001, 2)
            unused = unused - col_limit + 1
            if unused <= 0:
                return done()
            continue
        for col in range(1, col_limit):
            out[row][col] = 1 + rnd.uniform(0.001, 2)
            unused -= 1
            if unused <= 0:
                return done()
        col_max *= 2
    if unused > 0:
        raise ValueError("not supported for this density: %s for this shape (%s,%s)"
                         % (density, num_rows, num_cols))
    return done()


def rand_sparse_ndarray(shape, stype, density=None, dtype=None, distribution=None,
                        data_init=None, rsp_indices=None, modifier_func=None,
                        shuffle_csr_indices=False, ctx=None):
    """A random ``row_sparse`` or ``csr`` array and its parts: ``(array, (values, indices))``
    for row_sparse, ``(array, (indptr, indices, data))`` for csr. ``density``: the share of rows
    (row_sparse) or entries (csr) stored, random when None; ``distribution``: ``uniform`` or,
    for csr, ``powerlaw``."""
    ctx = ctx if ctx else default_context()
    density = rnd.rand() if density is None else density
    dtype = default_dtype() if dtype is None else dtype
    distribution = "uniform" if distribution is None else distribution
    if stype == "row_sparse":
        if distribution != "uniform":
            raise ValueError("Distribution %s not supported for row_sparse" % distribution)
        if rsp_indices is not None:
            indices = rsp_indices
            assert len(indices) <= shape[0]
        else:
            indices = np.argwhere(rnd.rand(shape[0]) < density).flatten()
        if indices.shape[0] == 0:
            return (creation.zeros(shape, stype="row_sparse", dtype=dtype, ctx=ctx),
                    (np.array([], dtype=dtype), np.array([])))
        values = rnd.rand(indices.shape[0], *shape[1:]).astype(dtype)
        if data_init is not None:
            values.fill(data_init)
        if modifier_func is not None:
            values = assign_each(values, modifier_func)
        array = _sparse.row_sparse_array((values, indices), shape=shape, dtype=dtype, ctx=ctx)
        return array, (values, indices)
    if stype == "csr":
        if len(shape) != 2:
            raise ValueError("a csr array has two axes, not shape %s" % (tuple(shape),))
        if distribution == "uniform":
            csr = _uniform_csr(shape[0], shape[1], density, dtype, data_init,
                               shuffle_csr_indices, ctx)
        elif distribution == "powerlaw":
            csr = _powerlaw_csr(shape[0], shape[1], density, dtype, ctx)
        else:
            raise ValueError("Distribution not supported: %s" % distribution)
        return csr, (csr.indptr, csr.indices, csr.data)
    raise ValueError("unknown storage type %r: 'row_sparse' or 'csr'" % (stype,))


def rand_ndarray(shape, stype="default", density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A random array of ``shape`` and storage type ``stype`` (dense: standard normal)."""
    ctx = ctx if ctx else default_context()
    if stype == "default":
        return creation.array(random_arrays(shape), dtype=dtype, ctx=ctx)
    return rand_sparse_ndarray(shape, stype, density=density, modifier_func=modifier_func,
                               dtype=dtype, shuffle_csr_indices=shuffle_csr_indices,
                               distribution=distribution, ctx=ctx)[0]


def create_sparse_array(shape, stype, data_init=None, rsp_indices=None, dtype=None,
                        modifier_func=None, density=.5, shuffle_csr_indices=False):
    """A random sparse array; row_sparse ``rsp_indices`` are sorted first."""
    if stype not in ("row_sparse", "csr"):
        raise AssertionError("Unknown storage type: " + stype)
    if stype == "row_sparse" and rsp_indices is not None:
        rsp_indices = np.sort(np.asarray(rsp_indices))
    return rand_sparse_ndarray(shape, stype, density=density, data_init=data_init,
                               rsp_indices=rsp_indices if stype == "row_sparse" else None,
                               dtype=dtype, modifier_func=modifier_func,
                               shuffle_csr_indices=shuffle_csr_indices)[0]


def create_sparse_array_zd(shape, stype, density, data_init=None, rsp_indices=None,
                           dtype=None, modifier_func=None, shuffle_csr_indices=False):
    """``create_sparse_array`` where a row_sparse array's rows are ``rsp_indices`` alone."""
    if stype == "row_sparse":
        density = 0.0
        if rsp_indices is not None:
            assert len(rsp_indices) <= shape[0]
    return create_sparse_array(shape, stype, data_init=data_init, rsp_indices=rsp_indices,
                               dtype=dtype, modifier_func=modifier_func, density=density,
                               shuffle_csr_indices=shuffle_csr_indices)


def rand_shape_2d(dim0=10, dim1=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return rnd.randint(low, dim0 + 1), rnd.randint(low, dim1 + 1)


def rand_shape_3d(dim0=10, dim1=10, dim2=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return rnd.randint(low, dim0 + 1), rnd.randint(low, dim1 + 1), rnd.randint(low, dim2 + 1)


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    low = 0 if allow_zero_size else 1
    return tuple(rnd.randint(low, dim + 1, size=num_dim))


def rand_coord_2d(x_low, x_high, y_low, y_high):
    return (np.random.randint(x_low, x_high, dtype=np.int64),
            np.random.randint(y_low, y_high, dtype=np.int64))


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """``numpy_reduce_func`` over each of ``axis`` (an int, a list, or None: all), last first."""
    if isinstance(axis, int):
        axis = [axis]
    else:
        axis = list(axis) if axis is not None else range(len(dat.shape))
    ret = dat
    for i in reversed(sorted(axis)):
        ret = numpy_reduce_func(ret, axis=i)
    if keepdims:
        shape = list(dat.shape)
        for i in axis:
            shape[i] = 1
        ret = ret.reshape(tuple(shape))
    return ret


# ----------------------------------------------------------------------------- comparisons
def _numpy(x):
    return x.asnumpy() if isinstance(x, NDArray) else x


def same(a, b):
    """Whether two arrays are equal, element for element (NumPy's ``array_equal``)."""
    return np.array_equal(_numpy(a), _numpy(b))


def checkShapes(a, b):  # noqa: N802 (MXNet's name)
    if a.shape != b.shape:
        raise AssertionError(npt.build_err_msg(
            [a, b], err_msg="a.shape = {} and b.shape = {} are not equal".format(a.shape, b.shape)))


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """Whether ``|a - b| <= atol + rtol * |b|`` everywhere (NumPy's ``allclose``)."""
    a, b = _numpy(a), _numpy(b)
    if not use_broadcast:
        checkShapes(a, b)
    return np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol), equal_nan=equal_nan)


def locationError(a, b, index, names, maxError=False):  # noqa: N802,N803 (MXNet's names)
    return "Location of %serror: %s, %s=%.8f, %s=%.8f" % (
        "maximum " if maxError else "", str(index), names[0], a[index], names[1], b[index])


def _worst(a, b, rtol, atol):
    """The index (Python ints) of the largest tolerance violation and its size (infinities
    equal as in ``allclose``)."""
    absdiff = np.where(np.equal(a, b), 0, np.abs(a - b))
    violation = absdiff / (atol + rtol * np.abs(b) + 1e-20)
    index = np.unravel_index(np.argmax(violation), violation.shape)
    return tuple(int(i) for i in index), np.max(violation)


def _mismatch_report(a, b, rtol, atol, names, equal_nan, mismatches):
    """MXNet's failure message: the worst violations printed one by one (up to
    ``mismatches[0]``), counted up to ``mismatches[1]``."""
    index, rel = _worst(a, b, rtol, atol)
    if index == ():
        return "Error %f exceeds tolerance rtol=%e, atol=%e.\n" % (rel, rtol, atol)
    worst_index, worst = index, rel
    print("\n*** Maximum errors for vector of size {}:  rtol={}, atol={}\n"
          .format(a.size, rtol, atol))
    a_left, b_left = a.copy(), b.copy()
    i = 1
    while i <= a.size:
        if i <= mismatches[0]:
            print("%3d: Error %f  %s" % (i, rel, locationError(a, b, index, names)))
        a_left[index] = b_left[index] = 0
        if almost_equal(a_left, b_left, rtol, atol, equal_nan=equal_nan):
            break
        i += 1
        if i <= mismatches[1] or mismatches[1] <= 0:
            index, rel = _worst(a_left, b_left, rtol, atol)
        else:
            break
    degree = "at least " if mismatches[1] > 0 and i > mismatches[1] else ""
    return "Error %f exceeds tolerance rtol=%e, atol=%e (mismatch %s%f%%).\n%s" % (
        worst, rtol, atol, degree, 100 * i / a.size,
        locationError(a, b, worst_index, names, maxError=True))


def _fail(a, b, message):
    with np.printoptions(threshold=4, suppress=True):
        raise AssertionError(npt.build_err_msg([a, b], err_msg=message))


def assert_almost_equal(a, b, rtol=None, atol=None, names=("a", "b"), equal_nan=False,
                        use_broadcast=True, mismatches=(10, 10)):
    """Raise AssertionError, with the worst mismatches, unless ``a`` and ``b`` (NumPy arrays,
    NDArrays or numbers) agree within ``rtol``/``atol`` (numbers, or dicts by dtype; None: the
    larger default of the two dtypes)."""
    if not use_broadcast:
        checkShapes(a, b)
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = _numpy(a), _numpy(b)
    if getattr(a, "dtype", None) == np.bool_ and getattr(b, "dtype", None) == np.bool_:
        np.testing.assert_equal(a, b)
        return
    if almost_equal(a, b, rtol, atol, equal_nan=equal_nan):
        return
    a, b = np.asarray(a), np.asarray(b)
    _fail(a, b, _mismatch_report(a, b, rtol, atol, names, equal_nan, mismatches))


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a, b, rtol=None, atol=None, etol=None, names=("a", "b"),
                                 equal_nan=False, mismatches=(10, 10)):
    """``assert_almost_equal``, passing while at most ``etol`` of the elements (a fraction)
    are out of tolerance."""
    etol = get_etol(etol)
    if etol <= 0:
        return assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = np.asarray(_numpy(a)), np.asarray(_numpy(b))
    equals = np.isclose(a, b, rtol=rtol, atol=atol)
    if 1 - np.count_nonzero(equals) / equals.size > etol:
        _fail(a, b, _mismatch_report(a, b, rtol, atol, names, equal_nan, mismatches))


def assert_almost_equal_ignore_nan(a, b, rtol=None, atol=None, names=("a", "b")):
    """``assert_almost_equal`` with every position that is NaN in either array left out."""
    a, b = np.copy(_numpy(a)), np.copy(_numpy(b))
    nan_mask = np.logical_or(np.isnan(a), np.isnan(b))
    a[nan_mask] = 0
    b[nan_mask] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f, exception_type, *args, **kwargs):
    """``f(*args, **kwargs)`` must raise ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError("%s did not raise %s" % (getattr(f, "__name__", f),
                                                  getattr(exception_type, "__name__",
                                                          exception_type)))


def retry(n):
    """Run a stochastic test up to ``n`` times, failing only when every run fails."""
    assert n > 0

    def decorate(f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            for i in range(n):
                try:
                    f(*args, **kwargs)
                    return
                except AssertionError:
                    if i == n - 1:
                        raise
        return wrapper
    return decorate


def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    """``assert_almost_equal`` on two arrays or (nested) tuples of them; None skips."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def compare_optimizer(opt1, opt2, shape, dtype, w_stype="default", g_stype="default",
                      rtol=1e-4, atol=1e-5, compare_states=True, ntensors=1):
    """One update of ``opt1`` and ``opt2`` from the same random weight and gradient: their
    states and weights agree. With a list of shapes, ``opt2`` updates the ``ntensors`` tensors
    in one call and ``opt1`` one by one."""
    ctx = default_context()

    def weight_and_grad(stype, density):
        # A sparse weight stores every row (density 1); a sparse gradient a random share.
        if stype == "default":
            x2 = _nd_random.uniform(shape=shape, ctx=ctx, dtype=dtype)
            return x2.copyto(ctx), x2
        if stype in ("row_sparse", "csr"):
            x2 = rand_ndarray(shape, stype, density=density, dtype=dtype)
            return x2.copyto(ctx).tostype("default"), x2
        raise ValueError("storage type %r not supported: 'default', 'row_sparse' or 'csr'"
                         % (stype,))

    if not isinstance(shape, list):
        assert ntensors == 1
        w1, w2 = weight_and_grad(w_stype, 1)
        g1, g2 = weight_and_grad(g_stype, None)
        state1 = opt1.create_state_multi_precision(0, w1)
        state2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(state1, state2)
        opt1.update_multi_precision(0, w1, g1, state1)
        opt2.update_multi_precision(0, w2, g2, state2)
        if compare_states:
            compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)
        return
    w1 = tuple(_nd_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape)
    g1 = tuple(_nd_random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape)
    w2, g2 = tuple(w.copy() for w in w1), tuple(g.copy() for g in g1)
    state2 = [opt2.create_state_multi_precision(0, w2[i]) for i in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), w2, g2, state2)
    for i in range(ntensors):
        state1 = opt1.create_state_multi_precision(i, w1[i])
        opt1.update_multi_precision(i, w1[i], g1[i], state1)
        if compare_states:
            compare_ndarray_tuple(state1, state2[i], rtol, atol)
        compare_ndarray_tuple(w1[i], w2[i], rtol, atol)


def same_array(array1, array2):
    """Whether two NDArrays share their memory: a change made through one shows in the other
    (and is undone)."""
    array1[:] += 1
    if not same(array1.asnumpy(), array2.asnumpy()):
        array1[:] -= 1
        return False
    array1[:] -= 1
    return same(array1.asnumpy(), array2.asnumpy())


def collapse_sum_like(a, shape):
    """``a`` summed over the axes that ``shape`` (broadcastable to ``a``'s) lacks or has as 1."""
    assert len(a.shape) >= len(shape)
    if np.prod(shape) == 0 or a.size == 0:
        return np.zeros(shape, dtype=a.dtype)
    extra = len(a.shape) - len(shape)
    axes = list(range(extra))
    for i, s in enumerate(shape):
        if s != a.shape[i + extra]:
            assert s == 1
            axes.append(i + extra)
    return np.sum(a, axis=tuple(axes)).reshape(shape)


def check_gluon_hybridize_consistency(net_builder, data_l, numpy_func=None, test_grad=True,
                                      rtol=1E-4, atol=1E-4):
    """A HybridBlock from ``net_builder(prefix='net_')`` gives the same outputs (and input
    gradients, with ``test_grad``) imperative and hybridized, from the same parameters; and
    ``numpy_func``'s outputs where given. The block must draw no random numbers."""
    from . import autograd
    from .initializer import Initializer

    class _FromArrays(Initializer):
        def __init__(self, arrays):
            super().__init__()
            self._arrays = arrays

        def _init_weight(self, name, arr):
            arr[()] = self._arrays[name]

    saved_out = saved_grads = init = None
    for hybridize in (False, True):
        for use_autograd in ([False, True] if test_grad else [False]):
            net = net_builder(prefix="net_")
            if init is None:
                net.initialize()
            else:
                net.initialize(init)
            if hybridize:
                net.hybridize()
            inputs = [x.copy() for x in data_l]
            if use_autograd:
                for x in inputs:
                    x.attach_grad()
                with autograd.record():
                    out = net(*inputs)
                out.backward(out)
            else:
                out = net(*inputs)
            if init is None:
                init = _FromArrays({k: v.data().asnumpy()
                                    for k, v in net.collect_params().items()})
            if saved_out is None:
                saved_out = out.asnumpy()
            else:
                assert_almost_equal(out.asnumpy(), saved_out, rtol=rtol, atol=atol)
            if use_autograd:
                if saved_grads is None:
                    saved_grads = [x.grad.asnumpy() for x in inputs]
                else:
                    for x, saved in zip(inputs, saved_grads):
                        assert_almost_equal(x.grad.asnumpy(), saved, rtol=rtol, atol=atol)
    if numpy_func is not None:
        assert_almost_equal(saved_out, numpy_func(*[x.asnumpy() for x in data_l]),
                            rtol=rtol, atol=atol)


# ----------------------------------------------------------------------------- machine, files
def list_gpus():
    """``range`` over the GPUs CuPy sees (empty without CuPy or a GPU)."""
    return range(_context.num_gpus())


def download(url, fname=None, dirname=None, overwrite=False, retries=5):
    """The path where MXNet's ``download`` would put ``url`` (``fname``, by default the URL's
    last part, in ``dirname``), when the file is already there. trainer_cli downloads nothing:
    otherwise (or with ``overwrite``) ``NotDownloadedError`` says where to put it."""
    assert retries >= 0, "Number of retries should be at least 0"
    fname = url.split("/")[-1] if fname is None else fname
    if dirname is not None:
        fname = os.path.join(dirname, fname)
    if not overwrite and os.path.isfile(fname):
        # MXNet logs this through the root logger's module function, whose first call gives the
        # root logger its default handler at WARNING: a later logging.basicConfig(level=INFO) in
        # the program is then a no-op, and its logging.info() lines stay unshown (the Straight
        # Dope's conditional GAN after get_mnist()). The same call gives the same program output.
        logging.info("%s exists, skipping download", fname)
        return fname
    raise NotDownloadedError(
        "%s: trainer_cli does not download files; fetch %s yourself and save it as %s "
        "(the path MXNet's download() would write)%s."
        % (fname, url, os.path.abspath(fname),
           "" if not overwrite else ", then call download() without overwrite=True"))


_MNIST_URL = "http://data.mxnet.io/data/mnist/"


def get_mnist():
    """MNIST as MXNet's ``get_mnist`` returns it, from the four ``.gz`` idx files in the current
    folder (where MXNet's would download them): ``train_data``/``test_data`` float32 (N, 1, 28,
    28) in [0, 1], ``train_label``/``test_label`` int8."""
    def read(label_name, image_name):
        label = read_idx(download(_MNIST_URL + label_name), 0x801, 1).view(np.int8)
        image = read_idx(download(_MNIST_URL + image_name), 0x803, 3)
        return label, image.reshape(image.shape[0], 1, 28, 28).astype(np.float32) / 255

    train_label, train_data = read("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz")
    test_label, test_data = read("t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz")
    return {"train_data": train_data, "train_label": train_label,
            "test_data": test_data, "test_label": test_label}


def _unpacked(folder, names, url):
    """``names`` in ``folder``, unpacking MXNet's archive ``url`` there first when one is missing;
    the archive must already be in ``folder`` (``download`` fetches nothing)."""
    if not os.path.isdir(folder):
        os.makedirs(folder)
    if not all(os.path.exists(os.path.join(folder, name)) for name in names):
        try:
            extract_zip(download(url, dirname=folder), folder)
        except ArchiveError as exc:
            raise MXNetError(str(exc)) from None
        missing = [n for n in names if not os.path.exists(os.path.join(folder, n))]
        if missing:
            raise MXNetError("%s: the archive unpacked, but %s is still missing from %s"
                             % (url.rsplit("/", 1)[-1], ", ".join(missing), folder))


def get_mnist_ubyte():
    """MNIST's four unpacked idx files in ``data/`` of the current folder, as MXNet's
    ``get_mnist_ubyte`` leaves them: unpacked from ``data/mnist.zip`` when they are not there
    (trainer_cli downloads nothing: without the archive ``NotDownloadedError`` says where to put
    it)."""
    _unpacked("data", ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                       "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"],
              "http://data.mxnet.io/mxnet/data/mnist.zip")


def get_cifar10():
    """CIFAR-10's RecordIO files in ``data/cifar/``, as MXNet's ``get_cifar10`` leaves them:
    unpacked from ``data/cifar10.zip`` when they are not there (nothing is downloaded)."""
    _unpacked("data", ["cifar/train.rec", "cifar/test.rec", "cifar/train.lst", "cifar/test.lst"],
              "http://data.mxnet.io/mxnet/data/cifar10.zip")


def get_mnist_iterator(batch_size, input_shape, num_parts=1, part_index=0):
    """``(train, validation)`` ``mx.io.MNISTIter``s over ``get_mnist_ubyte``'s files, as MXNet's:
    both shuffled (seed 0), flat unless ``input_shape`` has three dimensions."""
    get_mnist_ubyte()
    flat = len(input_shape) != 3
    train = MNISTIter(image="data/train-images-idx3-ubyte", label="data/train-labels-idx1-ubyte",
                      input_shape=input_shape, batch_size=batch_size, shuffle=True, flat=flat,
                      num_parts=num_parts, part_index=part_index)
    val = MNISTIter(image="data/t10k-images-idx3-ubyte", label="data/t10k-labels-idx1-ubyte",
                    input_shape=input_shape, batch_size=batch_size, flat=flat,
                    num_parts=num_parts, part_index=part_index)
    return train, val


@contextmanager
def discard_stderr():
    """Send the process's standard error, file descriptor 2 (where C libraries write, whatever
    ``sys.stderr`` is), to /dev/null for the block."""
    sys.stderr.flush()
    with open(os.devnull, "w") as bit_bucket:
        saved = os.dup(2)
        try:
            os.dup2(bit_bucket.fileno(), 2)
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


class DummyIter(DataIter):
    """An iterator that returns the first batch of ``real_iter`` forever (for timing)."""

    def __init__(self, real_iter):
        super().__init__()
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.batch_size = real_iter.batch_size
        self.the_batch = next(real_iter)

    def __iter__(self):
        return self

    def next(self):
        return self.the_batch


@contextmanager
def environment(*args):
    """Set environment variables for the block (``environment(name, value)`` or
    ``environment({name: value, ...})``; a value of None unsets), restoring them after."""
    if len(args) == 1 and isinstance(args[0], dict):
        wanted = args[0]
    else:
        assert len(args) == 2, "Expecting one dict arg or two args: env var name and value"
        wanted = {args[0]: args[1]}
    before = {name: os.environ.get(name) for name in wanted}

    def apply(values):
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    apply(wanted)
    try:
        yield
    finally:
        creation.waitall()
        apply(before)


def is_cd_run():
    return os.environ.get("CD_JOB", 0) == "1"


def is_aarch64_run():
    return platform.machine() == "aarch64"


# ----------------------------------------------------------------------------- not provided
_ABSENT = {
    name: "symbolic test helper (mxnet.test_utils.%s: it executes symbols)" % name
    for name in ("simple_forward", "numeric_grad", "check_numeric_gradient",
                 "check_symbolic_forward", "check_symbolic_backward", "check_speed",
                 "check_consistency", "same_symbol_structure")}
_ABSENT.update({
    "get_mnist_pkl": "pickled MNIST download (mxnet.test_utils.get_mnist_pkl: pickle is never read)",
    "get_zip_data": "archive download (mxnet.test_utils.get_zip_data)",
    "get_bz2_data": "archive download (mxnet.test_utils.get_bz2_data)",
    "download_model": "model download (mxnet.test_utils.download_model)",
    "get_im2rec_path": "im2rec tool (mxnet.test_utils.get_im2rec_path)",
})
_ABSENT.update({
    name: "random generator check (mxnet.test_utils.%s)" % name
    for name in ("gen_buckets_probs_with_ppf", "mean_check", "var_check", "chi_square_check",
                 "verify_generator")})


def __getattr__(name):
    raise missing_attribute(__name__, name, _ABSENT)
