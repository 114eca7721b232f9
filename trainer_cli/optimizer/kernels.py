"""The kernel layer of the optimizer rules: the one place that chooses how a rule runs.

A rule (``sgd.py``, ``adam.py``) is written three times, side by side in its own file: the NumPy
body (over ``xp``, the reference that the golden tests check), a CPU loop over one element at a
time (compiled by numba, see ``trainer_cli._jit``) and the CUDA source of the same element (a
CuPy ``ElementwiseKernel``). The loop and the CUDA element do the NumPy body's operations in the
same order and precision, so the three give the same bits (``tests/test_fused_kernels.py``;
``tests/test_cuda_on_host.py`` compiles the CUDA source as C++ on the host). The rule declares
them once as a ``Kernel``; this module does the rest for every rule:

* ``Kernel.run(arrays, scalars)`` picks the path for one tensor: numba when the arrays are NumPy,
  large enough and of a layout the loop handles; the CUDA kernel for CuPy arrays it handles;
  otherwise it returns False and the rule runs its NumPy body.
* ``Kernel.run_groups`` runs many tensors in one call per dtype: a driver, generated here for
  every rule from its loop, walks a table of array addresses (``groups``), so a step over hundreds
  of tensors pays Python's dispatch once. Each tensor is computed exactly as alone. On CuPy the
  rule's CUDA element runs inside one kernel over all of a group's tensors (``_CudaGroup``).
* ``groups`` splits a step's tensors into those tables; the caller keeps the result while the
  same arrays come back (the Updater's prepared step, ``updater.PreparedStep``).

Every kernel takes its arrays (weight first, then gradient, then states, each flat and of the
weight's dtype) and one row of scalars of that dtype, in the order the rule's ``scalars`` names
them; flags (clipping, decay) are scalars too, 0 or 1, so that a multi-tensor driver hands each
tensor its own row.

A row_sparse rule (MXNet's lazy update over the rows a gradient holds) sits beside the dense one
in the rule's file as a ``RowKernel``: the rule's per-element loop run on each present row (the
weight's and states' row ``rows[r]``, the gradient's row ``r``), so a step costs O(rows touched),
never O(table); on CuPy its CUDA element runs on each element of those rows in one launch. Its
NumPy body gathers the rows, runs the dense body on them and scatters them back; all give the
same bits (``tests/test_optim_sparse.py``, ``tests/test_cuda_on_host.py``).
"""
from __future__ import annotations

import os

import numpy

from .. import _jit
from .._jit import enabled
from ..ndarray import tensor_launch

__all__ = ["Kernel", "RowKernel", "groups", "clip", "CUDA_CLIP", "enabled", "num_threads", "MIN_SIZE",
           "PARALLEL_MIN_SIZE"]

# Below this many elements a tensor (or a whole group) takes the NumPy body: numba's call and,
# the first time, its import and loading cost more than they save.
MIN_SIZE = 1 << 14
# Below this many elements an update is not split over threads: handing work to another thread
# costs tens of microseconds.
PARALLEL_MIN_SIZE = 1 << 20
_ALIGN = 16         # split points at multiples of 16 elements keep the vector loops aligned

_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
_np_ndarray = numpy.ndarray


# ----------------------------------------------------------------------------- shared pieces
def clip(x, lo, hi):
    """``numpy.clip`` on one element: max with lo, then min with hi, a NaN kept. The CPU loops
    import it as ``_clip`` (and call it compiled once compiled); ``CUDA_CLIP`` is the same in
    CUDA."""
    if x == x:
        x = x if x > lo else lo
        x = x if x < hi else hi
    return x


CUDA_CLIP = """
    if (x == x) {
        x = x > lo ? x : lo;
        x = x < hi ? x : hi;
    }
"""

_clip_kernel = _jit.Kernel(clip)


def params_array(values, dtype, exact=()):
    """``values``, operator parameters, as an array of ``dtype``: through float32 for float64,
    since MXNet's C++ rules hold them as float32 fields and widen them for float64 weights
    (except at the positions ``exact``: values the rule computed in the weight's dtype)."""
    if dtype != numpy.float64:
        return numpy.array(values, dtype=dtype)
    rounded = numpy.array(values, dtype=numpy.float32).astype(numpy.float64)
    for i in exact:
        rounded[i] = values[i]
    return rounded


