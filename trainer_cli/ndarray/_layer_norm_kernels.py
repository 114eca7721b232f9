"""LayerNorm over the last axis in one numba loop forward and one backward (CPU), with NumPy
bodies (``np_normalized``, ``np_input_grad``: what ``nd.LayerNorm``, InstanceNorm and GroupNorm
run where a loop does not apply) as the reference, to the bit.

NumPy runs a LayerNorm as about ten whole-array passes each way (the row means by reduction, the
centred copy and its square, the normalised copy, the scale and shift; the gradient's products,
two row means and the combination), each over arrays of megabytes, at 3.8 times PyTorch's time
on a transformer's (32, 35, 512). A loop here works a row at a time, in the cache, and keeps
only each row's mean and ``invstd`` for the backward pass, which makes the normalized row again
from the input (the same operations, so the same bits) rather than reading a stored copy:

- forward: the row's mean, ``(0 + pairwise sum) / D`` as NumPy's ``mean`` adds it (its pairwise
  summation, ``_pairwise.pairwise``); the centred values and their squares' mean the same way;
  ``invstd = 1 / sqrt(var + eps)``; ``xhat = (x - mean) * invstd`` and ``xhat * gamma + beta``;
- backward, the input's gradient: with ``gh = g * gamma``,
  ``((gh - mean(gh)) - xhat * mean(gh * xhat)) * invstd``, the means as above; gamma's and
  beta's gradients as NumPy's sums over the rows add them: with a value per column, from +0.0
  row after row (``(g * xhat).sum(axis=0)``); with a value per row group (``per_row``), each
  row's pairwise sum, then those of a group's rows one after the other.

Every operation is NumPy's in its order and dtype (numba without fastmath neither reassociates
nor contracts), so the bits are the same. Each function returns None where the loop does not
apply (no numba, another array library or dtype, non-contiguous arrays, small arrays before
numba is loaded); the caller then runs the NumPy bodies. Arrays of ``SPLIT_SIZE`` elements
or more are worked in ranges of rows on the BLAS's thread count of threads; a row's arithmetic
does not depend on the range, and the column sums of gamma's and beta's gradients, which run
down every row, are then made in a second pass in ranges of columns instead, which pays only
from ``COLUMN_SPLIT_SIZE`` elements on. ``tests/test_layer_norm_kernels.py`` compares the bits.
"""
from __future__ import annotations

import numpy

from .. import _jit
from . import _pairwise as _pw
from . import host_threads as _host_threads

__all__ = ["forward", "backward", "np_normalized", "np_input_grad", "np_xhat", "MIN_SIZE",
           "SPLIT_SIZE", "COLUMN_SPLIT_SIZE"]

MIN_SIZE = 1 << 12
# On two threads of the 2-core EPYC (forward and backward, the wall clock): LayerNorm(512) of
# 32x35x512 took 1.38 ms in ranges with the column sums' second pass and 0.80 ms whole; 64x128x768
# 13.5 against 14.6 ms. GroupNorm of 16x64x16x16 0.49 against 0.42 ms, of 32x64x64x64 12.9 against
# 19.4 ms; InstanceNorm of 16x32x32x32 0.73 against 0.78 ms.
SPLIT_SIZE = 1 << 20
COLUMN_SPLIT_SIZE = 1 << 22
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
_np_ndarray = numpy.ndarray
# What the backward loop does with gamma's and beta's gradients.
_NO_SUMS, _COLUMN_SUMS, _ROW_SUMS = 0, 1, 2


def _usable(x, *vectors) -> bool:
    if type(x) is not _np_ndarray or not x.flags.c_contiguous or x.ndim < 1 or not x.size:
        return False
    dtype = x.dtype
    if dtype is not _F32 and dtype is not _F64:
        return False
    for v in vectors:
        if type(v) is not _np_ndarray or v.dtype is not dtype or not v.flags.c_contiguous:
            return False
    if x.size < MIN_SIZE and not _jit.loaded():
        return False
    return _jit.ready()


# ----------------------------------------------------------------------------- NumPy bodies
def np_normalized(x, axis, eps, xp=numpy):
    """``(xhat, invstd, mean, var)`` of ``x`` normalized over ``axis`` (kept as a length-1 axis
    in the statistics), in the array library ``xp``: the operations the loops reproduce."""
    mean = x.mean(axis=axis, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=axis, keepdims=True)
    invstd = 1 / xp.sqrt(var + eps)
    return centered * invstd, invstd, mean, var


def np_xhat(x, mean, invstd):
    """The normalized rows of ``x`` (rows along the last axis) from the ``mean`` and ``invstd``
    ``forward`` kept: ``np_normalized``'s ``xhat``, bit for bit."""
    return (x - mean.reshape(x.shape[:-1] + (1,))) * invstd.reshape(x.shape[:-1] + (1,))


