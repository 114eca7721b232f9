"""The data transforms of ``winograd`` in one pass each, on the CPU (numba).

Each loop does, for every element, the additions and subtractions of its NumPy reference in
``winograd`` in the same order, in the arrays' own precision (the zeros of the padding are passed
in as that dtype's zero, so that no operation widens to float64); the results are bitwise equal,
signed zeros included (``tests/test_winograd.py``). Sums over overlapping tiles keep the
reference's order too: in ``input_grad`` the tiles are visited right to left and bottom to top,
which is the order in which the reference's strided adds reach each element.

Each transform is two stages, each its own loop into or out of a buffer, so that LLVM vectorizes
every one; a loop over tiles that computed and stored a whole tile's 16 values ran 4-5x slower
(its 16 scattered stores stayed scalar). The stage that reads or writes the 16 GEMM operands
runs over all of a channel's tiles in the piece at once, the other one along each image row:
the rows are short (6 tiles in an 11x11 output), and loops that long cost more in their set-up
than in their work. Every function returns False where it does not apply (no
numba, another dtype or array library, a non-contiguous array); the caller then runs NumPy.
"""
from __future__ import annotations

import numpy

from .. import _jit
from . import _conv_kernels as _ck

__all__ = ["tiles", "takes", "filter_transform", "filter_grad", "input_transform",
           "output_transform", "grad_transform", "input_grad"]

_U = numpy.uint64


_usable = _ck._usable


def tiles(out_sp):
    """The tile rows and columns covering an output of ``out_sp`` (the last ones may stick out;
    their extra outputs are computed from zero padding and dropped)."""
    return (out_sp[0] + 1) // 2, (out_sp[1] + 1) // 2


def takes(*arrays) -> bool:
    """Whether every kernel takes ``arrays`` (None skipped): each C-contiguous and of the first
    one's dtype, the first one large enough, numba there."""
    return _usable(*arrays)


def filter_transform(w, u, pairs=None) -> bool:
    """``pairs``: ``(start, stop)``, the run of (filter, channel) pairs to transform (all by
    default); each pair's arithmetic does not depend on the run it falls in."""
    if not _usable(w, u):
        return False
    f, c = w.shape[:2]
    lo, hi = (0, f * c) if pairs is None else pairs
    _filter(w.reshape(-1), f * c, lo, hi, w.dtype.type(0.5),
            numpy.empty(16 * FILTER_BLOCK, w.dtype), u.reshape(-1))
    return True


def filter_grad(du, out) -> bool:
    if not _usable(du, out):
        return False
    _filter_grad(du.reshape(-1), du.shape[1] * du.shape[2], du.dtype.type(0.5),
                 numpy.empty(16 * FILTER_BLOCK, du.dtype), out.reshape(-1))
    return True


# Filter transforms work on runs of this many (filter, channel) pairs: 16 rows of them, 24 KiB of
# float32. Per forward pass, 64 x 32 channels: 0.111 -> 0.014 ms (backward 0.042 -> 0.014 ms);
# 256 x 256: 2.9 -> 0.47 ms (0.88 -> 0.37 ms).
FILTER_BLOCK = 384


def input_transform(x, pad, out, channels=None, rows=None) -> bool:
    """``channels``: ``(start, stop)``, the channels to transform (all by default); ``rows``:
    ``(start, stop)``, only those tile rows of each image, ``out`` then ``(16, C, N * (stop -
    start) * tiles a row)``."""
    if not _usable(x, out):
        return False
    n, c, h, w = x.shape
    c0, c1 = (0, c) if channels is None else channels
    th, tw = tiles((h + 2 * pad[0] - 2, w + 2 * pad[1] - 2))
    i0, i1 = (0, th) if rows is None else rows
    _input(x.reshape(-1), n, c, h, w, pad[0], pad[1], i0, i1, tw, c0, c1, x.dtype.type(0),
           numpy.empty(2 * tw + 2, x.dtype), numpy.empty(16 * n * (i1 - i0) * tw, x.dtype),
           out.reshape(-1))
    return True


