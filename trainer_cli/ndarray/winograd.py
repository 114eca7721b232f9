"""3x3 convolutions of stride 1 on host arrays as Winograd's F(2x2, 3x3) (Lavin and Gray, 2015).

Each 2x2 block of the output (a tile) comes from the 4x4 block of the padded input around it:
``Y = A^T [(G w G^T) * (B^T d B)] A``, where ``*`` multiplies element by element. Over all tiles
and channels that is 16 GEMMs, one per position of the 4x4 block, of ``(F, C) @ (C, tiles)``:
2.25 times fewer multiplications than im2col's ``(F, 9C) @ (9C, positions)``, and a transformed
input 4 times the input's size instead of 9. The backward pass is the same algebra transposed:
with ``Z = A dY A^T`` the output gradient's transform, the input gradient is ``B (U^T Z) B^T``
added back over overlapping tiles, and the weight gradient ``G^T (Z V^T) G``, again 16 GEMMs
each.

The transforms add and subtract only (the filter's take halves, exactly), so float32 results
differ from im2col's by rounding alone, a few units in the last place (``docs/compat.md``). Each
transform is written twice: in NumPy here, the reference, and as a numba loop
(``_winograd_kernels``) that does the same operations on each element in the same order, so the
two are bitwise equal (``tests/test_winograd.py``). So is each filter transform.

Used by ``nn._convolution`` for 2-D convolutions of NumPy arrays with a 3x3 kernel, stride 1, no
dilation, one group and at least ``MIN_CHANNELS`` input and output channels (see there).
"""
from __future__ import annotations

import math

import numpy

from . import _conv_kernels as _ck
from . import _relu_masks
from . import _winograd_kernels as _wk
from ._winograd_kernels import tiles
from . import host_threads as _host_threads
from .ndarray import _recording_for, _result, _wrap

__all__ = ["applies", "convolution", "tiles", "filter_transform", "filter_grad", "input_transform",
           "output_transform", "grad_transform", "input_grad", "MIN_CHANNELS"]

# Measured on one thread, one layer's forward and backward against im2col
# (``benchmarks/bench_conv.py --layers``): 1.3-2.0x faster with 8 to 128 channels at 8x8 to 32x32,
# 1.2x at 11x11 (LeNet's conv2). With fewer channels than MIN_CHANNELS the GEMMs are thin and the
# transforms, which scale with the channel counts, cost more than im2col saves (an RGB input to
# 64 filters: 1.2x slower; LeNet's first layer, one input channel: 4x slower). An output of odd
# height or width is tiled with a spare row or column, computed and dropped. Where the tiles
# compute more than WASTE times the outputs that loses: at 3x3 (1.78 times) Winograd's was 1.2x
# slower with 64 channels and with 256, at 1x1 (4 times) 2x; at 5x5 (1.44 times) it was 1.0-1.2x
# faster, at 7x7 (1.31 times) 1.2-1.4x with 16 to 64 channels.
MIN_CHANNELS = 8
WASTE = 1.5
# With few tiles in the whole batch the 16 GEMMs are thin, and reading ``U`` (16 F C values,
# against im2col's 9 F C weights) and making it each call dominate: more than
# MAX_FILTERS_PER_TILE filters per tile of the batch goes to im2col. One image through
# resnet18_v1's 512-channel 7x7 layers (16 tiles): Winograd 7.2 ms, im2col 3.7 ms; 4 images
# (64 tiles) 12.1 against 11.1; 256 channels at 14x14 (49 tiles) 2.6 against 2.9; a CIFAR
# batch of 32 at 4x4 (128 tiles), forward and backward, 71 against 102.
MAX_FILTERS_PER_TILE = 6

# A transformed input of at most KEEP_ELEMENTS values (4 times the input, or more where tiles stick
# out) is kept from the forward pass for the weight gradient; a larger one is made again in the
# backward pass, piece by piece. LeNet's conv2 keeps its 1.2M (one-thread step 18.4 -> 18.1 ms,
# median, in-process A/B); the CIFAR-sized layers' 8.4M each would add 100 MB to the step.
KEEP_ELEMENTS = 1 << 21

# A piece of the batch is as many images as fill PIECE_ELEMENTS values of the larger transformed
# operand, the input's or the output's (one image at least), as im2col's pieces in ``nn``: each
# piece's transforms and GEMMs stay in cache, and the pieces run on the BLAS's thread count
# (``host_threads``).
PIECE_ELEMENTS = 1 << 18