# ----------------------------------------------------------------------------- one rule
class Kernel:
    """A rule's fused kernels: ``cpu``, a loop ``cpu(*arrays, s)`` over flat arrays (``s`` the
    row of scalars named by ``scalars``), and ``cuda``, ``(in_params, out_params, body)`` of a
    CuPy ElementwiseKernel whose scalar parameters are ``scalars`` in the same order. ``arrays``
    is how many arrays the kernel takes (weight, gradient, states). ``checked``, where a rule
    has one: ``cpu`` computing exactly the same, returning whether every gradient element it
    read and every value it wrote is finite (``(x - x) == 0`` is false only for NaN and inf; the
    test costs a few instructions on values in registers, where a check after the update reads
    every array again)."""

    __slots__ = ("name", "scalars", "arrays", "cpu", "cuda", "_multi", "_checked",
                 "_cuda_kernel", "_cuda_multis")

    def __init__(self, name, *, scalars, arrays, cpu, cuda, checked=None):
        self.name, self.scalars, self.arrays = name, tuple(scalars), arrays
        self.cpu = _jit.Kernel(cpu, {"_clip": _clip_kernel})
        self.cuda = cuda
        self._multi = _jit.Kernel(_DRIVERS[arrays], {"one": self.cpu, "column": _column_kernel},
                                  qualname="multi_" + name)
        self._checked = None if checked is None else _jit.Kernel(
            _CHECKED_DRIVERS[arrays], {"one": _jit.Kernel(checked, {"_clip": _clip_kernel}),
                                       "column": _column_kernel}, qualname="checked_" + name)
        self._cuda_kernel = None
        self._cuda_multis = {}

    def row(self, dtype, **values):
        """The scalars as one array of ``dtype`` (each rounds as ``dtype(x)``; for float64,
        through float32, as MXNet's operators hold their parameters)."""
        return params_array([values[name] for name in self.scalars], dtype)

    def rows(self, dtype, count, fixed, per_tensor):
        """``count`` rows: the ``fixed`` values in every row, the lists of ``per_tensor`` one
        value per row."""
        rows = numpy.empty((count, len(self.scalars)), dtype=dtype)
        rows[...] = self.row(dtype, **dict(fixed, **dict.fromkeys(per_tensor, 0)))
        for name, values in per_tensor.items():
            rows[:, self.scalars.index(name)] = params_array(values, dtype)
        return rows

    @staticmethod
    def fits(w, *others) -> bool:
        """Whether the CPU loop takes these arrays: NumPy, one native float dtype and size,
        C-contiguous, not overlapping other than exactly, at least ``MIN_SIZE`` elements, and
        numba available."""
        return type(w) is _np_ndarray and w.size >= MIN_SIZE and handles((w,) + others) \
            and _jit.ready()

    @staticmethod
    def declines(w) -> bool:
        """Whether ``run`` would surely say no for weight ``w`` (a NumPy array too small, or no
        numba): the caller then skips working out the scalars, which costs as much as a small
        tensor's NumPy body."""
        return type(w) is _np_ndarray and (w.size < MIN_SIZE or not _jit.ready())

    def run(self, arrays, scalars) -> bool:
        """Run the kernel on one tensor's ``arrays`` if a kernel takes them (``scalars``: a
        mapping of the values ``scalars`` names); False when the NumPy body must run instead."""
        w = arrays[0]
        if type(w) is _np_ndarray:
            if not self.fits(*arrays):
                return False
            s = self.row(w.dtype, **scalars)
            if w.ndim != 1:
                arrays = [a.ravel() for a in arrays]
            self.cpu(*arrays, s)
            return True
        if not cuda_handles(*arrays):
            return False
        row = list(params_array([scalars[name] for name in self.scalars], w.dtype))
        self._cuda()(*arrays[1:2], *row, arrays[0], *arrays[2:])
        return True

    def _cuda(self):
        if self._cuda_kernel is None:
            import cupy
            in_params, out_params, body = self.cuda
            self._cuda_kernel = cupy.ElementwiseKernel(
                in_params, out_params, body, "trainer_cli_" + self.name, options=CUDA_OPTIONS)
        return self._cuda_kernel

    def run_groups(self, split, rows_of, step=None):
        """The kernel over each group of ``split`` (from ``groups``): ``rows_of(positions,
        )`` gives a group's rows of scalars. Returns the positions left to the NumPy body.

        ``step``: the ``PreparedStep`` the split is of. When it ``watches`` and the rule has a
        checking loop, the CPU groups run that loop, and ``step.saw`` hears which positions it
        covered and in how many spans it met a NaN/Inf."""
        found, rest = split
        checked = self._checked if step is not None and step.watch else None
        for group in found:
            if type(group) is _CudaGroup:
                group.run(self, rows_of(group.positions))
            else:
                positions, table, spans = group
                if checked is not None:
                    step.saw(self, positions, sum(_run_spans(checked, table, rows_of(positions),
                                                             spans)))
                else:
                    _run_spans(self._multi, table, rows_of(positions), spans)
        return rest

    def _cuda_multi(self, dtype):
        """The CUDA element inside a multi-tensor kernel for ``dtype`` (see ``_CudaGroup``)."""
        key = dtype.char
        kernel = self._cuda_multis.get(key)
        if kernel is None:
            import cupy
            kernel = self._cuda_multis[key] = cupy.RawKernel(
                _multi_source(self.name, self.cuda, dtype), "trainer_cli_multi_" + self.name,
                options=CUDA_OPTIONS)
        return kernel


