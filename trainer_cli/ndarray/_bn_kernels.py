"""BatchNorm's passes over the data in one numba loop each, on the CPU (``nn.BatchNorm``).

The NumPy path of a training-mode BatchNorm runs about ten whole-array passes forward and ten
backward (the channel means by reduction, the centred copy, its square, the normalised copy, the
scale and shift; the gradient's sums, products and the input gradient), each over arrays of
megabytes. The kernels do the same arithmetic in five passes that keep nothing but the output:

- ``channel_sums``: per channel, the sum of ``x`` (or, given the mean, of ``(x - mean)**2``);
- ``scale_shift``: ``(x - mean) * scale + beta``;
- ``predict``: predict mode's whole BatchNorm from the moving statistics (each channel's scale
  made inside the loop), optionally with the ReLU that follows it;
- ``grad_sums``: per channel, the sums of ``g`` and of ``g * ((x - mean) * invstd)``;
- ``grad_input``: ``((g - gmean) - ((x - mean) * invstd) * proj) * scale``;

the backward two taking ``g`` masked by a ReLU's output where BatchNorm and the ReLU after it
are one node.

The per-channel arithmetic between them (means, variance, ``1 / sqrt(var + eps)``, the moving
statistics) stays NumPy's on arrays of C values, shared with the NumPy path.

Bitwise: the element-wise parts are the NumPy expressions' operations in their order, rounded to
the dtype at each step (numba without fastmath neither reassociates nor contracts into FMAs). The
sums are ``np_channel_sums``': over the batch first, position by position in image order (NumPy's
``a.sum(axis=0)`` of the ``(N, C, P)`` array), then each channel's plane of ``P`` such sums by
NumPy's pairwise summation (``_pairwise.pairwise``: eight running sums over blocks of up to
128, halved recursively above that) from +0.0. NumPy's own ``x.sum(axis=(0, 2, 3))`` instead sums
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
from . import _pairwise as _pw
from . import host_threads as _host_threads

__all__ = ["channel_sums", "scale_shift", "predict", "grad_sums", "grad_input", "ordered",
           "np_channel_sums", "MIN_SIZE", "SPLIT_SIZE", "SHIFT_SPLIT_SIZE"]

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
        tasks, values, acc = _pw.workspace(x.dtype, (c1 - c0) * p)
        _sums(x.reshape(-1), n, c, p, c0, c1, sums if mean is None else mean, mean is not None,
              x.dtype.type(0), sums, acc, tasks, values)
    _by_channels(x, work)


def scale_shift(x, mean, scale, beta, out, relu=False) -> None:
    """``out = (x - mean) * scale + beta``, per channel vectors (any shape of C values);
    ``relu``: then the ReLU, as ``predict`` applies it."""
    n, c, p = _geometry(x)
    zero = x.dtype.type(0)
    _by_channels(x, lambda c0, c1: _scale_shift(
        x.reshape(-1), n, c, p, c0, c1, mean.reshape(-1), scale.reshape(-1), beta.reshape(-1),
        bool(relu), zero, out.reshape(-1)), SHIFT_SPLIT_SIZE)


def predict(x, mean, var, gamma, beta, eps, fix_gamma, relu):
    """``(x - mean) * scale + beta`` as a new array, ``scale = 1 / sqrt(var + eps)`` times
    ``gamma`` unless ``fix_gamma``, all per channel ``(C,)``, each channel's scale rounded as
    NumPy rounds ``1 / sqrt(var + eps) * gamma`` in the dtype (``eps`` taken to it first, as
    NumPy takes a Python float); ``relu``: then ``relu`` as ``_fc_kernels`` computes it (NaN
    kept, the rest not above 0 made +0). None unless ``usable(x, mean, var, gamma, beta)``.
    One pass over the data and no per-channel NumPy calls: a batch-1 image's BatchNorm in
    predict mode is mostly those calls."""
    if not usable(x, mean, var, gamma, beta):
        return None
    out = numpy.empty_like(x)
    n, c, p = _geometry(x)
    t = x.dtype.type
    _by_channels(x, lambda c0, c1: _predict(
        x.reshape(-1), n, c, p, c0, c1, mean, var, gamma, beta, t(eps), t(1), t(0),
        bool(fix_gamma), bool(relu), out.reshape(-1)), SHIFT_SPLIT_SIZE)
    return out


def grad_sums(g, x, mean, invstd, gsum, gxhat_sum, relu_out=None) -> None:
    """Per channel: ``gsum`` = ``np_channel_sums(g)``, ``gxhat_sum`` = that of
    ``g * ((x - mean) * invstd)``; ``relu_out``: of ``g`` masked first as the ReLU's backward
    masks it, ``g * (1 if relu_out > 0 else 0)`` (a BatchNorm + ReLU node)."""
    n, c, p = _geometry(x)
    t = x.dtype.type
    mask = g if relu_out is None else relu_out

    def work(c0, c1):
        tasks, values, acc_g = _pw.workspace(x.dtype, (c1 - c0) * p)
        _grad_sums(g.reshape(-1), x.reshape(-1), n, c, p, c0, c1, mean, invstd, t(0),
                   gsum, gxhat_sum, acc_g, numpy.empty_like(acc_g), tasks, values,
                   mask.reshape(-1), relu_out is not None, t(1))
    _by_channels(x, work)


def grad_input(g, x, mean, invstd, gmean, proj, scale, gx, relu_out=None) -> None:
    """``gx = ((g - gmean) - ((x - mean) * invstd) * proj) * scale``, per channel vectors;
    ``relu_out``: ``g`` masked first, as in ``grad_sums``."""
    n, c, p = _geometry(x)
    t = x.dtype.type
    mask = g if relu_out is None else relu_out
    _by_channels(x, lambda c0, c1: _grad_input(
        g.reshape(-1), x.reshape(-1), n, c, p, c0, c1, mean, invstd, gmean, proj, scale,
        gx.reshape(-1), mask.reshape(-1), relu_out is not None, t(0), t(1)))


# ----------------------------------------------------------------------------- the loops
# Flat arrays, every index cast to uint64 where it is used (see _conv_kernels: numba's check for
# negative indices keeps LLVM from vectorizing).
_U = numpy.uint64


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


def _shift_plane_loop(x, row, p_, m, sc, b, relu, zero, out):
    # One channel's plane of one image: (x - m) * sc + b, then the ReLU (NaN kept).
    if relu:
        for p in range(p_):
            v = (x[_U(row + p)] - m) * sc + b
            out[_U(row + p)] = v if v > zero or v != v else zero
    else:
        for p in range(p_):
            out[_U(row + p)] = (x[_U(row + p)] - m) * sc + b


def _scale_shift_loop(x, n_, c_, p_, c0, c1, mean, scale, beta, relu, zero, out):
    for n in range(n_):
        for c in range(c0, c1):
            _shift_plane(x, (n * c_ + c) * p_, p_, mean[c], scale[c], beta[c], relu, zero, out)


def _predict_loop(x, n_, c_, p_, c0, c1, mean, var, gamma, beta, eps, one, zero, fix_gamma,
                  relu, out):
    for n in range(n_):
        for c in range(c0, c1):
            sc = one / numpy.sqrt(var[c] + eps)
            if not fix_gamma:
                sc = sc * gamma[c]
            _shift_plane(x, (n * c_ + c) * p_, p_, mean[c], sc, beta[c], relu, zero, out)


def _grad_sums_loop(g, x, n_, c_, p_, c0, c1, mean, invstd, zero, gsum, gxhat_sum, acc_g,
                    acc_gxhat, tasks, values, mask, masked, one):
    for n in range(n_):
        first = n == 0
        base = (n * c_ + c0) * p_
        for c in range(c0, c1):
            m, inv = mean[c], invstd[c]
            at = (c - c0) * p_
            for k in range(p_):
                i, j = _U(at + k), _U(base + at + k)
                gv = g[j]
                if masked:
                    gv = gv * (one if mask[j] > zero else zero)
                t = gv * ((x[j] - m) * inv)
                acc_g[i] = gv if first else acc_g[i] + gv
                acc_gxhat[i] = t if first else acc_gxhat[i] + t
    for c in range(c0, c1):
        at = (c - c0) * p_
        gsum[c] = zero + _pairwise(acc_g, at, p_, zero, tasks, values)
        gxhat_sum[c] = zero + _pairwise(acc_gxhat, at, p_, zero, tasks, values)


def _grad_input_loop(g, x, n_, c_, p_, c0, c1, mean, invstd, gmean, proj, scale, gx, mask,
                     masked, zero, one):
    for n in range(n_):
        for c in range(c0, c1):
            row = (n * c_ + c) * p_
            m, inv, gm, pr, sc = mean[c], invstd[c], gmean[c], proj[c], scale[c]
            for p in range(p_):
                gv = g[_U(row + p)]
                if masked:
                    gv = gv * (one if mask[_U(row + p)] > zero else zero)
                xhat = (x[_U(row + p)] - m) * inv
                gx[_U(row + p)] = ((gv - gm) - xhat * pr) * sc


# The loops call their helpers by these names; compiled, they call them compiled (the plane's
# shift inlined).
_pairwise = _pw.pairwise_loop
_sums = _jit.Kernel(_sums_loop, {"_pairwise": _pw.pairwise})
_shift_plane = _shift_plane_loop
_shift_plane_inline = {"_shift_plane": _jit.Kernel(_shift_plane_loop, inline=True)}
_scale_shift = _jit.Kernel(_scale_shift_loop, _shift_plane_inline)
_predict = _jit.Kernel(_predict_loop, _shift_plane_inline)
_grad_sums = _jit.Kernel(_grad_sums_loop, {"_pairwise": _pw.pairwise})
_grad_input = _jit.Kernel(_grad_input_loop)