# ... but where the transformed filter ``U`` (16 F C values) is larger than that, a piece takes
# as many values as ``U`` has (up to WEIGHT_PIECE_ELEMENTS): each piece's GEMMs stream all of
# ``U``, and with few tiles an image (ResNet's last stages: 512 channels at 4x4) thin GEMMs read
# it many times over for little work, and the pieces' weight gradients, ``U``'s size each, are
# summed once a piece. A CIFAR ResNet-18's 256- and 512-channel layers' forward and backward:
# 70-76 -> 57-60 ms and 92 -> 62-78 ms on one thread (benchmarks/bench_conv.py --layers).
WEIGHT_PIECE_ELEMENTS = 1 << 22


def applies(x, w, kernel, stride, dilate, groups, out_sp) -> bool:
    """Whether a convolution of ``x`` by ``w`` into ``out_sp`` goes through here."""
    if not (type(x) is numpy.ndarray and x.ndim == 4 and tuple(kernel) == (3, 3)
            and tuple(stride) == (1, 1) and tuple(dilate) == (1, 1) and groups == 1
            and x.dtype in (numpy.float32, numpy.float64) and w.dtype == x.dtype):
        return False
    th, tw = tiles(out_sp)
    return (min(x.shape[1], w.shape[0]) >= MIN_CHANNELS
            and 4 * th * tw <= WASTE * out_sp[0] * out_sp[1]
            and w.shape[0] <= MAX_FILTERS_PER_TILE * x.shape[0] * th * tw)


def convolution(data, weight, bias, pad, relu):
    """The convolution's node: ``data`` ``(N, C, H, W)`` by ``weight`` ``(F, C, 3, 3)``, padded by
    ``pad``, plus ``bias`` (an NDArray or None), then ReLU when ``relu``."""
    x, w = data._data, weight._data
    n, c, h, wd = x.shape
    f = w.shape[0]
    out_sp = (h + 2 * pad[0] - 2, wd + 2 * pad[1] - 2)
    th, tw = tiles(out_sp)
    per_image = th * tw
    budget = max(PIECE_ELEMENTS, min(16 * f * c, WEIGHT_PIECE_ELEMENTS))
    pieces = _host_threads.pieces(n, 16 * max(c, f) * per_image, budget)
    b = None if bias is None else bias._data
    out = numpy.empty((n, f) + out_sp, x.dtype)
    inputs = (data, weight, bias) if bias is not None else (data, weight)
    recording = _recording_for(*inputs)
    kept = [None] * len(pieces) if recording and 16 * c * n * per_image <= KEEP_ELEMENTS else None
    threads = _host_threads.blas_threads() if len(pieces) == 1 else 1
    if not recording and len(pieces) == 1 and 0 < BLOCKS_FILTERS_PER_TILE * n * per_image <= f:
        _filter_blocks(x, w, pad, b, relu, out)
        return _wrap(out, data._ctx)
    split = None
    if threads > 1:
        # Parts that keep to their own data where the transformed input need not be kept, else
        # the three steps (which make it whole).
        u = _own_parts_forward(x, w, pad, b, relu, out, threads) if kept is None else None
        split = (u, None) if u is not None else _split_forward(x, w, pad, b, relu, out, threads)
    if split is not None:
        u, v = split
        if kept is not None:
            kept[0] = _transposed(v)
    else:
        u = filter_transform(w)

    def transformed(a, z):
        return input_transform(x[a:z], pad, numpy.empty((16, c, (z - a) * per_image), x.dtype))

    def forward(i):
        a, z = pieces[i]
        v = transformed(a, z)
        if kept is not None:
            kept[i] = _transposed(v)
        output_transform(numpy.matmul(u, v), out_sp, b, relu, out[a:z])

    if split is None:
        _host_threads.run(len(pieces), forward)
    if not recording:
        return _wrap(out, data._ctx)
    if relu:
        _relu_masks.mark_output(out)

    def vjp(g, needs):
        # A max pooling of ``out`` may have applied the ReLU's mask already (_relu_masks).
        mask = relu and not _relu_masks.take_masked(g)
        # The ReLU's mask is applied piece by piece, on the pieces' threads, and the bias
        # gradient's row sums are taken there too (one kernel pass where it takes the arrays).
        g = numpy.ascontiguousarray(g, x.dtype)
        gm = numpy.empty(out.shape, x.dtype) if mask else g
        # ``U``'s transpose as a view: OpenBLAS packs it as fast as a copy, and the copy, 16 F C
        # values a layer each step, cost more (CIFAR ResNet-18's step 0.965 / 0.929 on 1 / 2
        # threads without it; its 512-channel layers' U is 16 MB).
        ut = u.transpose(0, 2, 1) if needs[0] else None
        gx = numpy.empty(x.shape, x.dtype) if needs[0] else None
        flat = (n, f, math.prod(out_sp))
        g3, out3, gm3 = g.reshape(flat), out.reshape(flat), gm.reshape(flat)
        bias_grad = bias is not None and needs[2]
        # Rows of up to 128 values are summed in one block (longer ones NumPy halves, which the
        # kernel does slower than a NumPy pass over the whole gradient afterwards).
        row_sums = numpy.empty(flat[:2], x.dtype) if bias_grad and flat[2] <= 128 and \
            _ck.takes_grad_rows(g3, out3, mask, gm3) else None

        def backward(i):
            a, z = pieces[i]
            if not _ck.mask_rows(g3, out3, mask, gm3, a, z, row_sums):
                numpy.multiply(g[a:z], out[a:z] > 0, out=gm[a:z])
            zg = grad_transform(gm[a:z], numpy.empty((16, f, (z - a) * per_image), x.dtype))
            if needs[0]:
                input_grad(numpy.matmul(ut, zg), pad, gx[a:z])
            if needs[1]:
                # Made again here, the transform is multiplied as a transposed view: its copy
                # costs more than OpenBLAS saves on it (a 64-channel 32x32 image's piece:
                # 0.46 ms + 0.27 ms copy against 0.59 ms; the same or better at 128 to 512).
                vt = kept[i] if kept is not None else transformed(a, z).transpose(0, 2, 1)
                return numpy.matmul(zg, vt)
            return None

        # The pieces' weight gradients, summed in piece order on any number of threads.
        du = _host_threads.run_summed(len(pieces), backward)
        gb = None
        if row_sums is not None:
            gb = numpy.empty(f, x.dtype)
            _ck.bias_totals(row_sums, gb)
        elif bias_grad:
            gb = gm.reshape(flat).sum(axis=(0, 2))
        gw = filter_grad(du) if needs[1] else None
        return (gx, gw, gb) if bias is not None else (gx, gw)
    return _result(out, data._ctx, inputs, vjp)


