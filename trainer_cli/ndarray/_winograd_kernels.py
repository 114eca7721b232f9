"""The data transforms of ``winograd`` in one pass each, on the CPU (numba).

Each loop does, for every element, the additions and subtractions of its NumPy reference in
``winograd`` in the same order, in the arrays' own precision (the zeros of the padding are passed
in as that dtype's zero, so that no operation widens to float64); the results are bitwise equal,
signed zeros included (``tests/test_winograd.py``). Sums over overlapping tiles keep the
reference's order too: in ``input_grad`` the tiles are visited right to left and bottom to top,
which is the order in which the reference's strided adds reach each element.

The loops work a row of tiles at a time, each stage as its own loop over the row's tiles into a
small buffer (the padded input rows, a transform's first stage), so that LLVM vectorizes every
one; a loop over tiles that computed and stored a whole tile's 16 values ran 4-5x slower (its
16 scattered stores stayed scalar). Every function returns False where it does not apply (no
numba, another dtype or array library, a non-contiguous array); the caller then runs NumPy.
"""
from __future__ import annotations

import numpy

from .. import _jit
from . import _conv_kernels as _ck

__all__ = ["input_transform", "output_transform", "grad_transform", "input_grad"]

_U = numpy.uint64


_usable = _ck._usable


def input_transform(x, pad, out) -> bool:
    if not _usable(x, out):
        return False
    n, c, h, w = x.shape
    th, tw = (h + 2 * pad[0] - 1) // 2, (w + 2 * pad[1] - 1) // 2
    _input(x.reshape(-1), n, c, h, w, pad[0], pad[1], th, tw, x.dtype.type(0),
           numpy.empty(4 * (2 * tw + 2), x.dtype), numpy.empty(16 * tw, x.dtype), out.reshape(-1))
    return True


def output_transform(m, bias, relu, out) -> bool:
    if not _usable(m, out, bias):
        return False
    n, f, oh, ow = out.shape
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    _output(m.reshape(-1), n, f, oh, ow, th, tw, m.reshape(-1)[:f] if bias is None else bias,
            bias is not None, relu, numpy.empty(8 * tw, m.dtype), numpy.empty(4 * tw, m.dtype),
            out.reshape(-1))
    return True


def grad_transform(g, out) -> bool:
    if not _usable(g, out):
        return False
    n, f, oh, ow = g.shape
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    _grad(g.reshape(-1), n, f, oh, ow, th, tw, g.dtype.type(0), numpy.empty(4 * tw, g.dtype),
          numpy.empty(8 * tw, g.dtype), out.reshape(-1))
    return True


def input_grad(dv, pad, gx) -> bool:
    if not _usable(dv, gx):
        return False
    n, c, h, w = gx.shape
    th, tw = (h + 2 * pad[0] - 1) // 2, (w + 2 * pad[1] - 1) // 2
    _input_grad(dv.reshape(-1), n, c, h, w, pad[0], pad[1], th, tw, gx.dtype.type(0),
                numpy.empty(16 * tw, gx.dtype), numpy.empty(4 * tw, gx.dtype),
                numpy.empty(4 * (2 * tw + 2), gx.dtype), gx.reshape(-1))
    return True


