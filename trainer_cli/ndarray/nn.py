"""Neural-network ops with MXNet's names and semantics: Convolution, Pooling, BatchNorm, Dropout,
Embedding, LeakyReLU.

Convolution is im2col: a strided window view of the padded input is copied into a
``(groups, C/g * kernel, N * out)`` matrix and multiplied by the weight in one GEMM per group;
its input gradient scatters the column gradient back window offset by window offset. On host
arrays that is done a few images at a time (``PIECE_ELEMENTS``), on several threads; there a 3x3
convolution of stride 1 with enough channels goes through Winograd's F(2x2, 3x3) instead
(``winograd``), with 2.25 times fewer multiplications. Pooling loops over window offsets (a
handful of whole-array ops) instead of materialising windows. Everything is written over the
array module of the input, so NumPy and CuPy share it.
"""
from __future__ import annotations

import itertools
import math
import numbers

import numpy

from .. import autograd as _ag
from .. import random as _random
from ..base import ShapeError
from . import _act_kernels
from . import _bn_kernels as _bk
from . import _conv_kernels as _ck
from . import _depthwise
from . import _layer_norm_kernels as _ln_kernels
from . import _relu_masks
from . import host_threads as _host_threads
from . import winograd as _winograd
from .ndarray import NDArray, _recording_for, _result, _scatter_add, _wrap, _xp_of
from .sparse import embedding_grad, embedding_of_rows
from .normalization import rows_loop_grads
from .ops import _erf_raw, _relu_grad, _relu_raw
from .ops import flatten as _flatten
from .ops import relu as _relu

__all__ = ["Convolution", "Pooling", "BatchNorm", "LayerNorm", "Dropout", "Embedding", "LeakyReLU",
           "Flatten"]

Flatten = _flatten


def _tuple(value, n, default, what=None):
    """A length-``n`` tuple from MXNet's int / tuple / empty-tuple (meaning default) spellings;
    ``what`` names the argument in the error (``"im2col: stride"``)."""
    if value is None or value == ():
        return (default,) * n
    if isinstance(value, numbers.Integral):
        return (int(value),) * n
    value = tuple(int(v) for v in value)
    if len(value) != n:
        raise ValueError("%s must have %d entries (the kernel's), got %r" % (what, n, value)
                         if what else "expected %d values, got %r" % (n, value))
    return value


def _leading(value, n):
    """``value``'s first ``n`` entries where it is a sequence of more (else ``value``)."""
    if isinstance(value, (tuple, list)) and len(value) > n:
        return tuple(value[:n])
    return value


def _check_layout(layout, nsp):
    expected = {1: "NCW", 2: "NCHW", 3: "NCDHW"}[nsp]
    if layout is not None and layout != expected:
        raise NotImplementedError("only the %s layout is supported, got %r" % (expected, layout))


def _offsets(kernel):
    return itertools.product(*(range(k) for k in kernel))


def _window_slices(offset, dilate, stride, out):
    """Slices picking, for one kernel offset, the input element of every output position."""
    return tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                 for o, d, s, n in zip(offset, dilate, stride, out))


# ----------------------------------------------------------------------------- Convolution
def Convolution(data=None, weight=None, bias=None, kernel=None, stride=None, dilate=None, pad=None,
                num_filter=None, num_group=1, workspace=1024, no_bias=False, cudnn_tune=None,
                cudnn_off=False, layout=None, **kwargs):
    """N-D convolution (1-D, 2-D or 3-D, channels first) with groups, stride, dilation, padding."""
    return _convolution(data, weight, None if no_bias else bias, kernel, stride, dilate, pad,
                        num_filter, num_group, layout, False)