class RowKernel:
    """A rule's row_sparse kernel: ``one``, a per-element loop ``one(*arrays, s)`` of the dense
    kind, run by a driver on each row a gradient holds: ``one(w[i], g[r], state[i]..., s)`` for
    ``i = rows[r]``, the weight and states 2-D ``(rows, row_length)``, the gradient's values
    ``(len(rows), row_length)``. ``arrays`` counts weight, gradient and states as in ``Kernel``.
    ``cuda``, where a rule has one: its CUDA element, ``(in_params, out_params, body)`` as in
    ``Kernel``, whose scalars are among ``scalars``; on CuPy one launch runs it on every element
    of the present rows (``_rows_source``). Without it the rule's NumPy body runs there (gather,
    dense body, scatter)."""

    __slots__ = ("name", "scalars", "cpu", "cuda", "_last_row", "_params", "_exact",
                 "_cuda_kernels")

    def __init__(self, name, *, scalars, arrays, one, params=False, computed=(), cuda=None):
        self.name, self.scalars = name, tuple(scalars)
        if cuda is not None:
            unknown = set(_names(cuda[0])[1:]) - set(self.scalars)
            assert not unknown, "the CUDA element of %s reads %s" % (name, sorted(unknown))
        self.cuda, self._cuda_kernels = cuda, {}
        self._last_row = (None, None)
        # ``params``: the scalars are a C++ rule's parameters (``params_array``), but for the
        # ``computed`` ones
        self._params = params
        self._exact = tuple(self.scalars.index(n) for n in computed)
        self.cpu = _jit.Kernel(_ROW_DRIVERS[arrays],
                               {"one": _jit.Kernel(one, {"_clip": _clip_kernel}, inline=True),
                                "in_range": _in_range_kernel},
                               qualname="rows_" + name)

    def run(self, w, rows, values, states, scalars) -> bool:
        """Run on the rows ``rows`` (int64) of ``w`` and ``states`` with gradient ``values``
        (``scalars``: the values ``scalars`` names); False when the NumPy body must run (not
        NumPy, another layout, too little work to pay for numba, numba off). A row id outside
        ``w`` raises ValueError before anything is written (the caller need not check them)."""
        if type(w) is not _np_ndarray:
            return self._run_cuda(w, rows, values, states, scalars)
        if not w.ndim or values.size < MIN_SIZE \
                or not handles_rows(w, rows, values, states) or not _jit.ready():
            return False
        width = w.size // w.shape[0] if w.shape[0] else 0
        s = scalars if type(scalars) is _np_ndarray else self.row(w.dtype, scalars)
        if not self.cpu(w.reshape(-1, width), rows, values.reshape(-1, width),
                        *[a.reshape(-1, width) for a in states], s):
            raise row_ids_error(w.shape[0])
        return True

    def _run_cuda(self, w, rows, values, states, scalars) -> bool:
        if self.cuda is None or not cuda_handles_rows(w, rows, values, states):
            return False
        count = w.shape[0]
        if not rows_in_range(rows, count):
            raise row_ids_error(count)
        if not len(rows):
            return True
        width = w.size // count
        s = scalars if type(scalars) is _np_ndarray else self.row(w.dtype, scalars)
        t = w.dtype.type
        total = len(rows) * width
        import cupy
        with cupy.cuda.Device(w.device.id):
            self._cuda_rows(w.dtype)(
                (tensor_launch.blocks_for(total),), (tensor_launch.THREADS,),
                (rows, numpy.int64(len(rows)), numpy.int64(width), numpy.int64(count), values, w)
                + tuple(states) + tuple(t(x) for x in s))
        return True

    def _cuda_rows(self, dtype):
        kernel = self._cuda_kernels.get(dtype.char)
        if kernel is None:
            import cupy
            kernel = self._cuda_kernels[dtype.char] = cupy.RawKernel(
                _rows_source(self.name, self.cuda, self.scalars, dtype),
                "trainer_cli_rows_" + self.name, options=CUDA_OPTIONS)
        return kernel

    def row(self, dtype, scalars):
        """The kernel's row of ``scalars`` (a mapping of the values ``scalars`` names) in
        ``dtype``."""
        values = [scalars[name] for name in self.scalars]
        if self._params:
            return params_array(values, dtype, self._exact)
        return numpy.array(values, dtype=dtype)

    def kept_row(self, key, dtype, build):
        """``self.row(dtype, build())``, or the row made for the previous call when ``key`` is
        equal: a training loop's every step passes the same rates. ``key`` must hold every value
        the row depends on, with each zero's sign (equal numbers make equal bits, except -0.0
        and 0.0)."""
        last_key, last_row = self._last_row
        if last_key == key and last_row is not None:
            return last_row
        row = self.row(dtype, build())
        row.flags.writeable = False
        self._last_row = (key, row)
        return row