# In predict mode (nothing kept for a backward pass), one piece whose transformed filter
# outweighs its transformed input (more filters than tiles: resnet18_v1's 256-channel layers at
# 14x14 for one image) is worked in blocks of filters of about U_BLOCK_ELEMENTS values of ``U``
# each: a block's filter transform, its 16 GEMMs and its outputs' transform follow one another
# while the block is in the core's cache, on any free thread, after the transformed input is
# made once. Made whole first, ``U`` (4 MB for 256 channels) went out to memory and came back
# for the GEMMs, and on two threads each thread made the whole transformed input for its half
# of the filters: that layer 0.87 / 0.83 of the time on one / two threads. Only where the
# filters are BLOCKS_FILTERS_PER_TILE times the tiles or more: each block's GEMMs pack the
# transformed input again, which costs more than the blocks save where it is not small beside
# ``U`` (16 images through a 512-channel 7x7 layer, 2 filters a tile: 1.08-1.2x slower; 4
# images, 8 filters a tile: level). The blocks depend on the sizes alone, never on the thread
# count: the same bits on any number of threads (and without numba). A recorded pass keeps
# ``U`` whole for the backward pass and its tuned paths (blocks were level to 4% slower
# there). Where the blocks' GEMMs are small enough for other BLAS kernels (below SAME_SUMS:
# that layer's are), their outputs can differ in the last bits from the recorded pass's and
# from the same image's in a larger batch (``docs/compat.md``); blocks kept at SAME_SUMS or
# more gave back most of the gain (the layer 0.99 / 0.97).
U_BLOCK_ELEMENTS = 1 << 18
BLOCKS_FILTERS_PER_TILE = 4


