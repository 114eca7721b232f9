"""A strided convolution's column matrix from its input taken apart by column phase (numba).

With a stride ``s`` along the width, an output row's windows read every ``s``-th input column: a
strided load per value, which stays scalar, and LLVM's loop over the row cannot use vector
copies. Taken apart first into ``s`` planes per input row, the columns of phase ``p`` (``col %
s == p``) side by side, each output row's values of one kernel offset are a contiguous run of
one phase: ``x[y, o * s + off]`` is phase ``off % s`` at ``o + off // s``. The copy into phases
reads the input once; every one of the ``kh * kw`` offsets then copies whole runs. Used by
``_conv_kernels.im2col`` for wide output rows of large kernels (resnet18_v1's 7x7 stride-2 stem,
AlexNet's 11x11 stride-4 layer), whose offsets read each input value many times over: the
stem's column matrix 0.54 -> 0.26 ms, one thread. Copies only: the same matrix, bit for bit.

The loops are compiled by ``_conv_kernels``, which binds ``_span`` to ``span_loop`` compiled
(its other loops call it too).
"""
from __future__ import annotations

import numpy

__all__ = ["span_loop", "input_rows", "phases_loop", "columns_loop"]

_U = numpy.uint64


def span_loop(size, k_off, step, pad, count):
    """The outputs ``[lo, hi)`` whose input ``o * step + k_off - pad`` lies inside ``[0, size)``."""
    lo, start = 0, k_off - pad
    while lo < count and start + lo * step < 0:
        lo += 1
    hi = count
    while hi > lo and start + (hi - 1) * step >= size:
        hi -= 1
    return lo, hi


_span = span_loop       # compiled, the loops call the compiled one (``_jit.Kernel``'s helpers)


def input_rows(h, kh, sh, dh, ph, r0, r1):
    """``(y0, y1)``: the input rows that output rows ``r0 <= r < r1`` read (within ``[0, h)``)."""
    y0 = max(0, r0 * sh - ph)
    y1 = min(h, (r1 - 1) * sh - ph + (kh - 1) * dh + 1)
    return y0, max(y0, y1)


def phases_loop(x, planes, h_, w_, y0, y1, s, wq, zero, out):
    # x: ``planes`` planes of h_ x w_; out: each plane's rows y0 <= y < y1 as s phases of wq
    # values, column q * s + p at [row][p][q] (zero past the row's end: never read).
    rows = y1 - y0
    for t in range(planes):
        for y in range(y0, y1):
            src = (t * h_ + y) * w_
            dst = (t * rows + y - y0) * s * wq
            for p in range(s):
                at = dst + p * wq
                last = (w_ - p + s - 1) // s        # the phase's columns inside the row
                for q in range(last):
                    out[_U(at + q)] = x[_U(src + q * s + p)]
                for q in range(last, wq):
                    out[_U(at + q)] = zero


def columns_loop(xs, n_, c_, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow, h_, w_, lo, hi, r0, r1,
                 y0, y1, wq, cols):
    # ``_conv_kernels._im2col_loop``'s matrix (the (channel, kernel row) pairs lo <= ci < hi,
    # output rows r0 <= r < r1) from ``phases_loop``'s ``xs`` of rows y0 <= y < y1.
    plane = (r1 - r0) * ow
    length = n_ * plane
    rows = y1 - y0
    for ci in range(lo, hi):
        c, i = ci // kh, ci % kh
        a_lo, a_hi = _span(h_, i * dh, sh, ph, oh)
        a_lo = min(max(a_lo, r0), r1)
        a_hi = min(max(a_hi, a_lo), r1)
        for j in range(kw):
            b_lo, b_hi = _span(w_, j * dw, sw, pw, ow)
            row = ((c * kh + i) * kw + j) * length
            w_off = j * dw - pw
            phase = w_off % sw
            first = w_off // sw
            for n in range(n_):
                src = (n * c_ + c) * rows
                base = row + n * plane
                for q in range(base, base + (a_lo - r0) * ow):
                    cols[_U(q)] = 0
                for a in range(a_lo, a_hi):
                    at = base + (a - r0) * ow
                    s0 = ((src + a * sh + i * dh - ph - y0) * sw + phase) * wq + first
                    for b in range(b_lo):
                        cols[_U(at + b)] = 0
                    for b in range(b_lo, b_hi):
                        cols[_U(at + b)] = xs[_U(s0 + b)]
                    for b in range(b_hi, ow):
                        cols[_U(at + b)] = 0
                for q in range(base + (a_hi - r0) * ow, base + plane):
                    cols[_U(q)] = 0