def np_input_grad(gh, xhat, invstd, axis=-1):
    """The input's gradient from ``gh``, the output gradient times gamma, as ``backward``'s
    loop computes it."""
    return (gh - gh.mean(axis=axis, keepdims=True)
            - xhat * (gh * xhat).mean(axis=axis, keepdims=True)) * invstd


def _one_call(rows, width, split) -> bool:
    """Whether the loops take all ``rows`` in one call, in order (fewer than ``split`` elements,
    or one thread), rather than in ranges of rows on several threads."""
    return rows * width < split or rows < 2 or _host_threads.blas_threads() < 2


def _by_rows(rows, width, dtype, scratch_rows, split, work):
    """``work(r0, r1, tasks, values, scratch)`` over ranges of ``rows`` (one range where
    ``_one_call``), each with a workspace of its own (``_pw.workspace``: the pairwise sum's
    stack, and ``scratch_rows`` rows)."""
    def run(r0, r1):
        tasks, values, _ = _pw.workspace(dtype, 0)
        work(r0, r1, tasks, values, numpy.empty((scratch_rows, width), dtype))
    if _one_call(rows, width, split):
        run(0, rows)
    else:
        _host_threads.in_ranges(rows, rows * width, split, run)


def forward(x, gamma, beta, eps, per_row=0):
    """``(out, mean, invstd)`` of a LayerNorm over the last axis of ``x`` (``mean`` and ``invstd``
    a value per row, of shape ``x.shape[:-1]``), or None where the loop does not apply. ``gamma``
    and ``beta`` hold a value per column, or with ``per_row`` = k one per row, row r taking entry
    r % k (InstanceNorm's channels, GroupNorm's groups)."""
    if not _usable(x, gamma, beta) or gamma.size != beta.size \
            or gamma.size != (per_row or x.shape[-1]):
        return None
    width = x.shape[-1]
    rows = x.size // width
    out = numpy.empty_like(x)
    mean, invstd = numpy.empty(x.shape[:-1], x.dtype), numpy.empty(x.shape[:-1], x.dtype)
    t = x.dtype.type
    flat, o, m, inv = x.reshape(-1), out.reshape(-1), mean.reshape(-1), invstd.reshape(-1)
    g, b = gamma.reshape(-1), beta.reshape(-1)
    _by_rows(rows, width, x.dtype, 1, SPLIT_SIZE, lambda r0, r1, tasks, values, scratch: _forward(
        flat, width, g, b, per_row, t(eps), t(0), t(width), t(1), o, m, inv, r0, r1, tasks,
        values, scratch))
    return out, mean, invstd


def backward(gout, x, gamma, mean, invstd, per_row=0, needs=(True, True, True), gx=None):
    """``(gx, ggamma, gbeta)`` of the LayerNorm ``forward`` made (``mean``, ``invstd``; ``x``,
    ``gamma`` and ``per_row`` as it took them) for the output's gradient ``gout``, each None where
    ``needs`` says it is not wanted; ``gx`` written into the given array if there is one. None
    where the loop does not apply."""
    if not _usable(gout, x, gamma, mean, invstd) or gout.shape != x.shape \
            or (gx is not None and not _usable(gx, x)) or not any(needs):
        return None
    width = x.shape[-1]
    rows = x.size // width
    want_gx, want_sums = bool(needs[0]), bool(needs[1] or needs[2])
    if want_gx and gx is None:
        gx = numpy.empty_like(x)
    t = x.dtype.type
    # A value per row: each row's own sums (in ranges of rows on any thread count); a value per
    # column: sums down the rows, in the loop where one call takes the rows in order, else after
    # it in ranges of columns. Where gamma is one value (one column, one group), NumPy's sum
    # runs pairwise over the whole array: that is left to NumPy below.
    single = (per_row or width) == 1
    sums = (_ROW_SUMS if per_row else _COLUMN_SUMS) if want_sums and not single else _NO_SUMS
    split = COLUMN_SPLIT_SIZE if sums == _COLUMN_SUMS else SPLIT_SIZE
    loop_sums = _NO_SUMS if sums == _COLUMN_SUMS and not _one_call(rows, width, split) else sums
    k = rows if per_row else width
    ga, gb = numpy.zeros(k, x.dtype), numpy.zeros(k, x.dtype)
    flat, gf, g = x.reshape(-1), gout.reshape(-1), gamma.reshape(-1)
    m, inv = mean.reshape(-1), invstd.reshape(-1)
    out = gx.reshape(-1) if want_gx else ga
    if want_gx or loop_sums != _NO_SUMS:
        _by_rows(rows, width, x.dtype, 4, split, lambda r0, r1, tasks, values, scratch: _backward(
            gf, flat, width, g, per_row, m, inv, t(0), t(width), want_gx, out, loop_sums, ga, gb,
            r0, r1, tasks, values, scratch))
    if sums == _COLUMN_SUMS and loop_sums == _NO_SUMS:
        ranges = _host_threads.even_pieces(width, min(width, 2 * _host_threads.blas_threads()))
        _host_threads.run(len(ranges), lambda i: _column_sums(
            gf, flat, width, rows, m, inv, ranges[i][0], ranges[i][1], ga, gb))
    elif sums == _ROW_SUMS:
        ga, gb = (v.reshape(-1, per_row).sum(axis=0) for v in (ga, gb))
    elif want_sums and single:
        ga = (gout * np_xhat(x, mean, invstd)).sum().reshape(1) if needs[1] else None
        gb = gout.sum().reshape(1)
    return (gx if want_gx else None, ga if needs[1] else None, gb if needs[2] else None)