def output_transform(m, bias, relu, out, filters=None, rows=None) -> bool:
    """``filters``: ``(start, stop)``, the filters whose outputs to make (all by default);
    ``rows``: ``(start, stop)``, ``m`` holds only those tile rows of each image (as
    ``input_transform`` makes them), whose output rows are made."""
    if not _usable(m, out, bias):
        return False
    n, f, oh, ow = out.shape
    f0, f1 = (0, f) if filters is None else filters
    th, tw = tiles((oh, ow))
    i0, i1 = (0, th) if rows is None else rows
    t_ = n * (i1 - i0) * tw
    _output(m.reshape(-1), n, f, oh, ow, i0, i1, tw, f0, f1,
            m.reshape(-1)[:f] if bias is None else bias,
            bias is not None, relu, numpy.empty(8 * t_, m.dtype),
            numpy.empty(4 * t_, m.dtype), out.reshape(-1))
    return True


def grad_transform(g, out) -> bool:
    if not _usable(g, out):
        return False
    n, f, oh, ow = g.shape
    th, tw = tiles((oh, ow))
    _grad(g.reshape(-1), n, f, oh, ow, th, tw, g.dtype.type(0),
          numpy.empty(4 * n * th * tw * tw, g.dtype), numpy.empty(8 * n * th * tw, g.dtype),
          out.reshape(-1))
    return True


def input_grad(dv, pad, gx) -> bool:
    if not _usable(dv, gx):
        return False
    n, c, h, w = gx.shape
    th, tw = tiles((h + 2 * pad[0] - 2, w + 2 * pad[1] - 2))
    t_ = n * th * tw
    first = numpy.zeros(t_, numpy.uint8)
    first[::tw] = 1
    _input_grad(dv.reshape(-1), n, c, h, w, pad[0], pad[1], th, tw, gx.dtype.type(0),
                numpy.empty(16 * t_, gx.dtype), first, numpy.empty(8 * t_, gx.dtype),
                numpy.empty(8 * n * th, gx.dtype), gx.reshape(-1))
    return True


# ----------------------------------------------------------------------------- the loops
def _input_loop(x, n_, c_, h_, w_, ph, pw, i0, i1, tw, c0, c1, zero, row, r, out):
    # row: an input row, padded; r: d B along every row of one channel's tiles
    # (winograd._bt_rows), 16 x T, [4 u + k][tile] for the block's row u. Only the tile rows
    # i0 <= i < i1 of each image: T counts those.
    th = i1 - i0
    t_ = n_ * th * tw
    step = c_ * t_              # from one block position's GEMM operand to the next
    width = 2 * tw + 2
    lo, hi = min(width, pw), min(width, pw + w_)
    for c in range(c0, c1):
        for n in range(n_):
            src = (n * c_ + c) * h_ * w_
            for i in range(i0, i1):
                for u in range(4):
                    h = 2 * i + u - ph
                    if 0 <= h < h_:
                        at = src + h * w_ - pw
                        for q in range(lo):
                            row[_U(q)] = zero
                        for q in range(lo, hi):
                            row[_U(q)] = x[_U(at + q)]
                        for q in range(hi, width):
                            row[_U(q)] = zero
                    else:
                        for q in range(width):
                            row[_U(q)] = zero
                    to = 4 * u * t_ + (n * th + i - i0) * tw
                    for j in range(tw):
                        d0, d1 = row[_U(2 * j)], row[_U(2 * j + 1)]
                        d2, d3 = row[_U(2 * j + 2)], row[_U(2 * j + 3)]
                        r[_U(to + j)] = d0 - d2
                        r[_U(to + t_ + j)] = d1 + d2
                        r[_U(to + 2 * t_ + j)] = d2 - d1
                        r[_U(to + 3 * t_ + j)] = d1 - d3
        at = c * t_
        for b in range(4):      # then B^T down each column
            r0, r1, r2, r3 = b * t_, (4 + b) * t_, (8 + b) * t_, (12 + b) * t_
            o0, o1 = at + b * step, at + (4 + b) * step
            o2, o3 = at + (8 + b) * step, at + (12 + b) * step
            for t in range(t_):
                out[_U(o0 + t)] = r[_U(r0 + t)] - r[_U(r2 + t)]
            for t in range(t_):
                out[_U(o1 + t)] = r[_U(r1 + t)] + r[_U(r2 + t)]
            for t in range(t_):
                out[_U(o2 + t)] = r[_U(r2 + t)] - r[_U(r1 + t)]
            for t in range(t_):
                out[_U(o3 + t)] = r[_U(r1 + t)] - r[_U(r3 + t)]


