"""BatchNorm's passes over the data in one numba loop each, on the CPU (``nn.BatchNorm``).

The NumPy path of a training-mode BatchNorm runs about ten whole-array passes forward and ten
backward (the channel means by reduction, the centred copy, its square, the normalised copy, the
scale and shift; the gradient's sums, products and the input gradient), each over arrays of
megabytes. The kernels do the same arithmetic in five passes that keep nothing but the output:

- ``channel_sums``: per channel, the sum of ``x`` (or, given the mean, of ``(x - mean)**2``);
- ``scale_shift``: ``(x - mean) * scale + beta``;
- ``grad_sums``: per channel, the sums of ``g`` and of ``g * ((x - mean) * invstd)``;
- ``grad_input``: ``((g - gmean) - ((x - mean) * invstd) * proj) * scale``.

The per-channel arithmetic between them (means, variance, ``1 / sqrt(var + eps)``, the moving
statistics) stays NumPy's on arrays of C values, shared with the NumPy path.

Bitwise: the element-wise parts are the NumPy expressions' operations in their order, rounded to
the dtype at each step (numba without fastmath neither reassociates nor contracts into FMAs). The
sums are ``np_channel_sums``': over the batch first, position by position in image order (NumPy's
``a.sum(axis=0)`` of the ``(N, C, P)`` array), then each channel's plane of ``P`` such sums by
NumPy's pairwise summation (``pairwise`` below: eight running sums over blocks of up to 128,
halved recursively above that) from +0.0. NumPy's own ``x.sum(axis=(0, 2, 3))`` instead sums
each image's plane pairwise and adds those sums image by image: a call per (image, channel),
which on small planes (4x4, 7x7) cost 2-6 ns a value against 0.4 on large ones.
``ordered`` says which arrays BatchNorm sums this way (C-contiguous ``(N, C, ...)`` NumPy
arrays), with or without the kernels. ``tests/test_bn_kernels.py`` compares the bits of both paths.
Every function returns False where it does not apply (no numba, another dtype, layout or array
library, small arrays); the caller then runs the NumPy code.

Arrays of ``SPLIT_SIZE`` elements or more are worked in ranges of channels on the BLAS's thread
count of threads (``host_threads``); each channel's arithmetic, sums included, does not depend on
the range it falls in, so the bits do not depend on the thread count.
"""
from __future__ import annotations

import numpy

from .. import _jit
from . import _lane_sums
from . import host_threads as _host_threads

__all__ = ["channel_sums", "scale_shift", "grad_sums", "grad_input", "ordered", "np_channel_sums",
           "MIN_SIZE", "SPLIT_SIZE", "SHIFT_SPLIT_SIZE"]

MIN_SIZE = 1 << 12
# A pass over this many elements (1 MiB of float32, about 0.3 ms) is split into CHANNEL_PARTS
# ranges of channels; smaller ones would pay the threads' hand-over for little.
SPLIT_SIZE = 1 << 18
CHANNEL_PARTS = 8
# ... but the scale and shift, one read and one write an element, runs at the memory's pace on
# one thread until the arrays leave the cache: on two threads, in parts, it took longer below
# this size (one image of 64x112x112 in predict mode 107 -> 261 us, 16 of 64x56x56 535 -> 817
# us; 32 of 64x48x48, 4.7M values, 1502 -> 1159 us).
SHIFT_SPLIT_SIZE = 1 << 22
_np_ndarray = numpy.ndarray
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
BLOCK = 128         # NumPy's PW_BLOCKSIZE: pairwise_sum's longest run of eight running sums
# pairwise's workspace (``workspace``): ``tasks`` rows of two int64 hold a plan of up to
# MAX_LEAVES block sums and their additions, then the walk's stack (3 rows per halving: 2**64
# elements need < 200) and its slots (one per halving); ``values`` holds the plan's sums.
MAX_LEAVES = 512
_LEAVES = 2
_JOINS = _LEAVES + MAX_LEAVES
_WALK = _JOINS + MAX_LEAVES
_WALK_SLOTS = _WALK + 200
STACK = _WALK_SLOTS + 70
_JOINED = MAX_LEAVES
# Halving a count above 128 leaves parts of 64 or more, so a sum of up to this many elements
# has at most MAX_LEAVES blocks.
PLAN_MAX = 64 * MAX_LEAVES


def ordered(x) -> bool:
    """Whether BatchNorm's channel sums of ``x`` are ``np_channel_sums``': ``x`` a C-contiguous
    ``(N, C, ...)`` NumPy array (3 axes or more) of a native float dtype."""
    return (type(x) is _np_ndarray and x.ndim >= 3 and x.flags.c_contiguous
            and (x.dtype is _F32 or x.dtype is _F64))


