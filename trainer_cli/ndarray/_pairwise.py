"""NumPy's pairwise summation of a stretch of an array, bit for bit, compiled into the loops that
sum rows (BatchNorm's planes, the row normalizations, the softmaxes, the softmax cross-entropy,
the convolutions' bias gradients, the depthwise convolution's taps).

NumPy adds a contiguous stretch of up to 128 values (``BLOCK``) in eight running sums, sum
``k`` taking the values at offsets ``k``, ``k + 8``, ... (one vector of eight lanes here,
``_lane_sums``), combined as ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, the last
``n % 8`` values added one by one; fewer than eight values from +0.0 one by one; above 128 values
the sum of both halves, the first rounded down to a multiple of 8. ``pairwise(a, s, n, zero,
tasks, values)`` is that sum of ``a[s:s + n]``. The halving depends on ``n`` alone, so it is
worked out once into a plan kept in ``tasks`` (``_plan``) and followed again while ``n`` stays
the same, as a caller summing rows of one width does: the blocks' sums, then the tree's
additions, each into its own slot of ``values``, without a stack to wait on. ``tasks`` and
``values`` come from ``workspace``, which also gives the caller a row to sum from. Sums of more
than ``PLAN_MAX`` values halve with an explicit stack instead (``_stacked_sum``).
``tests/test_bn_kernels.py`` compares the sums with NumPy's ``a.sum()``.
"""
from __future__ import annotations

import numpy

from .. import _jit
from . import _lane_sums

__all__ = ["pairwise", "pairwise_loop", "block_sum", "workspace", "BLOCK", "STACK", "PLAN_MAX"]

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


def workspace(dtype, p):
    """``pairwise``'s tasks (no plan in them yet) and values, and a row of ``p`` elements to sum
    from."""
    tasks = numpy.empty((STACK, 2), numpy.int64)
    tasks[0, 0] = -1
    return tasks, numpy.empty(STACK, dtype), numpy.empty(p, dtype)


# Indices as uint64 where they are used (see _conv_kernels: numba's check for negative indices
# keeps LLVM from vectorizing).
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