def _output_loop(m, n_, f_, oh, ow, i0, i1, tw, f0, f1, bias, with_bias, relu, a, y, out):
    # a: A^T m down each column of one filter's tiles (winograd._at_rows), 8 x T, [4 r + b][tile]
    # for the output row r; y: then A along them, 2 x T x 2 (a tile's two outputs of row r side
    # by side: every tile row's row r, 2tw wide), in one loop over the piece's tiles each, as
    # ``_grad_loop``'s rows; then each output row takes the epilogue. m holds only the tile
    # rows i0 <= i < i1 of each image, which make the output rows 2 i0 to 2 i1.
    th = i1 - i0
    t_ = n_ * th * tw
    step = f_ * t_
    width = 2 * tw
    for f in range(f0, f1):
        k = f * t_
        for b in range(4):
            m0, m1, m2, m3 = k + b * step, k + (4 + b) * step, k + (8 + b) * step, \
                k + (12 + b) * step
            for t in range(t_):
                a[_U(b * t_ + t)] = m[_U(m0 + t)] + m[_U(m1 + t)] + m[_U(m2 + t)]
            for t in range(t_):
                a[_U((4 + b) * t_ + t)] = m[_U(m1 + t)] - m[_U(m2 + t)] - m[_U(m3 + t)]
        for r in range(2):      # then along each row
            base, to = 4 * r * t_, 2 * r * t_
            for t in range(t_):
                a0, a1 = a[_U(base + t)], a[_U(base + t_ + t)]
                a2, a3 = a[_U(base + 2 * t_ + t)], a[_U(base + 3 * t_ + t)]
                y[_U(to + 2 * t)] = a0 + a1 + a2
                y[_U(to + 2 * t + 1)] = a1 - a2 - a3
        bv = bias[f]
        for n in range(n_):
            dst = (n * f_ + f) * oh * ow
            for i in range(i0, i1):
                for r in range(2):
                    if 2 * i + r >= oh:
                        continue
                    at, src = dst + (2 * i + r) * ow, 2 * r * t_ + (n * th + i - i0) * width
                    for q in range(ow):
                        # conv_epilogue's: the bias added, then NumPy's maximum(v, 0)
                        v = y[_U(src + q)]
                        if with_bias:
                            v = v + bv
                        if relu and not (v > 0 or v != v):
                            v = 0
                        out[_U(at + q)] = v