def np_channel_sums(a):
    """``(C,)``: per channel of the ``(N, C, ...)`` array ``a``, the sum over the batch position
    by position, then over the plane by NumPy's pairwise summation (the kernels' order)."""
    n, c, p = _geometry(a)
    return numpy.ascontiguousarray(a).reshape(n, c, p).sum(axis=0).sum(axis=-1)


def usable(x, *others) -> bool:
    """``ordered(x)`` with ``MIN_SIZE`` elements or more, every other one a C-contiguous NumPy
    array of that dtype; numba there."""
    if x.size < MIN_SIZE or not ordered(x):
        return False
    dtype = x.dtype
    for a in others:
        if type(a) is not _np_ndarray or a.dtype is not dtype or not a.flags.c_contiguous:
            return False
    return _jit.ready()


def _geometry(x):
    n, c = x.shape[:2]
    return n, c, x.size // (n * c)


def workspace(dtype, p):
    """``pairwise``'s tasks (no plan in them yet) and values, and a row of ``p`` elements to sum
    from."""
    tasks = numpy.empty((STACK, 2), numpy.int64)
    tasks[0, 0] = -1
    return tasks, numpy.empty(STACK, dtype), numpy.empty(p, dtype)


def _by_channels(x, work, split=None):
    """``work(c0, c1)`` for ranges of channels covering them all: one range for an ``x`` of fewer
    than ``split`` (SPLIT_SIZE) elements, else CHANNEL_PARTS of them on the BLAS's thread count
    of threads."""
    c = x.shape[1]
    if x.size < (SPLIT_SIZE if split is None else split) or c < 2:
        work(0, c)
        return
    ranges = _host_threads.even_pieces(c, min(c, CHANNEL_PARTS))
    _host_threads.run(len(ranges), lambda i: work(*ranges[i]))


def channel_sums(x, mean, sums) -> None:
    """``sums`` ``(C,)``: ``np_channel_sums(x)``, or that of ``(x - mean)**2`` computed as
    ``d = x - mean; d * d`` when ``mean`` ``(C,)`` is given. The caller checked ``usable``."""
    n, c, p = _geometry(x)

    def work(c0, c1):
        tasks, values, acc = workspace(x.dtype, (c1 - c0) * p)
        _sums(x.reshape(-1), n, c, p, c0, c1, sums if mean is None else mean, mean is not None,
              x.dtype.type(0), sums, acc, tasks, values)
    _by_channels(x, work)


def scale_shift(x, mean, scale, beta, out) -> None:
    """``out = (x - mean) * scale + beta``, per channel vectors (any shape of C values)."""
    n, c, p = _geometry(x)
    _by_channels(x, lambda c0, c1: _scale_shift(
        x.reshape(-1), n, c, p, c0, c1, mean.reshape(-1), scale.reshape(-1), beta.reshape(-1),
        out.reshape(-1)), SHIFT_SPLIT_SIZE)


def grad_sums(g, x, mean, invstd, gsum, gxhat_sum) -> None:
    """Per channel: ``gsum`` = ``np_channel_sums(g)``, ``gxhat_sum`` = that of
    ``g * ((x - mean) * invstd)``."""
    n, c, p = _geometry(x)

    def work(c0, c1):
        tasks, values, acc_g = workspace(x.dtype, (c1 - c0) * p)
        _grad_sums(g.reshape(-1), x.reshape(-1), n, c, p, c0, c1, mean, invstd, x.dtype.type(0),
                   gsum, gxhat_sum, acc_g, numpy.empty_like(acc_g), tasks, values)
    _by_channels(x, work)


def grad_input(g, x, mean, invstd, gmean, proj, scale, gx) -> None:
    """``gx = ((g - gmean) - ((x - mean) * invstd) * proj) * scale``, per channel vectors."""
    n, c, p = _geometry(x)
    _by_channels(x, lambda c0, c1: _grad_input(
        g.reshape(-1), x.reshape(-1), n, c, p, c0, c1, mean, invstd, gmean, proj, scale,
        gx.reshape(-1)))


# ----------------------------------------------------------------------------- the loops
# Flat arrays, every index cast to uint64 where it is used (see _conv_kernels: numba's check for
# negative indices keeps LLVM from vectorizing).
_U = numpy.uint64


