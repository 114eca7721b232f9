"""LayerNorm over the last axis in one numba loop forward and one for the input's gradient (CPU),
with NumPy bodies (``np_normalized``, ``np_input_grad``: what ``nd.LayerNorm``, InstanceNorm and
GroupNorm run where a loop does not apply) as the reference, to the bit.

NumPy runs a LayerNorm as about ten whole-array passes each way (the row means by reduction, the
centred copy and its square, the normalised copy, the scale and shift; the gradient's products,
two row means and the combination), each over arrays of megabytes, at 3.8 times PyTorch's time
on a transformer's (32, 35, 512). A loop here works a row at a time, in the cache:

- forward: the row's mean, ``(0 + pairwise sum) / D`` as NumPy's ``mean`` adds it (its pairwise
  summation, ``_bn_kernels.pairwise``); the centred values and their squares' mean the same way;
  ``invstd = 1 / sqrt(var + eps)``; ``xhat = (x - mean) * invstd`` (kept for the gradient, as the
  NumPy path keeps it) and ``xhat * gamma + beta``;
- backward, the input's gradient: with ``gh = g * gamma``,
  ``((gh - mean(gh)) - xhat * mean(gh * xhat)) * invstd``, the means as above. The gradients
  of gamma and beta (sums over the rows) stay NumPy's.

Every operation is NumPy's in its order and dtype (numba without fastmath neither reassociates
nor contracts), so the bits are the same. Each function returns None where the loop does not
apply (no numba, another array library or dtype, non-contiguous arrays, small arrays before
numba is loaded); the caller then runs the NumPy bodies. Arrays of ``SPLIT_SIZE`` elements
or more are worked in ranges of rows on the BLAS's thread count of threads; a row's arithmetic
does not depend on the range. ``tests/test_layer_norm_kernels.py`` compares the bits.
"""
from __future__ import annotations

import numpy

from .. import _jit
from . import _bn_kernels as _bk
from . import host_threads as _host_threads

__all__ = ["forward", "input_grad", "np_normalized", "np_input_grad", "MIN_SIZE", "SPLIT_SIZE"]

MIN_SIZE = 1 << 12
SPLIT_SIZE = 1 << 18
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
_np_ndarray = numpy.ndarray


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


def np_input_grad(gh, xhat, invstd, axis=-1):
    """The input's gradient from ``gh``, the output gradient times gamma, as ``input_grad``'s
    loop computes it."""
    return (gh - gh.mean(axis=axis, keepdims=True)
            - xhat * (gh * xhat).mean(axis=axis, keepdims=True)) * invstd


def _by_rows(rows, width, dtype, work):
    """``work(r0, r1, tasks, values, scratch)`` over ranges of ``rows``, each with a workspace of
    its own (``_bk.workspace``: the pairwise sum's stack and a scratch row, two rows here)."""
    def run(r0, r1):
        tasks, values, _ = _bk.workspace(dtype, 0)
        work(r0, r1, tasks, values, numpy.empty((2, width), dtype))
    _host_threads.in_ranges(rows, rows * width, SPLIT_SIZE, run)


def forward(x, gamma, beta, eps, per_row=0):
    """``(out, xhat, invstd)`` of a LayerNorm over the last axis of ``x`` (``invstd`` of shape
    ``x.shape[:-1] + (1,)``), or None where the loop does not apply. ``gamma`` and ``beta``
    hold a value per column, or with ``per_row`` = k one per row, row r taking entry r % k
    (InstanceNorm's channels, GroupNorm's groups)."""
    if not _usable(x, gamma, beta) or gamma.size != beta.size \
            or gamma.size != (per_row or x.shape[-1]):
        return None
    width = x.shape[-1]
    rows = x.size // width
    out, xhat = numpy.empty_like(x), numpy.empty_like(x)
    invstd = numpy.empty(x.shape[:-1] + (1,), x.dtype)
    t = x.dtype.type
    flat, o, h, inv = x.reshape(-1), out.reshape(-1), xhat.reshape(-1), invstd.reshape(-1)
    g, b = gamma.reshape(-1), beta.reshape(-1)
    _by_rows(rows, width, x.dtype, lambda r0, r1, tasks, values, scratch: _forward(
        flat, width, g, b, per_row, t(eps), t(0), t(width), t(1), o, h, inv, r0, r1, tasks, values,
        scratch))
    return out, xhat, invstd


