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

``_conv_kernels`` compiles the copy (``phases_loop``), and its column matrix loop reads the
phases where it is handed them.
"""
from __future__ import annotations

import numpy

__all__ = ["input_rows", "phases_loop"]

_U = numpy.uint64


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