def _block_sum_loop(a, s, n, zero):
    """NumPy's pairwise_sum for ``n <= 128``: sequential below 8, else eight running sums (one
    vector of eight lanes when compiled: ``_lane_sums``)."""
    if n < 8:
        res = zero
        for i in range(n):
            res = res + a[_U(s + i)]
        return res
    whole = n - n % 8
    r0, r1, r2, r3, r4, r5, r6, r7 = lane_sums(a, s, whole)       # noqa: F821
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(whole, n):
        res = res + a[_U(s + i)]
    return res


def _pairwise_loop(a, s, n, zero, tasks, values):
    """NumPy's pairwise_sum of ``a[s:s + n]``: above 128 elements the sum of both halves (the
    first rounded down to a multiple of 8). The halving depends on ``n`` alone, so it is worked
    out once into a plan kept in ``tasks`` (``_plan``), used again while ``n`` stays the same (a
    caller sums rows of one width): the leaves' block sums, then the additions of the tree,
    each into its own slot of ``values``, without a stack to wait on. Sums of more than
    ``PLAN_MAX`` elements halve with an explicit stack instead (``_stacked_sum``)."""
    if n > PLAN_MAX:
        return _stacked_sum(a, s, n, zero, tasks, values)
    if tasks[0, 0] != n:
        _plan(n, tasks)
    leaves, joins = tasks[0, 1], tasks[1, 0]
    # One call of the block sum, compiled into each caller once (a block alone: no joins).
    for i in range(leaves):
        values[i] = _block_sum(a, s + tasks[_LEAVES + i, 0], tasks[_LEAVES + i, 1], zero)
    for k in range(joins):
        values[_JOINED + k] = values[tasks[_JOINS + k, 0]] + values[tasks[_JOINS + k, 1]]
    return values[_JOINED + joins - 1] if joins else values[0]


def _halve_loop(tasks, top, start, count):
    """The task on top of the walk's stack (``count`` > BLOCK) replaced by its addition and its
    halves, NumPy's first half (rounded down to a multiple of 8) on top; the new top."""
    half = count // 2
    half -= half % 8
    tasks[top, 0], tasks[top, 1] = 0, -1
    tasks[top + 1, 0], tasks[top + 1, 1] = start + half, count - half
    tasks[top + 2, 0], tasks[top + 2, 1] = start, half
    return top + 3


def _plan_loop(n, tasks):
    """The halving of ``n`` (PLAN_MAX at most) as a plan in ``tasks``: row 0 ``(n, leaves)``,
    row 1 ``(joins, 0)``; from row ``_LEAVES`` each leaf's ``(offset, count)`` in order, its sum
    going to slot ``i`` of ``values``; from row ``_JOINS`` each addition's two slots in the order
    the recursion adds them, its sum going to slot ``_JOINED + k``. The walk's own stack, a task
    ``(offset, count)`` or ``(0, -1)`` for an addition, and the slots of the sums made so far,
    lie after the plan."""
    top, slots, leaves, joins = _WALK, _WALK_SLOTS, 0, 0
    tasks[top, 0], tasks[top, 1] = 0, n
    top += 1
    while top > _WALK:
        top -= 1
        start, count = tasks[top, 0], tasks[top, 1]
        if count < 0:
            tasks[_JOINS + joins, 0] = tasks[slots - 2, 0]
            tasks[_JOINS + joins, 1] = tasks[slots - 1, 0]
            slots -= 1
            tasks[slots - 1, 0] = _JOINED + joins
            joins += 1
        elif count <= BLOCK:
            tasks[_LEAVES + leaves, 0], tasks[_LEAVES + leaves, 1] = start, count
            tasks[slots, 0] = leaves
            slots += 1
            leaves += 1
        else:
            top = _halve(tasks, top, start, count)
    tasks[0, 0], tasks[0, 1] = n, leaves
    tasks[1, 0], tasks[1, 1] = joins, 0


def _stacked_sum_loop(a, s, n, zero, tasks, values):
    """``pairwise`` by an explicit stack: a task ``(start, count)`` sums a range; ``(0, -1)``
    adds the two sums on top of ``values``. Its stack lies after the plan, which it keeps."""
    top, vtop = _WALK + 1, 0
    tasks[_WALK, 0], tasks[_WALK, 1] = s, n
    while top > _WALK:
        top -= 1
        start, count = tasks[top, 0], tasks[top, 1]
        if count < 0:
            right = values[vtop - 1]
            left = values[vtop - 2]
            vtop -= 1
            values[vtop - 1] = left + right
        elif count <= BLOCK:
            values[vtop] = _block_sum(a, start, count, zero)
            vtop += 1
        else:
            top = _halve(tasks, top, start, count)
    return values[0]