# ----------------------------------------------------------------------------- the loops
# Indices as uint64 where they are used (see _conv_kernels: numba's check for negative indices
# keeps LLVM from vectorizing).
_U = numpy.uint64


def _forward_loop(x, d, gamma, beta, per_row, eps, zero, dn, one, out, means, invstd, r0, r1,
                  tasks, values, scratch):
    squares = scratch[0]
    for r in range(r0, r1):
        at = r * d
        mean = (zero + pairwise(x, at, d, zero, tasks, values)) / dn   # noqa: F821
        for j in range(d):
            c = x[_U(at + j)] - mean
            squares[_U(j)] = c * c
        var = (zero + pairwise(squares, 0, d, zero, tasks, values)) / dn     # noqa: F821
        inv = one / numpy.sqrt(var + eps)
        means[r] = mean
        invstd[r] = inv
        if per_row:
            scale, shift = gamma[r % per_row], beta[r % per_row]
            for j in range(d):
                out[_U(at + j)] = ((x[_U(at + j)] - mean) * inv) * scale + shift
        else:
            for j in range(d):
                out[_U(at + j)] = ((x[_U(at + j)] - mean) * inv) * gamma[_U(j)] + beta[_U(j)]


def _backward_loop(gout, x, d, gamma, per_row, means, invstd, zero, dn, want_gx, gx, sums, ga, gb,
                   r0, r1, tasks, values, scratch):
    # One pass over a row makes what the sums need (fewer passes, fewer stores: faster than a
    # loop for each), in a loop without a test inside it for each kind of sums.
    xhat, gh, ghx, prod = scratch[0], scratch[1], scratch[2], scratch[3]
    for r in range(r0, r1):
        at = r * d
        mean, inv = means[r], invstd[r]
        if per_row:
            scale = gamma[r % per_row]
            if sums == 2:
                for j in range(d):
                    v = gout[_U(at + j)]
                    h = (x[_U(at + j)] - mean) * inv
                    xhat[_U(j)] = h
                    prod[_U(j)] = v * h
                    w = v * scale
                    gh[_U(j)] = w
                    ghx[_U(j)] = w * h
                ga[r] = pairwise(prod, 0, d, zero, tasks, values)       # noqa: F821
                gb[r] = pairwise(gout, at, d, zero, tasks, values)      # noqa: F821
            else:
                for j in range(d):
                    h = (x[_U(at + j)] - mean) * inv
                    xhat[_U(j)] = h
                    w = gout[_U(at + j)] * scale
                    gh[_U(j)] = w
                    ghx[_U(j)] = w * h
        elif sums == 1:
            for j in range(d):
                v = gout[_U(at + j)]
                h = (x[_U(at + j)] - mean) * inv
                xhat[_U(j)] = h
                ga[_U(j)] = ga[_U(j)] + v * h
                gb[_U(j)] = gb[_U(j)] + v
                w = v * gamma[_U(j)]
                gh[_U(j)] = w
                ghx[_U(j)] = w * h
        else:
            for j in range(d):
                h = (x[_U(at + j)] - mean) * inv
                xhat[_U(j)] = h
                w = gout[_U(at + j)] * gamma[_U(j)]
                gh[_U(j)] = w
                ghx[_U(j)] = w * h
        if not want_gx:
            continue
        m1 = (zero + pairwise(gh, 0, d, zero, tasks, values)) / dn      # noqa: F821
        m2 = (zero + pairwise(ghx, 0, d, zero, tasks, values)) / dn     # noqa: F821
        for j in range(d):
            gx[_U(at + j)] = ((gh[_U(j)] - m1) - xhat[_U(j)] * m2) * inv


def _column_sums_loop(gout, x, d, rows, means, invstd, c0, c1, ga, gb):
    for r in range(rows):
        at = r * d
        mean, inv = means[r], invstd[r]
        for j in range(c0, c1):
            v = gout[_U(at + j)]
            ga[_U(j)] = ga[_U(j)] + v * ((x[_U(at + j)] - mean) * inv)
            gb[_U(j)] = gb[_U(j)] + v


_forward = _jit.Kernel(_forward_loop, {"pairwise": _pw.pairwise})
_backward = _jit.Kernel(_backward_loop, {"pairwise": _pw.pairwise})
_column_sums = _jit.Kernel(_column_sums_loop)