def row_ids_error(count) -> ValueError:
    """What a row_sparse update raises for a row id outside a weight of ``count`` rows."""
    return ValueError("row_sparse gradient: row ids must lie in [0, %d)" % count)


def handles_rows(w, rows, values, states) -> bool:
    """Whether a row loop takes a weight ``w``, its ``states`` (NumPy, C-contiguous, one native
    float dtype and shape), row ids ``rows`` (int64, one per row of ``values``) and gradient
    ``values`` (C-contiguous, the weight's dtype and row length), none overlapping another."""
    dtype = w.dtype
    if (dtype is not _F32 and dtype is not _F64) or not w.flags.c_contiguous:
        return False
    if type(rows) is not _np_ndarray or rows.dtype != numpy.int64 or rows.ndim != 1 \
            or type(values) is not _np_ndarray or values.dtype is not dtype \
            or not values.flags.c_contiguous or values.shape[0] != rows.shape[0] \
            or values.shape[1:] != w.shape[1:]:
        return False
    for a in states:
        if type(a) is not _np_ndarray or a.dtype is not dtype or a.shape != w.shape \
                or not a.flags.c_contiguous:
            return False
    arrays = (w, values) + tuple(states)
    # Arrays owning their memory are distinct allocations unless they are the same object
    # (as in ``handles``); views are checked.
    if w.base is None and values.base is None and w is not values and not states:
        return True
    return _disjoint(arrays, numpy.may_share_memory)


def cuda_handles_rows(w, rows, values, states) -> bool:
    """``handles_rows`` for CuPy arrays, all on ``w``'s device (bounds only, as ``cuda_handles``
    checks overlaps)."""
    if not cuda_handles(w, *states) or not w.ndim or not w.flags.c_contiguous:
        return False
    if type(rows) is not type(w) or rows.dtype != numpy.int64 or rows.ndim != 1 \
            or not rows.flags.c_contiguous or rows.device != w.device \
            or type(values) is not type(w) or values.dtype != w.dtype \
            or not values.flags.c_contiguous or values.device != w.device \
            or values.shape[0] != rows.shape[0] or values.shape[1:] != w.shape[1:]:
        return False
    if not all(a.flags.c_contiguous for a in states):
        return False
    # The weight's and states' bounds apart: cuda_handles saw to those; the gradient's here.
    from ..context import array_module_of
    shares = array_module_of(w).may_share_memory
    return not any(shares(values, a) for a in (w,) + tuple(states))