def _filter_blocks(x, w, pad, bias, relu, out) -> bool:
    """The forward pass of one piece ``x`` into ``out`` in blocks of filters (done: True)."""
    n, c = x.shape[:2]
    f = w.shape[0]
    out_sp = out.shape[2:]
    th, tw = tiles(out_sp)
    # (made whole on this thread: in parts by channels on two threads it was no faster, the
    # hand-over costing what the second thread saved)
    v = input_transform(x, pad, numpy.empty((16, c, n * th * tw), x.dtype))
    m = numpy.empty((16, f, v.shape[2]), x.dtype)
    blocks = _host_threads.even_pieces(f, max(1, min(f, 16 * f * c // U_BLOCK_ELEMENTS)))

    def block(i):
        f0, f1 = blocks[i]
        numpy.matmul(filter_transform(w[f0:f1]), v, out=m[:, f0:f1])
        if not _wk.output_transform(m, bias, relu, out, (f0, f1)):
            output_transform(m[:, f0:f1], out_sp, None if bias is None else bias[f0:f1], relu,
                             out[:, f0:f1])

    _host_threads.run(len(blocks), block)
    return True


# A batch of one piece (one image, most often) on several threads is worked in three steps,
# each split into independent parts: the filter's and the input's transforms by ranges of
# (filter, channel) pairs and of channels, the 16 GEMMs one by one, the output transform by
# ranges of filters. Each element's arithmetic, and each GEMM's call, is the one piece's: the
# same bits as on one thread. A transform is cut into about SPLIT_PARTS parts a thread (the
# threads take the next part left, so one slowed by other work takes fewer), the filter's into
# runs of FILTER_SPLIT pairs at least (64 x 64 channels: 0.03 ms, not worth a hand-over).
SPLIT_PARTS = 2
FILTER_SPLIT = 1 << 14


def _split_forward(x, w, pad, bias, relu, out, threads):
    """The forward pass of one piece of ``x`` into ``out`` on ``threads`` threads, in parts;
    ``(U, the transformed input)``, or None where the kernels do not take these arrays."""
    n, c = x.shape[:2]
    f = w.shape[0]
    th, tw = tiles(out.shape[2:])
    count = n * th * tw
    u = numpy.empty((16, f, c), x.dtype)
    v = numpy.empty((16, c, count), x.dtype)
    m = numpy.empty((16, f, count), x.dtype)
    if not (_wk.takes(x, v) and _wk.takes(m, out, bias)):
        return None
    parts = SPLIT_PARTS * threads
    pairs = _host_threads.pieces(f * c, 1, max(FILTER_SPLIT, -(-f * c // parts)))
    if not _wk.takes(w, u):        # too few weights for the kernel: NumPy's, before the parts
        u, pairs = filter_transform(w), []
    channels = _host_threads.even_pieces(c, min(c, parts))

    def transform(i):
        if i < len(pairs):
            _wk.filter_transform(w, u, pairs[i])
        else:
            _wk.input_transform(x, pad, v, channels[i - len(pairs)])

    def product(k):
        numpy.matmul(u[k], v[k], out=m[k])

    filters = _host_threads.even_pieces(f, min(f, parts))
    _host_threads.run(len(pairs) + len(channels), transform)
    _host_threads.run(16, product)
    _host_threads.run(len(filters), lambda i: _wk.output_transform(m, bias, relu, out,
                                                                     filters[i]))
    return u, v


# OpenBLAS sums a product of at least this many multiply-adds in the same order however its rows
# or columns are cut (its general kernels); smaller ones may go to its small-matrix kernels
# (SkylakeX: up to 100**3), which sum in another order. A part's GEMMs stay at or above it, so
# that its outputs are the whole product's bits.
SAME_SUMS = 1 << 20


def _own_parts_forward(x, w, pad, bias, relu, out, threads):
    """The forward pass of one piece of ``x`` into ``out`` in one part a thread, each part
    working its own share from the transforms through the GEMMs to the output, so that what a
    part reads it made itself, in its core's cache (the three steps of ``_split_forward`` hand
    half of every operand to the other core, and take three hand-overs): bands of tile rows
    where the transformed filter ``U`` is smaller than the transformed input (each band reads
    all of ``U``, made first), else ranges of filters (each makes the whole transformed input,
    and its filters' rows of ``U``). Returns ``U``, or None where the parts' GEMMs would be too
    small to keep the whole product's bits, or the kernels do not take these arrays."""
    n, c = x.shape[:2]
    f = w.shape[0]
    th, tw = tiles(out.shape[2:])
    count = n * th * tw
    by_rows = f <= count
    parts = min(threads, th if by_rows else f, f * c * count // SAME_SUMS)
    if parts < 2:
        return None
    shares = _host_threads.even_pieces(th if by_rows else f, parts)
    smallest = min(z - a for a, z in shares) * (f * c * n * tw if by_rows else c * count)
    u = numpy.empty((16, f, c), x.dtype)
    if smallest < SAME_SUMS or not (_wk.takes(w, u) and _wk.takes(x, u) and
                                    _wk.takes(u, out, bias)):
        return None
    if by_rows:
        _wk.filter_transform(w, u)

        def part(i):
            i0, i1 = shares[i]
            v = numpy.empty((16, c, n * (i1 - i0) * tw), x.dtype)
            _wk.input_transform(x, pad, v, rows=shares[i])
            _wk.output_transform(numpy.matmul(u, v), bias, relu, out, rows=shares[i])
    else:
        m = numpy.empty((16, f, count), x.dtype)

        def part(i):
            f0, f1 = shares[i]
            _wk.filter_transform(w, u, (f0 * c, f1 * c))
            v = numpy.empty((16, c, count), x.dtype)
            _wk.input_transform(x, pad, v)
            numpy.matmul(u[:, f0:f1], v, out=m[:, f0:f1])
            _wk.output_transform(m, bias, relu, out, shares[i])
    _host_threads.run(parts, part)
    return u


def _transposed(v):
    """The transformed input ``(16, C, tiles)`` as the weight gradient's GEMMs take it: a
    contiguous ``(16, tiles, C)`` copy. OpenBLAS multiplies by it faster than by the transposed
    view, copy included (a LeNet piece's 16 GEMMs 0.25 -> 0.15 ms, the copy 0.05 ms); the copy
    kept from the forward pass is made there, while the transform is still in cache (made in
    the backward pass, it took 0.12 ms a piece). Not so for im2col's GEMMs, which keep the view."""
    return numpy.ascontiguousarray(v.transpose(0, 2, 1))


# ----------------------------------------------------------------------------- the filter
def filter_transform(w):
    """``U = G w G^T`` of ``w`` ``(F, C, 3, 3)``, as ``(16, F, C)``."""
    f, c = w.shape[:2]
    u = numpy.empty((4, 4, f, c), w.dtype)
    if _wk.filter_transform(w, u):
        return u.reshape(16, f, c)
    rows = _g_rows(w[:, :, 0], w[:, :, 1], w[:, :, 2])           # 4 x (F, C, 3)
    for a, r in enumerate(rows):
        for b, value in enumerate(_g_rows(r[..., 0], r[..., 1], r[..., 2])):
            u[a, b] = value
    return u.reshape(16, f, c)


def _g_rows(g0, g1, g2):
    half = g0.dtype.type(0.5)
    return g0, (g0 + g1 + g2) * half, (g0 - g1 + g2) * half, g2


def filter_grad(du):
    """``G^T dU G`` of ``du`` ``(16, F, C)``, the weight gradient ``(F, C, 3, 3)``."""
    f, c = du.shape[1:]
    out = numpy.empty((f, c, 3, 3), du.dtype)
    if _wk.filter_grad(du, out):
        return out
    du = du.reshape(4, 4, f, c)
    rows = _gt_rows(du[0], du[1], du[2], du[3])                   # 3 x (4, F, C)
    for r, row in enumerate(rows):
        for s, value in enumerate(_gt_rows(row[0], row[1], row[2], row[3])):
            out[:, :, r, s] = value
    return out


def _gt_rows(d0, d1, d2, d3):
    half = d0.dtype.type(0.5)
    return d0 + (d1 + d2) * half, (d1 - d2) * half, (d1 + d2) * half + d3


# ----------------------------------------------------------------------------- the data
def input_transform(x, pad, out):
    """``out`` ``(16, C, N * tiles)`` = ``B^T d B`` of each tile's 4x4 block ``d`` of ``x``
    ``(N, C, H, W)`` padded by ``pad``; tiles in (image, row, column) order."""
    if _wk.input_transform(x, pad, out):
        return out
    n, c, h, w = x.shape
    th, tw = tiles((h + 2 * pad[0] - 2, w + 2 * pad[1] - 2))
    xpad = numpy.zeros((n, c, 2 * th + 2, 2 * tw + 2), x.dtype)
    xpad[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x
    d = [[xpad[:, :, u:u + 2 * th:2, v:v + 2 * tw:2] for v in range(4)] for u in range(4)]
    rows = [_bt_rows(*d[u]) for u in range(4)]           # d B: along each row of the block
    view = out.reshape(4, 4, c, n, th, tw)
    for b in range(4):
        for a, value in enumerate(_bt_rows(*(rows[u][b] for u in range(4)))):
            view[a, b] = value.transpose(1, 0, 2, 3)
    return out


def _bt_rows(d0, d1, d2, d3):
    return d0 - d2, d1 + d2, d2 - d1, d1 - d3


def output_transform(m, out_sp, bias, relu, out):
    """``out`` ``(N, F, oh, ow)`` = ``A^T m A`` of each tile's 4x4 block of ``m``
    ``(16, F, N * tiles)``, plus ``bias``, then ReLU when ``relu``."""
    if _wk.output_transform(m, bias, relu, out):
        return out
    n, f = out.shape[:2]
    th, tw = tiles(out_sp)
    blocks = m.reshape(4, 4, f, n, th, tw)
    cols = [_at_rows(*blocks[:, b]) for b in range(4)]   # A^T m: down each column of the block
    full = numpy.empty((n, f, 2 * th, 2 * tw), m.dtype)
    for r in range(2):
        for s, value in enumerate(_at_rows(*(cols[b][r] for b in range(4)))):
            full[:, :, r::2, s::2] = value.transpose(1, 0, 2, 3)
    out[...] = full[:, :, :out_sp[0], :out_sp[1]]
    if bias is not None:
        out += bias.reshape(1, f, 1, 1)
    if relu:
        numpy.maximum(out, 0, out=out)
    return out


def _at_rows(m0, m1, m2, m3):
    return m0 + m1 + m2, m1 - m2 - m3


def grad_transform(g, out):
    """``out`` ``(16, F, N * tiles)`` = ``A g A^T`` of each tile's 2x2 block of ``g``
    ``(N, F, oh, ow)`` (zeros where a tile sticks out)."""
    if _wk.grad_transform(g, out):
        return out
    n, f, oh, ow = g.shape
    th, tw = tiles((oh, ow))
    gpad = numpy.zeros((n, f, 2 * th, 2 * tw), g.dtype)
    gpad[:, :, :oh, :ow] = g
    rows = [_a_rows(gpad[:, :, r::2, 0::2], gpad[:, :, r::2, 1::2]) for r in range(2)]  # g A^T
    view = out.reshape(4, 4, f, n, th, tw)
    for b in range(4):
        for a, value in enumerate(_a_rows(rows[0][b], rows[1][b])):
            view[a, b] = value.transpose(1, 0, 2, 3)
    return out


def _a_rows(g0, g1):
    return g0, g0 + g1, g0 - g1, -g1


def input_grad(dv, pad, gx):
    """``gx`` ``(N, C, H, W)`` = ``B dv B^T`` of each tile's 4x4 block of ``dv``
    ``(16, C, N * tiles)``, added over the overlapping blocks: first along each row of tiles
    (each element: +0.0, then the right-hand tile's term, then the left-hand one's), then those
    rows down the column of tile rows (+0.0, the lower row's, the upper row's)."""
    if _wk.input_grad(dv, pad, gx):
        return gx
    n, c, h, w = gx.shape
    th, tw = tiles((h + 2 * pad[0] - 2, w + 2 * pad[1] - 2))
    blocks = dv.reshape(4, 4, c, n, th, tw)
    cols = [_b_rows(*blocks[:, b]) for b in range(4)]     # B dv: down each column of the block
    dd = [_b_rows(*(cols[b][u] for b in range(4))) for u in range(4)]   # then along each row
    across = numpy.zeros((4, c, n, th, 2 * tw + 2), dv.dtype)
    for u in range(4):
        for v in range(4):
            across[u, :, :, :, v:v + 2 * tw:2] += dd[u][v]
    gpad = numpy.zeros((c, n, 2 * th + 2, 2 * tw + 2), dv.dtype)
    for u in range(4):
        gpad[:, :, u:u + 2 * th:2] += across[u]
    gx[...] = gpad[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w].transpose(1, 0, 2, 3)
    return gx


def _b_rows(v0, v1, v2, v3):
    return v0, v1 - v2 + v3, v1 + v2 - v0, -v3
