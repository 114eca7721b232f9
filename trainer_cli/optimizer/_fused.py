"""Fused CPU kernels for the optimizer rules (numba; see ``trainer_cli._jit``).

A rule's NumPy body makes one pass over memory per operation; its kernel does the same operations
on one element at a time, in the same order and precision, in a single pass, so the results are
bitwise equal (``tests/test_fused_kernels.py``). Arrays smaller than ``MIN_SIZE`` elements, and
layouts a kernel does not handle, take the NumPy body.

A ``MultiKernel`` runs a kernel over a whole group of tensors in one call, so that a step over
hundreds of tensors pays Python's dispatch once instead of once per tensor. The tensors are
processed one after the other, each exactly as the single kernel does, so the numbers stay the
same. The group goes in as a table of addresses (``ArrayTables``, built once and reused while the
same arrays come back, as they do at every step of a training loop): numba passes one int64
array in well under a microsecond, where typed lists of arrays cost microseconds per call.
"""
from __future__ import annotations

import os
from operator import is_

import numpy

from .. import _jit
from .._jit import enabled

__all__ = ["Kernel", "MultiKernel", "ArrayTables", "scalar_rows", "enabled", "num_threads",
           "MIN_SIZE"]

MIN_SIZE = 1 << 14
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
_np_ndarray = numpy.ndarray


def handles(arrays) -> bool:
    """Whether a kernel takes these arrays of one tensor (weight first): NumPy, one native float
    dtype, one size, C-contiguous, and no two of them overlapping other than exactly."""
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
            return _disjoint(arrays)
    return True


def _disjoint(arrays):
    for i, a in enumerate(arrays):
        for b in arrays[i + 1:]:
            if a is not b and numpy.may_share_memory(a, b):
                return False
    return True


class Kernel(_jit.Kernel):
    """A rule's kernel; ``fits(*arrays)`` says whether a call is worth it: arrays the kernel
    ``handles``, of at least ``MIN_SIZE`` elements, and numba available. The caller passes them
    flattened with ``ravel`` (a view for contiguous arrays) and scalars already cast to that
    dtype.
    """

    __slots__ = ()

    def fits(self, w, *others) -> bool:
        return type(w) is _np_ndarray and w.size >= MIN_SIZE and handles((w,) + others) \
            and _jit._numba is not False and (_jit._numba is not None or enabled())


def _clip_loop(x, lo, hi):
    # numpy.clip on one element: max with lo, then min with hi, a NaN kept.
    if x == x:
        x = x if x > lo else lo
        x = x if x < hi else hi
    return x


# The rules' loops call it as their global ``_clip`` (bound when they compile; see ``_jit``).
clip = _jit.Kernel(_clip_loop)


# A tensor's arrays inside a MultiKernel loop: ``_column(table, k, c, like)`` is column ``c``
# (1 for the weight, 2 for the gradient, ...) of row ``k`` of an ``ArrayTables`` table, as a
# flat array of ``like``'s dtype. Compiled on first use, when numba is imported.
def _column_loop(table, k, c, like):
    return _carray(_pointer(table[k, c], like), (table[k, 0],))


_carray = _pointer = None
_column = None


def _compiled_column():
    global _carray, _pointer, _column
    if _column is None:
        import numba
        from numba import types
        from numba.extending import intrinsic

        @intrinsic
        def pointer(typingctx, address, like):
            # An int64 address as a pointer to like's dtype.
            signature = types.CPointer(like.dtype)(address, like)

            def codegen(context, builder, sig, args):
                return builder.inttoptr(args[0], context.get_value_type(sig.return_type))
            return signature, codegen

        _carray, _pointer = numba.carray, pointer
        _column = _jit.jit(_column_loop)
    return _column