# ----------------------------------------------------------------------------- the loops
def _input_loop(x, n_, c_, h_, w_, ph, pw, th, tw, zero, rows, r, out):
    # rows: the 4 input rows of a row of tiles, padded; r: their d B (winograd._bt_rows), 16 x tw.
    t_ = n_ * th * tw
    step = c_ * t_              # from one block position's GEMM operand to the next
    width = 2 * tw + 2
    lo, hi = min(width, pw), min(width, pw + w_)
    for c in range(c_):
        for n in range(n_):
            src = (n * c_ + c) * h_ * w_
            for i in range(th):
                for u in range(4):
                    h = 2 * i + u - ph
                    base = u * width
                    if 0 <= h < h_:
                        at = src + h * w_ - pw
                        for q in range(lo):
                            rows[_U(base + q)] = zero
                        for q in range(lo, hi):
                            rows[_U(base + q)] = x[_U(at + q)]
                        for q in range(hi, width):
                            rows[_U(base + q)] = zero
                    else:
                        for q in range(width):
                            rows[_U(base + q)] = zero
                for u in range(4):
                    base, to = u * width, 4 * u * tw
                    for j in range(tw):
                        d0, d1 = rows[_U(base + 2 * j)], rows[_U(base + 2 * j + 1)]
                        d2, d3 = rows[_U(base + 2 * j + 2)], rows[_U(base + 2 * j + 3)]
                        r[_U(to + j)] = d0 - d2
                        r[_U(to + tw + j)] = d1 + d2
                        r[_U(to + 2 * tw + j)] = d2 - d1
                        r[_U(to + 3 * tw + j)] = d1 - d3
                at = c * t_ + (n * th + i) * tw
                for b in range(4):      # then B^T down each column
                    r0, r1, r2, r3 = b * tw, (4 + b) * tw, (8 + b) * tw, (12 + b) * tw
                    o0, o1 = at + b * step, at + (4 + b) * step
                    o2, o3 = at + (8 + b) * step, at + (12 + b) * step
                    for j in range(tw):
                        out[_U(o0 + j)] = r[_U(r0 + j)] - r[_U(r2 + j)]
                    for j in range(tw):
                        out[_U(o1 + j)] = r[_U(r1 + j)] + r[_U(r2 + j)]
                    for j in range(tw):
                        out[_U(o2 + j)] = r[_U(r2 + j)] - r[_U(r1 + j)]
                    for j in range(tw):
                        out[_U(o3 + j)] = r[_U(r1 + j)] - r[_U(r3 + j)]


def _output_loop(m, n_, f_, oh, ow, th, tw, bias, with_bias, relu, a, y, out):
    # a: A^T m down each column of the tile row's blocks (winograd._at_rows), 8 x tw; y: the two
    # output rows, 2 x 2tw, before the epilogue.
    t_ = n_ * th * tw
    step = f_ * t_
    for f in range(f_):
        bv = bias[f]
        for n in range(n_):
            dst = (n * f_ + f) * oh * ow
            for i in range(th):
                k = f * t_ + (n * th + i) * tw
                for b in range(4):
                    m0, m1, m2, m3 = k + b * step, k + (4 + b) * step, k + (8 + b) * step, \
                        k + (12 + b) * step
                    for j in range(tw):
                        a[_U(b * tw + j)] = m[_U(m0 + j)] + m[_U(m1 + j)] + m[_U(m2 + j)]
                    for j in range(tw):
                        a[_U((4 + b) * tw + j)] = m[_U(m1 + j)] - m[_U(m2 + j)] - m[_U(m3 + j)]
                for r in range(2):      # then along each row
                    base, yr = 4 * r * tw, 2 * r * tw
                    for j in range(tw):
                        a0, a1 = a[_U(base + j)], a[_U(base + tw + j)]
                        a2, a3 = a[_U(base + 2 * tw + j)], a[_U(base + 3 * tw + j)]
                        y[_U(yr + 2 * j)] = a0 + a1 + a2
                        y[_U(yr + 2 * j + 1)] = a1 - a2 - a3
                    if 2 * i + r < oh:
                        at = dst + (2 * i + r) * ow
                        for q in range(ow):
                            # conv_epilogue's: the bias added, then NumPy's maximum(v, 0)
                            v = y[_U(yr + q)]
                            if with_bias:
                                v = v + bv
                            if relu and not (v > 0 or v != v):
                                v = 0
                            out[_U(at + q)] = v


def _grad_loop(g, n_, f_, oh, ow, th, tw, zero, rows, r, out):
    # rows: the tile row's two gradient rows, zeros past the output, 2 x 2tw; r: their g A^T
    # (winograd._a_rows), 8 x tw.
    t_ = n_ * th * tw
    step = f_ * t_
    width = 2 * tw
    for f in range(f_):
        for n in range(n_):
            src = (n * f_ + f) * oh * ow
            for i in range(th):
                for s in range(2):
                    base = s * width
                    if 2 * i + s < oh:
                        at = src + (2 * i + s) * ow
                        for q in range(ow):
                            rows[_U(base + q)] = g[_U(at + q)]
                        for q in range(ow, width):
                            rows[_U(base + q)] = zero
                    else:
                        for q in range(width):
                            rows[_U(base + q)] = zero
                for s in range(2):
                    base, to = s * width, 4 * s * tw
                    for j in range(tw):
                        g0, g1 = rows[_U(base + 2 * j)], rows[_U(base + 2 * j + 1)]
                        r[_U(to + j)] = g0
                        r[_U(to + tw + j)] = g0 + g1
                        r[_U(to + 2 * tw + j)] = g0 - g1
                        r[_U(to + 3 * tw + j)] = -g1
                at = f * t_ + (n * th + i) * tw
                for b in range(4):      # then A down each column
                    r0, r1 = b * tw, (4 + b) * tw
                    o0, o1 = at + b * step, at + (4 + b) * step
                    o2, o3 = at + (8 + b) * step, at + (12 + b) * step
                    for j in range(tw):
                        out[_U(o0 + j)] = r[_U(r0 + j)]
                    for j in range(tw):
                        out[_U(o1 + j)] = r[_U(r0 + j)] + r[_U(r1 + j)]
                    for j in range(tw):
                        out[_U(o2 + j)] = r[_U(r0 + j)] - r[_U(r1 + j)]
                    for j in range(tw):
                        out[_U(o3 + j)] = -r[_U(r1 + j)]


