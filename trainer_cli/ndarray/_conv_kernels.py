"""2-D convolution's and max pooling's data movement in one pass each, on the CPU (numba).

Convolution is im2col + GEMM (``nn.Convolution``). The GEMMs are OpenBLAS's either way; what the
kernels replace are the NumPy passes around them, which on a LeNet-sized step cost as much as the
GEMMs themselves:

- ``im2col``: the column matrix ``(C * kh * kw, N * oh * ow)`` straight from the unpadded input
  (NumPy: a padded copy, then a strided window view copied into the matrix);
- ``conv_epilogue``: the GEMM's ``(F, N, P)`` result into the ``(N, F, P)`` output with the bias
  added and, for Conv2D(activation='relu'), the ReLU (NumPy: ``moveaxis(out) + bias`` and
  ``maximum(out, 0)``); ``bias_relu_rows`` the same in place, where the GEMMs wrote the output's
  layout image by image;
- ``conv_grad_out``: the output gradient, ReLU-masked, into the GEMMs' ``(F, N, P)`` layout
  (NumPy: ``g * (out > 0)`` and a transposing copy); ``conv_grad_out_t`` into the ``(N * P, F)``
  layout that layers with many input channels use (see ``nn._convolution``), with the bias
  gradient's sums on the way; ``mask_rows`` masks it in the output's layout, with each row's
  sum for the bias gradient (Winograd's), which ``bias_totals`` adds up in NumPy's order;
- ``col2im``: the column gradient added back into the input gradient, window offset by window
  offset (NumPy: one strided ``+=`` per offset into a padded buffer);
- ``max_pool`` / ``max_pool_grad``: the window maximum with the index of its first occurrence, and
  the gradient routed back through that index (NumPy: ``maximum`` per offset, then per offset a
  comparison, a mask and a multiply-add), masked first by a ReLU below it (``_relu_masks``);
  3x3 windows of stride 2 that halve the planes and Inception's of stride 1 and padding 1
  straight from the planes, other 3x3 stride-1 windows on planes turned into lanes, their
  gradients gathered.

Each does, element by element, the operations of the NumPy code it replaces in the same order, so
the results are bitwise equal (NaN, infinities and signed zeros included): copies are copies; the
bias add and ReLU are those of ``_fc_kernels``; NumPy's ``maximum(a, b)`` is ``a`` if ``a`` is NaN,
else ``b`` if ``b`` is NaN, else ``a if a > b else b``; every sum starts from +0.0 and adds its
terms in window-offset order. One thing is not the same: which NaN an add of two NaNs returns
(its sign bit). NumPy's own loops differ there (its broadcast add returns the first operand's, its
strided in-place add the second's) and so may LLVM, which treats an add as commutative; the
tests require NaN exactly where NumPy has NaN and every other bit equal. Every function returns False where it does not apply (no numba,
another dtype, layout or array library, small arrays); the caller then runs the NumPy code.
``tests/test_conv_kernels.py`` compares the bits of both.
"""
from __future__ import annotations

import functools

import numpy

from .. import _jit
from . import _lanes
from . import _pairwise as _pw
from . import _strided_columns as _sc
from . import host_threads as _host_threads

__all__ = ["im2col", "takes_im2col", "conv_epilogue", "bias_relu_rows", "conv_grad_out",
           "conv_grad_out_t", "mask_rows", "bias_totals", "takes_grad_rows", "col2im", "max_pool",
           "max_pool_grad", "MIN_SIZE"]

MIN_SIZE = 1 << 12
_np_ndarray = numpy.ndarray
_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)


def _usable(first, *others) -> bool:
    """``first`` a C-contiguous NumPy array of a native float dtype and ``MIN_SIZE`` elements or
    more, every other one (None skipped) a C-contiguous NumPy array of its dtype; numba there."""
    if type(first) is not _np_ndarray or first.size < MIN_SIZE or not first.flags.c_contiguous:
        return False
    dtype = first.dtype
    if dtype is not _F32 and dtype is not _F64:
        return False
    for a in others:
        if a is not None and (type(a) is not _np_ndarray or a.dtype is not dtype
                              or not a.flags.c_contiguous):
            return False
    return _jit._numba is not False and (_jit._numba is not None or _jit.enabled())


def takes_im2col(x, cols) -> bool:
    """Whether ``im2col`` runs here for these arrays (else NumPy must)."""
    return _usable(x, cols)