def _convolution(data, weight, bias, kernel, stride, dilate, pad, num_filter, num_group, layout,
                 relu):
    """Convolution, followed by ReLU when ``relu`` (one node: Conv2D(activation='relu'))."""
    x, w = data._data, weight._data
    xp = _xp_of(x)
    nsp = x.ndim - 2
    if kernel is None:
        kernel = w.shape[2:]
    kernel = _tuple(kernel, nsp, 1)
    _check_layout(layout, nsp)
    stride, dilate, pad = _tuple(stride, nsp, 1), _tuple(dilate, nsp, 1), _tuple(pad, nsp, 0)
    n, c = x.shape[:2]
    f = w.shape[0]
    groups = int(num_group)
    if num_filter is not None and int(num_filter) != f:
        raise ShapeError("num_filter=%s does not match weight shape %s" % (num_filter, w.shape))
    if c % groups or f % groups or w.shape[1] * groups != c or tuple(w.shape[2:]) != kernel:
        raise ShapeError("weight shape %s does not fit data shape %s with kernel %s and num_group=%d"
                         % (w.shape, x.shape, kernel, groups))
    spatial = x.shape[2:]
    out_sp = tuple((h + 2 * p - d * (k - 1) - 1) // s + 1
                   for h, p, d, k, s in zip(spatial, pad, dilate, kernel, stride))
    if min(out_sp) <= 0:
        raise ShapeError("kernel %s (dilate %s) is larger than the padded input %s"
                         % (kernel, dilate, spatial))
    if _depthwise.applies(x, w, None if bias is None else bias._data, groups, relu):
        return _depthwise_convolution(data, weight, bias, (stride, dilate, pad, out_sp))
    if _winograd.applies(x, w, kernel, stride, dilate, groups, out_sp):
        return _winograd.convolution(data, weight, bias, pad, relu)
    ksize = math.prod(kernel)
    plane = math.prod(out_sp)
    rows = (c // groups) * ksize        # of the column matrix, per group
    host = type(x) is numpy.ndarray
    budget = max(PIECE_ELEMENTS, min(w.size, _winograd.WEIGHT_PIECE_ELEMENTS))
    pieces = _host_threads.pieces(n, c * ksize * plane, budget) if host else [(0, n)]
    wm = w.reshape(groups, f // groups, rows)
    b = None if bias is None else bias._data

    def columns(a, z, ones=False):
        """The column matrix of images ``a:z``, ``(groups, rows, (z - a) * plane)``, laid out
        (C, kernel..., N, out...); ``ones`` (one group, host arrays): with a last row of ones."""
        xs = x[a:z]
        full = numpy.empty((c * ksize + ones, (z - a) * plane), x.dtype) if host else None
        cols = None if full is None else full[:c * ksize]
        if cols is None or not _ck.im2col(xs, kernel, stride, dilate, pad, out_sp, cols):
            xpad = xp.pad(xs, ((0, 0), (0, 0)) + tuple((p, p) for p in pad)) if any(pad) else xs
            xpad = xp.ascontiguousarray(xpad)
            st = xpad.strides
            view = xp.lib.stride_tricks.as_strided(
                xpad, shape=(c,) + kernel + (z - a,) + out_sp,
                strides=(st[1],) + tuple(st[2 + i] * dilate[i] for i in range(nsp)) + (st[0],)
                + tuple(st[2 + i] * stride[i] for i in range(nsp)))
            cols = view.reshape(c * ksize, (z - a) * plane)
            if ones:
                full[:c * ksize] = cols
        if ones:
            full[c * ksize] = 1
            return full.reshape(1, rows + 1, (z - a) * plane)
        return cols.reshape(groups, rows, (z - a) * plane)

    out = xp.empty((n, f) + out_sp, x.dtype)

    # Few column rows against many filters: each image's GEMM writes its (F, P) block of the
    # output in place, and the epilogue only adds the bias and takes the ReLU there (the
    # transposing epilogue's pass over the output, the largest array, is gone). So does a 1x1
    # convolution of stride 1 without padding on planes of POINTWISE_PLANE values or more, whose
    # columns are each image itself: no column matrix is made either; unless its weights
    # outweigh POINTWISE_COLUMNS times what its operands hold a plane (many channels on a small
    # plane), where the images' GEMMs are too thin.
    pointwise = host and groups == 1 and ksize == 1 and all(s == 1 for s in stride) \
        and not any(pad) and plane >= POINTWISE_PLANE \
        and f * c < POINTWISE_COLUMNS * plane * (f + c)
    per_image = host and groups == 1 and (rows <= PER_IMAGE_ROWS < f or pointwise)

    def forward(i):
        a, z = pieces[i]
        target = out[a:z]
        if per_image:
            blocks = target.reshape(z - a, f, plane)
            cols = x[a:z].reshape(z - a, c, plane) if pointwise else \
                columns(a, z).reshape(rows, z - a, plane).transpose(1, 0, 2)
            numpy.matmul(wm[0], cols, out=blocks)
            if not _ck.bias_relu_rows(blocks, b, relu):
                if b is not None:
                    blocks += b.reshape(f, 1)
                if relu:
                    numpy.maximum(blocks, 0, out=blocks)
            return
        if host and z - a == 1:
            # One image: the GEMM's (F, P) result is the output's layout; it is written there,
            # in bands of output rows where the columns outweigh the weights (one image's
            # parts, in turn on this piece's thread: resnet18_v1 at batch 16, 0.991 / 0.978 of
            # the time on one / two threads; a batch of one tried its bands already, below).
            if n == 1 or not _split_image(x[a:z], wm, b, relu, target,
                                          (kernel, stride, dilate, pad, out_sp), 1, _in_turn):
                _one_image(wm, columns(a, z), b, relu, target)
            return
        res = xp.matmul(wm, columns(a, z)).reshape(f, z - a, plane)
        if not _ck.conv_epilogue(res, b, relu, target.reshape(z - a, f, plane)):
            moved = xp.moveaxis(res.reshape((f, z - a) + out_sp), 0, 1)
            if b is not None:
                xp.add(moved, b.reshape((f,) + (1,) * nsp), out=target)
            else:
                target[...] = moved
            if relu:
                xp.maximum(target, 0, out=target)

    threads = _host_threads.blas_threads() if host and n == 1 else 1
    if host and n == 1 and not per_image and \
            _split_image(x, wm, b, relu, out, (kernel, stride, dilate, pad, out_sp), threads):
        pass
    elif threads <= 1:
        _host_threads.run(len(pieces), forward)
    else:
        # One image too small to split: its GEMM on one BLAS thread, whose others would meet
        # for little work, then spin on a core where the next op's pieces want to run.
        with _host_threads.one_blas_thread():
            forward(0)
    inputs = (data, weight, bias) if bias is not None else (data, weight)
    if not _recording_for(*inputs):
        return _wrap(out, data._ctx)
    if relu and host:
        _relu_masks.mark_output(out)

    def vjp(g, needs):
        bias_grad = bias is not None and needs[2]
        transposed = rows >= TRANSPOSED_GRAD_ROWS and n * plane >= TRANSPOSED_GRAD_POSITIONS
        # A max pooling of ``out`` may have applied the ReLU's mask already (_relu_masks).
        mask = relu and not _relu_masks.take_masked(g)
        if per_image:
            return _per_image_vjp(g, out, mask, x, wm, None if pointwise else columns, pieces,
                                  needs, bias is not None, (kernel, stride, dilate, pad, out_sp))
        if transposed:
            g2, gb = _grad_rows_t(g, out, mask, n, f, plane, bias_grad, xp)
            g2 = g2.reshape(n * plane, groups, f // groups)
        else:
            # The masked gradient's (F, N, P) rows are made piece by piece, on the pieces' threads.
            g2, gb = xp.empty((f, n, plane), g.dtype), None
            gc = g if type(g) is not numpy.ndarray or g.flags.c_contiguous \
                else numpy.ascontiguousarray(g)
        gx = xp.empty(x.shape, x.dtype) if needs[0] else None

        def backward(i):
            a, z = pieces[i]
            if transposed:
                piece_g = g2[a * plane:z * plane].transpose(1, 0, 2)      # (G, L, F/G)
                fl = piece_g.transpose(0, 2, 1)                          # (G, F/G, L)
            else:
                _grad_rows(gc, out, mask, a, z, g2, xp)
                fl = g2.reshape(groups, f // groups, n * plane)[:, :, a * plane:z * plane]
            part = None
            if needs[1]:
                cols = columns(a, z)
                part = xp.matmul(cols, piece_g) if transposed else \
                    xp.matmul(fl, cols.transpose(0, 2, 1))
            if needs[0]:
                gcols = xp.matmul(wm.transpose(0, 2, 1), fl).reshape(c * ksize, (z - a) * plane)
                _col2im(gcols, gx[a:z], kernel, stride, dilate, pad, out_sp, xp)
            return part

        # The pieces' weight gradients, summed in piece order on any number of threads.
        gw_sum = _host_threads.run_summed(len(pieces), backward)
        if not transposed and bias_grad:
            gb = g2.reshape(f, n * plane).sum(axis=1)
        gw = None
        if needs[1]:
            gw = xp.ascontiguousarray(gw_sum.transpose(0, 2, 1)) if transposed else gw_sum
            gw = gw.reshape(w.shape)
        if bias is not None:
            return gx, gw, gb
        return gx, gw
    return _result(out, data._ctx, inputs, vjp)


def _depthwise_convolution(data, weight, bias, geometry):
    """A 2-D depthwise convolution on the CPU, tap by tap (``_depthwise``): its loops, or their
    NumPy body where numba is not available."""
    x, w = data._data, weight._data
    b = None if bias is None else bias._data
    out = _depthwise.forward(x, w, b, *geometry)
    if out is None:
        out = _depthwise.np_forward(x, w, b, *geometry)
    inputs = (data, weight, bias) if bias is not None else (data, weight)
    if not _recording_for(*inputs):
        return _wrap(out, data._ctx)

    def vjp(g, needs):
        made = _depthwise.backward(g, x, w, *geometry, needs[0], needs[1])
        gx, gw = made if made is not None else _depthwise.np_backward(
            g, x, w, *geometry, needs[0], needs[1])
        if bias is None:
            return gx, gw
        return gx, gw, (g.sum(axis=(0, 2, 3)) if needs[2] else None)
    return _result(out, data._ctx, inputs, vjp)


# A convolution on host arrays works on a few images at a time: the column matrix of at most as
# many images as fill PIECE_ELEMENTS values (512 KiB of float32; one image at least; the batch cut
# into pieces of equal size, give or take an image), its GEMMs and epilogue, then the next, on
# as many threads as the BLAS has (``host_threads``). A piece's matrices stay in the core's
# cache, and no matrix of the whole batch is made (the CIFAR-sized layer's was 75 MB, in the
# forward pass and again for its gradient). One thread, 64 -> 64 channels at 32x32, batch 32:
# forward 44 -> 34 ms, backward (the columns made again) 75 -> 64 ms. The weight gradient is the
# pieces' GEMMs summed in piece order; the pieces depend on the shapes alone, so the result is
# the same bits on any thread count. On a GPU the batch is one piece. Half a MiB rather than one:
# LeNet's first layer (one input channel, 32 filters: its output 3.5 times its columns) in three
# pieces instead of two, the whole LeNet step 17.4 -> 17.0 ms on one thread and 13.7 -> 12.8 ms
# on two (in-process A/B, medians of 16); the CIFAR-sized step unchanged.
PIECE_ELEMENTS = 1 << 17
# A layer whose weights outnumber PIECE_ELEMENTS takes pieces as large as its weights (up to
# ``winograd.WEIGHT_PIECE_ELEMENTS``), for the reason given there: ResNet's stride-2 3x3 layer
# of 256 -> 512 channels at 8x8, batch 32, forward and backward on one thread 88 -> 48 ms.
# Convolutions whose column matrix has at most this many rows (input channels x kernel size) and
# more filters than that multiply image by image straight into the output (see ``forward``).
PER_IMAGE_ROWS = 16
# A pointwise convolution's images go straight to their GEMMs from planes of this many values
# on (see ``forward``); on smaller ones the per-image GEMMs are too thin: 832 -> 384 channels at
# 3x3, batch 32, forward 2.3 ms with the column matrix, 4.3 image by image. From 6x6 on, forward
# and backward on one thread: 512 -> 64 channels at 6x6 4.65 -> 4.24 ms, 64 -> 64 at 24x24
# 9.6 -> 9.2, 64 -> 128 at 56x56 109 -> 107 (two threads: 1.07x, 1.11x, 1.11x).
POINTWISE_PLANE = 16
# With the column matrix a copy of the planes (``_conv_kernels.im2col``), one GEMM a piece beats
# the images' GEMMs where ``F C >= 2 P (F + C)``. Forward and backward, batch 32, one thread:
# 832 -> 384 channels at 4x4 13.5 -> 12.0 ms, 528 -> 256 at 6x6 12.1 -> 11.5, 512 -> 128 at
# 6x6 6.3 -> 6.1, 512 -> 512 at 7x7 (8 images) 7.7 -> 7.3; below that ratio the images' GEMMs
# win (128 -> 64 at 5x5, 1.7: 0.64 against 0.73 ms; 64 -> 64 at 6x6, 0.9: 0.47 against 0.54).
POINTWISE_COLUMNS = 2


def _in_turn(count, part):
    """``part(i)`` for each ``i < count``, on this thread (``_split_image``'s ``run`` inside a
    piece, which already has its thread)."""
    for i in range(count):
        part(i)


def _one_image(wm, cols, bias, relu, target):
    """``target`` ``(1, F, ...)`` = ``wm`` ``(G, F/G, rows)`` times ``cols`` ``(G, rows, P)``,
    plus ``bias``, then ReLU when ``relu`` (the epilogue's element rule, in place)."""
    groups, fg = wm.shape[:2]
    numpy.matmul(wm, cols, out=target.reshape(groups, fg, -1))
    blocks = target.reshape(1, groups * fg, -1)
    if not _ck.bias_relu_rows(blocks, bias, relu):
        if bias is not None:
            blocks += bias.reshape(-1, 1)
        if relu:
            numpy.maximum(blocks, 0, out=blocks)


# One image on several threads (where its column matrix has SPLIT_ELEMENTS values or more;
# smaller ones would pay the hand-over for little). Where the column matrix outweighs the
# weights (the stem, early layers), in parts, each a GEMM of its own on one BLAS thread: a part
# is a block of output rows; it makes those windows' columns alone and multiplies them into its
# columns of the output, in cache, with no wait between. So on one thread too, in as many parts
# as on two (resnet18_v1's stem 3.8 -> 3.2 ms: its whole column matrix, 7 MB, left the cache
# before its GEMM read it; the network's step 0.977 of the time). Else the columns are made
# first, in about SPLIT_PARTS runs of rows a thread, then multiplied by the weights in one GEMM
# on the BLAS's threads, which share each packed panel of the columns (blocks of filters, a
# GEMM each on the piece threads, each packed all of the columns again: 128 -> 256 channels at
# 28x28, stride 2, its product 0.75 ms against 0.62 on two threads). OpenBLAS splits the rows and
# columns of a product, never its sum, so the bits are the one thread's. A product of fewer
# than BLAS_SPLIT_WORK multiply-adds stays on one BLAS thread: the others would meet for little
# work, then spin on a core where the next op's pieces want to run.
#
# A block of output positions starts at a multiple of ALIGN (a multiple of the
# rows and columns of OpenBLAS's micro-kernel tiles here) and has MIN_BLOCK_WORK
# multiply-adds at least: on one thread OpenBLAS may take other kernels for smaller products
# (its small-matrix kernel below 1M, its SkylakeX "direct" sgemm below 7.3M), whose sums need
# not be the blocked GEMM's. Each output element is then summed as by the one GEMM of the
# whole image, the same bits as on one thread (tests/test_batch_one_threads.py checks each
# resnet18_v1 shape).
SPLIT_ELEMENTS = 1 << 16
SPLIT_PARTS = 2
ALIGN = 16
MIN_BLOCK_WORK = 1 << 23
BLAS_SPLIT_WORK = 1 << 24


def _blocks(count, unit, work_per_item, threads):
    """Ranges of ``count`` items (output rows, ``work_per_item`` multiply-adds each) in blocks
    that start at multiples of ``unit`` and hold MIN_BLOCK_WORK at least, up to SPLIT_PARTS a
    thread; one range where they cannot be."""
    units = count // unit
    least = -(-MIN_BLOCK_WORK // (work_per_item * unit))    # units a block
    parts = min(SPLIT_PARTS * threads, units // least)
    if parts <= 1:
        return [(0, count)]
    if parts > threads:
        # Whole rounds of parts: with three parts on two threads one thread works two of them
        # (ResNet's 64 -> 128 stride-2 layer, one image: 20 of its 28 output rows).
        parts -= parts % threads
    bounds = [(a * unit, z * unit) for a, z in _host_threads.even_pieces(units, parts)]
    return bounds[:-1] + [(bounds[-1][0], count)]


def _split_image(x, wm, bias, relu, out, geometry, threads, run=None) -> bool:
    """The forward pass of one image ``x`` into ``out`` on ``threads`` threads, in parts (each
    ``run`` by ``run(count, part)``, ``host_threads.run`` by default); False where the kernels
    do not take these arrays or the work makes one part (nothing done)."""
    kernel, stride, dilate, pad, out_sp = geometry
    groups, f, rows = wm.shape
    plane = math.prod(out_sp)
    # (``out``: of the columns' dtype and contiguous, as the kernel wants them)
    if groups != 1 or len(kernel) != 2 or rows * plane < SPLIT_ELEMENTS \
            or not _ck.takes_im2col(x, out):
        return False
    width = out_sp[1]
    # (as many parts on one thread as on two: they keep each part's columns in cache)
    spans = _blocks(out_sp[0], ALIGN // math.gcd(width, ALIGN), f * rows * width,
                    max(threads, 2))
    if plane > f and len(spans) > 1:        # the columns outweigh the weights
        flat = out.reshape(f, plane)

        def part(i):
            r0, r1 = spans[i]
            cols = numpy.empty((rows, (r1 - r0) * width), x.dtype)
            _ck.im2col(x, kernel, stride, dilate, pad, out_sp, cols, None, spans[i])
            block = flat[:, r0 * width:r1 * width]
            numpy.matmul(wm[0], cols, out=block)
            if bias is not None:        # NumPy's, the epilogue kernel's rule, on a strided block
                block += bias.reshape(f, 1)
            if relu:
                numpy.maximum(block, 0, out=block)
        (run or _host_threads.run)(len(spans), part)
        return True
    if threads < 2 or f * rows * plane < BLAS_SPLIT_WORK:   # the caller's GEMM, one BLAS thread
        return False
    cols = numpy.empty((rows, plane), x.dtype)
    _ck.im2col(x, kernel, stride, dilate, pad, out_sp, cols)      # in parts where it is large
    _one_image(wm, cols.reshape(1, rows, plane), bias, relu, out)
    return True


def _per_image_vjp(g, out, mask, x, wm, columns, pieces, needs, with_bias, geometry):
    """The gradients of a per-image convolution (see ``forward``), image by image in the output's
    (N, F, P) layout: the masked gradient's (F, P) block of each image times its columns. No
    (F, N, P) copy of the gradient is made, and each GEMM's operands are contiguous blocks
    (LeNet's first layer, one piece of 16 images alone: 1.9 -> 0.76 ms). The bias gradient comes
    out of the same GEMMs, from a row of ones below the columns (a pass of its own over the
    gradient took 0.25 ms there, the extra column 0.035 ms). ``columns`` None: a pointwise
    convolution, whose columns are the images themselves; the input's gradient is then its
    GEMMs' result, and the bias gradient the gradient's sums (a row of ones would take a copy
    of the input)."""
    n, f = out.shape[:2]
    _, _, rows = wm.shape
    plane = math.prod(out.shape[2:])
    g = numpy.ascontiguousarray(g, x.dtype).reshape(n, f, plane)
    o = out.reshape(n, f, plane)
    gm = numpy.empty_like(g) if mask else g
    gx = numpy.empty(x.shape, x.dtype) if needs[0] else None
    bias_grad = with_bias and needs[2]

    def backward(i):
        a, z = pieces[i]
        if not _ck.mask_rows(g, o, mask, gm, a, z, None):
            numpy.multiply(g[a:z], o[a:z] > 0, out=gm[a:z])
        if needs[0] and columns is None:
            numpy.matmul(wm[0].T, gm[a:z], out=gx[a:z].reshape(z - a, rows, plane))
        elif needs[0]:
            gcols = numpy.matmul(wm[0].T, gm[a:z])                                # (n, rows, P)
            gcols = numpy.ascontiguousarray(gcols.transpose(1, 0, 2)).reshape(rows, -1)
            _col2im(gcols, gx[a:z], *geometry, numpy)
        if columns is None and (needs[1] or bias_grad):
            part = (numpy.empty if needs[1] else numpy.zeros)((f, rows + 1), x.dtype)
            if needs[1]:
                _pointwise_weight_grad(gm[a:z], x[a:z], part[:, :rows])
            if bias_grad:
                numpy.sum(gm[a:z].sum(axis=2), axis=0, out=part[:, rows])
            return part
        if needs[1] or bias_grad:
            cols = columns(a, z, ones=bias_grad)[0]                        # (rows [+ 1], n * P)
            cols = cols.reshape(len(cols), z - a, plane).transpose(1, 2, 0)  # (n, P, rows [+ 1])
            return numpy.matmul(gm[a:z], cols).sum(axis=0)                    # (F, rows [+ 1])
        return None

    # The pieces' weight (and bias) gradients, summed in piece order on any number of threads.
    total = _host_threads.run_summed(len(pieces), backward)
    gw = numpy.ascontiguousarray(total[:, :rows]).reshape((f, x.shape[1]) + geometry[0]) \
        if needs[1] else None
    if not with_bias:
        return gx, gw
    return gx, gw, (total[:, rows].copy() if bias_grad else None)


def _pointwise_weight_grad(gm, x, out):
    """``out`` ``(F, C)`` = the sum over images of ``gm``'s ``(F, P)`` gradient block times the
    image's ``(P, C)`` transposed input (``x`` ``(n, C, ...)``). Where the weights outnumber what
    the two operands hold a plane (``F C >= P (F + C)``: many channels on small planes) in one
    GEMM over all the images' positions, of the operands in ``(F, n P)`` and ``(C, n P)`` copies:
    the image-by-image products would make ``n`` weight-sized blocks to be summed after (1024
    channels at 5x5, 8 images: a 32 MB block, forward and backward 31 -> 20 ms on one thread;
    832 -> 384 at 4x4, 32 images, 18.9 -> 13.5 ms; 512 -> 160 at 6x6 9.1 -> 7.9 ms). On larger
    planes the copies cost as much as they save, and the products stay image by image."""
    n, f, plane = gm.shape
    rows = out.shape[1]
    if f * rows >= plane * (f + rows):
        grads = numpy.ascontiguousarray(gm.transpose(1, 0, 2)).reshape(f, n * plane)
        images = numpy.ascontiguousarray(
            x.reshape(n, rows, plane).transpose(1, 0, 2)).reshape(rows, n * plane)
        numpy.matmul(grads, images.T, out=out)
    else:
        images = x.reshape(n, rows, plane).transpose(0, 2, 1)                   # (n, P, C)
        numpy.sum(numpy.matmul(gm, images), axis=0, out=out)


def _col2im(gcols, target, kernel, stride, dilate, pad, out_sp, xp):
    """The column gradient ``gcols`` ``(C * kernel, N * out)`` summed back into ``target``
    ``(N, C, spatial...)``, window offset by window offset."""
    if _ck.col2im(gcols, kernel, stride, dilate, pad, out_sp, target):
        return
    n, c, spatial = target.shape[0], target.shape[1], target.shape[2:]
    gcols = gcols.reshape((c,) + kernel + (n,) + out_sp)
    gpad = xp.zeros((c, n) + tuple(h + 2 * p for h, p in zip(spatial, pad)), dtype=target.dtype)
    for offset in _offsets(kernel):
        gpad[(slice(None), slice(None)) + _window_slices(offset, dilate, stride, out_sp)] \
            += gcols[(slice(None),) + offset]
    inner = tuple(slice(p, p + h) for p, h in zip(pad, spatial))
    target[...] = xp.moveaxis(gpad[(slice(None), slice(None)) + inner], 0, 1)


# From this many rows of the column matrix per group (input channels x kernel size) on, the
# output gradient goes to the GEMMs as (N * P, F): OpenBLAS runs the weight gradient's GEMM 5-20%
# faster on it, which outweighs the transposing copy in wide layers only. Measured on one thread
# (benchmarks/bench_conv.py's steps): the CIFAR-sized step (64 channels, 576 rows) 396 -> 384 ms;
# LeNet's step (9 and 288 rows) 0.5 ms slower with its conv2 transposed, 0.8 ms with conv1 too.
TRANSPOSED_GRAD_ROWS = 512
# ... and from this many output positions in the batch on: the weight gradient then comes out as
# (rows, F) and is copied to (F, rows), a transpose of the weights' size, whose strided copy
# (about 5 ns a value where the weights outgrow the cache) outweighs the GEMM's gain on few
# positions. ResNet-18's 512-channel 3x3 layer on 3x3 planes, batch 32 (288 positions; the
# copy of 2.4M values 12 ms against a 14 ms product), forward and backward on one thread 59.3
# -> 47.5 ms; 256 -> 512 channels at 6x6 of stride 2 28.6 -> 23.8; level from 1152 positions on.
TRANSPOSED_GRAD_POSITIONS = 1024


def _grad_rows(g, out, relu, a, z, g2, xp):
    """The output gradient of images ``a:z``, ReLU-masked (the same mask as relu's d > 0, NaN
    included), into their place in the GEMMs' (F, N, P) layout ``g2``."""
    f, n, plane = g2.shape
    if type(g) is numpy.ndarray and _ck.conv_grad_out(g.reshape(n, f, plane),
                                                       out.reshape(n, f, plane), relu, g2, a, z):
        return
    gm = g[a:z] * (out[a:z] > 0) if relu else g[a:z]
    g2[:, a:z] = xp.moveaxis(gm.reshape(z - a, f, plane), 1, 0)


def _grad_rows_t(g, out, relu, n, f, plane, bias_grad, xp):
    """``(the masked output gradient in the (N * P, F) layout, the bias gradient or None)``; the
    bias gradient is summed from the (N, F, P) layout, in NumPy's order on both paths."""
    if type(g) is numpy.ndarray:
        g2 = numpy.empty((n * plane, f), g.dtype)
        gb = numpy.empty(f, g.dtype) if bias_grad else None
        gc = g.reshape(n, f, plane) if g.flags.c_contiguous else \
            numpy.ascontiguousarray(g).reshape(n, f, plane)
        if _ck.conv_grad_out_t(gc, out.reshape(n, f, plane), relu, g2, gb):
            return g2, gb
    gm = xp.ascontiguousarray(g * (out > 0) if relu else g).reshape(n, f, plane)
    return (xp.ascontiguousarray(gm.transpose(0, 2, 1)).reshape(n * plane, f),
            gm.sum(axis=(0, 2)) if bias_grad else None)


# ----------------------------------------------------------------------------- Pooling
def _pool_geometry(spatial, kernel, stride, pad, convention):
    if convention == "valid":
        return tuple((h + 2 * p - k) // s + 1 for h, k, s, p in zip(spatial, kernel, stride, pad))
    if convention == "full":
        return tuple(-(-(h + 2 * p - k) // s) + 1 for h, k, s, p in zip(spatial, kernel, stride, pad))
    raise NotImplementedError("pooling_convention %r is not supported ('valid' or 'full')" % convention)


def _avg_divisor(xp, spatial, kernel, stride, pad, out_sp, count_include_pad, dtype):
    """MXNet's per-output divisor: the window clipped to the padded input (or to the real input)."""
    divisor = numpy.ones(out_sp, dtype=numpy.float64)
    for axis, (h, k, s, p, o) in enumerate(zip(spatial, kernel, stride, pad, out_sp)):
        start = numpy.arange(o) * s - p
        end = numpy.minimum(start + k, h + p)
        if not count_include_pad:
            start, end = numpy.maximum(start, 0), numpy.minimum(end, h)
        shape = [1] * len(out_sp)
        shape[axis] = o
        divisor = divisor * (end - start).reshape(shape)
    return xp.asarray(divisor.astype(dtype))


def Pooling(data=None, kernel=None, pool_type="max", global_pool=False, cudnn_off=False,
            pooling_convention="valid", stride=None, pad=None, p_value=None, count_include_pad=None,
            layout=None, **kwargs):
    """Max, average or sum pooling over 1-3 trailing spatial axes (channels first)."""
    x = data._data
    xp = _xp_of(x)
    nsp = x.ndim - 2
    _check_layout(layout, nsp)
    if pool_type == "lp":
        return _lp_pool(data, kernel, global_pool, pooling_convention, stride, pad, p_value, layout)
    if pool_type not in ("max", "avg", "sum"):
        raise ValueError("Pooling: pool_type must be 'max', 'avg', 'sum' or 'lp', not %r"
                         % (pool_type,))
    spatial = x.shape[2:]
    if global_pool:
        return _global_pool(data, pool_type)
    kernel = _tuple(kernel, nsp, 1)
    # MXNet's Pooling reads the first ``nsp`` values of a longer stride or pad and ignores the
    # rest (GluonCV's DropBlock pads with four); Convolution refuses them.
    stride, pad = _tuple(_leading(stride, nsp), nsp, 1), _tuple(_leading(pad, nsp), nsp, 0)
    out_sp = _pool_geometry(spatial, kernel, stride, pad, pooling_convention)
    # 'full' windows may run past the padding on the far side: pad enough for the last window.
    hi = tuple(max(p, (o - 1) * s + k - h - p) for h, k, s, p, o in zip(spatial, kernel, stride, pad, out_sp))
    is_max = pool_type == "max"
    lead = (slice(None), slice(None))
    ones = (1,) * nsp
    index = out = None
    if is_max and type(x) is numpy.ndarray:
        # The window maximum with the offset of its first occurrence (numba), which is all the
        # gradient needs; int8 holds the offset of any window up to 127 elements.
        # Outside ``autograd.record()`` no gradient comes: the maxima alone.
        out = numpy.empty(x.shape[:2] + out_sp, x.dtype)
        recording = _recording_for(data)
        index = numpy.empty(out.shape, numpy.int8 if math.prod(kernel) <= 127 else numpy.int32) \
            if recording else None
        if not _ck.max_pool(x, kernel, stride, pad, out, index):
            out = index = None
        elif not recording:
            return _wrap(out, data._ctx)
    if out is None:
        xpad = _pool_padded(x, pad, hi, is_max)
        for offset in _offsets(kernel):
            win = xpad[lead + _window_slices(offset, ones, stride, out_sp)]
            if out is None:
                out = win.copy()
            elif is_max:
                xp.maximum(out, win, out=out)
            else:
                out += win
    divisor = None
    if pool_type == "avg":
        include = True if count_include_pad is None else bool(count_include_pad)
        divisor = _avg_divisor(xp, spatial, kernel, stride, pad, out_sp, include, x.dtype)
        out /= divisor
    if not _recording_for(data):
        return _wrap(out, data._ctx)
    # The max of a ReLU-fused convolution's output: its gradient goes back already masked.
    relu_in = is_max and type(x) is numpy.ndarray and _relu_masks.is_output(x)

    def vjp(g, needs):
        gx = _max_pool_grad(g, relu_in)
        if relu_in:
            _relu_masks.mark_masked(gx)
        return (gx,)

    def _max_pool_grad(g, masked):
        """The input gradient; ``masked``: of ``g * (out > 0)`` (on the kernel's pieces)."""
        if index is not None:
            gx = numpy.empty(x.shape, x.dtype)
            gc = g if type(g) is numpy.ndarray and g.flags.c_contiguous else numpy.ascontiguousarray(g)
            if _ck.max_pool_grad(gc, index, kernel, stride, pad, gx, out if masked else None):
                return gx
        if masked:
            g = g * (out > 0)
        xpad = _pool_padded(x, pad, hi, is_max)
        gpad = xp.zeros(xpad.shape, dtype=x.dtype)
        if is_max:
            # The gradient goes to the first maximum of each window, in row-major order, as MXNet.
            taken = xp.zeros(out.shape, dtype=bool)
            for offset in _offsets(kernel):
                sl = lead + _window_slices(offset, ones, stride, out_sp)
                hit = (xpad[sl] == out) & ~taken
                taken |= hit
                gpad[sl] += g * hit
        else:
            share = g / divisor if divisor is not None else g
            for offset in _offsets(kernel):
                gpad[lead + _window_slices(offset, ones, stride, out_sp)] += share
        inner = tuple(slice(p, p + h) for p, h in zip(pad, spatial))
        return gpad[lead + inner]
    return _result(out, data._ctx, (data,), vjp)


def _pool_padded(x, pad, hi, is_max):
    """``x`` padded by ``pad`` before and ``hi`` after, with the lowest finite value for max."""
    if not any(pad) and not any(hi):
        return x
    xp = _xp_of(x)
    fill = xp.finfo(x.dtype).min if is_max else 0
    return xp.pad(x, ((0, 0), (0, 0)) + tuple(zip(pad, hi)), constant_values=fill)


def _lp_pool(data, kernel, global_pool, pooling_convention, stride, pad, p_value, layout):
    """MXNet's 'lp' pooling: the p-th root of the window's sum of x**p, for p in 1, 2, 3 (no
    absolute value, as in MXNet: p = 1 and 3 keep the sign), composed of recorded ops."""
    from . import ops as _ops
    if p_value not in (1, 2, 3):
        raise ValueError("Pooling: pool_type='lp' needs p_value 1, 2 or 3, not %r" % (p_value,))
    power = data if p_value == 1 else _ops.square(data) if p_value == 2 else \
        data * _ops.square(data)
    total = Pooling(power, kernel=kernel, pool_type="sum", global_pool=global_pool,
                    pooling_convention=pooling_convention, stride=stride, pad=pad, layout=layout)
    return total if p_value == 1 else _ops.sqrt(total) if p_value == 2 else _ops.cbrt(total)


def _global_pool(data, pool_type):
    x = data._data
    xp = _xp_of(x)
    n, c = x.shape[:2]
    keep = (n, c) + (1,) * (x.ndim - 2)
    flat = x.reshape(n, c, -1)
    if pool_type == "max":
        idx = flat.argmax(axis=-1)[..., None]  # first maximum, as MXNet
        out = xp.take_along_axis(flat, idx, axis=-1).reshape(keep)
    elif pool_type == "avg":
        out = flat.mean(axis=-1).reshape(keep)
    else:
        out = flat.sum(axis=-1).reshape(keep)
    if not _recording_for(data):
        return _wrap(out, data._ctx)
    size = flat.shape[-1]

    def vjp(g, needs):
        g2 = g.reshape(n, c, 1)
        if pool_type == "max":
            gx = (xp.arange(size) == idx) * g2
        else:
            gx = xp.broadcast_to(g2 / size if pool_type == "avg" else g2, flat.shape)
        return (gx.reshape(x.shape),)
    return _result(out, data._ctx, (data,), vjp)


# ----------------------------------------------------------------------------- BatchNorm
def BatchNorm(data=None, gamma=None, beta=None, moving_mean=None, moving_var=None, eps=1e-3,
              momentum=0.9, fix_gamma=True, use_global_stats=False, output_mean_var=False, axis=1,
              cudnn_off=False, **kwargs):
    """Batch normalization with MXNet's semantics.

    In training mode (``autograd.is_training()``) without ``use_global_stats`` it normalizes with
    the batch mean and biased batch variance; ``moving_mean``/``moving_var`` take them in its
    backward pass, as MXNet's CPU operator updates them: ``moving = moving * momentum + batch *
    (1 - momentum)`` in float32, the variance as MXNet recovers it from the inverse standard
    deviation (``1 / invstd**2 - eps``, in double). So a forward that no backward pass goes
    through (a recorded forward left without ``backward()``, a BatchNorm whose data, gamma and
    beta need no gradient) leaves them as they were, as in MXNet. Otherwise it normalizes with
    the moving statistics. ``fix_gamma`` uses a scale of 1 (and sets ``gamma`` to 1, as MXNet
    does) with a zero gamma gradient.
    """
    return batch_norm(data, gamma, beta, moving_mean, moving_var, eps, momentum, fix_gamma,
                      use_global_stats, output_mean_var, axis, False)


def batch_norm(data, gamma, beta, moving_mean, moving_var, eps, momentum, fix_gamma,
               use_global_stats, output_mean_var, axis, relu):
    """``BatchNorm``, followed by ``relu`` when ``relu`` (``contrib.BatchNormWithReLU``): one
    pass and one node where BatchNorm's kernels apply (the bits of the two ops), else the two
    ops."""
    x = data._data
    xp = _xp_of(x)
    # float16 data beside float32 parameters (net.cast keeps BatchNorm's in float32, as MXNet):
    # computed in float32, the output and the input's gradient float16 as MXNet gives them.
    half = x.dtype == numpy.float16 and gamma._data.dtype != numpy.float16
    if half:
        x = x.astype(gamma._data.dtype)
    if not -x.ndim <= axis < x.ndim:
        # MXNet's check; the modulo below would otherwise normalize over another axis.
        raise ShapeError("BatchNorm: Channel axis out of range: %d (data of shape %s)"
                         % (axis, x.shape))
    ax = axis % x.ndim
    if fix_gamma:
        gamma._data[...] = 1
    training = _ag._state.training and not use_global_stats
    if not training and not output_mean_var and ax == 1 and not _recording_for(data, gamma, beta):
        out = _bk.predict(x, moving_mean._data, moving_var._data, gamma._data, beta._data, eps,
                          fix_gamma, relu)
        if out is not None:
            return _wrap(out.astype(numpy.float16) if half else out, data._ctx)
    if relu and (output_mean_var or half or ax != 1
                 or not _bk.usable(x, gamma._data, beta._data)):
        out = batch_norm(data, gamma, beta, moving_mean, moving_var, eps, momentum, fix_gamma,
                         use_global_stats, output_mean_var, axis, False)
        return [_relu(out[0])] + list(out[1:]) if output_mean_var else _relu(out)
    red = tuple(i for i in range(x.ndim) if i != ax)
    bshape = tuple(x.shape[ax] if i == ax else 1 for i in range(x.ndim))
    count = x.size // x.shape[ax]
    # The (N, C, ...) layout sums by channel in the kernels' order (_bn_kernels), by their
    # passes (numba) where they apply; the same numbers either way.
    ordered = ax == 1 and _bk.ordered(x)
    fast = ordered and _bk.usable(x, gamma._data, beta._data)
    if training:
        if ordered:
            mean = numpy.empty(x.shape[1], x.dtype)
            if fast:
                _bk.channel_sums(x, None, mean)
            else:
                mean[...] = _bk.np_channel_sums(x)
            # As NumPy's mean: the sum divided by the count as an intp, in place.
            numpy.true_divide(mean, numpy.intp(count), out=mean, casting="unsafe")
            var = numpy.empty(x.shape[1], x.dtype)
            if fast:
                _bk.channel_sums(x, mean, var)
            else:
                centered = x - mean.reshape(bshape)
                var[...] = _bk.np_channel_sums(centered * centered)
            numpy.true_divide(var, numpy.intp(count), out=var, casting="unsafe")
            mean, var = mean.reshape(bshape), var.reshape(bshape)
        else:
            mean = x.mean(axis=red, keepdims=True)
            centered = x - mean
            var = (centered * centered).mean(axis=red, keepdims=True)
        invstd = 1 / xp.sqrt(var + eps)
    else:
        mean = moving_mean._data.reshape(bshape).astype(x.dtype, copy=False)
        var = moving_var._data.reshape(bshape).astype(x.dtype, copy=False)
        invstd = 1 / xp.sqrt(var + eps)
    scale = invstd if fix_gamma else invstd * gamma._data.reshape(bshape)
    beta_b = beta._data.reshape(bshape)
    if fast and _bk.usable(x, mean, scale, beta_b):
        out = numpy.empty(x.shape, x.dtype)
        _bk.scale_shift(x, mean, scale, beta_b, out, relu)
    else:
        fast = False
        out = (x - mean) * scale + beta_b
        if relu:
            out = _relu_raw(out)
    moving = (moving_mean, moving_var, momentum, eps) if training else None
    result = _finish_bn(data, x, gamma, beta, out, (mean, invstd), scale, red, moving,
                        fix_gamma, count, fast, ordered, half, relu)
    if output_mean_var:
        # MXNet's second and third outputs are the batch mean and inverse standard deviation.
        return [result, _wrap(mean.reshape(-1), data._ctx), _wrap(invstd.reshape(-1), data._ctx)]
    return result


def _update_moving(moving, mean, invstd):
    """MXNet's update of the moving statistics from a training batch's ``mean`` and ``invstd``
    (its backward pass makes it): float32 products and sum, the variance recovered from
    ``invstd`` in double."""
    moving_mean, moving_var, momentum, eps = moving
    rm, rv = moving_mean._data, moving_var._data
    xp = _xp_of(rm)
    t = rm.dtype.type
    mom = t(momentum)
    minus_mom = t(1) - mom
    variance = (1.0 / (invstd.astype(numpy.float64) ** 2) - float(eps)).astype(rv.dtype)
    rm[...] = rm * mom + mean.reshape(rm.shape).astype(rm.dtype, copy=False) * minus_mom
    rv[...] = rv * mom + xp.reshape(variance, rv.shape) * minus_mom


def _finish_bn(data, x, gamma, beta, out, stats, scale, red, moving, fix_gamma, count, fast,
               ordered, half, relu=False):
    """The node of BatchNorm: ``stats`` (mean, invstd) give ``xhat = (x - mean) * invstd``,
    recomputed in the backward pass rather than kept from the forward one. ``moving``: the
    moving statistics a training batch updates when the backward pass reaches this node (None
    otherwise). ``half``: ``data`` is float16, ``x`` its float32 copy, and the output and input
    gradient are float16. ``relu``: ``out`` is the ReLU of the normalized values (not with
    ``half``); the gradient is masked as the ReLU's own backward masks it (``out > 0`` where
    the values were above 0) before BatchNorm's, so one node gives the two ops' gradients."""
    if half:
        out = out.astype(numpy.float16)
    if not _recording_for(data, gamma, beta):
        return _wrap(out, data._ctx)
    training = moving is not None
    vjp = _bn_vjp(x, gamma, beta, stats, scale, red, training, fix_gamma, count, fast, ordered,
                  out if relu else None)
    if training:
        stats_vjp = vjp

        def vjp(g, needs):
            _update_moving(moving, *stats)
            return stats_vjp(g, needs)
    if half:
        vjp32 = vjp

        def vjp(g, needs):
            gx, ggamma, gbeta = vjp32(g.astype(x.dtype), needs)
            return (None if gx is None else gx.astype(numpy.float16)), ggamma, gbeta
    return _result(out, data._ctx, (data, gamma, beta), vjp)


def _bn_vjp(x, gamma, beta, stats, scale, red, training, fix_gamma, count, fast, ordered,
            relu_out=None):
    """BatchNorm's vjp on ``x`` (the array the forward normalized); ``ordered``: its channel
    sums are ``_bn_kernels.np_channel_sums``'. ``relu_out``: the node's output is the ReLU of
    BatchNorm's, and the gradient is masked first as the ReLU's backward masks it (inside the
    kernels' passes where they run)."""
    xp = _xp_of(x)
    mean, invstd = stats

    def sums(a, keepdims=False):
        if ordered and type(a) is numpy.ndarray:
            total = _bk.np_channel_sums(a)
            return total.reshape(mean.shape) if keepdims else total
        return a.sum(axis=red, keepdims=keepdims)

    def vjp(g, needs):
        if fast and _bk.usable(g, x):
            return _bn_grad_kernels(g, x, mean, invstd, scale, needs, training, fix_gamma, count,
                                    gamma._data, beta._data, relu_out)
        if relu_out is not None:
            g = _relu_grad(g, relu_out, None)
        gx = ggamma = gbeta = None
        xhat = (x - mean) * invstd
        if needs[0]:
            if training:
                gmean = sums(g, True) / count
                proj = sums(g * xhat, True) / count
                gx = (g - gmean - xhat * proj) * scale
            else:
                gx = g * scale
        if needs[1]:
            ggamma = (xp.zeros(gamma._data.shape, dtype=gamma._data.dtype) if fix_gamma
                      else sums(g * xhat).reshape(gamma._data.shape))
        if needs[2]:
            gbeta = sums(g).reshape(beta._data.shape)
        return gx, ggamma, gbeta
    return vjp


def _bn_grad_kernels(g, x, mean, invstd, scale, needs, training, fix_gamma, count, gamma, beta,
                     relu_out=None):
    """BatchNorm's vjp in two passes (``_bn_kernels``), bitwise the NumPy path's; ``relu_out``
    as ``_bn_vjp``'s."""
    if relu_out is not None and not (training and _bk.usable(relu_out, x)):
        g, relu_out = _relu_grad(g, relu_out, None), None
    channels = x.shape[1]
    gsum = numpy.empty(channels, x.dtype)
    gxhat_sum = numpy.empty(channels, x.dtype)
    mean_c, invstd_c, scale_c = mean.reshape(-1), invstd.reshape(-1), scale.reshape(-1)
    _bk.grad_sums(g, x, mean_c, invstd_c, gsum, gxhat_sum, relu_out)
    gx = None
    if needs[0]:
        if training:
            gx = numpy.empty(x.shape, x.dtype)
            _bk.grad_input(g, x, mean_c, invstd_c, gsum / count, gxhat_sum / count, scale_c, gx,
                           relu_out)
        else:
            gx = g * scale
    ggamma = (numpy.zeros(gamma.shape, dtype=gamma.dtype) if fix_gamma
              else gxhat_sum.reshape(gamma.shape)) if needs[1] else None
    return gx, ggamma, (gsum.reshape(beta.shape) if needs[2] else None)


# ----------------------------------------------------------------------------- LayerNorm
def LayerNorm(data=None, gamma=None, beta=None, axis=-1, eps=1e-5, output_mean_var=False, **kwargs):
    """Normalize over ``axis`` with the biased variance, then scale by ``gamma`` and shift by ``beta``."""
    x = data._data
    xp = _xp_of(x)
    ax = axis % x.ndim
    if ax == x.ndim - 1 and not output_mean_var:
        made = _ln_kernels.forward(x, gamma._data, beta._data, eps)
        if made is not None:
            return _layer_norm_rows_result(data, gamma, beta, *made)
    xhat, invstd, mean, var = _ln_kernels.np_normalized(x, ax, eps, xp)
    bshape = tuple(x.shape[ax] if i == ax else 1 for i in range(x.ndim))
    out = xhat * gamma._data.reshape(bshape) + beta._data.reshape(bshape)
    result = _layer_norm_result(data, gamma, beta, out, xhat, invstd, ax)
    if output_mean_var:
        return [result, _wrap(mean, data._ctx), _wrap(xp.sqrt(var + eps), data._ctx)]
    return result


def _layer_norm_rows_result(data, gamma, beta, out, mean, invstd):
    """LayerNorm's output over the last axis made by ``_ln_kernels.forward``, with its gradients
    from that module's backward loop (the input's written straight into its gradient buffer
    where it may be), or, where that loop does not apply, from the NumPy body on the normalized
    rows made again."""
    inputs = (data, gamma, beta)
    if not _recording_for(*inputs):
        return _wrap(out, data._ctx)
    x, g, beta_shape = data._data, gamma._data, beta._data.shape

    def vjp(gout, needs):
        if type(gout) is numpy.ndarray:     # a transpose's gradient, say: the loop wants rows
            gout = numpy.ascontiguousarray(gout)
        made = rows_loop_grads(data, gamma, beta, gout, x, g, mean, invstd, 0, needs)
        if made is None:
            return _layer_norm_vjp(gout, needs, g, beta_shape, _ln_kernels.np_xhat(x, mean, invstd),
                                   invstd.reshape(x.shape[:-1] + (1,)), x.ndim - 1)
        return made
    return _result(out, data._ctx, inputs, vjp)


def _layer_norm_vjp(gout, needs, g, beta_shape, xhat, invstd, ax):
    """The gradients of a LayerNorm by its NumPy body."""
    red = tuple(i for i in range(xhat.ndim) if i != ax)
    gx = ggamma = gbeta = None
    if needs[0]:
        bshape = tuple(xhat.shape[ax] if i == ax else 1 for i in range(xhat.ndim))
        gx = _ln_kernels.np_input_grad(gout * g.reshape(bshape), xhat, invstd, ax)
    if needs[1]:
        ggamma = (gout * xhat).sum(axis=red).reshape(g.shape)
    if needs[2]:
        gbeta = gout.sum(axis=red).reshape(beta_shape)
    return gx, ggamma, gbeta


def _layer_norm_result(data, gamma, beta, out, xhat, invstd, ax):
    """LayerNorm's output with its gradients by the NumPy body."""
    inputs = (data, gamma, beta)
    if not _recording_for(*inputs):
        return _wrap(out, data._ctx)
    g, beta_shape = gamma._data, beta._data.shape
    return _result(out, data._ctx, inputs, lambda gout, needs: _layer_norm_vjp(
        gout, needs, g, beta_shape, xhat, invstd, ax))


# ----------------------------------------------------------------------------- Dropout
def Dropout(data=None, p=0.5, mode="training", axes=(), cudnn_off=False, **kwargs):
    """Inverted dropout: in training mode (or ``mode='always'``) zero each element with probability
    ``p`` and scale the rest by ``1/(1-p)``; ``axes`` share one mask value along those axes."""
    x = data._data
    active = mode == "always" or _ag._state.training
    if not active or p <= 0:
        # A copy, as MXNet's identity output: writing into it must not change the input.
        if _recording_for(data):
            return _result(x.copy(), data._ctx, (data,), lambda g, needs: (g,))
        return _wrap(x.copy(), data._ctx)
    xp = _xp_of(x)
    shape = list(x.shape)
    for a in (axes if not isinstance(axes, numbers.Integral) else (axes,)):
        shape[a] = 1
    ctx = data._ctx
    gen = _random.generator(ctx)
    fdtype = x.dtype if x.dtype in (numpy.float32, numpy.float64) else numpy.dtype(numpy.float32)
    if p >= 1:
        mask = xp.zeros(shape, dtype=x.dtype)
    else:
        with ctx.device_scope():
            if ctx.is_gpu:
                u = gen.random_sample(tuple(shape), dtype=fdtype)
            else:
                u = gen.random(tuple(shape), dtype=fdtype)
        mask = (u <= 1 - p).astype(x.dtype) * x.dtype.type(1 / (1 - p))
    out = x * mask
    if _recording_for(data):
        return _result(out, data._ctx, (data,), lambda g, needs: (g * mask,))
    return _wrap(out, data._ctx)


# ----------------------------------------------------------------------------- Embedding
def Embedding(data=None, weight=None, input_dim=None, output_dim=None, dtype="float32",
              sparse_grad=False, **kwargs):
    """Rows of ``weight`` picked by the (float) indices in ``data``, clipped to the table.

    The result has shape ``data.shape + (output_dim,)``; only ``weight`` gets a gradient (rows used
    several times accumulate); the indices get none. With ``sparse_grad`` the gradient is
    row_sparse: the sorted distinct looked-up rows, zero sums included. A row_sparse ``weight``
    (pulled by ``Parameter.row_sparse_data``) gives zeros for the rows it does not store and
    always a row_sparse gradient.
    """
    if weight._sparse:
        return embedding_of_rows(data, weight, input_dim)
    w = weight._data
    xp = _xp_of(w)
    rows = w.shape[0] if input_dim is None else int(input_dim)
    idx = _table_rows(data._data, xp, rows)
    out = xp.take(w, idx, axis=0)
    if not _recording_for(weight):
        return _wrap(out, weight._ctx)
    flat = idx.reshape(-1)
    if sparse_grad:
        def sparse_vjp(g, needs):
            # Only the looked-up rows, never a table-sized gradient (row_sparse, as MXNet's).
            return None, embedding_grad(flat, g.reshape((flat.shape[0],) + w.shape[1:]), w.shape)
        return _result(out, weight._ctx, (data, weight), sparse_vjp)

    def vjp(g, needs):
        gw = xp.zeros(w.shape, dtype=w.dtype)
        _scatter_add(gw, flat, g.reshape((flat.shape[0],) + w.shape[1:]))
        return None, gw
    return _result(out, weight._ctx, (data, weight), vjp)


def _transfer_index(d, xp):
    return d if _xp_of(d) is xp else xp.asarray(d)


def _table_rows(ids, xp, rows):
    """The (float) ``ids`` as int64 row numbers clipped to ``[0, rows)``, a new array. (In place:
    ``clip``'s Python wrapper costs more than the clipping of a batch of ids; on the GPU one
    launch, ``_rows_cuda.table_rows``, does all three.)"""
    ids = _transfer_index(ids, xp)
    if xp is not numpy:
        from . import _rows_cuda
        idx = _rows_cuda.table_rows(ids, rows)
        if idx is not None:
            return idx
    idx = ids.astype(numpy.int64)
    xp.maximum(idx, 0, out=idx)
    xp.minimum(idx, rows - 1, out=idx)
    return idx


# ----------------------------------------------------------------------------- LeakyReLU
_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_LAMBDA = 1.0507009873554804934193349852946


def LeakyReLU(data=None, gamma=None, act_type="leaky", slope=0.25, lower_bound=0.125,
              upper_bound=0.334, **kwargs):
    """MXNet's LeakyReLU family: 'leaky', 'elu', 'selu', 'gelu' and 'prelu' (learned ``gamma``)."""
    x = data._data
    xp = _xp_of(x)
    if act_type == "leaky":
        return _leaky(data, x, xp, float(slope))
    if act_type == "gelu":
        return _gelu(data, x, xp)
    if act_type in ("elu", "selu") and type(x) is numpy.ndarray and x.dtype == numpy.float32:
        return _elu(data, x, act_type, float(slope))
    pos = x > 0
    if act_type == "elu":
        em1 = xp.expm1(xp.minimum(x, 0))
        out = xp.where(pos, x, slope * em1)
        local = lambda: xp.where(pos, 1, slope * (em1 + 1)).astype(x.dtype)  # noqa: E731
    elif act_type == "selu":
        em1 = xp.expm1(xp.minimum(x, 0))
        out = _SELU_LAMBDA * xp.where(pos, x, _SELU_ALPHA * em1)
        local = lambda: (_SELU_LAMBDA * xp.where(pos, 1, _SELU_ALPHA * (em1 + 1))).astype(x.dtype)  # noqa: E731
    elif act_type == "prelu":
        return _prelu(data, gamma)
    else:
        raise NotImplementedError("LeakyReLU act_type %r is not supported" % (act_type,))
    out = out.astype(x.dtype, copy=False)
    if _recording_for(data):
        return _result(out, data._ctx, (data,), lambda g, needs: (g * local(),))
    return _wrap(out, data._ctx)


def _elu(data, x, act_type, slope):
    """ELU and SELU of float32 on the CPU: ``expm1`` and the gradient's ``exp`` are Cephes'
    (``_expf``), one pass each way by ``_act_kernels`` where its loop applies, else the same
    operations over whole arrays."""
    alpha, scale = (slope, None) if act_type == "elu" else (_SELU_ALPHA, _SELU_LAMBDA)
    out = _act_kernels.elu(x, alpha, scale)
    if out is None:
        out = _act_kernels.np_elu(x, numpy.float32(alpha),
                                  None if scale is None else numpy.float32(scale))
    if not _recording_for(data):
        return _wrap(out, data._ctx)

    def vjp(g, needs):
        gx = _act_kernels.elu_grad(g, x, alpha, scale)
        if gx is None:
            gx = _act_kernels.np_elu_grad(g, x, numpy.float32(alpha),
                                          None if scale is None else numpy.float32(scale))
        return (gx,)
    return _result(out, data._ctx, (data,), vjp)


def swish_f32(data, beta):
    """Gluon's Swish ``x * sigmoid(beta * x)`` of a dense float32 array on the CPU as one
    operation: one pass each way by ``_act_kernels`` where its loop applies, else the same
    operations over whole arrays; the bits of the three recorded operations it replaces. None
    for other arrays (the layer then records those)."""
    x = data._data
    if type(data) is not NDArray or type(x) is not numpy.ndarray or x.dtype != numpy.float32:
        return None
    b = numpy.float32(beta)
    made = _act_kernels.swish(x, b)
    out, s = made if made is not None else _act_kernels.np_swish(x, b)
    if not _recording_for(data):
        return _wrap(out, data._ctx)

    def vjp(g, needs):
        gx = _act_kernels.swish_grad(g, x, s, b)
        return (_act_kernels.np_swish_grad(g, x, s, b) if gx is None else gx,)
    return _result(out, data._ctx, (data,), vjp)


def _leaky(data, x, xp, slope):
    """``x`` where positive, else ``x * slope`` (the slope in ``x``'s dtype, as MXNet's float
    parameter is); one pass each way by ``_act_kernels`` where its loop applies."""
    out = _act_kernels.leaky(x, slope)
    if out is None:
        out = xp.where(x > 0, x, x * slope).astype(x.dtype, copy=False)
    if not _recording_for(data):
        return _wrap(out, data._ctx)

    def vjp(g, needs):
        gx = _act_kernels.leaky_grad(g, x, slope)
        if gx is None:
            gx = g * xp.where(x > 0, 1, slope).astype(x.dtype)
        return (gx,)
    return _result(out, data._ctx, (data,), vjp)


def _gelu(data, x, xp):
    """``x * cdf`` with ``cdf = 0.5 * (1 + erf(x / sqrt(2)))``, and its gradient; one pass each
    way by ``_act_kernels`` where its loop applies (the same bits as its NumPy body)."""
    if xp is numpy:
        made = _act_kernels.gelu(x)
        out, cdf = made if made is not None else _act_kernels.np_gelu(x)
        grad = _act_kernels.gelu_grad
    else:
        cdf = 0.5 * (1 + _erf_raw(x / math.sqrt(2)))
        out, grad = x * cdf, None
    out = out.astype(x.dtype, copy=False)
    if not _recording_for(data):
        return _wrap(out, data._ctx)

    def vjp(g, needs):
        gx = grad(g, x, cdf) if grad is not None else None
        if gx is None:
            gx = (_act_kernels.np_gelu_grad(g, x, cdf) if xp is numpy else
                  g * (cdf + x * xp.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)))
        return (gx,)
    return _result(out, data._ctx, (data,), vjp)


def _prelu(data, gamma):
    x, a = data._data, gamma._data
    xp = _xp_of(x)
    shape = [1] * x.ndim
    if x.ndim > 1 and a.size > 1:
        shape[1] = a.size
    slope = a.reshape(shape)
    out = _act_kernels.prelu(x, a)
    if out is None:
        out = xp.where(x > 0, x, x * slope)
    inputs = (data, gamma)
    if not _recording_for(*inputs):
        return _wrap(out, data._ctx)

    def vjp(g, needs):
        made = _act_kernels.prelu_grad(g, x, a, needs[0], needs[1])
        if made is not None:
            gx, contrib = made
        else:
            pos = x > 0
            gx = xp.where(pos, g, g * slope) if needs[0] else None
            contrib = xp.where(pos, 0, g * x) if needs[1] else None
        ga = None
        if needs[1]:
            ga = (contrib.sum() if a.size == 1 else
                  contrib.sum(axis=tuple(i for i in range(x.ndim) if i != 1))).reshape(a.shape)
        return gx, ga
    return _result(out, data._ctx, inputs, vjp)