def rows_in_range(rows, count) -> bool:
    """Whether the sorted row ids ``rows`` (a device array) lie in ``[0, count)``: its first and
    last id in one transfer, the only wait of a row update on the device. (Row ids are sorted
    and unique wherever they are made; were they not, the kernel still writes no row outside
    the weight: it skips them.)"""
    n = rows.shape[0]
    if not n:
        return True
    ends = (rows[::n - 1] if n > 1 else rows).get()
    return 0 <= int(ends[0]) and int(ends[-1]) < count


def _rows_source(name, cuda, scalars, dtype):
    """A rule's CUDA element (``RowKernel.cuda``) over the present rows of a weight: thread
    ``k`` takes element ``k`` of the gradient's values, which is column ``k % width`` of row
    ``rows[k / width]`` of the weight and states. The element reads and writes what the dense
    ElementwiseKernel does on those elements, so the rows come out as the NumPy body makes them.
    A row id outside the weight is skipped (the caller refuses such ids before the launch)."""
    in_params, out_params, body = cuda
    grad = _names(in_params)[0]
    outs = _names(out_params)
    ctype = {"f": "float", "d": "double"}[dtype.char]
    refs = "\n".join("        T &%s = _out%d[_at];" % (n, k) for k, n in enumerate(outs))
    return """
typedef %(ctype)s T;
extern "C" __global__ void trainer_cli_rows_%(name)s(const long long *_rows, long long _n,
        long long _width, long long _count, const T *_g, %(outs)s, %(args)s) {
    for (long long _k = (long long)blockIdx.x * blockDim.x + threadIdx.x; _k < _n * _width;
         _k += (long long)gridDim.x * blockDim.x) {
        const long long _r = _k / _width;
        const long long _i = _rows[_r];
        if (_i < 0 || _i >= _count) continue;
        const long long _at = _i * _width + (_k - _r * _width);
        const T %(grad)s = _g[_k];
%(refs)s
%(body)s
    }
}
""" % {"ctype": ctype, "name": name, "outs": ", ".join("T *_out%d" % k for k in range(len(outs))),
       "args": ", ".join("T " + n for n in scalars), "grad": grad, "refs": refs, "body": body}


# The row_sparse drivers: ``one`` (the rule's loop) over each present row. The row ids are
# checked first (the loop indexes unchecked); False, and nothing written, when one is out of range.
def _rows_in_range(rows, count):
    for r in range(rows.shape[0]):
        if rows[r] < 0 or rows[r] >= count:
            return False
    return True


def _rows2(w, rows, g, s):
    if not in_range(rows, w.shape[0]):  # noqa: F821
        return False
    for r in range(rows.shape[0]):
        one(w[rows[r]], g[r], s)  # noqa: F821
    return True


def _rows3(w, rows, g, a, s):
    if not in_range(rows, w.shape[0]):  # noqa: F821
        return False
    for r in range(rows.shape[0]):
        i = rows[r]
        one(w[i], g[r], a[i], s)  # noqa: F821
    return True


def _rows4(w, rows, g, a, b, s):
    if not in_range(rows, w.shape[0]):  # noqa: F821
        return False
    for r in range(rows.shape[0]):
        i = rows[r]
        one(w[i], g[r], a[i], b[i], s)  # noqa: F821
    return True


_in_range_kernel = _jit.Kernel(_rows_in_range)
_ROW_DRIVERS = {2: _rows2, 3: _rows3, 4: _rows4}


# The multi-tensor drivers: ``one`` (the rule's loop) over the span of each tensor a thread
# takes, its arrays read from the table by ``column``. One per number of arrays; a Kernel
# compiles it with its own loop as ``one`` (see ``_jit.Kernel``).
def _multi2(table, rows, spans):
    for j in range(spans.shape[0]):
        k, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
        one(column(table, k, 1, rows)[a:b], column(table, k, 2, rows)[a:b], rows[k])  # noqa: F821


def _multi3(table, rows, spans):
    for j in range(spans.shape[0]):
        k, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
        one(column(table, k, 1, rows)[a:b], column(table, k, 2, rows)[a:b],  # noqa: F821
            column(table, k, 3, rows)[a:b], rows[k])  # noqa: F821


def _multi4(table, rows, spans):
    for j in range(spans.shape[0]):
        k, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
        one(column(table, k, 1, rows)[a:b], column(table, k, 2, rows)[a:b],  # noqa: F821
            column(table, k, 3, rows)[a:b], column(table, k, 4, rows)[a:b], rows[k])  # noqa: F821