def _grad_loop(g, n_, f_, oh, ow, th, tw, zero, rows, r, out):
    # rows: one filter's gradient rows, zeros past the output (2tw wide: a tile's two columns
    # side by side), every tile row's first row, then every tile row's second; r: g A^T along
    # them (winograd._a_rows), 8 x T, [4 s + b][tile] for the tile's row s. Laid out so, a tile's
    # pair of a parity's rows sits at 2 t, 2 t + 1, and g A^T is one loop over the piece's tiles
    # (a loop per row had 6 tiles in an 11x11 output: 2x slower).
    t_ = n_ * th * tw
    step = f_ * t_
    width = 2 * tw
    half = t_ * width
    for f in range(f_):
        for n in range(n_):
            src = (n * f_ + f) * oh * ow
            for i in range(th):
                for s in range(2):
                    to = s * half + (n * th + i) * width
                    if 2 * i + s < oh:
                        at = src + (2 * i + s) * ow
                        for q in range(ow):
                            rows[_U(to + q)] = g[_U(at + q)]
                        for q in range(ow, width):
                            rows[_U(to + q)] = zero
                    else:
                        for q in range(width):
                            rows[_U(to + q)] = zero
        for s in range(2):
            at, to = s * half, 4 * s * t_
            for t in range(t_):
                g0, g1 = rows[_U(at + 2 * t)], rows[_U(at + 2 * t + 1)]
                r[_U(to + t)] = g0
                r[_U(to + t_ + t)] = g0 + g1
                r[_U(to + 2 * t_ + t)] = g0 - g1
                r[_U(to + 3 * t_ + t)] = -g1
        at = f * t_
        for b in range(4):      # then A down each column
            r0, r1 = b * t_, (4 + b) * t_
            o0, o1 = at + b * step, at + (4 + b) * step
            o2, o3 = at + (8 + b) * step, at + (12 + b) * step
            for t in range(t_):
                out[_U(o0 + t)] = r[_U(r0 + t)]
            for t in range(t_):
                out[_U(o1 + t)] = r[_U(r0 + t)] + r[_U(r1 + t)]
            for t in range(t_):
                out[_U(o2 + t)] = r[_U(r0 + t)] - r[_U(r1 + t)]
            for t in range(t_):
                out[_U(o3 + t)] = -r[_U(r1 + t)]