def _sums_loop(x, n_, c_, p_, c0, c1, mean, centered, zero, sums, acc, tasks, values):
    # The batch's images added position by position into acc (the channels c0..c1 of one
    # image, contiguous), then each channel's plane summed pairwise.
    for n in range(n_):
        first = n == 0
        base = (n * c_ + c0) * p_
        for c in range(c0, c1):
            m = mean[c]
            at = (c - c0) * p_
            for k in range(p_):
                i = _U(at + k)
                v = x[_U(base + at + k)]
                if centered:
                    d = v - m
                    v = d * d
                acc[i] = v if first else acc[i] + v
    for c in range(c0, c1):
        sums[c] = zero + _pairwise(acc, (c - c0) * p_, p_, zero, tasks, values)


def _scale_shift_loop(x, n_, c_, p_, c0, c1, mean, scale, beta, out):
    for n in range(n_):
        for c in range(c0, c1):
            row = (n * c_ + c) * p_
            m, sc, b = mean[c], scale[c], beta[c]
            for p in range(p_):
                out[_U(row + p)] = (x[_U(row + p)] - m) * sc + b


def _grad_sums_loop(g, x, n_, c_, p_, c0, c1, mean, invstd, zero, gsum, gxhat_sum, acc_g,
                    acc_gxhat, tasks, values):
    for n in range(n_):
        first = n == 0
        base = (n * c_ + c0) * p_
        for c in range(c0, c1):
            m, inv = mean[c], invstd[c]
            at = (c - c0) * p_
            for k in range(p_):
                i, j = _U(at + k), _U(base + at + k)
                gv = g[j]
                t = gv * ((x[j] - m) * inv)
                acc_g[i] = gv if first else acc_g[i] + gv
                acc_gxhat[i] = t if first else acc_gxhat[i] + t
    for c in range(c0, c1):
        at = (c - c0) * p_
        gsum[c] = zero + _pairwise(acc_g, at, p_, zero, tasks, values)
        gxhat_sum[c] = zero + _pairwise(acc_gxhat, at, p_, zero, tasks, values)


def _grad_input_loop(g, x, n_, c_, p_, c0, c1, mean, invstd, gmean, proj, scale, gx):
    for n in range(n_):
        for c in range(c0, c1):
            row = (n * c_ + c) * p_
            m, inv, gm, pr, sc = mean[c], invstd[c], gmean[c], proj[c], scale[c]
            for p in range(p_):
                xhat = (x[_U(row + p)] - m) * inv
                gx[_U(row + p)] = ((g[_U(row + p)] - gm) - xhat * pr) * sc


# The loops call these by name; compiled, they call them compiled (``_jit.Kernel``'s helpers).
# A row's block sums are compiled into ``pairwise``: a second call per row of a small plane cost
# as much as its sum (batch 32, one thread, forward and backward: 512 channels of 3x3 1.55 ->
# 1.33 ms, 256 of 6x6 1.37 -> 1.14, 128 of 12x12 1.82 -> 1.50). ``pairwise`` is compiled into
# its callers too, with one block sum in it and the plan's making left a call: the call cost
# 20 ns a row, a fifth of a 512-value row's sum. When it held the stack's walk and two block
# sums, that took a fresh process's first BatchNorm from 2.7 to 4.1 s of compiling; now 3.0 ->
# 3.4 s, LayerNorm's 2.0 -> 3.8 s.
lane_sums = _lane_sums.lane_sums
_block_sum = _block_sum_loop
block_sum = _jit.Kernel(_block_sum_loop, {"lane_sums": _lane_sums.LANE_SUMS}, inline=True)
_halve = _halve_loop
_plan = _plan_loop
_stacked_sum = _stacked_sum_loop
_pairwise = pairwise_loop = _pairwise_loop
_halve_kernel = _jit.Kernel(_halve_loop, inline=True)
pairwise = _jit.Kernel(_pairwise_loop, inline=True, helpers={
    "_block_sum": block_sum, "_plan": _jit.Kernel(_plan_loop, {"_halve": _halve_kernel}),
    "_stacked_sum": _jit.Kernel(_stacked_sum_loop, {"_block_sum": block_sum,
                                                     "_halve": _halve_kernel})})
_sums = _jit.Kernel(_sums_loop, {"_pairwise": pairwise})
_scale_shift = _jit.Kernel(_scale_shift_loop)
_grad_sums = _jit.Kernel(_grad_sums_loop, {"_pairwise": pairwise})
_grad_input = _jit.Kernel(_grad_input_loop)