_DRIVERS = {2: _multi2, 3: _multi3, 4: _multi4}


# The checking driver: the same over a rule's checking loop (``Kernel``'s ``checked``), which
# computes exactly as its plain loop and returns whether every gradient it read and every value
# it wrote was finite; it returns how many spans were not.
def _checked4(table, rows, spans):
    n = 0
    for j in range(spans.shape[0]):
        k, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
        n += not one(column(table, k, 1, rows)[a:b], column(table, k, 2, rows)[a:b],  # noqa: F821
                     column(table, k, 3, rows)[a:b], column(table, k, 4, rows)[a:b],  # noqa: F821
                     rows[k])
    return n


_CHECKED_DRIVERS = {4: _checked4}     # the rules with a checking loop: Adam, AdamW


# A tensor's array inside a driver: column ``c`` of row ``k`` of a ``groups`` table.
_column_kernel = _jit.column


def _run_spans(multi, table, rows, spans):
    """``multi(table, rows, spans[i])`` for each thread's spans, the first on this thread (the
    kernels release the GIL, so the threads run at once); their results in a list."""
    if len(spans) == 1:
        return [multi(table, rows, spans[0])]
    pool = _thread_pool(len(spans) - 1)
    others = [pool.submit(multi, table, rows, part) for part in spans[1:]]
    first = multi(table, rows, spans[0])
    return [first] + [future.result() for future in others]


# ----------------------------------------------------------------------------- layouts
def handles(arrays) -> bool:
    """Whether a CPU loop takes these arrays of one tensor (weight first): NumPy, one native
    float dtype, one size, C-contiguous, and no two of them overlapping other than exactly."""
    w = arrays[0]
    if type(w) is not _np_ndarray:
        return False
    dtype, size = w.dtype, w.size
    # Native float dtypes are singletons; anything else (byte-swapped...) takes the NumPy path.
    if (dtype is not _F32 and dtype is not _F64) or not w.flags.c_contiguous:
        return False
    for a in arrays[1:]:
        if type(a) is not _np_ndarray or a.dtype is not dtype or a.size != size \
                or not a.flags.c_contiguous:
            return False
    # A kernel computes element i from elements i only, so buffers that overlap other than
    # exactly would see each other's writes in another order than the NumPy passes do.
    # Arrays owning their memory (parameters, gradients, states) are distinct allocations;
    # views are checked.
    for a in arrays:
        if a.base is not None:
            return _disjoint(arrays, numpy.may_share_memory)
    return True


def _disjoint(arrays, shares):
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if a is not b and shares(a, b):
                return False
    return True


def groups(columns):
    """The tensors of a step split into groups a driver runs: ``columns`` holds one list per
    kernel argument (weights, gradients, each state). Returns ``(groups, rest)``: ``groups``
    holds ``(positions, table, spans)`` per dtype, ``table`` an int64 array with a row per
    tensor (its size, then the address of each column's array), ``spans`` each thread's work
    (see ``_spans``); ``rest`` the positions left to the NumPy body (other layouts, other array
    libraries, too little work in all to pay for numba).

    The addresses stay valid while the arrays live: whoever keeps the result keeps the arrays."""
    by_dtype, on_device, rest = {}, {}, []
    for pos, arrays in enumerate(zip(*columns)):
        # No size floor per tensor: a small tensor is cheap inside a group.
        if handles(arrays) and arrays[0].size:
            by_dtype.setdefault(arrays[0].dtype, []).append(pos)
        elif type(arrays[0]) is not _np_ndarray and arrays[0].size and _cuda_flat(arrays):
            on_device.setdefault((arrays[0].dtype, arrays[0].device.id), []).append(pos)
        else:
            rest.append(pos)
    found = [_CudaGroup(positions, columns, device) for (_, device), positions in on_device.items()]
    for positions in by_dtype.values():
        # Checked before numba is imported: small models never load it. Once it is loaded
        # (the runner loads it before its clock starts), one call beats a NumPy body per tensor
        # at any size.
        if (not _jit.loaded() and sum(columns[0][p].size for p in positions) < MIN_SIZE) \
                or not enabled():
            rest.extend(positions)
            continue
        table = _jit.address_table(*([column[p] for p in positions] for column in columns))
        found.append((positions, table, _spans(table[:, 0].tolist())))
    rest.sort()
    return found, rest