def _input_grad_loop(dv, n_, c_, h_, w_, ph, pw, th, tw, zero, dd, first, across, tail, gx):
    # dd: B dv B^T of one channel's tiles (winograd._b_rows down each column, then along each
    # row), 16 x T, [4 u + v][tile]. across: for each block row u, a tile row's row u added along
    # it, 4 x T x 2: columns 2j and 2j + 1 (block j's values, then block j - 1's two to the right)
    # side by side at 2t, 2t + 1, in one loop over the piece's tiles; tail: each row's two last
    # columns (the last block's alone), 4 x rows x 2. first: 1 for a row's first tile. Then each
    # input row takes its lower tile row's row and its upper tile row's, in one loop along it.
    # (A loop per tile row and block row did the adding along rows: 6 tiles in LeNet's conv2,
    # 2x slower.)
    t_ = n_ * th * tw
    step = c_ * t_
    rows = n_ * th
    for c in range(c_):
        k = c * t_
        # B dv's rows: dv's row 0; rows 1 - 2 + 3; rows 1 + 2 - 0; -row 3 (a loop each: one
        # loop with the choice inside ran 1.9x slower)
        for t in range(t_):
            q = k + t
            _dd_row(dd, t, t_, dv[_U(q)], dv[_U(q + step)], dv[_U(q + 2 * step)],
                    dv[_U(q + 3 * step)])
        for t in range(t_):
            q = k + t
            _dd_row(dd, 4 * t_ + t, t_,
                    dv[_U(q + 4 * step)] - dv[_U(q + 8 * step)] + dv[_U(q + 12 * step)],
                    dv[_U(q + 5 * step)] - dv[_U(q + 9 * step)] + dv[_U(q + 13 * step)],
                    dv[_U(q + 6 * step)] - dv[_U(q + 10 * step)] + dv[_U(q + 14 * step)],
                    dv[_U(q + 7 * step)] - dv[_U(q + 11 * step)] + dv[_U(q + 15 * step)])
        for t in range(t_):
            q = k + t
            _dd_row(dd, 8 * t_ + t, t_,
                    dv[_U(q + 4 * step)] + dv[_U(q + 8 * step)] - dv[_U(q)],
                    dv[_U(q + 5 * step)] + dv[_U(q + 9 * step)] - dv[_U(q + step)],
                    dv[_U(q + 6 * step)] + dv[_U(q + 10 * step)] - dv[_U(q + 2 * step)],
                    dv[_U(q + 7 * step)] + dv[_U(q + 11 * step)] - dv[_U(q + 3 * step)])
        for t in range(t_):
            q = k + t
            _dd_row(dd, 12 * t_ + t, t_, -dv[_U(q + 12 * step)], -dv[_U(q + 13 * step)],
                    -dv[_U(q + 14 * step)], -dv[_U(q + 15 * step)])
        for u in range(4):
            d0, d1, d2, d3 = 4 * u * t_, (4 * u + 1) * t_, (4 * u + 2) * t_, (4 * u + 3) * t_
            to = 2 * u * t_
            # Column 2j + v takes block j's v-th value (+0.0 first), then block j - 1's
            # (v + 2)-th. At a row's first tile the neighbour loaded is the row above's last
            # tile's: read, and not used.
            across[_U(to)] = zero + dd[_U(d0)]
            across[_U(to + 1)] = zero + dd[_U(d1)]
            for t in range(1, t_):
                own0, own1 = zero + dd[_U(d0 + t)], zero + dd[_U(d1 + t)]
                left0, left1 = own0 + dd[_U(d2 + t - 1)], own1 + dd[_U(d3 + t - 1)]
                alone = first[_U(t)] != 0
                across[_U(to + 2 * t)] = own0 if alone else left0
                across[_U(to + 2 * t + 1)] = own1 if alone else left1
            for r in range(rows):
                last = r * tw + tw - 1
                tail[_U((u * rows + r) * 2)] = zero + dd[_U(d2 + last)]
                tail[_U((u * rows + r) * 2 + 1)] = zero + dd[_U(d3 + last)]
        for n in range(n_):
            dst = (n * c_ + c) * h_ * w_
            for h in range(h_):
                # Padded row h + ph: row u1 of tile row i1 (the lower), then row u1 + 2 of
                # tile row i1 - 1 (the upper), each where it exists, added to +0.0 in that order.
                i1, u1 = (h + ph) // 2, (h + ph) % 2
                lower, upper = i1 < th, i1 >= 1
                at = dst + h * w_
                a1 = 2 * u1 * t_ + 2 * (n * th + i1) * tw
                a0 = 2 * (u1 + 2) * t_ + 2 * (n * th + i1 - 1) * tw
                inner = min(w_, 2 * tw - pw)      # columns taken from ``across``, then ``tail``
                if lower and upper:
                    for q in range(inner):
                        gx[_U(at + q)] = (zero + across[_U(a1 + pw + q)]) + across[_U(a0 + pw + q)]
                elif lower:
                    for q in range(inner):
                        gx[_U(at + q)] = zero + across[_U(a1 + pw + q)]
                else:
                    for q in range(inner):
                        gx[_U(at + q)] = zero + across[_U(a0 + pw + q)]
                for q in range(max(inner, 0), w_):
                    col = q + pw - 2 * tw
                    v = zero
                    if lower:
                        v = v + tail[_U((u1 * rows + n * th + i1) * 2 + col)]
                    if upper:
                        v = v + tail[_U(((u1 + 2) * rows + n * th + i1 - 1) * 2 + col)]
                    gx[_U(at + q)] = v


