"""FullyConnected's element-wise passes in one pass each, on the CPU (numba; see ``_jit``).

Forward, the bias add and the ReLU after the GEMM; backward, the ReLU mask and the bias gradient.
In NumPy those are two to three passes with a temporary each, and on the layer sizes of a small
MLP they cost as much as a fifth of the GEMMs (NumPy's ``maximum`` with a scalar runs at a
fraction of memory speed). A kernel does the same operations on each element, in NumPy's order:

- bias and ReLU: ``x + b``, then ``maximum(x, 0)`` (NaN kept; -0 becomes +0, as NumPy does);
- the mask: ``g * (out > 0)``, a multiply by 1 or 0 (so inf*0 gives NaN, as in NumPy);
- the bias gradient: the sum over the batch as NumPy's ``sum(axis=0)`` adds it, from +0.0:
  pairwise along a contiguous batch (NumPy's ``pairwise_sum``: up to 128 values in 8 running
  sums; longer batches are left to NumPy), one row after another when the batch is the outer
  axis.

Every function returns None (or False) where it does not apply: no numba, arrays below
``MIN_SIZE`` elements, other dtypes or layouts, another array library; the caller then runs the
NumPy operations. ``tests/test_fc_kernels.py`` compares the bits of both.
"""
from __future__ import annotations

import numpy

from .. import _jit

__all__ = ["bias_relu", "relu", "relu_mask", "relu_bias_grad", "pairwise_block",
           "pairwise_block_inline", "MIN_SIZE"]

MIN_SIZE = 1 << 12
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
_np_ndarray = numpy.ndarray


def _usable(a, b=None) -> bool:
    """Whether the kernels take ``a`` (and ``b``, of ``a``'s dtype): C-contiguous NumPy arrays
    of a native float dtype, ``a`` of at least ``MIN_SIZE`` elements, numba available."""
    # Called several times per layer and step: two fixed arguments, dtypes compared by identity
    # (NumPy's native dtypes are singletons; a byte-swapped one takes the NumPy path).
    if type(a) is not _np_ndarray or a.size < MIN_SIZE or not a.flags.c_contiguous:
        return False
    dtype = a.dtype
    if dtype is not _F32 and dtype is not _F64:
        return False
    if b is not None and (type(b) is not _np_ndarray or b.dtype is not dtype
                          or not b.flags.c_contiguous):
        return False
    return _jit._numba is not False and (_jit._numba is not None or _jit.enabled())


def bias_relu(out, bias, bias_on_rows, relu) -> bool:
    """In place on the 2-D C-contiguous ``out``: add ``bias`` (one value per row when
    ``bias_on_rows``, per column otherwise; None for none), then ReLU when ``relu``."""
    if bias is None:
        if not relu or not _usable(out):
            return False
        _bias_relu(out, out[0], 0, True)
        return True
    if not _usable(out, bias) or bias.shape != (out.shape[0] if bias_on_rows else out.shape[1],):
        return False
    _bias_relu(out, bias, 1 if bias_on_rows else 2, relu)
    return True


def relu(x):
    """``maximum(x, 0)`` as a new array, for a C-contiguous ``x`` of any shape (the ReLU
    activation, whose input the gradient's mask needs kept); None where the kernel does not
    apply."""
    if not _usable(x):
        return None
    out = numpy.empty_like(x)
    _relu_into(x.reshape(-1), out.reshape(-1))
    return out


def relu_mask(g, x):
    """``g * (x > 0)`` for C-contiguous ``g`` and ``x`` of one shape; None where the kernel does
    not apply."""
    if not _usable(g, x) or g.shape != x.shape or not g.ndim:
        return None
    # one row: the Dense mask's pass without a bias, in one inner loop (a row per last-axis
    # stretch ran at 2-9 ns a value on convolutions' 5- to 10-wide planes)
    masked, _ = relu_bias_grad(g.reshape(1, -1), x.reshape(1, -1), True, True, False)
    return masked.reshape(g.shape)