class MultiKernel:
    """``pyfunc`` loops a single-tensor ``Kernel`` over the tensors of an ``ArrayTables`` table.

    The loop calls the kernel through the module global ``callee`` and reads the arrays through
    the global ``_column``: numba resolves globals when it compiles, so the names are bound to
    the compiled functions just before, which also lets numba cache the loop on disk like any
    function calling another jitted one.
    """

    __slots__ = ("pyfunc", "one", "callee", "_compiled")

    def __init__(self, pyfunc, one: Kernel, callee: str):
        self.pyfunc = pyfunc
        self.one = one
        self.callee = callee
        self._compiled = None

    def __call__(self, *args):
        fn = self._compiled
        if fn is None:
            self.pyfunc.__globals__[self.callee] = self.one.compiled()
            self.pyfunc.__globals__["_column"] = _compiled_column()
            fn = self._compiled = _jit.jit(self.pyfunc)
        return fn(*args)

    def run(self, table, *args, spans):
        """``self(table, *args, spans[i])`` for each thread's spans, the first on this thread
        (the kernels release the GIL, so the threads run at once)."""
        if len(spans) == 1:
            return self(table, *args, spans[0])
        pool = _thread_pool(len(spans) - 1)
        others = [pool.submit(self, table, *args, part) for part in spans[1:]]
        self(table, *args, spans[0])
        for future in others:
            future.result()


class ArrayTables:
    """The tensors of an update split into groups a ``MultiKernel`` runs, cached by identity.

    ``groups(columns)`` takes one list per kernel argument (weights, gradients, each state) and
    returns ``(groups, rest)``: ``groups`` holds ``(positions, table, spans)`` for each dtype,
    ``table`` being an int64 array with a row per tensor, its size then the address of each
    column's array, and ``spans`` the work of each thread (see ``_spans``); ``rest`` the
    positions a kernel does not handle (other layouts, other array libraries, too little work
    in all to pay for numba).
    A training loop passes the same arrays at every step, so the split is kept for the last
    few sets of arrays seen (one per device). The arrays themselves are kept with it: that is
    what makes their ids a valid key, and their addresses valid while the entry lives (a caller
    holds them in its own lists while a kernel runs, too).
    """

    __slots__ = ("_entries", "_size")

    def __init__(self, size=8):
        self._entries = []
        self._size = size

    def groups(self, columns):
        entries = self._entries
        if entries:
            # The very lists of the last call (the Updater hands the same ones at every step);
            # callers never change a list they handed over.
            last = entries[0][2]
            if len(last) == len(columns) and all(map(is_, columns, last)):
                return entries[0][1]
        key = tuple([id(a) for column in columns for a in column])
        for pos, (entry_key, value, _) in enumerate(entries):
            if entry_key == key:
                del entries[pos]        # to the front, with these lists
                break
        else:
            value = _split(columns)
        entries.insert(0, (key, value, columns))
        del entries[self._size:]
        return value


def _split(columns):
    by_dtype, rest = {}, []
    for pos, arrays in enumerate(zip(*columns)):
        # No size floor per tensor: a small tensor is cheap inside a group.
        if handles(arrays) and arrays[0].size:
            by_dtype.setdefault(arrays[0].dtype, []).append(pos)
        else:
            rest.append(pos)
    groups = []
    for positions in by_dtype.values():
        # Checked before numba is imported: small models never load it.
        if sum(columns[0][p].size for p in positions) < MIN_SIZE or not enabled():
            rest.extend(positions)
            continue
        sizes = [columns[0][p].size for p in positions]
        table = numpy.array([[size] + [column[p].ctypes.data for column in columns]
                             for size, p in zip(sizes, positions)], dtype=numpy.int64)
        groups.append((positions, table, _spans(sizes)))
    rest.sort()
    return groups, rest


# Below this many elements an update is not split over threads: handing work to another
# thread costs tens of microseconds.
PARALLEL_MIN_SIZE = 1 << 20
_ALIGN = 16         # split points at multiples of 16 elements keep the vector loops aligned


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


def scalar_rows(template, n, columns):
    """An ``(n, len(template))`` array of ``template``'s dtype: every row ``template``, with
    column ``c`` set to the per-tensor values ``columns[c]`` (each rounds as ``dtype(x)``)."""
    rows = numpy.empty((n, template.shape[0]), dtype=template.dtype)
    rows[...] = template
    for c, values in columns.items():
        rows[:, c] = values
    return rows