def _filter_loop(w, m_, lo, hi, half, block, u):
    # For each filter and channel k, G w G^T of its 3x3 block (winograd._g_rows down each of
    # the block's columns, then along each row), into u (16, K). A run of ``block`` values of k
    # at a time goes to ``block`` (16 rows) first, then to u row by row: u's 16 rows are K values
    # apart, often a power of two, and 16 streams stored that far apart at once thrash the
    # cache's sets.
    size = block.shape[0] // 16
    for k0 in range(lo, hi, size):
        n = min(size, hi - k0)
        for j in range(n):
            at = 9 * (k0 + j)
            a00, a10, a20, a30 = _g4(w[_U(at)], w[_U(at + 3)], w[_U(at + 6)], half)
            a01, a11, a21, a31 = _g4(w[_U(at + 1)], w[_U(at + 4)], w[_U(at + 7)], half)
            a02, a12, a22, a32 = _g4(w[_U(at + 2)], w[_U(at + 5)], w[_U(at + 8)], half)
            _row4(block, j, size, 0, _g4(a00, a01, a02, half))
            _row4(block, j, size, 1, _g4(a10, a11, a12, half))
            _row4(block, j, size, 2, _g4(a20, a21, a22, half))
            _row4(block, j, size, 3, _g4(a30, a31, a32, half))
        for r in range(16):
            for j in range(n):
                u[_U(r * m_ + k0 + j)] = block[_U(r * size + j)]


def _g4(g0, g1, g2, half):
    return g0, (g0 + g1 + g2) * half, (g0 - g1 + g2) * half, g2


def _row4(block, j, size, a, values):
    for b in range(4):
        block[_U((4 * a + b) * size + j)] = values[b]


def _filter_grad_loop(du, m_, half, block, out):
    # For each filter and channel k, G^T dU G of its 4x4 block (winograd._gt_rows down each
    # column, then along each row), into out (K, 3, 3); du's 16 rows read a run of k at a time
    # into ``block`` first (see _filter_loop).
    size = block.shape[0] // 16
    for k0 in range(0, m_, size):
        n = min(size, m_ - k0)
        for r in range(16):
            for j in range(n):
                block[_U(r * size + j)] = du[_U(r * m_ + k0 + j)]
        for j in range(n):
            r00, r10, r20 = _gt3(block[_U(j)], block[_U(4 * size + j)], block[_U(8 * size + j)],
                                 block[_U(12 * size + j)], half)
            r01, r11, r21 = _gt3(block[_U(size + j)], block[_U(5 * size + j)],
                                 block[_U(9 * size + j)], block[_U(13 * size + j)], half)
            r02, r12, r22 = _gt3(block[_U(2 * size + j)], block[_U(6 * size + j)],
                                 block[_U(10 * size + j)], block[_U(14 * size + j)], half)
            r03, r13, r23 = _gt3(block[_U(3 * size + j)], block[_U(7 * size + j)],
                                 block[_U(11 * size + j)], block[_U(15 * size + j)], half)
            at = 9 * (k0 + j)
            _row3(out, at, _gt3(r00, r01, r02, r03, half))
            _row3(out, at + 3, _gt3(r10, r11, r12, r13, half))
            _row3(out, at + 6, _gt3(r20, r21, r22, r23, half))


def _gt3(d0, d1, d2, d3, half):
    return d0 + (d1 + d2) * half, (d1 - d2) * half, (d1 + d2) * half + d3


def _row3(out, at, values):
    for s in range(3):
        out[_U(at + s)] = values[s]


def _dd_row(dd, at, t_, e0, e1, e2, e3):
    # One row of B dv along it (winograd._b_rows): a tile's row of B dv B^T.
    dd[_U(at)] = e0
    dd[_U(at + t_)] = e1 - e2 + e3
    dd[_U(at + 2 * t_)] = e1 + e2 - e0
    dd[_U(at + 3 * t_)] = -e3


_filter = _jit.Kernel(_filter_loop, {"_g4": _jit.Kernel(_g4, inline=True),
                                     "_row4": _jit.Kernel(_row4, inline=True)})
_filter_grad = _jit.Kernel(_filter_grad_loop, {"_gt3": _jit.Kernel(_gt3, inline=True),
                                               "_row3": _jit.Kernel(_row3, inline=True)})
_input = _jit.Kernel(_input_loop)
_output = _jit.Kernel(_output_loop)
_grad = _jit.Kernel(_grad_loop)
_input_grad = _jit.Kernel(_input_grad_loop, {"_dd_row": _jit.Kernel(_dd_row, inline=True)})