def input_grad(gout, gamma, xhat, invstd, per_row=0):
    """The input's gradient of the LayerNorm ``forward`` made (``xhat``, ``invstd``; ``gamma`` and
    ``per_row`` as it took them), or None where the loop does not apply."""
    if not _usable(gout, gamma, xhat, invstd) or gout.shape != xhat.shape:
        return None
    width = xhat.shape[-1]
    rows = xhat.size // width
    gx = numpy.empty_like(xhat)
    t = xhat.dtype.type
    gf, h, inv, out = gout.reshape(-1), xhat.reshape(-1), invstd.reshape(-1), gx.reshape(-1)
    g = gamma.reshape(-1)
    _by_rows(rows, width, xhat.dtype, lambda r0, r1, tasks, values, scratch: _input_grad(
        gf, width, g, per_row, h, inv, t(0), t(width), out, r0, r1, tasks, values, scratch))
    return gx


# ----------------------------------------------------------------------------- the loops
# Indices as uint64 where they are used (see _conv_kernels: numba's check for negative indices
# keeps LLVM from vectorizing).
_U = numpy.uint64


def _forward_loop(x, d, gamma, beta, per_row, eps, zero, dn, one, out, xhat, invstd, r0, r1, tasks,
                  values, scratch):
    centered = scratch[0]
    squares = scratch[1]
    for r in range(r0, r1):
        at = r * d
        mean = (zero + pairwise(x, at, d, zero, tasks, values)) / dn   # noqa: F821
        for j in range(d):
            c = x[_U(at + j)] - mean
            centered[_U(j)] = c
            squares[_U(j)] = c * c
        var = (zero + pairwise(squares, 0, d, zero, tasks, values)) / dn     # noqa: F821
        inv = one / numpy.sqrt(var + eps)
        invstd[r] = inv
        if per_row:
            scale, shift = gamma[r % per_row], beta[r % per_row]
            for j in range(d):
                h = centered[_U(j)] * inv
                xhat[_U(at + j)] = h
                out[_U(at + j)] = h * scale + shift
        else:
            for j in range(d):
                h = centered[_U(j)] * inv
                xhat[_U(at + j)] = h
                out[_U(at + j)] = h * gamma[_U(j)] + beta[_U(j)]


def _input_grad_loop(gout, d, gamma, per_row, xhat, invstd, zero, dn, gx, r0, r1, tasks, values,
                     scratch):
    gh = scratch[0]
    ghx = scratch[1]
    for r in range(r0, r1):
        at = r * d
        if per_row:
            scale = gamma[r % per_row]
            for j in range(d):
                v = gout[_U(at + j)] * scale
                gh[_U(j)] = v
                ghx[_U(j)] = v * xhat[_U(at + j)]
        else:
            for j in range(d):
                v = gout[_U(at + j)] * gamma[_U(j)]
                gh[_U(j)] = v
                ghx[_U(j)] = v * xhat[_U(at + j)]
        m1 = (zero + pairwise(gh, 0, d, zero, tasks, values)) / dn      # noqa: F821
        m2 = (zero + pairwise(ghx, 0, d, zero, tasks, values)) / dn     # noqa: F821
        inv = invstd[r]
        for j in range(d):
            gx[_U(at + j)] = ((gh[_U(j)] - m1) - xhat[_U(at + j)] * m2) * inv


_forward = _jit.Kernel(_forward_loop, {"pairwise": _bk.pairwise})
_input_grad = _jit.Kernel(_input_grad_loop, {"pairwise": _bk.pairwise})
