"""Planes turned into lanes and back, on the CPU (numba): a block of ``nb`` planes of ``size``
values each, ``(nb, size)``, copied to ``(size, nb)``, position by position the planes side by
side, and the inverse. A loop over a block's lanes then runs the same arithmetic on every plane
at once, whatever the planes' width: 3x3 max pooling of Inception's small planes
(``_conv_kernels``), where a plane's rows are too short for LLVM's vector loops. The copies go
in 16 x 16 tiles, each read and written in whole cache lines (0.28-0.35 ns a value each way, one
thread, in cache; planes that come from memory cost more: a depthwise convolution's input
gradient in lanes, 2.6x faster than its tap loops on 256 channels of 10x10 in cache, was 1.14x
slower with its gradient cold, so it was not made).
"""
from __future__ import annotations

import numpy

from .. import _jit

__all__ = ["to_lanes", "from_lanes", "at", "block"]

# Indices as uint64 where they are used (see _conv_kernels: numba's check for negative indices
# keeps LLVM from vectorizing).
_U = numpy.uint64


def block(size: int, elements: int, most: int) -> int:
    """Planes of ``size`` values to a block: about ``elements`` values, whole tiles of 16 planes,
    16 to ``most``."""
    per = elements // max(size, 1)
    return max(16, min(most, per - per % 16))


def _to_lanes_loop(x, p0, nb, size, xb):
    # Planes p0 .. p0 + nb of x (``size`` values each) into xb as (size, nb).
    full, pfull = nb - nb % 16, size - size % 16
    for l0 in range(0, full, 16):
        for q0 in range(0, pfull, 16):
            for p in range(16):
                for lane in range(16):
                    xb[_U((q0 + p) * nb + l0 + lane)] = x[_U((p0 + l0 + lane) * size + q0 + p)]
        for p in range(pfull, size):
            for lane in range(16):
                xb[_U(p * nb + l0 + lane)] = x[_U((p0 + l0 + lane) * size + p)]
    for lane in range(full, nb):
        for p in range(size):
            xb[_U(p * nb + lane)] = x[_U((p0 + lane) * size + p)]


def _from_lanes_loop(xb, p0, nb, size, x):
    # The inverse of _to_lanes_loop.
    full, pfull = nb - nb % 16, size - size % 16
    for l0 in range(0, full, 16):
        for q0 in range(0, pfull, 16):
            for lane in range(16):
                for p in range(16):
                    x[_U((p0 + l0 + lane) * size + q0 + p)] = xb[_U((q0 + p) * nb + l0 + lane)]
        for lane in range(16):
            for p in range(pfull, size):
                x[_U((p0 + l0 + lane) * size + p)] = xb[_U(p * nb + l0 + lane)]
    for lane in range(full, nb):
        for p in range(size):
            x[_U((p0 + lane) * size + p)] = xb[_U(p * nb + lane)]


def _at_loop(r, c, rows, cols, nb, outside):
    # Where position (r, c) of planes of ``rows`` x ``cols`` starts in a block of ``nb`` lanes;
    # ``outside`` (a row the caller keeps: padding, zeros) where it lies off the planes.
    return (r * cols + c) * nb if 0 <= r < rows and 0 <= c < cols else outside


to_lanes = _jit.Kernel(_to_lanes_loop)
from_lanes = _jit.Kernel(_from_lanes_loop)
at = _jit.Kernel(_at_loop, inline=True)