def relu_bias_grad(g, out, batch_on_rows, relu, bias, sums=None):
    """``(g * (out > 0) if relu else g, its sum over the batch if bias else None)`` for 2-D
    C-contiguous ``g`` and ``out`` of one shape; the batch runs down the columns (each row one
    unit, the transposed layout) unless ``batch_on_rows``. The sum goes into ``sums`` where that
    is given (the bias's gradient buffer). None where the kernel does not apply (or there is
    nothing to fuse)."""
    if not relu and not bias:
        return None
    if not _usable(g, out if relu else None) or (relu and out.shape != g.shape):
        return None
    if bias and (g.shape[1] < 2 if batch_on_rows else g.shape[1] > _BLOCK):
        # One unit with the batch on rows: the batch is contiguous and NumPy sums it pairwise;
        # a long batch along the rows: NumPy's pairwise sum splits it, which the kernel does not.
        return None
    masked = numpy.empty_like(g) if relu else g
    units = g.shape[1] if batch_on_rows else g.shape[0]
    if sums is None or type(sums) is not _np_ndarray or sums.dtype != g.dtype \
            or sums.shape != (units,) or not sums.flags.c_contiguous:
        sums = numpy.empty(units, g.dtype)
    (_grad_batch_rows if batch_on_rows else _grad_batch_cols)(
        g, out if relu else g, relu, bias, masked, sums)
    return masked, (sums if bias else None)


# ----------------------------------------------------------------------------- the loops
def _bias_relu_loop(out, bias, mode, relu):
    # mode 0: no bias, 1: bias per row, 2: bias per column.
    rows, cols = out.shape
    for i in range(rows):
        row = out[i]
        for j in range(cols):
            v = row[j]
            if mode == 1:
                v = v + bias[i]
            elif mode == 2:
                v = v + bias[j]
            if relu and not (v > 0 or v != v):
                v = 0
            row[j] = v


def _relu_into_loop(x, out):
    for i in range(x.shape[0]):
        v = x[i]
        out[i] = v if v > 0 or v != v else 0


def _grad_batch_cols_loop(g, out, relu, bias, masked, sums):
    # One unit per row, the batch along it (at most _BLOCK long): each row's sum is NumPy's.
    for i in range(g.shape[0]):
        if relu:
            grow, orow, mrow = g[i], out[i], masked[i]
            for j in range(g.shape[1]):
                mrow[j] = grow[j] * (1 if orow[j] > 0 else 0)
        if bias:
            sums[i] = _pairwise_block(masked[i])


def _grad_batch_rows_loop(g, out, relu, bias, masked, sums):
    # One sample per row: the sums add whole rows in order, as NumPy reduces the outer axis.
    if bias:
        for j in range(g.shape[1]):
            sums[j] = 0             # NumPy starts a sum from +0.0 (so -0.0 sums to +0.0)
    for i in range(g.shape[0]):
        grow, mrow = g[i], masked[i]
        if relu:
            orow = out[i]
            for j in range(g.shape[1]):
                mrow[j] = grow[j] * (1 if orow[j] > 0 else 0)
        if bias:
            for j in range(g.shape[1]):
                sums[j] = sums[j] + mrow[j]


# NumPy's pairwise sum (numpy/_core/src/umath/loops_utils.h.src) sums up to PW_BLOCKSIZE values
# in 8 running sums and splits longer runs in halves; the kernel takes the first case only.
_BLOCK = 128


def _pairwise_block_loop(a):
    # NumPy: +0.0 + pairwise_sum(a), which starts from -0.0 below 8 values; at most _BLOCK long.
    n = a.shape[0]
    if n < 8:
        res = a[0]                  # -0.0 + x is x for every x (and n >= 1 here)
        for i in range(1, n):
            res = res + a[i]
        return abs(res) if res == 0 else res
    r0, r1, r2, r3, r4, r5, r6, r7 = a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]
    whole = n - n % 8
    for k in range(8, whole, 8):
        r0, r1, r2, r3 = r0 + a[k], r1 + a[k + 1], r2 + a[k + 2], r3 + a[k + 3]
        r4, r5, r6, r7 = r4 + a[k + 4], r5 + a[k + 5], r6 + a[k + 6], r7 + a[k + 7]
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(whole, n):
        res = res + a[i]
    return abs(res) if res == 0 else res        # +0.0 + res, in a's dtype


# The loops call it by this name; compiled, they call it compiled (``_jit.Kernel``'s helpers).
_pairwise_block = _pairwise_block_loop
pairwise_block = _jit.Kernel(_pairwise_block_loop)
# The same, compiled into a caller that sums one short row after another (GroupAdaGrad's rows).
pairwise_block_inline = _jit.Kernel(_pairwise_block_loop, inline=True)

_bias_relu = _jit.Kernel(_bias_relu_loop)
_relu_into = _jit.Kernel(_relu_into_loop)
_grad_batch_cols = _jit.Kernel(_grad_batch_cols_loop, {"_pairwise_block": pairwise_block})
_grad_batch_rows = _jit.Kernel(_grad_batch_rows_loop)