def _spans(sizes):
    """Each thread's share of tensors of ``sizes``: an int64 array of rows ``(tensor, start,
    stop)``, contiguous element ranges of about equal total. Every element is computed the
    same way whichever thread takes it, so the split never changes a number."""
    total = sum(sizes)
    threads = num_threads() if total >= PARALLEL_MIN_SIZE else 1
    share = -(-total // threads)
    share += -share % _ALIGN
    parts, rows, room = [], [], share
    for k, size in enumerate(sizes):
        start = 0
        while start < size:
            stop = min(size, start + room)
            rows.append((k, start, stop))
            room -= stop - start
            start = stop
            if room == 0 and len(parts) < threads - 1:
                parts.append(rows)
                rows, room = [], share
    parts.append(rows)
    return tuple(numpy.array(p, dtype=numpy.int64).reshape(-1, 3) for p in parts if p)


def num_threads() -> int:
    """Threads a large update is split over: ``TRAINER_NUM_THREADS``, else ``OMP_NUM_THREADS``
    (what NumPy's BLAS follows), else the CPUs this process may run on."""
    for name in ("TRAINER_NUM_THREADS", "OMP_NUM_THREADS"):
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


_pool = None


def _forget_pool():
    # A forked child has the pool object but none of its threads: it makes its own.
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _thread_pool(workers):
    global _pool
    if _pool is None or _pool._max_workers < workers:
        from concurrent.futures import ThreadPoolExecutor
        _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainer-cli-update")
    return _pool


# ----------------------------------------------------------------------------- CUDA
# ``--fmad=false`` keeps NVRTC from contracting a multiply and an add into one FMA, which would
# round once where the separate CuPy operations round twice; division and square root are
# IEEE-exact by default (``--prec-div``/``--prec-sqrt``), as in CuPy's own ``divide`` and
# ``sqrt``. So a CUDA element gives the bits of the rule's NumPy body run by CuPy.
CUDA_OPTIONS = ("--fmad=false",)


def cuda_handles(w, *others) -> bool:
    """CuPy arrays of one float32/float64 dtype and shape, on one device, not overlapping other
    than exactly (an elementwise kernel reads and writes each element once)."""
    if type(w) is _np_ndarray:
        return False
    from ..context import array_module_of
    xp = array_module_of(w)
    if xp.__name__ != "cupy" or w.dtype.char not in "fd":
        return False
    for a in others:
        if type(a) is not type(w) or a.dtype != w.dtype or a.shape != w.shape \
                or a.device != w.device:
            return False
    # Bounds only: CuPy's exact shares_memory sorts on the device and waits for it (about 1 ms a
    # tensor); arrays whose bounds overlap without being the same array take the per-op path.
    return _disjoint((w,) + others, xp.may_share_memory)


def _cuda_flat(arrays) -> bool:
    """Whether a multi-tensor CUDA kernel takes one tensor's arrays: what the ElementwiseKernel
    takes (``cuda_handles``), each C-contiguous (the kernel indexes flat memory)."""
    return cuda_handles(*arrays) and all(a.flags.c_contiguous for a in arrays)


def _names(params):
    return [p.split()[-1] for p in params.split(",")]


# Elements a thread of a multi-tensor kernel takes at a time: their loads all issued before any
# arithmetic, so that each thread has four times the memory requests in flight. On an H200 this
# took Adam over 100M float32 in 200 tensors from 0.90 to 0.70 ms, within 4% of a plain copy's
# bandwidth (the launch's blocks are sized for it: ``tensor_launch.blocks_for(n, MULTI_ILP)``).
MULTI_ILP = 4


def _multi_source(name, cuda, dtype):
    """A rule's CUDA element (``Kernel.cuda``: the ElementwiseKernel's ``(in_params,
    out_params, body)``) inside a kernel over many tensors: block row ``blockIdx.y`` takes one
    tensor (its size and array addresses a row of ``table``), its threads stride over the
    elements, ``MULTI_ILP`` strides at a time (loaded into registers, computed, stored), then
    one at a time for the rest. The element reads and writes exactly what the ElementwiseKernel
    does, so both give the same bits."""
    in_params, out_params, body = cuda
    grad, *scalars = _names(in_params)
    outs = _names(out_params)
    ctype = {"f": "float", "d": "double"}[dtype.char]
    width = 2 + len(outs)           # size, gradient, then the weight and the states

    def each(line):     # ``line`` for each array written: k its number, n its name, c its column
        return "".join(line % {"k": k, "n": n, "c": 2 + k} for k, n in enumerate(outs))

    return """
typedef %(ctype)s T;
extern "C" __global__ void trainer_cli_multi_%(name)s(const long long *table, int first, %(args)s) {
    const long long *_row = table + (long long)(blockIdx.y + first) * %(width)d;
    const long long _n = _row[0];
    const T *_g = (const T *)_row[1];
%(pointers)s    const long long _s = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + %(last)d * _s < _n; i += %(ilp)d * _s) {
        T _gr[%(ilp)d];
%(registers)s        #pragma unroll
        for (int _k = 0; _k < %(ilp)d; ++_k) {
            _gr[_k] = _g[i + _k * _s];
%(loads)s        }
        #pragma unroll
        for (int _k = 0; _k < %(ilp)d; ++_k) {
            const T %(grad)s = _gr[_k];
%(held)s%(body)s
        }
        #pragma unroll
        for (int _k = 0; _k < %(ilp)d; ++_k) {
%(stores)s        }
    }
    for (; i < _n; i += _s) {
        const T %(grad)s = _g[i];
%(refs)s%(body)s
    }
}
""" % {"ctype": ctype, "name": name, "args": ", ".join("T " + n for n in scalars),
       "width": width, "grad": grad, "body": body, "ilp": MULTI_ILP, "last": MULTI_ILP - 1,
       "pointers": each("    T *_p%(k)d = (T *)_row[%(c)d];\n"),
       "registers": each("        T _r%%(k)d[%d];\n" % MULTI_ILP),
       "loads": each("            _r%(k)d[_k] = _p%(k)d[i + _k * _s];\n"),
       "held": each("            T &%(n)s = _r%(k)d[_k];\n"),
       "stores": each("            _p%(k)d[i + _k * _s] = _r%(k)d[_k];\n"),
       "refs": each("        T &%(n)s = _p%(k)d[i];\n")}


class _CudaGroup:
    """The CuPy tensors of one dtype and device in a step, run by one kernel launch for each
    distinct row of scalars (tensors with the same rate and decay share one; the scalars go by
    value, so a step uploads nothing). The table of sizes and addresses is copied to the device
    once and kept with the step's split, which keeps the arrays alive."""

    __slots__ = ("positions", "device", "_rows", "_tables")

    def __init__(self, positions, columns, device):
        self.positions, self.device = positions, device
        # Column order of the table: size, gradient, weight, states (the kernel's order).
        order = [columns[1]] + [columns[0]] + list(columns[2:])
        self._rows = numpy.array([[columns[0][p].size] + [c[p].data.ptr for c in order]
                                  for p in positions], dtype=numpy.int64)
        self._tables = {}

    def _table(self, picked):
        key = tuple(picked)
        found = self._tables.get(key)
        if found is None:
            import cupy
            rows = self._rows[list(picked)]
            found = (cupy.asarray(rows), len(picked),
                     tensor_launch.blocks_for(int(rows[:, 0].max()), MULTI_ILP))
            self._tables[key] = found
        return found

    def run(self, kernel, rows):
        import cupy
        with cupy.cuda.Device(self.device):
            self._run(kernel, rows)

    def _run(self, kernel, rows):
        multi = kernel._cuda_multi(rows.dtype)
        t = rows.dtype.type
        bits = rows.view(numpy.uint64 if rows.dtype.itemsize == 8 else numpy.uint32)
        if len(rows) == 1 or (bits == bits[0]).all():
            subsets = [(range(len(rows)), rows[0])]
        else:       # by bits: a rate of -0.0 is not one of 0.0
            distinct, inverse = numpy.unique(bits, axis=0, return_inverse=True)
            picks = [numpy.flatnonzero(inverse.reshape(-1) == k) for k in range(len(distinct))]
            subsets = [(picked, rows[picked[0]]) for picked in picks]
        for picked, row in subsets:
            table, count, blocks = self._table(picked)
            tensor_launch.launch(multi, table, count, blocks, *(t(x) for x in row))