def im2col(x, kernel, stride, dilate, pad, out_sp, cols, rows=None, out_rows=None) -> bool:
    """Fill ``cols`` ``(C*kh*kw, N*oh*ow)`` with the windows of ``x`` ``(N, C, H, W)``;
    ``rows``: ``(start, stop)``, only the rows of those (channel, kernel row) pairs, counted
    ``c * kh + i`` (all by default); ``out_rows``: ``(start, stop)``, only the windows of
    those output rows, ``cols`` then ``(C*kh*kw, N*(stop - start)*ow)``. All output rows of
    at most GATHER_WIDTH windows each (kernels larger than 1x1, padded planes of at most
    GATHER_PADDED values in all) are gathered through a padded copy of each channel. The whole matrix, of THREAD_ELEMENTS values or more
    (GATHER_THREAD_FACTOR times that for the gather), is filled in runs of rows on the BLAS's
    thread count of threads (``_in_parts``). A 3-D convolution's ``(N, C, D, H, W)`` (the whole
    matrix only) fills ``(C*kd*kh*kw, N*od*oh*ow)``, the padding's windows zero, in runs of
    channels."""
    if not _usable(x, cols):
        return False
    if len(kernel) == 3 and rows is None and out_rows is None:
        n, c = x.shape[:2]
        _in_parts(c, cols.size, lambda c0, c1: _im2col_3d(
            x.reshape(-1), n, c, x.shape[2:], kernel, stride, dilate, pad, out_sp,
            cols.reshape(-1), c0, c1))
        return True
    if len(kernel) != 2:
        return False
    n, c, h, w = x.shape
    if _pointwise(kernel, stride, pad) and rows is None and out_rows is None:
        # Each image's channels are its columns' rows: one transposing copy of whole planes
        # (GoogLeNet's 832-channel 1x1 layers at 3x3, forward and backward, 10-16% faster than
        # the window loop).
        numpy.copyto(cols.reshape(c, n, h * w), x.reshape(n, c, h * w).transpose(1, 0, 2))
        return True
    geometry = (x.reshape(-1), n, c, h, w, kernel[0], kernel[1], stride[0], stride[1],
                dilate[0], dilate[1], pad[0], pad[1], out_sp[0], out_sp[1])
    padded_size = (h + 2 * pad[0]) * (w + 2 * pad[1])
    if out_rows is None and out_sp[1] <= GATHER_WIDTH and kernel[0] * kernel[1] > 1 \
            and n * padded_size <= GATHER_PADDED:
        def fill(lo, hi):
            _im2col_gather(*geometry, lo, hi, cols.reshape(-1),
                           numpy.empty(n * padded_size, x.dtype),
                           numpy.empty(kernel[0] * kernel[1] * out_sp[0] * out_sp[1],
                                       numpy.int32))
        factor = GATHER_THREAD_FACTOR
    elif stride[1] > 1 and kernel[0] * kernel[1] >= PHASE_TAPS and out_sp[1] >= PHASE_WIDTH:
        r0, r1 = (0, out_sp[0]) if out_rows is None else out_rows
        y0, y1 = _sc.input_rows(h, kernel[0], stride[0], dilate[0], pad[0], r0, r1)
        sw = stride[1]
        wq = -(-w // sw)
        xs = numpy.empty(n * c * (y1 - y0) * sw * wq, x.dtype)
        _phases(x.reshape(-1), n * c, h, w, y0, y1, sw, wq, x.dtype.type(0), xs)

        def fill(lo, hi):
            _im2col(xs, *geometry[1:], lo, hi, r0, r1, y0, y1, wq, cols.reshape(-1))
        factor = 1
    else:
        r0, r1 = (0, out_sp[0]) if out_rows is None else out_rows

        def fill(lo, hi):
            _im2col(*geometry, lo, hi, r0, r1, 0, h, 0, cols.reshape(-1))
        factor = 1
    if rows is not None:
        fill(*rows)
    else:
        _in_parts(c * kernel[0], cols.size, fill, factor)
    return True


# A column matrix (or an input gradient from one) of this many values or more is made in parts
# on the BLAS's thread count of threads: about SPLIT_PARTS runs of (channel, kernel row) pairs,
# or of channels, a thread. Where the batch is one piece of a convolution (one image, or a layer
# of many weights), its GEMMs run on OpenBLAS's threads and these copies were the one-thread part
# left: 512 channels at 3x3, batch 32, the column matrix 1.9 ms and the gradient's 0.9 ms.
THREAD_ELEMENTS = 1 << 16
SPLIT_PARTS = 2
# Output rows of at most GATHER_WIDTH windows (of kernels larger than 1x1) are made by
# ``_im2col_gather_loop``: row by row, the span arithmetic and three short loops a row cost more
# than the copies. One thread, 3x3 kernels: 512 channels at 7x7, one image 0.39 -> 0.13 ms, 16
# images 2.65 -> 1.46 ms; 512 at 4x4, 32 images, 2.6 -> 1.05 ms; 256 at 14x14 stride 2, 16 images,
# 1.21 -> 0.85 ms. Wider rows (8 and 16 at stride 2, 32 images: 0.88x, 0.92x) and 1x1 kernels,
# which read a quarter of a plane the copy makes whole (0.6-0.9x), stay row by row. Those copies
# are fast enough that handing a part to another thread costs more than it saves below
# GATHER_THREAD_FACTOR times THREAD_ELEMENTS values.
GATHER_WIDTH = 7
GATHER_THREAD_FACTOR = 16
GATHER_PADDED = 1 << 22     # values of the padded planes at most (16 MiB of float32)
# Rows of at least PHASE_WIDTH windows strided along the width, of kernels of PHASE_TAPS values
# or more, are copied from the input taken apart by column phase (``_strided_columns``). One
# thread, one image: resnet18_v1's 7x7 stride-2 stem 0.54 -> 0.26 ms, 5x5 stride 2 from 64
# channels at 56x56 0.41 -> 0.36, 11x11 stride 4 from one channel at 224x224 0.11 -> 0.07 (from
# three at 227x227 level); with fewer offsets the copy into phases costs more than it saves
# (3x3 stride 2 from 64 channels at 56x56: 0.15 -> 0.20; 5x5 at 27x27: 0.22 -> 0.27).
PHASE_TAPS = 25
PHASE_WIDTH = 28


def _in_parts(count, size, work, factor=1):
    """``work(lo, hi)`` over ``range(count)``: whole, or in runs on several threads where
    ``size`` values are made (``factor`` times THREAD_ELEMENTS or more) and the BLAS has several
    (none nested in a piece's thread)."""
    threads = _host_threads.blas_threads() if size >= factor * THREAD_ELEMENTS else 1
    if threads <= 1 or count < 2:
        work(0, count)
        return
    runs = _host_threads.even_pieces(count, min(count, SPLIT_PARTS * threads))
    _host_threads.run(len(runs), lambda i: work(*runs[i]))


def conv_epilogue(res, bias, relu, out) -> bool:
    """``out[n, f] = res[f, n] (+ bias[f]) (then ReLU)`` for ``res`` ``(F, N, P)`` and ``out``
    ``(N, F, P)``."""
    if not _usable(res, out, bias):
        return False
    f, n, p = res.shape
    _epilogue(res.reshape(-1), f, n, p, res.reshape(-1)[:f] if bias is None else bias,
              bias is not None, relu, out.reshape(-1), True)
    return True


def bias_relu_rows(res, bias, relu) -> bool:
    """In place, ``res[n, f] (+ bias[f]) (then ReLU)`` for ``(N, F, P)`` ``res``: the epilogue's
    element rule without its transpose."""
    if bias is None and not relu:
        return True     # nothing to do
    if not _usable(res, bias):
        return False
    n, f, p = res.shape
    flat = res.reshape(-1)
    _epilogue(flat, f, n, p, flat[:f] if bias is None else bias, bias is not None, relu, flat,
              False)
    return True


def conv_grad_out(g, out, relu, g2, lo=0, hi=None) -> bool:
    """``g2[f, n] = g[n, f] * (out[n, f] > 0 if relu else 1)`` for ``(N, F, P)`` ``g`` and ``out``
    and ``(F, N, P)`` ``g2``, for the images ``n`` in ``[lo, hi)`` (all by default); without
    ``relu`` a transposing copy."""
    if not _usable(g, g2, out if relu else None):
        return False
    n, f, p = g.shape
    _grad_out(g.reshape(-1), lo, n if hi is None else hi, n, f, p,
              (out if relu else g).reshape(-1), relu, g2.reshape(-1))
    return True


def takes_grad_rows(g, out, relu, gm, row_sums=None) -> bool:
    """Whether ``mask_rows`` runs here for these arrays (else NumPy must)."""
    return _usable(g, gm, out if relu else None, row_sums)


def mask_rows(g, out, relu, gm, lo, hi, row_sums) -> bool:
    """For the images ``n`` in ``[lo, hi)`` of ``(N, F, P)`` ``g`` and ``out``: ``gm[n] = g[n] *
    (out[n] > 0)`` where ``relu`` (``gm`` unused otherwise), and ``row_sums[n, f]`` (or None) the
    sum of row ``(n, f)`` of that masked gradient, in NumPy's order, for ``bias_totals``."""
    if not relu and row_sums is None:
        return True     # nothing to do
    if not takes_grad_rows(g, out, relu, gm, row_sums):
        return False
    n, f, p = g.shape
    tasks, values, _ = _pw.workspace(g.dtype, 0)
    sums = g.reshape(-1)[:1] if row_sums is None else row_sums.reshape(-1)
    _mask_rows(g.reshape(-1), out.reshape(-1), lo, hi, f, p, relu, gm.reshape(-1),
               row_sums is not None, sums, g.dtype.type(0), tasks, values)
    return True


def bias_totals(row_sums, sums) -> None:
    """``sums[f]``: +0.0 plus ``row_sums[n, f]`` for each ``n`` in order: with the rows' pairwise
    sums that is NumPy's ``gm.sum(axis=(0, 2))`` of an ``(N, F, P)`` gradient ``gm`` (see
    ``_bn_kernels``). Only after ``mask_rows`` filled ``row_sums``."""
    n, f = row_sums.shape
    _totals(row_sums.reshape(-1), n, f, row_sums.dtype.type(0), sums)


def conv_grad_out_t(g, out, relu, g2, sums) -> bool:
    """``g2[n * P + p, f] = g[n, f, p] * (out[n, f, p] > 0 if relu else 1)`` for ``(N, F, P)``
    ``g`` and ``out`` and ``(N * P, F)`` ``g2``; without ``relu`` a transposing copy. ``sums``
    ``(F,)`` (or None): the bias gradient, NumPy's ``gm.sum(axis=(0, 2))`` of that masked
    gradient ``gm`` in its ``(N, F, P)`` layout."""
    if not _usable(g, g2, out if relu else None, sums):
        return False
    n, f, p = g.shape
    tasks, values, rows = _pw.workspace(g.dtype, _BLOCK * p)
    _grad_out_t(g.reshape(-1), n, f, p, (out if relu else g).reshape(-1), relu, g2.reshape(-1),
                sums is not None, g2.reshape(-1)[:f] if sums is None else sums, g.dtype.type(0),
                tasks, values, rows)
    return True


def col2im(gcols, kernel, stride, dilate, pad, out_sp, gx) -> bool:
    """``gx`` ``(N, C, H, W)`` (or a 3-D convolution's ``(N, C, D, H, W)``) = the sum over window
    offsets, in order, of ``gcols``'s columns; of THREAD_ELEMENTS values or more, in runs of
    channels on several threads (each channel's sums are its own)."""
    if len(kernel) not in (2, 3) or not _usable(gcols, gx):
        return False
    if len(kernel) == 3:
        n, c = gx.shape[:2]
        _in_parts(c, gcols.size, lambda c0, c1: _col2im_3d(
            gcols.reshape(-1), kernel, stride, dilate, pad, out_sp, gx.reshape(-1), n, c,
            gx.shape[2:], c0, c1))
        return True
    n, c, h, w = gx.shape
    if _pointwise(kernel, stride, pad):
        # One term an element: +0.0 plus it (a -0.0 comes out +0.0, as from the loop), copied
        # back to the images' layout.
        numpy.add(gcols.reshape(c, n, h * w).transpose(1, 0, 2), gx.dtype.type(0),
                  out=gx.reshape(n, c, h * w))
        return True
    _in_parts(c, gcols.size, lambda c0, c1: _col2im(
        gcols.reshape(-1), kernel[0], kernel[1], stride[0], stride[1], dilate[0], dilate[1],
        pad[0], pad[1], out_sp[0], out_sp[1], gx.reshape(-1), n, c, h, w, c0, c1))
    return True


def _pointwise(kernel, stride, pad) -> bool:
    """A 1x1 kernel of stride 1 without padding: its column matrix is the images transposed."""
    return tuple(kernel) == (1, 1) and tuple(stride) == (1, 1) and not any(pad)


def _square(kernel, stride, pad, small, large) -> bool:
    """The 2x2 / stride-2 / unpadded windows that tile ``large`` into ``small``."""
    return (kernel == (2, 2) and tuple(stride) == (2, 2) and not any(pad)
            and small[2:] == (large[2] // 2, large[3] // 2))


def _halving(kernel, stride, pad, small, large) -> bool:
    """ResNet's and GoogLeNet's 3x3 windows of stride 2 and padding 1 over planes of even height
    and width, which halve them."""
    return (tuple(kernel) == (3, 3) and tuple(stride) == (2, 2) and tuple(pad) == (1, 1)
            and large[2] % 2 == 0 and large[3] % 2 == 0
            and small[2:] == (large[2] // 2, large[3] // 2))


def _same(kernel, stride, pad, small, large) -> bool:
    """Inception's 3x3 windows of stride 1 and padding 1, which keep the planes' size."""
    return (tuple(kernel) == (3, 3) and tuple(stride) == (1, 1) and tuple(pad) == (1, 1)
            and small[2:] == large[2:])


@functools.lru_cache(maxsize=32)
def _edges(h: int, w: int, planes: int):
    """Which edges of its plane each position of ``planes`` planes lies on, as bits: 1 the first
    column, 2 the last, 4 the first row, 8 the last (``_max_3x3_same_loop``). Kept, read-only:
    a layer's forward and backward pass ask for the same table every step."""
    edges = numpy.zeros((h, w), numpy.int8)
    edges[:, 0] |= 1
    edges[:, -1] |= 2
    edges[0] |= 4
    edges[-1] |= 8
    table = numpy.tile(edges.reshape(-1), planes)
    table.flags.writeable = False
    return table


def max_pool(x, kernel, stride, pad, out, index) -> bool:
    """``out`` ``(N, C, oh, ow)``: each window's maximum (padding counts as the dtype's lowest
    finite value); ``index``: the offset of the window's first element equal to it, -1 if none;
    None where no gradient is wanted (predict mode): the maxima alone. Disjoint 2x2 windows have
    loops of their own; other 3x3 windows of stride 1 than Inception's (below; in predict mode
    only on planes of up to LANES_PREDICT_PLANE values), theirs, on blocks of planes turned into
    lanes
    (``_max_3x3_lanes_loop``; ``index`` is then laid out as those lanes, which only
    ``max_pool_grad`` reads: see ``_lanes_block``); any other goes through a padded
    copy of its planes (``_max_pool_padded_loop``: ResNet's 3x3 stride-2 pooling of one image
    at 112x112, predict mode, 1.32 -> 0.43 ms on one thread against a loop of selects over
    each row of windows); 3x3 windows of stride 2 that halve the planes, and those of stride 1
    and padding 1 that keep them, straight from the planes (``_max_3x3_halving_loop``,
    ``_max_3x3_same_loop``)."""
    if len(kernel) != 2 or not _usable(x, out) or (index is not None and (
            type(index) is not _np_ndarray or not index.flags.c_contiguous)):
        return False
    n, c, h, w = x.shape
    oh, ow = out.shape[2:]
    square = _square(kernel, stride, pad, out.shape, x.shape)
    halving = _halving(kernel, stride, pad, out.shape, x.shape)
    same = _same(kernel, stride, pad, out.shape, x.shape)
    lowest = numpy.finfo(x.dtype).min
    planes = _plane_pieces(n * c, h * w)
    edges = _edges(h, w, max(z - a for a, z in planes)) if same else None
    # Strided rows of windows shorter than SHORT_POOL_REACH: every row folded down, in a loop
    # LLVM vectorizes, rather than the outputs' rows alone (measured on GoogLeNet's stride-2
    # poolings before they halved straight from the planes: 12x12 planes with the index 10.9 ->
    # 5.4 ms, 6x6 6.0 -> 2.9; 24x24 level; 48x48 and wider fare better row by row).
    every_row = stride[0] == 1 or (ow - 1) * stride[1] + 1 < SHORT_POOL_REACH

    # Predict mode in lanes on small planes alone: without the index to find and the gradient
    # to gather, the padded planes are faster from 12x12 on (1.2-2x), the lanes up to 7x7
    # (0.52-0.84x, one thread).
    lanes = _lanes_block(kernel, stride, h * w, oh * ow) \
        if not same and (index is not None or h * w <= LANES_PREDICT_PLANE) else 0

    def piece(i):
        a, z = planes[i]
        xs = x.reshape(-1)[a * h * w:z * h * w]
        outs = out.reshape(-1)[a * oh * ow:z * oh * ow]
        if lanes:
            ob = numpy.empty(oh * ow * lanes, x.dtype)
            ix = numpy.empty(1, numpy.int8) if index is None else \
                index.reshape(-1)[a * oh * ow:z * oh * ow]
            _max_3x3_lanes(xs, z - a, h, w, pad[0], pad[1], lowest, lanes, outs, oh, ow, ix,
                           index is not None, numpy.empty((h * w + 1) * lanes, x.dtype), ob)
            return
        if halving or same:
            ix = numpy.empty(1, numpy.int8) if index is None else \
                index.reshape(-1)[a * oh * ow:z * oh * ow]
            rows = (z - a) * h * ow
            firsts = rows if index is not None else 1       # the index's scratch, unread else
            scratch = numpy.empty(rows, x.dtype), numpy.empty(firsts, numpy.int8)
            if same:
                _max_3x3_same(xs, z - a, h, w, lowest, outs, ix, index is not None,
                              edges[:rows], *scratch)
            else:
                _max_3x3_halving(xs, z - a, h, w, lowest, outs, ix, index is not None, *scratch,
                                 numpy.empty(rows, x.dtype), numpy.empty(firsts, numpy.int8))
            return
        if index is None and square:
            _max_pool_values(xs, z - a, h, w, kernel[0], kernel[1], stride[0], stride[1],
                             pad[0], pad[1], lowest, outs, oh, ow)
            return
        if square:
            _max_pool_2x2(xs, z - a, h, w, oh, ow, outs,
                          index.reshape(-1)[a * oh * ow:z * oh * ow])
            return
        size = (z - a) * ((oh - 1) * stride[0] + kernel[0]) * ((ow - 1) * stride[1] + kernel[1])
        if index is None:       # the kernel's index arguments, unread
            ix = offsets = numpy.empty(1, numpy.int8)
        else:
            ix = index.reshape(-1)[a * oh * ow:z * oh * ow]
            offsets = numpy.empty(size, index.dtype)
        _max_pool_padded(xs, z - a, h, w, kernel[0], kernel[1], stride[0], stride[1], pad[0],
                         pad[1], lowest, outs, oh, ow, ix, index is not None,
                         numpy.empty(size, x.dtype), numpy.empty(size, x.dtype),
                         numpy.empty(size, x.dtype), offsets, every_row)

    _host_threads.run(len(planes), piece)
    return True


def max_pool_grad(g, index, kernel, stride, pad, gx, pooled=None) -> bool:
    """``gx`` ``(N, C, H, W)``: for each window offset in order, ``g * (index == offset)`` added
    where the window puts that offset; with ``pooled`` (the windows' maxima), of ``g * (pooled >
    0)`` instead (a ReLU's mask, ``_relu_masks``), piece by piece. Windows that halve the planes
    (``_halving``) gather each element's terms (``_max_3x3_halving_grad_loop``) where their
    rows hold HALVING_GRAD_ROW windows or more, as do those of stride 1 that keep the planes'
    size (``_same``, ``_max_3x3_same_grad_loop``); others are scattered."""
    if len(kernel) != 2 or not _usable(gx, g, pooled) or index.shape != g.shape:
        return False
    n, c, h, w = gx.shape
    oh, ow = g.shape[2:]
    square = _square(kernel, stride, pad, g.shape, gx.shape)
    planes = _plane_pieces(n * c, h * w)
    rows_of, cols_of = divmod(numpy.arange(kernel[0] * kernel[1]), kernel[1])
    offsets = rows_of * w + cols_of
    # The index of other 3x3 stride-1 windows than Inception's is in the forward kernel's
    # lanes (see max_pool).
    same = _same(kernel, stride, pad, g.shape, gx.shape)
    edges = _edges(h, w, max(z - a for a, z in planes)) if same else None
    lanes = 0 if same else _lanes_block(kernel, stride, h * w, oh * ow)
    halving = _halving(kernel, stride, pad, g.shape, gx.shape) and ow >= HALVING_GRAD_ROW

    def piece(i):
        a, z = planes[i]
        gs, ix, gxs = (g.reshape(-1)[a * oh * ow:z * oh * ow],
                       index.reshape(-1)[a * oh * ow:z * oh * ow],
                       gx.reshape(-1)[a * h * w:z * h * w])
        ps = gs if pooled is None else pooled.reshape(-1)[a * oh * ow:z * oh * ow]
        if lanes:
            one = gx.dtype.type(1)
            _max_3x3_lanes_grad(gs, ix, z - a, oh, ow, pad[0], pad[1], gxs, h, w,
                                pooled is not None, ps, lanes,
                                numpy.empty((oh * ow + 1) * lanes, gx.dtype),
                                numpy.empty((oh * ow + 1) * lanes, index.dtype),
                                numpy.empty(max(h * w, oh * ow) * lanes, gx.dtype), one, one - one)
        elif same:
            _same_grad(gs, ix, ps, pooled is not None, edges[:gs.size], gxs, w)
        elif halving:
            size = (z - a) * (oh + 1) * (ow + 1)
            one = gx.dtype.type(1)
            _max_3x3_halving_grad(gs, ix, z - a, h, w, gxs, pooled is not None, ps,
                                  numpy.empty(size, gx.dtype), numpy.empty(size, index.dtype),
                                  numpy.empty(2 * size, gx.dtype), numpy.empty(2 * size, gx.dtype),
                                  one - one, one)
        elif square and ow <= SHORT_POOL_ROW:
            _max_pool_2x2_grad_short(gs, ix, z - a, oh, ow, gxs, h, w, pooled is not None, ps)
        elif square:
            _max_pool_2x2_grad(gs, ix, z - a, oh, ow, gxs, h, w,
                               numpy.empty(4 * (POOL_GRAD_CHUNK + ow), gx.dtype),
                               pooled is not None, ps)
        else:
            _max_pool_scatter(gs, ix, z - a, oh, ow, kernel[0], kernel[1], stride[0], stride[1],
                              pad[0], pad[1], gxs, h, w, pooled is not None, ps, rows_of,
                              cols_of, offsets)

    _host_threads.run(len(planes), piece)
    return True


def _same_grad(g, index, pooled, masked, edges, gx, w):
    """``_max_3x3_same_grad_loop`` over a piece's positions: the inner ones read their nine
    windows in place; the first and last ``w + 1``, whose windows past the piece their edges
    rule out, from copies of the piece's ends with ``w + 1`` values of padding around them (the
    loop reads before it selects)."""
    size, reach = g.size, w + 1
    one = gx.dtype.type(1)
    if size > 2 * reach:
        _max_3x3_same_grad(g, index, pooled, masked, edges, gx, w, reach, size - reach,
                           one - one, one)
    for lo, hi in ((0, min(reach, size)), (max(reach, size - reach), size)):
        if lo >= hi:
            continue
        a, z = max(0, lo - reach), min(size, hi + reach)
        around = [numpy.concatenate((numpy.zeros(reach - (lo - a), v.dtype), v[a:z],
                                     numpy.zeros(reach - (z - hi), v.dtype)))
                  for v in (g, index, pooled, edges)]
        part = numpy.empty(around[0].size, gx.dtype)
        _max_3x3_same_grad(*around[:3], masked, around[3], part, w, reach, reach + hi - lo,
                           one - one, one)
        gx[lo:hi] = part[reach:reach + hi - lo]


def _lanes_block(kernel, stride, size: int, out_size: int) -> int:
    """How many planes of ``size`` values the 3x3 stride-1 windows' kernels turn into lanes at a
    time (``_max_3x3_lanes_loop``): about LANES_BLOCK_ELEMENTS values, whole tiles of 16 planes,
    at most MAX_LANES; 0 for other windows, and for planes of more than LANES_MAX_PLANE values,
    whose rows are long enough for the padded planes' loops (forward and backward, one thread:
    lanes 0.77-0.80x their time at 24x24 and 28x28, 0.97x at 32x32, 1.10x at 40x40, 1.18x at
    56x56, 1.47x at 112x112). Inception's windows (padding 1, ``_same``) are taken straight
    from the planes instead, faster on every size. Strided 3x3 windows do not take the lanes:
    their elements lie in one to four windows each, and a gradient in lanes (four reads an
    element, or a pass a window offset) was no faster than the scatter on 24x24 and 48x48
    planes and slower on 12x12, forward and backward together. The pieces and these blocks
    depend on the shapes alone: the gradient finds the index where the forward pass left it."""
    if tuple(kernel) != (3, 3) or tuple(stride) != (1, 1) \
            or max(size, out_size) > LANES_MAX_PLANE:
        return 0
    return _lanes.block(max(size, out_size), LANES_BLOCK_ELEMENTS, MAX_LANES)


def _plane_pieces(planes: int, plane_size: int) -> list:
    """Max pooling's pieces of work: runs of whole planes of about ``POOL_PIECE_ELEMENTS`` input
    values, one per thread at a time (``host_threads``); a plane's windows do not depend on which
    piece holds it, so neither do the bits."""
    return _host_threads.pieces(planes, plane_size, POOL_PIECE_ELEMENTS)


# ----------------------------------------------------------------------------- the loops
# The loops index flat arrays and cast every index to uint64 where it is used: numba checks a
# signed index for wrap-around (a negative one counts from the end), and that check in the inner
# loops kept LLVM from vectorizing them (an im2col ran 10x slower). Every index is >= 0 by
# construction: out-of-range window positions are cut off by ``_span`` or tested before.
_U = numpy.uint64
# Max pooling works on pieces of about this many input values (whole planes) on the BLAS's thread
# count: LeNet's first pooling (1.4M values) in 6 pieces.
POOL_PIECE_ELEMENTS = 1 << 18
POOL_GRAD_CHUNK = 2048  # windows per pass of the 2x2 max-pooling gradient (32 KiB of float32 terms)
SHORT_POOL_ROW = 16     # up to this many windows a row, the 2x2 gradient zeroes, then scatters
SHORT_POOL_REACH = 24   # 3x3 windows strided over rows shorter than this: every row folded down
                        # (rows of a window's reach: (ow - 1) * stride + 1 positions)
HALVING_GRAD_ROW = 4    # 3x3 stride-2 halving windows: rows of at least this many gathered
LANES_BLOCK_ELEMENTS = 1 << 15  # 3x3 stride-1 max pooling: input values a block of lanes holds
MAX_LANES = 256                 # and its planes at most (_lanes_block)
LANES_MAX_PLANE = 1024          # planes of at most this many values in lanes
LANES_PREDICT_PLANE = 64        # in predict mode, at most this many
_BLOCK = 16         # filters per block of the gradient's transpose: a 64-byte line of float32


def _span_loop(size, k_off, step, pad, count):
    """The outputs ``[lo, hi)`` whose input ``o * step + k_off - pad`` lies inside ``[0, size)``."""
    lo, start = 0, k_off - pad
    while lo < count and start + lo * step < 0:
        lo += 1
    hi = count
    while hi > lo and start + (hi - 1) * step >= size:
        hi -= 1
    return lo, hi


def _im2col_loop(x, n_, c_, h_, w_, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, lo, hi, r0, r1,
                 y0, y1, wq, cols):
    # lo, hi: the (channel, kernel row) pairs c * kh + i to fill, a stretch of cols's rows;
    # r0, r1: the output rows whose windows cols holds (an image's plane of (r1 - r0) * ow);
    # x: the input's planes, or (wq > 0) their rows y0 <= y < y1 taken apart by column phase,
    # sw phases of wq values a row (``_strided_columns``), where a window row is a run
    plane = (r1 - r0) * ow
    length = n_ * plane
    phased = wq > 0
    step = 1 if phased else sw
    row_len = sw * wq if phased else w_
    for ci in range(lo, hi):
        c, i = ci // kh, ci % kh
        a_lo, a_hi = _span(h_, i * dh, sh, ph, oh)
        a_lo = min(max(a_lo, r0), r1)
        a_hi = min(max(a_hi, a_lo), r1)
        for j in range(kw):
            b_lo, b_hi = _span(w_, j * dw, sw, pw, ow)
            row = ((c * kh + i) * kw + j) * length
            w_off = j * dw - pw
            first = (w_off % sw) * wq + w_off // sw if phased else w_off
            for n in range(n_):
                src = (n * c_ + c) * (y1 - y0) * row_len
                base = row + n * plane
                for q in range(base, base + (a_lo - r0) * ow):
                    cols[_U(q)] = 0
                for a in range(a_lo, a_hi):
                    at = base + (a - r0) * ow
                    s0 = src + (a * sh + i * dh - ph - y0) * row_len + first
                    for b in range(b_lo):
                        cols[_U(at + b)] = 0
                    if step == 1:
                        for b in range(b_lo, b_hi):
                            cols[_U(at + b)] = x[_U(s0 + b)]
                    else:
                        for b in range(b_lo, b_hi):
                            cols[_U(at + b)] = x[_U(s0 + b * sw)]
                    for b in range(b_hi, ow):
                        cols[_U(at + b)] = 0
                for q in range(base + (a_hi - r0) * ow, base + plane):
                    cols[_U(q)] = 0


def _im2col_gather_loop(x, n_, c_, h_, w_, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, lo, hi,
                        cols, padded, table):
    # ``_im2col_loop``'s matrix (all output rows) for narrow outputs: each channel's planes
    # copied once into ``padded`` (one plane an image, zeros around each), then every row of
    # cols read from there through ``table``, the offset in a padded plane of each (kernel
    # offset, output position), in loops of oh * ow gathers: no bounds to work out per output
    # row, and each row of cols written front to back.
    hp, wp = h_ + 2 * ph, w_ + 2 * pw
    size = hp * wp
    plane = oh * ow
    length = n_ * plane
    for i in range(kh):
        for j in range(kw):
            r = (i * kw + j) * plane
            for a in range(oh):
                for b in range(ow):
                    table[_U(r + a * ow + b)] = (a * sh + i * dh) * wp + b * sw + j * dw
    for t in range(n_ * size):
        padded[_U(t)] = 0
    held = -1
    for ci in range(lo, hi):
        c, i = ci // kh, ci % kh
        if c != held:
            for n in range(n_):
                src, dst = (n * c_ + c) * h_ * w_, n * size
                for r in range(h_):
                    at = dst + (r + ph) * wp + pw
                    for q in range(w_):
                        padded[_U(at + q)] = x[_U(src + r * w_ + q)]
            held = c
        for j in range(kw):
            row = ((c * kh + i) * kw + j) * length
            r = (i * kw + j) * plane
            for n in range(n_):
                at, base = row + n * plane, n * size
                for q in range(plane):
                    cols[_U(at + q)] = padded[_U(base + table[_U(r + q)])]


def _epilogue_loop(res, f_, n_, p_, bias, with_bias, relu, out, from_fnp):
    # from_fnp: ``res`` in the GEMM's (F, N, P) layout, else in ``out``'s (N, F, P) (in place).
    for n in range(n_):
        for f in range(f_):
            src, dst = ((f * n_ + n) if from_fnp else (n * f_ + f)) * p_, (n * f_ + f) * p_
            bv = bias[f]
            for p in range(p_):
                v = res[_U(src + p)]
                if with_bias:
                    v = v + bv
                if relu and not (v > 0 or v != v):
                    v = 0
                out[_U(dst + p)] = v


def _grad_out_loop(g, lo, hi, n_, f_, p_, out, relu, g2):
    for f in range(f_):
        for n in range(lo, hi):
            src, dst = (n * f_ + f) * p_, (f * n_ + n) * p_
            if relu:
                for p in range(p_):
                    g2[_U(dst + p)] = g[_U(src + p)] * (1 if out[_U(src + p)] > 0 else 0)
            else:
                for p in range(p_):
                    g2[_U(dst + p)] = g[_U(src + p)]


def _mask_rows_loop(g, out, lo, hi, f_, p_, relu, gm, with_sums, row_sums, zero, tasks, values):
    for n in range(lo, hi):
        for f in range(f_):
            at = (n * f_ + f) * p_
            if relu:
                for p in range(p_):
                    gm[_U(at + p)] = g[_U(at + p)] * (1 if out[_U(at + p)] > 0 else 0)
                if with_sums:
                    row_sums[n * f_ + f] = _pairwise(gm, at, p_, zero, tasks, values)
            elif with_sums:
                row_sums[n * f_ + f] = _pairwise(g, at, p_, zero, tasks, values)


def _totals_loop(row_sums, n_, f_, zero, sums):
    for f in range(f_):
        sums[f] = zero
    for n in range(n_):
        for f in range(f_):
            sums[f] = sums[f] + row_sums[n * f_ + f]


def _grad_out_t_loop(g, n_, f_, p_, out, relu, g2, with_sums, sums, zero, tasks, values, rows):
    # A transpose in blocks of _BLOCK filters: their (n, f) rows are masked into ``rows`` (where
    # each one's sum is taken, in NumPy's order: see _pairwise), then written out position by
    # position, _BLOCK contiguous values at a time (a column at a time ran 3x slower).
    if with_sums:
        for f in range(f_):
            sums[f] = zero
    for n in range(n_):
        for f0 in range(0, f_, _BLOCK):
            fb = min(_BLOCK, f_ - f0)
            for k in range(fb):
                src = (n * f_ + f0 + k) * p_
                at = k * p_
                if relu:
                    for p in range(p_):
                        rows[_U(at + p)] = g[_U(src + p)] * (1 if out[_U(src + p)] > 0 else 0)
                else:
                    for p in range(p_):
                        rows[_U(at + p)] = g[_U(src + p)]
                if with_sums:
                    sums[f0 + k] = sums[f0 + k] + _pairwise(rows, at, p_, zero, tasks, values)
            for p in range(p_):
                dst = (n * p_ + p) * f_ + f0
                for k in range(fb):
                    g2[_U(dst + k)] = rows[_U(k * p_ + p)]


def _col2im_loop(cols, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, gx, n_, c_, h_, w_, c0, c1):
    # Each element's terms arrive in window-offset order, as NumPy's per-offset adds; the column
    # rows are read front to back (row by row over the planes: 5x faster than plane by plane).
    # The channels c0 to c1 alone.
    plane = oh * ow
    length = n_ * plane
    for n in range(n_):
        for q in range((n * c_ + c0) * h_ * w_, (n * c_ + c1) * h_ * w_):
            gx[_U(q)] = 0
    for c in range(c0, c1):
        for i in range(kh):
            a_lo, a_hi = _span(h_, i * dh, sh, ph, oh)
            for j in range(kw):
                b_lo, b_hi = _span(w_, j * dw, sw, pw, ow)
                row = ((c * kh + i) * kw + j) * length
                w_off = j * dw - pw
                for n in range(n_):
                    dst = (n * c_ + c) * h_ * w_
                    for a in range(a_lo, a_hi):
                        d0 = dst + (a * sh + i * dh - ph) * w_ + w_off
                        at = row + n * plane + a * ow
                        if sw == 1:
                            for b in range(b_lo, b_hi):
                                gx[_U(d0 + b)] = gx[_U(d0 + b)] + cols[_U(at + b)]
                        else:
                            for b in range(b_lo, b_hi):
                                gx[_U(d0 + b * sw)] = gx[_U(d0 + b * sw)] + cols[_U(at + b)]


def _im2col_3d_loop(x, n_, c_, size, kernel, stride, dilate, pad, out_sp, cols, c0, c1):
    # Rows (c, i, j, k) of the kernel's offsets, columns (n, a, b, e) of the outputs: each row's
    # stretch for an image zeroed, then the outputs whose input is inside copied.
    d_, h_, w_ = size
    kd, kh, kw = kernel
    od, oh, ow = out_sp
    plane = od * oh * ow
    length = n_ * plane
    for c in range(c0, c1):
        for i in range(kd):
            a_lo, a_hi = _span(d_, i * dilate[0], stride[0], pad[0], od)
            for j in range(kh):
                b_lo, b_hi = _span(h_, j * dilate[1], stride[1], pad[1], oh)
                for k in range(kw):
                    e_lo, e_hi = _span(w_, k * dilate[2], stride[2], pad[2], ow)
                    row = (((c * kd + i) * kh + j) * kw + k) * length
                    for n in range(n_):
                        base = row + n * plane
                        for q in range(base, base + plane):
                            cols[_U(q)] = 0
                        src = (n * c_ + c) * d_ * h_ * w_
                        for a in range(a_lo, a_hi):
                            za = (a * stride[0] + i * dilate[0] - pad[0]) * h_
                            for b in range(b_lo, b_hi):
                                s0 = src + (za + b * stride[1] + j * dilate[1] - pad[1]) * w_ \
                                    + k * dilate[2] - pad[2]
                                at = base + (a * oh + b) * ow
                                for e in range(e_lo, e_hi):
                                    cols[_U(at + e)] = x[_U(s0 + e * stride[2])]


def _col2im_3d_loop(cols, kernel, stride, dilate, pad, out_sp, gx, n_, c_, size, c0, c1):
    # Each element's terms arrive in window-offset order, as NumPy's per-offset adds from zero.
    d_, h_, w_ = size
    kd, kh, kw = kernel
    od, oh, ow = out_sp
    plane = od * oh * ow
    length = n_ * plane
    volume = d_ * h_ * w_
    for n in range(n_):
        for q in range((n * c_ + c0) * volume, (n * c_ + c1) * volume):
            gx[_U(q)] = 0
    for c in range(c0, c1):
        for i in range(kd):
            a_lo, a_hi = _span(d_, i * dilate[0], stride[0], pad[0], od)
            for j in range(kh):
                b_lo, b_hi = _span(h_, j * dilate[1], stride[1], pad[1], oh)
                for k in range(kw):
                    e_lo, e_hi = _span(w_, k * dilate[2], stride[2], pad[2], ow)
                    row = (((c * kd + i) * kh + j) * kw + k) * length
                    for n in range(n_):
                        dst = (n * c_ + c) * volume
                        for a in range(a_lo, a_hi):
                            za = (a * stride[0] + i * dilate[0] - pad[0]) * h_
                            for b in range(b_lo, b_hi):
                                d0 = dst + (za + b * stride[1] + j * dilate[1] - pad[1]) * w_ \
                                    + k * dilate[2] - pad[2]
                                at = row + n * plane + (a * oh + b) * ow
                                for e in range(e_lo, e_hi):
                                    t = _U(d0 + e * stride[2])
                                    gx[t] = gx[t] + cols[_U(at + e)]


def _max_pool_2x2_loop(x, planes, h_, w_, oh, ow, out, index):
    # The usual MaxPool2D(2): 2x2 windows, stride 2, no padding. The general loop's rule (NumPy's
    # maximum from the first element on) gives the first NaN if there is one, else the last
    # element equal to the maximum, with the index of the first such element. Here in pairs and
    # selects only, which LLVM vectorizes (5x faster than the step-by-step rule): each pair keeps
    # its later element and earlier index on a tie, and so does the pair of pairs.
    for pl in range(planes):
        src, dst = pl * h_ * w_, pl * oh * ow
        for a in range(oh):
            top = src + 2 * a * w_
            bottom = top + w_
            at = dst + a * ow
            for b in range(ow):
                x0, x1 = x[_U(top + 2 * b)], x[_U(top + 2 * b + 1)]
                x2, x3 = x[_U(bottom + 2 * b)], x[_U(bottom + 2 * b + 1)]
                p, q = (x0 if x0 > x1 else x1), (x2 if x2 > x3 else x3)
                kp, kq = (1 if x1 > x0 else 0), (3 if x3 > x2 else 2)
                m, k = (p if p > q else q), (kq if q > p else kp)
                first_nan = x0 if x0 != x0 else (x1 if x1 != x1 else (x2 if x2 != x2 else x3))
                nan = (x0 != x0) | (x1 != x1) | (x2 != x2) | (x3 != x3)
                out[_U(at + b)] = first_nan if nan else m
                index[_U(at + b)] = -1 if nan else k


def _max_pool_2x2_grad_loop(g, index, planes, oh, ow, gx, h_, w_, buf, masked, pooled):
    # Disjoint 2x2 windows: each covered input element is +0.0 plus its one term; the rows and
    # columns no window covers stay +0.0. Two passes over a chunk of window rows at a time: the
    # terms of all its windows in one long loop (into ``buf``: the windows' top rows, then their
    # bottom rows), then each row copied to its place. One loop per row of windows did both, but
    # a row holds few windows (13 in LeNet's first pooling), too few for LLVM's vector loop:
    # 0.90 -> 0.55 ms there, 1.36 -> 0.71 ms at 32x32.
    rows = planes * oh
    per = max(1, (buf.shape[0] // 4 - ow) // ow)     # window rows per chunk
    for r0 in range(0, rows, per):
        r1 = min(rows, r0 + per)
        k0, n = r0 * ow, (r1 - r0) * ow
        for k in range(n):
            gv, kk = g[_U(k0 + k)], index[_U(k0 + k)]
            if masked:      # the ReLU's mask at the window's maximum (_relu_masks)
                gv = gv * (1 if pooled[_U(k0 + k)] > 0 else 0)
            buf[_U(2 * k)] = 0.0 + gv * (1 if kk == 0 else 0)
            buf[_U(2 * k + 1)] = 0.0 + gv * (1 if kk == 1 else 0)
            buf[_U(2 * n + 2 * k)] = 0.0 + gv * (1 if kk == 2 else 0)
            buf[_U(2 * n + 2 * k + 1)] = 0.0 + gv * (1 if kk == 3 else 0)
        for r in range(r0, r1):
            top = (r // oh) * h_ * w_ + 2 * (r % oh) * w_
            src = 2 * (r - r0) * ow
            for q in range(2 * ow):
                gx[_U(top + q)] = buf[_U(src + q)]
            for q in range(2 * ow):
                gx[_U(top + w_ + q)] = buf[_U(2 * n + src + q)]
            for q in range(2 * ow, w_):
                gx[_U(top + q)] = 0
                gx[_U(top + w_ + q)] = 0
    for pl in range(planes):
        for q in range(pl * h_ * w_ + 2 * oh * w_, (pl + 1) * h_ * w_):
            gx[_U(q)] = 0


def _max_pool_2x2_grad_short_loop(g, index, planes, oh, ow, gx, h_, w_, masked, pooled):
    # The same terms as _max_pool_2x2_grad_loop's, for rows of few windows: a plane zeroed, then
    # each of its windows' one term where it is finite and its window has no NaN (+0.0 plus
    # gv * 0 is +0.0 everywhere else); otherwise all four terms, as there. LeNet's second pooling
    # (5 windows a row): 0.28 -> 0.15 ms; at 13 windows 0.60 -> 0.55 ms; at 56 it was 5% slower
    # than the two passes. Zeroing plane by plane, while the plane is in cache for its terms,
    # rather than the whole piece first: 0.66 -> 0.60 ms and 0.21 -> 0.19 ms for LeNet's two.
    for pl in range(planes):
        for q in range(pl * h_ * w_, (pl + 1) * h_ * w_):
            gx[_U(q)] = 0
        for a in range(oh):
            top, k0 = pl * h_ * w_ + 2 * a * w_, (pl * oh + a) * ow
            for b in range(ow):
                gv, kk = g[_U(k0 + b)], index[_U(k0 + b)]
                if masked:
                    gv = gv * (1 if pooled[_U(k0 + b)] > 0 else 0)
                t = top + 2 * b
                if gv - gv == 0 and kk >= 0:
                    gx[_U(t + (kk & 1) + (kk >> 1) * w_)] = 0.0 + gv
                else:
                    gx[_U(t)] = 0.0 + gv * (1 if kk == 0 else 0)
                    gx[_U(t + 1)] = 0.0 + gv * (1 if kk == 1 else 0)
                    gx[_U(t + w_)] = 0.0 + gv * (1 if kk == 2 else 0)
                    gx[_U(t + w_ + 1)] = 0.0 + gv * (1 if kk == 3 else 0)


def _max_pool_values_loop(x, planes, h_, w_, kh, kw, sh, sw, ph, pw, lowest, out, oh, ow):
    # Each window's maximum without the index: m is NumPy's maximum(m, v) over its elements in
    # row-major order (m if m is NaN, else v if v is NaN, else m if m > v,
    # else v), padding reading as ``lowest``; but offset by offset over a whole row of windows,
    # the row kept in ``out``, so that each pass is a vectorizable select.
    for pl in range(planes):
        src, dst = pl * h_ * w_, pl * oh * ow
        for a in range(oh):
            at = dst + a * ow
            for i in range(kh):
                h = a * sh + i - ph
                inside = 0 <= h < h_
                row = src + h * w_
                for j in range(kw):
                    b_lo, b_hi = _span(w_, j, sw, pw, ow)
                    if not inside:
                        b_lo, b_hi = 0, 0
                    first = i == 0 and j == 0
                    for b in range(b_lo):
                        m = out[_U(at + b)]
                        out[_U(at + b)] = lowest if first or not (m != m or m > lowest) else m
                    for b in range(b_lo, b_hi):
                        v = x[_U(row + b * sw + j - pw)]
                        m = out[_U(at + b)]
                        out[_U(at + b)] = v if first or not (m != m or m > v) else m
                    for b in range(max(b_lo, b_hi), ow):
                        m = out[_U(at + b)]
                        out[_U(at + b)] = lowest if first or not (m != m or m > lowest) else m


def _max_pool_padded_loop(x, planes, h_, w_, kh, kw, sh, sw, ph, pw, lowest, out, oh, ow,
                          index, with_index, padded, across, folded, offsets, every_row):
    # Each window's maximum m, NumPy's maximum(m, v) over its elements in row-major order (m if
    # m is NaN, else v if v is NaN, else m if m > v, else v), and its index, from ``padded``, a
    # copy of the planes with ``lowest`` around them. That rule keeps the first NaN of a window,
    # else the last of its largest elements (+-0 equal): a choice among the window's elements
    # that comes out the same whichever runs of them are folded first. So the copy is folded
    # across kw columns (``across``), that down kh rows (``folded``), each a loop over the whole
    # copy, as if every position started a window of stride 1: the ends of rows and planes fold
    # into the next and are never read. The index (``offsets``, one a position) is then the
    # first offset whose element equals the maximum (NaN equals nothing: -1), taken offset by
    # offset from the last, again over the whole copy. The outputs are read off at their
    # windows' positions. Planes of a few dozen values make loops of a row or a window too short
    # for LLVM's vector loops; these run the length of the piece, over arrays of their own (in
    # one buffer, LLVM's test for overlap kept them scalar): 3x3 windows of stride 1 on 6x6
    # planes, the maxima with their index, 10x faster than window by window.
    hp, wp = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    size = hp * wp
    total = planes * size
    for t in range(total):
        padded[_U(t)] = lowest
    top, left = min(ph, hp), min(pw, wp)
    rows = max(0, min(h_, hp - top))
    cols = max(0, min(w_, wp - left))
    for pl in range(planes):
        for r in range(rows):
            at, src = pl * size + (top + r) * wp + left, (pl * h_ + r) * w_
            for c in range(cols):
                padded[_U(at + c)] = x[_U(src + c)]
    wide = total - (kw - 1)
    span = wide - (kh - 1) * wp
    if kh == 3 and kw == 3:
        _max_3x3(padded, across, folded, offsets, wide, span, wp, with_index, planes, size, sh,
                 oh, (ow - 1) * sw + 1, every_row)
    else:
        _max_windows(padded, across, folded, offsets, wide, span, kh, kw, wp, with_index)
    o = 0
    for pl in range(planes):
        for a in range(oh):
            at = pl * size + a * sh * wp
            for b in range(ow):
                out[_U(o)] = folded[_U(at + b * sw)]
                if with_index:
                    index[_U(o)] = offsets[_U(at + b * sw)]
                o += 1


def _max_windows_loop(padded, across, folded, offsets, wide, span, kh, kw, wp, with_index):
    for t in range(wide):
        across[_U(t)] = padded[_U(t)]
    for j in range(1, kw):
        for t in range(wide):
            m, v = across[_U(t)], padded[_U(t + j)]
            across[_U(t)] = m if (m != m) | (m > v) else v
    for t in range(span):
        folded[_U(t)] = across[_U(t)]
    for i in range(1, kh):
        for t in range(span):
            m, v = folded[_U(t)], across[_U(t + i * wp)]
            folded[_U(t)] = m if (m != m) | (m > v) else v
    if with_index:
        for t in range(span):
            offsets[_U(t)] = -1
        for q in range(kh * kw - 1, -1, -1):
            shift = (q // kw) * wp + q % kw
            for t in range(span):
                hit = padded[_U(t + shift)] == folded[_U(t)]
                offsets[_U(t)] = q if hit else offsets[_U(t)]


def _max_3x3_loop(padded, across, folded, offsets, wide, span, wp, with_index, planes, size,
                  sh, oh, reach, every_row):
    # ``_max_windows_loop`` for 3x3 windows, each fold and the index in one pass. With a stride
    # of rows (and not ``every_row``), only the rows of windows that are outputs are folded
    # down, ``reach`` positions each, to the row's last window; rows too short for LLVM's vector
    # loops are all folded, in one loop over the piece (see ``max_pool``).
    for t in range(wide):
        m, v = padded[_U(t)], padded[_U(t + 1)]
        m = m if (m != m) | (m > v) else v
        v = padded[_U(t + 2)]
        across[_U(t)] = m if (m != m) | (m > v) else v
    if every_row:
        _down_3(padded, across, folded, offsets, 0, span, wp, with_index)
        return
    for pl in range(planes):
        for a in range(oh):
            at = pl * size + a * sh * wp
            _down_3(padded, across, folded, offsets, at, at + reach, wp, with_index)


def _down_3_loop(padded, across, folded, offsets, start, stop, wp, with_index):
    for t in range(start, stop):
        m, v = across[_U(t)], across[_U(t + wp)]
        m = m if (m != m) | (m > v) else v
        v = across[_U(t + 2 * wp)]
        m = m if (m != m) | (m > v) else v
        folded[_U(t)] = m
        if with_index:
            r1, r2 = t + wp, t + 2 * wp
            k = -1
            k = 8 if padded[_U(r2 + 2)] == m else k
            k = 7 if padded[_U(r2 + 1)] == m else k
            k = 6 if padded[_U(r2)] == m else k
            k = 5 if padded[_U(r1 + 2)] == m else k
            k = 4 if padded[_U(r1 + 1)] == m else k
            k = 3 if padded[_U(r1)] == m else k
            k = 2 if padded[_U(t + 2)] == m else k
            k = 1 if padded[_U(t + 1)] == m else k
            k = 0 if padded[_U(t)] == m else k
            offsets[_U(t)] = k


def _fold_3_loop(p, q, r):
    # NumPy's maximum over p, q, r in that order, and the first of the three equal to it (-1
    # where it is NaN).
    m = p if (p != p) | (p > q) else q
    m = m if (m != m) | (m > r) else r
    j = 2 if r == m else -1
    j = 1 if q == m else j
    return m, 0 if p == m else j


def _max_3x3_halving_loop(x, planes, h_, w_, lowest, out, index, with_index, across, first,
                          down, at):
    # ``_max_pool_padded_loop``'s maxima and index for 3x3 windows of stride 2 and padding 1
    # over planes of even height and width (``_halving``), without the padded copy or folds at
    # positions no window starts at: window (a, b) spans rows 2a - 1 .. 2a + 1 and columns
    # 2b - 1 .. 2b + 1, so across the whole piece a row's fold of window column b is x[2t - 1],
    # x[2t], x[2t + 1] with t = row * ow + b, one loop LLVM vectorizes (column 0, whose left
    # neighbour is the padding, mended after). ``first``: the first of the three equal to that
    # fold. Then every row folds the rows above and below it down, again one loop over the
    # piece, into ``down``, whose even rows are the outputs, and each plane's first row is
    # mended with the padding above it. The window's first element equal to its maximum is in
    # the first of its rows whose fold equals the maximum (an element equals it only where its
    # row's fold does, NaN nowhere), at that row's ``first``. Batch 32, one thread, with the
    # index, the input cold: GoogLeNet's 64x48x48 6.0 -> 3.7 ms against the padded planes.
    # (Written for any stride, the stride unknown to LLVM kept the loads scalar.)
    ow, oh = w_ >> 1, h_ >> 1
    total = planes * h_ * ow
    for t in range(1, total):
        m, j = _fold_3(x[_U(2 * t - 1)], x[_U(2 * t)], x[_U(2 * t + 1)])
        across[_U(t)] = m
        if with_index:
            first[_U(t)] = j
    for row in range(planes * h_):      # column 0: its left neighbour is the padding
        t = row * ow
        m, j = _fold_3(lowest, x[_U(2 * t)], x[_U(2 * t + 1)])
        across[_U(t)] = m
        if with_index:
            first[_U(t)] = j
    for t in range(ow, total - ow):
        p, q, r = across[_U(t - ow)], across[_U(t)], across[_U(t + ow)]
        m = p if (p != p) | (p > q) else q
        m = m if (m != m) | (m > r) else r
        down[_U(t)] = m
        if with_index:
            k = 6 + first[_U(t + ow)] if r == m else -1
            k = 3 + first[_U(t)] if q == m else k
            at[_U(t)] = first[_U(t - ow)] if p == m else k
    for pl in range(planes):            # the outputs' rows below the first
        for a in range(1, oh):
            o, t = (pl * oh + a) * ow, (pl * h_ + 2 * a) * ow
            for b in range(ow):
                out[_U(o + b)] = down[_U(t + b)]
                if with_index:
                    index[_U(o + b)] = at[_U(t + b)]
    for pl in range(planes):            # each plane's first row: the padding above it
        o, start = pl * oh * ow, pl * h_ * ow
        for b in range(ow):
            t = start + b
            m, i = _fold_3(lowest, across[_U(t)], across[_U(t + ow)])
            out[_U(o + b)] = m
            if with_index:
                k = first[_U(t + ow)] + 6 if i == 2 else -1
                k = first[_U(t)] + 3 if i == 1 else k
                index[_U(o + b)] = 0 if i == 0 else k


def _max_3x3_same_loop(x, planes, h_, w_, lowest, out, index, with_index, edges, across, first):
    # ``_max_pool_padded_loop``'s maxima and index for 3x3 windows of stride 1 and padding 1
    # (``_same``), straight from the planes: each row's fold across x[t - 1], x[t], x[t + 1],
    # then down across[t - w], across[t], across[t + w], each one loop over the whole piece, an
    # element past its plane's edge (``edges``, see ``_edges``) reading as the padding. The
    # index as in ``_max_3x3_halving_loop``. The piece's first and last positions, whose
    # neighbours past the piece their edges rule out, are done apart, reading only inside it.
    # Batch 32, one thread, the input cold, with the index, against the lanes: 512x6x6 1.38 ->
    # 0.78 ms, 832x3x3 0.57 -> 0.43, 256x12x12 3.1 -> 1.4.
    total = planes * h_ * w_
    for t in range(1, total - 1):     # written out: through _fold_3 this loop took 1.4x
        e = edges[_U(t)]
        p = lowest if e & 1 else x[_U(t - 1)]
        q = x[_U(t)]
        r = lowest if e & 2 else x[_U(t + 1)]
        m = p if (p != p) | (p > q) else q
        m = m if (m != m) | (m > r) else r
        across[_U(t)] = m
        if with_index:
            j = 2 if r == m else -1
            j = 1 if q == m else j
            first[_U(t)] = 0 if p == m else j
    for t in (0, total - 1):
        e = edges[_U(t)]
        p, r = lowest, lowest
        if not e & 1:
            p = x[_U(t - 1)]
        if not e & 2:
            r = x[_U(t + 1)]
        m, j = _fold_3(p, x[_U(t)], r)
        across[_U(t)] = m
        if with_index:
            first[_U(t)] = j
    for t in range(w_, total - w_):
        e = edges[_U(t)]
        top, bottom = (e & 4) != 0, (e & 8) != 0
        p = lowest if top else across[_U(t - w_)]
        q = across[_U(t)]
        r = lowest if bottom else across[_U(t + w_)]
        m = p if (p != p) | (p > q) else q
        m = m if (m != m) | (m > r) else r
        out[_U(t)] = m
        if with_index:
            k = (6 if bottom else 6 + first[_U(t + w_)]) if r == m else -1
            k = 3 + first[_U(t)] if q == m else k
            index[_U(t)] = (0 if top else first[_U(t - w_)]) if p == m else k
    for b in range(min(w_, total)):
        for t in (b, total - 1 - b):
            e = edges[_U(t)]
            top, bottom = (e & 4) != 0, (e & 8) != 0
            p, r = lowest, lowest
            if not top:
                p = across[_U(t - w_)]
            if not bottom:
                r = across[_U(t + w_)]
            m, i = _fold_3(p, across[_U(t)], r)
            out[_U(t)] = m
            if with_index:
                k = (6 if bottom else first[_U(t + w_)] + 6) if i == 2 else -1
                k = first[_U(t)] + 3 if i == 1 else k
                index[_U(t)] = (0 if top else first[_U(t - w_)]) if i == 0 else k


def _max_3x3_same_grad_loop(g, index, pooled, masked, edges, gx, w_, lo, hi, zero, one):
    # ``_max_pool_scatter_loop``'s sums for ``_max_3x3_same_loop``'s windows, gathered for the
    # positions [lo, hi): the element at t is offset 3 i + j of the window at t + (1 - i) w +
    # (1 - j), and the scatter's walk (windows in reverse row-major order) reaches those windows
    # in rising offset; each term is ``g * (index == offset)``, added to +0.0 in that order (a
    # term the scatter leaves out is +-0.0 here, which changes no such sum), so the bits are the
    # same. A window past the element's plane (``edges``) gives +0.0; every read is made first,
    # so t +- (w + 1) must lie inside the arrays (``_same_grad`` does the piece's ends apart).
    # Batch 32, one thread, the input cold, under a ReLU's mask, against the lanes: 512x6x6
    # 2.0 -> 0.67 ms, 832x3x3 0.70 -> 0.35, 256x12x12 4.6 -> 1.2.
    for t in range(lo, hi):
        e = edges[_U(t)]
        left, right, top, bottom = (e & 1) != 0, (e & 2) != 0, (e & 4) != 0, (e & 8) != 0
        v = zero
        d = t + w_ + 1
        gv = zero if bottom | right else g[_U(d)]
        if masked:      # the ReLU's mask at the window's maximum (_relu_masks)
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 0 else zero)
        d = t + w_
        gv = zero if bottom else g[_U(d)]
        if masked:
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 1 else zero)
        d = t + w_ - 1
        gv = zero if bottom | left else g[_U(d)]
        if masked:
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 2 else zero)
        d = t + 1
        gv = zero if right else g[_U(d)]
        if masked:
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 3 else zero)
        d = t
        gv = g[_U(d)]
        if masked:
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 4 else zero)
        d = t - 1
        gv = zero if left else g[_U(d)]
        if masked:
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 5 else zero)
        d = t - w_ + 1
        gv = zero if top | right else g[_U(d)]
        if masked:
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 6 else zero)
        d = t - w_
        gv = zero if top else g[_U(d)]
        if masked:
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 7 else zero)
        d = t - w_ - 1
        gv = zero if top | left else g[_U(d)]
        if masked:
            gv = gv * (one if pooled[_U(d)] > 0 else zero)
        v = v + gv * (one if index[_U(d)] == 8 else zero)
        gx[_U(t)] = v


def _max_3x3_halving_grad_loop(g, index, planes, h_, w_, gx, masked, pooled, gb, kb, even, odd,
                               zero, one):
    # ``_max_pool_scatter_loop``'s sums for the halving windows of ``_max_3x3_halving_loop``,
    # gathered: the element at (2a + u, 2b + v) lies in window (a, b) and, for u or v = 1, in
    # those below and right of it, at offsets that rise as the scatter's walk (windows in
    # reverse row-major order) reaches them: (2a, 2b) is offset 4 of window (a, b); (2a, 2b + 1)
    # offset 3 of (a, b + 1), then 5 of (a, b); (2a + 1, 2b) 1 of (a + 1, b), then 7;
    # (2a + 1, 2b + 1) 0 of (a + 1, b + 1), 2 of (a + 1, b), 6 of (a, b + 1), 8 of (a, b). Each
    # term is ``g * (index == offset)``, added to +0.0 in that order: a term the scatter leaves
    # out (not the window's maximum, g finite) is +-0.0 here, which changes no such sum, and
    # the others are its terms, so the bits are the same. The gradients and index go to
    # ``gb``/``kb``, planes of (oh + 1) x (ow + 1) with zeros past the last row and column
    # (windows that are not there), so that one loop over the whole piece reads every window's
    # neighbours; it writes the even and the odd rows of the planes (``even``/``odd``, two
    # values a window), which are then copied into place. (GoogLeNet's 192x24x24 batch with its
    # ReLU's mask, one thread: 5.0 -> 1.7 ms; on 6x6 planes the short rows' copies cost more
    # than the scatter.)
    oh, ow = h_ >> 1, w_ >> 1
    wide = ow + 1
    size = (oh + 1) * wide
    for pl in range(planes):
        for a in range(oh):
            at, src = pl * size + a * wide, (pl * oh + a) * ow
            for b in range(ow):
                gv = g[_U(src + b)]
                if masked:      # the ReLU's mask at the window's maximum (_relu_masks)
                    gv = gv * (one if pooled[_U(src + b)] > 0 else zero)
                gb[_U(at + b)] = gv
                kb[_U(at + b)] = index[_U(src + b)]
            gb[_U(at + ow)] = zero
        at = pl * size + oh * wide
        for b in range(wide):
            gb[_U(at + b)] = zero
    for t in range(planes * size - wide - 1):
        g00, k00 = gb[_U(t)], kb[_U(t)]
        g01, k01 = gb[_U(t + 1)], kb[_U(t + 1)]
        g10, k10 = gb[_U(t + wide)], kb[_U(t + wide)]
        g11, k11 = gb[_U(t + wide + 1)], kb[_U(t + wide + 1)]
        even[_U(2 * t)] = zero + g00 * (one if k00 == 4 else zero)
        even[_U(2 * t + 1)] = (zero + g01 * (one if k01 == 3 else zero)) \
            + g00 * (one if k00 == 5 else zero)
        odd[_U(2 * t)] = (zero + g10 * (one if k10 == 1 else zero)) \
            + g00 * (one if k00 == 7 else zero)
        odd[_U(2 * t + 1)] = (((zero + g11 * (one if k11 == 0 else zero))
                               + g10 * (one if k10 == 2 else zero))
                              + g01 * (one if k01 == 6 else zero)) \
            + g00 * (one if k00 == 8 else zero)
    for pl in range(planes):
        for a in range(oh):
            src = 2 * (pl * size + a * wide)
            row = (pl * h_ + 2 * a) * w_
            for c in range(w_):
                gx[_U(row + c)] = even[_U(src + c)]
            for c in range(w_):
                gx[_U(row + w_ + c)] = odd[_U(src + c)]


def _max_pool_scatter_loop(g, index, planes, oh, ow, kh, kw, sh, sw, ph, pw, gx, h_, w_,
                           masked, pooled, rows_of, cols_of, offsets):
    # The sums of window offset by window offset (NumPy's per-offset strided adds of
    # ``g * (index == offset)``) in one pass: an element's terms come in offset order from the
    # windows in reverse row-major order, so the windows are walked that way. A finite term
    # goes to its window's maximum alone (every other element of the window gets +-0.0, which
    # changes no sum that starts at +0.0); a term that is not (``g * 0`` is NaN) or a window
    # without a maximum (NaN: index -1) goes to each element of the window, as there.
    # ``rows_of``/``cols_of``: each offset's row and column in the window (no division a term);
    # ``offsets``: its place in the plane from the window's first element, for a window that
    # lies inside the plane, which needs no test (ResNet's and GoogLeNet's stride-2 pooling of
    # 48x48 and 24x24 planes: 12-18% less time).
    for pl in range(planes):
        dst, src = pl * h_ * w_, pl * oh * ow
        for q in range(dst, dst + h_ * w_):
            gx[_U(q)] = 0
        for a in range(oh - 1, -1, -1):
            top = a * sh - ph
            rows_inside = top >= 0 and top + kh <= h_
            for b in range(ow - 1, -1, -1):
                o = src + a * ow + b
                gv, kk = g[_U(o)], index[_U(o)]
                if masked:      # the ReLU's mask at the window's maximum (_relu_masks)
                    gv = gv * (1 if pooled[_U(o)] > 0 else 0)
                if gv - gv == 0:
                    if kk >= 0:
                        left = b * sw - pw
                        if rows_inside and left >= 0 and left + kw <= w_:
                            t = dst + top * w_ + left + offsets[kk]
                            gx[_U(t)] = gx[_U(t)] + gv
                            continue
                        hh, ww = top + rows_of[kk], left + cols_of[kk]
                        if 0 <= hh < h_ and 0 <= ww < w_:
                            t = dst + hh * w_ + ww
                            gx[_U(t)] = gx[_U(t)] + gv
                    continue
                for k in range(kh * kw):
                    hh, ww = a * sh + rows_of[k] - ph, b * sw + cols_of[k] - pw
                    if 0 <= hh < h_ and 0 <= ww < w_:
                        t = dst + hh * w_ + ww
                        gx[_U(t)] = gx[_U(t)] + gv * (1 if kk == k else 0)


def _max_3x3_lanes_loop(x, planes, h_, w_, ph, pw, lowest, block, out, oh, ow, index, with_index,
                        xb, ob):
    # 3x3 windows of stride 1 with their index, block by block of up to ``block`` planes turned
    # into lanes (``_lanes``): a window's nine elements are then nine runs of the block's
    # planes side by side, and each window one loop over the lanes, which LLVM vectorizes
    # whatever the planes' width (on 6x6 planes the padded copy's rows and read-out are loops
    # of a few values). Padding reads a row of ``lowest``. The maximum is NumPy's maximum(m, v)
    # over the window in row-major order, as in _max_pool_padded_loop; a block without NaN
    # takes the plain ``m if m > v else v``, the same there and half the work. The index is the
    # first offset whose element equals the maximum (-1 if none: NaN), left in the block's
    # lanes for _max_3x3_lanes_grad_loop (``with_index``; predict mode wants the maxima alone).
    size, osize = h_ * w_, oh * ow
    for p0 in range(0, planes, block):
        nb = min(block, planes - p0)
        _to_lanes(x, p0, nb, size, xb)
        outside = size * nb
        for t in range(outside, outside + nb):
            xb[_U(t)] = lowest
        plain = True
        for t in range(outside):
            v = xb[_U(t)]
            plain = plain & (v == v)
        at = p0 * osize
        for a in range(oh):
            h = a - ph
            for b in range(ow):
                w = b - pw
                s0 = _lane_at(h, w, h_, w_, nb, outside)
                s1 = _lane_at(h, w + 1, h_, w_, nb, outside)
                s2 = _lane_at(h, w + 2, h_, w_, nb, outside)
                s3 = _lane_at(h + 1, w, h_, w_, nb, outside)
                s4 = _lane_at(h + 1, w + 1, h_, w_, nb, outside)
                s5 = _lane_at(h + 1, w + 2, h_, w_, nb, outside)
                s6 = _lane_at(h + 2, w, h_, w_, nb, outside)
                s7 = _lane_at(h + 2, w + 1, h_, w_, nb, outside)
                s8 = _lane_at(h + 2, w + 2, h_, w_, nb, outside)
                o = (a * ow + b) * nb
                for lane in range(nb):
                    v0, v1, v2 = xb[_U(s0 + lane)], xb[_U(s1 + lane)], xb[_U(s2 + lane)]
                    v3, v4, v5 = xb[_U(s3 + lane)], xb[_U(s4 + lane)], xb[_U(s5 + lane)]
                    v6, v7, v8 = xb[_U(s6 + lane)], xb[_U(s7 + lane)], xb[_U(s8 + lane)]
                    if plain:
                        m = v0 if v0 > v1 else v1
                        m = m if m > v2 else v2
                        m = m if m > v3 else v3
                        m = m if m > v4 else v4
                        m = m if m > v5 else v5
                        m = m if m > v6 else v6
                        m = m if m > v7 else v7
                        m = m if m > v8 else v8
                    else:
                        m = v0 if (v0 != v0) | (v0 > v1) else v1
                        m = m if (m != m) | (m > v2) else v2
                        m = m if (m != m) | (m > v3) else v3
                        m = m if (m != m) | (m > v4) else v4
                        m = m if (m != m) | (m > v5) else v5
                        m = m if (m != m) | (m > v6) else v6
                        m = m if (m != m) | (m > v7) else v7
                        m = m if (m != m) | (m > v8) else v8
                    ob[_U(o + lane)] = m
                    if not with_index:
                        continue
                    # int32, the lanes' width: int64 selects took twice the registers
                    k = numpy.int32(-1)
                    k = numpy.int32(8) if v8 == m else k
                    k = numpy.int32(7) if v7 == m else k
                    k = numpy.int32(6) if v6 == m else k
                    k = numpy.int32(5) if v5 == m else k
                    k = numpy.int32(4) if v4 == m else k
                    k = numpy.int32(3) if v3 == m else k
                    k = numpy.int32(2) if v2 == m else k
                    k = numpy.int32(1) if v1 == m else k
                    k = numpy.int32(0) if v0 == m else k
                    index[_U(at + o + lane)] = k
        _from_lanes(ob, p0, nb, osize, out)


def _max_3x3_lanes_grad_loop(g, index, planes, oh, ow, ph, pw, gx, h_, w_, masked, pooled,
                             block, gb, ib, xb, one, zero):
    # The gradient of _max_3x3_lanes_loop's stride-1 windows as a gather, in the same blocks of
    # lanes: each input element's terms in offset order, ``g * (index == offset)`` from the
    # windows that have it at offsets 0 .. 8 (a window past the edge: a row of zeros), the sum
    # starting at +0.0. That is _max_pool_scatter_loop's sum term for term: there a finite term
    # goes to its maximum alone, and the others' +-0.0 (and the zero rows' +0.0) would change
    # no such sum; a term that is not finite goes to every element, as here. ``masked``: g
    # times (pooled > 0) first.
    size, osize = h_ * w_, oh * ow
    for p0 in range(0, planes, block):
        nb = min(block, planes - p0)
        none = _lanes_grad_rows(g, index, p0, nb, osize, masked, pooled, gb, ib, xb, one, zero)
        for h in range(h_):
            for w in range(w_):
                # the windows with (h, w) at offsets (0, 0) .. (2, 2): (a, b) = (r - i, c - j)
                r, c = h + ph, w + pw
                w0 = _lane_at(r, c, oh, ow, nb, none)
                w1 = _lane_at(r, c - 1, oh, ow, nb, none)
                w2 = _lane_at(r, c - 2, oh, ow, nb, none)
                w3 = _lane_at(r - 1, c, oh, ow, nb, none)
                w4 = _lane_at(r - 1, c - 1, oh, ow, nb, none)
                w5 = _lane_at(r - 1, c - 2, oh, ow, nb, none)
                w6 = _lane_at(r - 2, c, oh, ow, nb, none)
                w7 = _lane_at(r - 2, c - 1, oh, ow, nb, none)
                w8 = _lane_at(r - 2, c - 2, oh, ow, nb, none)
                e = (h * w_ + w) * nb
                for lane in range(nb):
                    s = zero + gb[_U(w0 + lane)] * (one if ib[_U(w0 + lane)] == 0 else zero)
                    s = s + gb[_U(w1 + lane)] * (one if ib[_U(w1 + lane)] == 1 else zero)
                    s = s + gb[_U(w2 + lane)] * (one if ib[_U(w2 + lane)] == 2 else zero)
                    s = s + gb[_U(w3 + lane)] * (one if ib[_U(w3 + lane)] == 3 else zero)
                    s = s + gb[_U(w4 + lane)] * (one if ib[_U(w4 + lane)] == 4 else zero)
                    s = s + gb[_U(w5 + lane)] * (one if ib[_U(w5 + lane)] == 5 else zero)
                    s = s + gb[_U(w6 + lane)] * (one if ib[_U(w6 + lane)] == 6 else zero)
                    s = s + gb[_U(w7 + lane)] * (one if ib[_U(w7 + lane)] == 7 else zero)
                    s = s + gb[_U(w8 + lane)] * (one if ib[_U(w8 + lane)] == 8 else zero)
                    xb[_U(e + lane)] = s
        _from_lanes(xb, p0, nb, size, gx)


def _lanes_grad_rows_loop(g, index, p0, nb, osize, masked, pooled, gb, ib, xb, one, zero):
    # A block's gradient rows in lanes (times pooled > 0 where ``masked``) and its index rows,
    # each followed by a row of zeros (index -1); returns where that row starts.
    _to_lanes(g, p0, nb, osize, gb)
    if masked:
        _to_lanes(pooled, p0, nb, osize, xb)
        for t in range(osize * nb):
            gb[_U(t)] = gb[_U(t)] * (one if xb[_U(t)] > 0 else zero)
    none, at = osize * nb, p0 * osize
    for t in range(none):
        ib[_U(t)] = index[_U(at + t)]
    for t in range(none, none + nb):
        gb[_U(t)] = zero
        ib[_U(t)] = -1
    return none

# The loops call these by name; compiled, they call them compiled (``_jit.Kernel``'s helpers).
_span = _span_loop
span = _jit.Kernel(_span_loop)
_im2col = _jit.Kernel(_im2col_loop, {"_span": span})
_im2col_gather = _jit.Kernel(_im2col_gather_loop)
_phases = _jit.Kernel(_sc.phases_loop)
_epilogue = _jit.Kernel(_epilogue_loop)
_pairwise = _pw.pairwise_loop
_grad_out = _jit.Kernel(_grad_out_loop)
_mask_rows = _jit.Kernel(_mask_rows_loop, {"_pairwise": _pw.pairwise})
_totals = _jit.Kernel(_totals_loop)
_grad_out_t = _jit.Kernel(_grad_out_t_loop, {"_pairwise": _pw.pairwise})
_col2im = _jit.Kernel(_col2im_loop, {"_span": span})
_im2col_3d = _jit.Kernel(_im2col_3d_loop, {"_span": span})
_col2im_3d = _jit.Kernel(_col2im_3d_loop, {"_span": span})
_max_pool_values = _jit.Kernel(_max_pool_values_loop, {"_span": span})
_max_windows = _jit.Kernel(_max_windows_loop)
_down_3 = _jit.Kernel(_down_3_loop, inline=True)
_max_3x3 = _jit.Kernel(_max_3x3_loop, {"_down_3": _down_3})
_max_pool_padded = _jit.Kernel(_max_pool_padded_loop, {"_max_windows": _max_windows,
                                                       "_max_3x3": _max_3x3})
_fold_3 = _jit.Kernel(_fold_3_loop, inline=True)
_max_3x3_halving = _jit.Kernel(_max_3x3_halving_loop, {"_fold_3": _fold_3})
_max_3x3_same = _jit.Kernel(_max_3x3_same_loop, {"_fold_3": _fold_3})
_max_3x3_same_grad = _jit.Kernel(_max_3x3_same_grad_loop)
_max_3x3_halving_grad = _jit.Kernel(_max_3x3_halving_grad_loop)
_max_pool_scatter = _jit.Kernel(_max_pool_scatter_loop)
_max_pool_2x2 = _jit.Kernel(_max_pool_2x2_loop)
_max_pool_2x2_grad = _jit.Kernel(_max_pool_2x2_grad_loop)
_max_pool_2x2_grad_short = _jit.Kernel(_max_pool_2x2_grad_short_loop)
_to_lanes, _from_lanes, _lane_at = _lanes.to_lanes, _lanes.from_lanes, _lanes.at
_max_3x3_lanes = _jit.Kernel(_max_3x3_lanes_loop, {"_to_lanes": _to_lanes,
                                                   "_from_lanes": _from_lanes,
                                                   "_lane_at": _lane_at})
_lanes_grad_rows = _jit.Kernel(_lanes_grad_rows_loop, {"_to_lanes": _to_lanes})
_max_3x3_lanes_grad = _jit.Kernel(_max_3x3_lanes_grad_loop, {"_lanes_grad_rows": _lanes_grad_rows,
                                                             "_from_lanes": _from_lanes,
                                                             "_lane_at": _lane_at})
