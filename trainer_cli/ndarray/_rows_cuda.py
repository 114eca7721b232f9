"""Adding rows by index on the GPU in a fixed order, without atomic adds.

``cupy.add.at`` adds with atomics: rows that several indices share are summed in whatever order
the threads happen to run, so a step's gradient changes in its last bits from run to run, and
a resumed GPU run would not repeat an uninterrupted one. Here a stable sort groups the indices,
and one thread per (group, column) adds the group's rows in their original order, as
``numpy.add.at`` does on the CPU.
"""
from __future__ import annotations

import numpy

from ..context import is_cupy_array

__all__ = ["add_rows_at", "row_group_sums", "table_rows"]

_SOURCE = """
typedef %(ctype)s T;
extern "C" __global__ void trainer_cli_rows_add(const T *values, const long long *order,
        const long long *starts, const long long *dest, long long groups, long long n,
        long long width, T *out, int accumulate) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= groups * width) return;
    long long s = t / width, c = t %% width;
    long long a = starts[s], b = s + 1 < groups ? starts[s + 1] : n;
    long long d = (dest ? dest[s] : s) * width + c;
    T acc = values[order[a] * width + c];
    if (accumulate) acc = out[d] + acc;
    for (long long j = a + 1; j < b; ++j) acc = acc + values[order[j] * width + c];
    out[d] = acc;
}
"""
_kernels: dict = {}        # the row-adding kernel by dtype char, the others by name
_THREADS = 256


def _kernel(dtype):
    import cupy
    kernel = _kernels.get(dtype.char)
    if kernel is None:
        source = _SOURCE % {"ctype": {"f": "float", "d": "double"}[dtype.char]}
        kernel = _kernels[dtype.char] = cupy.RawKernel(source, "trainer_cli_rows_add",
                                                       options=("--fmad=false",))
    return kernel


# Where a run of equal sorted keys begins, in one launch (three as ``concatenate((ones(1),
# ordered[1:] != ordered[:-1]))``).
RUN_STARTS = ("raw T ordered", "bool first", "first = i == 0 || ordered[i] != ordered[i - 1];")


def _groups(keys):
    """``(order, ordered, starts)``: a stable order of ``keys``, the keys in it, and where each
    run of equal keys begins."""
    import cupy
    order = cupy.argsort(keys)          # CuPy's sort is stable
    ordered = keys[order]
    kernel = _kernels.get("run_starts")
    if kernel is None:
        kernel = _kernels["run_starts"] = cupy.ElementwiseKernel(
            *RUN_STARTS, "trainer_cli_run_starts")
    if not len(ordered):
        return order, ordered, cupy.zeros(0, dtype=numpy.int64)
    return order, ordered, cupy.flatnonzero(kernel(ordered, size=len(ordered)))


def _launch(values, order, starts, dest, out, accumulate):
    import cupy
    n = values.shape[0]
    width = values.size // n if n else 0
    total = len(starts) * width
    if not total:
        return
    _kernel(values.dtype)((-(-total // _THREADS),), (_THREADS,), (
        cupy.ascontiguousarray(values), order, starts.astype(cupy.int64, copy=False),
        dest if dest is not None else numpy.intp(0), numpy.int64(len(starts)), numpy.int64(n),
        numpy.int64(width), out, numpy.int32(accumulate)))


def takes(target, keys, values) -> bool:
    """Whether ``add_rows_at`` takes these arrays: float32/float64 CuPy arrays, ``target``
    C-contiguous, ``keys`` 1-D integers, ``values`` one row of ``target`` per key."""
    return (type(keys) is type(target) and type(values) is type(target)
            and target.dtype.char in "fd" and target.flags.c_contiguous and target.ndim >= 1
            and getattr(keys, "ndim", None) == 1 and keys.dtype.kind in "iu"
            and values.dtype == target.dtype
            and tuple(values.shape) == (keys.shape[0],) + tuple(target.shape[1:]))


# An embedding's ids as int64 rows clipped to the table, in one launch: the conversion is
# ``astype(int64)``'s (CUDA's, which saturates and takes NaN to 0), then ``maximum(., 0)`` and
# ``minimum(., rows - 1)``.
TABLE_ROWS = ("T ids, int64 last", "int64 rows",
              "long long k = (long long)ids; k = k > 0 ? k : 0; rows = k < last ? k : last;")


def table_rows(ids, rows):
    """``ids`` (a CuPy array of float32/float64/int32/int64) as int64 row numbers clipped to
    ``[0, rows)``, a new array; None for other arrays and dtypes."""
    if not is_cupy_array(ids) or ids.dtype.char not in "fdil" or rows < 1:
        return None
    import cupy
    kernel = _kernels.get("table_rows")
    if kernel is None:
        kernel = _kernels["table_rows"] = cupy.ElementwiseKernel(
            *TABLE_ROWS, "trainer_cli_table_rows")
    return kernel(ids, numpy.int64(rows - 1))


def add_rows_at(target, keys, values):
    """``target[keys] += values`` with repeated keys accumulating left to right, as
    ``numpy.add.at`` does (negative keys count from the end)."""
    import cupy
    if not keys.shape[0]:
        return
    keys = keys.astype(cupy.int64, copy=False)
    keys = cupy.where(keys < 0, keys + target.shape[0], keys)
    order, ordered, starts = _groups(keys)
    _launch(values, order, starts, ordered[starts], target, accumulate=1)


def row_group_sums(values, keys):
    """``(unique keys, sums)``: each key once, sorted, with the sum of its rows of ``values`` in
    their order."""
    import cupy
    order, ordered, starts = _groups(keys)
    out = cupy.empty((len(starts),) + values.shape[1:], dtype=values.dtype)
    _launch(values, order, starts, None, out, accumulate=0)
    return ordered[starts], out