def _input_grad_loop(dv, n_, c_, h_, w_, ph, pw, th, tw, zero, cols, dd, across, gx):
    # cols: B dv down each column of the tile row's blocks (winograd._b_rows), 16 x tw; dd: one
    # row of B dv B^T, 4 x tw; across: the 4 rows of a tile row added along it, 4 x (2tw + 2).
    t_ = n_ * th * tw
    step = c_ * t_
    width = 2 * tw + 2
    for n in range(n_):
        for c in range(c_):
            dst = (n * c_ + c) * h_ * w_
            for q in range(dst, dst + h_ * w_):
                gx[_U(q)] = 0
            for i in range(th - 1, -1, -1):     # bottom to top, as the reference's sums
                k = c * t_ + (n * th + i) * tw
                for b in range(4):
                    v0, v1, v2, v3 = k + b * step, k + (4 + b) * step, k + (8 + b) * step, \
                        k + (12 + b) * step
                    for j in range(tw):
                        cols[_U(b * tw + j)] = dv[_U(v0 + j)]
                    for j in range(tw):
                        cols[_U((4 + b) * tw + j)] = dv[_U(v1 + j)] - dv[_U(v2 + j)] \
                            + dv[_U(v3 + j)]
                    for j in range(tw):
                        cols[_U((8 + b) * tw + j)] = dv[_U(v1 + j)] + dv[_U(v2 + j)] \
                            - dv[_U(v0 + j)]
                    for j in range(tw):
                        cols[_U((12 + b) * tw + j)] = -dv[_U(v3 + j)]
                for u in range(4):      # then along each row, each block added where it lies
                    base = 4 * u * tw
                    for j in range(tw):
                        t0, t1 = cols[_U(base + j)], cols[_U(base + tw + j)]
                        t2, t3 = cols[_U(base + 2 * tw + j)], cols[_U(base + 3 * tw + j)]
                        dd[_U(j)] = t0
                        dd[_U(tw + j)] = t1 - t2 + t3
                        dd[_U(2 * tw + j)] = t1 + t2 - t0
                        dd[_U(3 * tw + j)] = -t3
                    # column 2j + v takes block j's v-th value, then block j - 1's (v + 2)-th
                    row = u * width
                    across[_U(row)] = zero + dd[_U(0)]
                    across[_U(row + 1)] = zero + dd[_U(tw)]
                    for j in range(1, tw):
                        across[_U(row + 2 * j)] = (zero + dd[_U(j)]) + dd[_U(2 * tw + j - 1)]
                    for j in range(1, tw):
                        across[_U(row + 2 * j + 1)] = (zero + dd[_U(tw + j)]) \
                            + dd[_U(3 * tw + j - 1)]
                    across[_U(row + 2 * tw)] = zero + dd[_U(3 * tw - 1)]
                    across[_U(row + 2 * tw + 1)] = zero + dd[_U(4 * tw - 1)]
                for u in range(4):      # rows 2i + u: this tile row's after the one below's
                    h = 2 * i + u - ph
                    if 0 <= h < h_:
                        at, row = dst + h * w_ - pw, u * width
                        for q in range(pw, pw + w_):
                            gx[_U(at + q)] = gx[_U(at + q)] + across[_U(row + q)]


_input = _jit.Kernel(_input_loop)
_output = _jit.Kernel(_output_loop)
_grad = _jit.Kernel(_grad_loop)
_input_grad = _jit.Kernel(_input_grad_loop)
