"""Depthwise 2-D convolution on the CPU (MobileNet's layers: one filter per channel, ``num_group``
equal to the channels and the filters), tap by tap instead of through a column matrix.

Through ``nn.Convolution``'s column matrix a depthwise layer makes nine copies of its input (a
3x3 kernel) and multiplies each channel's 1x9 filter into its own nine rows: 58 MB of columns and
64 thin GEMMs for MobileNet's 64 channels of 56x56 at batch 8, 3.7 times PyTorch's time forward
and backward. Here each output is its taps' products added in tap order (row by row of the
kernel), one plane at a time:

- forward: ``out = x_0 * w_0``, then ``out = out + x_t * w_t`` for each later tap ``t``, then
  ``+ bias``; ``x_t`` the input seen through tap ``t`` (stride, dilation) with the padding's
  zeros, which multiply like any value (``0 * w`` is ``-0.0`` for a negative weight, NaN for an
  infinite one);
- the input's gradient: into a zero padded plane, ``+ g * w_t`` at tap ``t``'s positions, tap
  after tap, then the plane without its padding;
- the weights' gradient: per channel and tap, the products ``g * x_t`` added over the batch
  position by position (image after image, from +0.0), then summed over the plane by NumPy's
  pairwise summation (``_pairwise.pairwise``), the plane's rows laid ``width`` positions
  apart (the loops' padded row, a stride phase's columns) with +0.0 in between, and up to its
  last output; the bias's, NumPy's ``g.sum(axis=(0, 2, 3))``. (Summing the batch first keeps
  the pairwise sums, whose additions wait on each other, to one a channel and tap.)

``np_forward`` and ``np_backward`` are those operations in NumPy (whole arrays, tap by tap); the
numba loops do them element by element in the same order and precision, so both give the same
bits (``tests/test_depthwise.py``; where two NaNs meet, which one's sign comes out is the
compiler's choice), and the loops run where numba is available. Planes are
worked in ranges on the BLAS's thread count of threads; a value's arithmetic does not depend on
the range. The fused ReLU of ``Conv2D(activation='relu')`` is left to the column path.
"""
from __future__ import annotations

import functools

import numpy

from .. import _jit
from . import _pairwise as _pw
from . import host_threads as _host_threads

__all__ = ["applies", "np_forward", "np_backward", "forward", "backward"]

_F32, _F64 = numpy.dtype(numpy.float32), numpy.dtype(numpy.float64)
_np_ndarray = numpy.ndarray
# Planes worked on one thread below this many output values in all.
SPLIT_SIZE = 1 << 16


def applies(x, w, b, groups, relu) -> bool:
    """A 2-D depthwise convolution of NumPy float arrays of one dtype (C-contiguous), without a
    fused ReLU."""
    return (type(x) is _np_ndarray and type(w) is _np_ndarray and x.ndim == 4 and groups > 1
            and x.shape[1] == groups and w.shape[0] == groups and w.shape[1] == 1
            and x.dtype in (_F32, _F64) and w.dtype == x.dtype and x.flags.c_contiguous
            and w.flags.c_contiguous and not relu
            and (b is None or (type(b) is _np_ndarray and b.dtype == x.dtype
                               and b.shape == (groups,))))


def _geometry(x, w, stride, dilate, pad, out_sp):
    return (x.shape[2], x.shape[3], w.shape[2], w.shape[3]) + tuple(stride) + tuple(dilate) \
        + tuple(pad) + tuple(out_sp)


# ----------------------------------------------------------------------------- NumPy bodies
def _padded(x, pad):
    ph, pw = pad
    if not ph and not pw:
        return x
    out = numpy.zeros(x.shape[:2] + (x.shape[2] + 2 * ph, x.shape[3] + 2 * pw), x.dtype)
    out[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]] = x
    return out


def _tap(a, ky, kx, stride, dilate, out_sp):
    """The padded array ``a`` as seen by tap ``(ky, kx)``: ``(N, C) + out_sp``."""
    y0, x0 = ky * dilate[0], kx * dilate[1]
    return a[:, :, y0:y0 + stride[0] * (out_sp[0] - 1) + 1:stride[0],
             x0:x0 + stride[1] * (out_sp[1] - 1) + 1:stride[1]]


def _width(w, pad, stride):
    """The positions of a row of the loops' padded plane (a stride phase's columns)."""
    return (w + 2 * pad + stride - 1) // stride


def _run(x, pad, stride, out_sp):
    """How many positions of a tap's row-major products, rows of ``_width``, the loops sum: up
    to the last output."""
    return (out_sp[0] - 1) * _width(x.shape[3], pad[1], stride[1]) + out_sp[1]


def np_forward(x, w, b, stride, dilate, pad, out_sp):
    padded = _padded(x, pad)
    c, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    out = None
    for ky in range(kh):
        for kx in range(kw):
            term = _tap(padded, ky, kx, stride, dilate, out_sp) * w[:, 0, ky, kx].reshape(1, c, 1, 1)
            if out is None:
                out = term
            else:
                out += term
    if b is not None:
        out += b.reshape(1, c, 1, 1)
    return out


def np_backward(g, x, w, stride, dilate, pad, out_sp, need_x, need_w):
    """``(input gradient or None, weight gradient or None)`` of ``np_forward``."""
    c, kh, kw = w.shape[0], w.shape[2], w.shape[3]
    gx = gw = None
    if need_w:
        padded = _padded(x, pad)
        gw = numpy.empty(w.shape, w.dtype)
        width, run = _width(x.shape[3], pad[1], stride[1]), _run(x, pad, stride, out_sp)
        rows = numpy.zeros((c, out_sp[0], width), g.dtype)
        for ky in range(kh):
            for kx in range(kw):
                products = g * _tap(padded, ky, kx, stride, dilate, out_sp)
                summed = numpy.zeros(products.shape[1:], g.dtype)
                for image in products:
                    summed = summed + image
                rows[..., :out_sp[1]] = summed
                gw[:, 0, ky, kx] = rows.reshape(c, -1)[:, :run].sum(axis=-1)
    if need_x:
        ph, pw = pad
        gpad = numpy.zeros(x.shape[:2] + (x.shape[2] + 2 * ph, x.shape[3] + 2 * pw), x.dtype)
        for ky in range(kh):
            for kx in range(kw):
                _tap(gpad, ky, kx, stride, dilate, out_sp)[...] += \
                    g * w[:, 0, ky, kx].reshape(1, c, 1, 1)
        gx = numpy.ascontiguousarray(gpad[:, :, ph:ph + x.shape[2], pw:pw + x.shape[3]])
    return gx, gw


# ----------------------------------------------------------------------------- entry points
@functools.lru_cache(maxsize=256)
def _layout(geo):
    """The loops' padded plane, split by the stride's phases (``_pad_plane_loop``): its rows and
    positions a row in each phase, each column phase's span of input columns ``[j0, j1)``, and
    where each tap's view of the first output row starts. Kept per geometry (working it out
    took 10 us, half a small layer's call); the loops only read it."""
    h, wd, kh, kw, sh, sw, dh, dw, ph, pw = geo[:10]
    rows, width = -(-(h + 2 * ph) // sh), _width(wd, pw, sw)
    spans = numpy.empty((sw, 2), numpy.int64)
    for rc in range(sw):
        j0 = min(width, max(0, -(-(pw - rc) // sw)))
        spans[rc] = j0, max(j0, min(width, -(-(pw + wd - rc) // sw)))
    starts = numpy.array([(((ky * dh % sh) * sw + kx * dw % sw) * rows + ky * dh // sh) * width
                          + kx * dw // sw for ky in range(kh) for kx in range(kw)], numpy.int64)
    spans.flags.writeable = starts.flags.writeable = False
    return rows, width, spans, starts


def _plane(x, geo, layout):
    return numpy.zeros(geo[4] * geo[5] * layout[0] * layout[1], x.dtype)


def forward(x, w, b, stride, dilate, pad, out_sp):
    """``np_forward``'s output by the loops, or None where numba is not available."""
    if not _jit.ready():
        return None
    n, c = x.shape[:2]
    out = numpy.empty((n, c) + tuple(out_sp), x.dtype)
    geo = _geometry(x, w, stride, dilate, pad, out_sp)
    layout = _layout(geo)
    bias = b if b is not None else numpy.zeros(c, x.dtype)
    run = _run(x, pad, stride, out_sp)
    _host_threads.in_ranges(n * c, out.size, SPLIT_SIZE, lambda p0, p1: _forward(
        x.reshape(-1), w.reshape(c, -1), bias, b is not None, geo, layout, out.reshape(-1),
        _plane(x, geo, layout), numpy.empty(run, x.dtype), p0, p1))
    return out


def backward(g, x, w, stride, dilate, pad, out_sp, need_x, need_w):
    """``np_backward`` by the loops, or None where numba is not available (or ``g`` is not a
    C-contiguous array of ``x``'s dtype)."""
    if not _jit.ready() or type(g) is not _np_ndarray or g.dtype != x.dtype \
            or not g.flags.c_contiguous:
        return None
    n, c = x.shape[:2]
    geo = _geometry(x, w, stride, dilate, pad, out_sp)
    layout = _layout(geo)
    zero = x.dtype.type(0)
    taps = w.shape[2] * w.shape[3]
    gx = gw = None
    run = _run(x, pad, stride, out_sp)
    if need_w:
        gw = numpy.empty(w.shape, w.dtype)

        def weights(c0, c1):
            tasks, values, sums = _pw.workspace(x.dtype, taps * run)
            _weight_grad(g.reshape(-1), x.reshape(-1), n, c, geo, layout, zero,
                         gw.reshape(c, -1), c0, c1, tasks, values, _plane(x, geo, layout),
                         numpy.zeros(run, x.dtype), sums)
        _host_threads.in_ranges(c, g.size, SPLIT_SIZE, weights)
    if need_x:
        gx = numpy.empty(x.shape, x.dtype)
        big = numpy.finfo(x.dtype).max
        _host_threads.in_ranges(n * c, g.size, SPLIT_SIZE, lambda p0, p1: _input_grad(
            g.reshape(-1), w.reshape(c, -1), c, geo, layout, zero, big, gx.reshape(-1),
            _plane(x, geo, layout), numpy.zeros(run, x.dtype), p0, p1))
    return gx, gw


# ----------------------------------------------------------------------------- the loops
# Flat arrays, indices cast to uint64 where they are used (see _conv_kernels: numba's check for
# negative indices keeps LLVM from vectorizing). Each input plane is first copied into a zero
# padded plane split by the stride's phases (padded row ``rr + i * sh``, column ``rc + j * sw``
# at ``[rr][rc][i][j]``, rows of ``width`` positions), where each tap sees the outputs' rows
# one after the other, ``width`` apart: a tap's products for the whole plane are one
# contiguous run, ``(oh - 1) * width + ow`` long, whose positions past ``ow`` in a row are not
# outputs (they are left out of the output, and are +0.0 in the weights' sums). A padding
# position holds +0.0 and takes part as ``0 * w``, as in the NumPy body. The layout's
# numbers come from ``_layout``, worked out once a call: integer divisions a plane cost as
# much as a small plane's arithmetic.
_U = numpy.uint64


def _pad_plane_loop(x, src, geo, layout, pp):
    """The input plane at ``src`` into ``pp``'s input positions; its padding positions are
    never written, so they keep the +0.0 that ``_plane`` gave them."""
    h, wd, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = geo
    rows, width, spans = layout[:3]
    for iy in range(h):
        rr, i = (iy + ph) % sh, (iy + ph) // sh
        for rc in range(sw):
            at = ((rr * sw + rc) * rows + i) * width
            line = src + iy * wd + rc - pw
            if sw == 1:
                for j in range(spans[rc, 0], spans[rc, 1]):
                    pp[_U(at + j)] = x[_U(line + j)]
            else:
                for j in range(spans[rc, 0], spans[rc, 1]):
                    pp[_U(at + j)] = x[_U(line + j * sw)]


def _forward_loop(x, w, bias, with_bias, geo, layout, out, pp, acc, p0, p1):
    h, wd, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = geo
    width, starts = layout[1], layout[3]
    run = acc.shape[0]
    for p in range(p0, p1):
        ch = p % w.shape[0]
        _pad_plane(x, p * h * wd, geo, layout, pp)        # noqa: F821
        if kh * kw == 9:
            # 3x3: the nine taps in one pass, the sum held in a register instead of ``acc``
            s0, s1, s2, s3, s4 = starts[0], starts[1], starts[2], starts[3], starts[4]
            s5, s6, s7, s8 = starts[5], starts[6], starts[7], starts[8]
            w0, w1, w2, w3, w4 = w[ch, 0], w[ch, 1], w[ch, 2], w[ch, 3], w[ch, 4]
            w5, w6, w7, w8 = w[ch, 5], w[ch, 6], w[ch, 7], w[ch, 8]
            for i in range(run):
                v = pp[_U(s0 + i)] * w0
                v = v + pp[_U(s1 + i)] * w1
                v = v + pp[_U(s2 + i)] * w2
                v = v + pp[_U(s3 + i)] * w3
                v = v + pp[_U(s4 + i)] * w4
                v = v + pp[_U(s5 + i)] * w5
                v = v + pp[_U(s6 + i)] * w6
                v = v + pp[_U(s7 + i)] * w7
                acc[_U(i)] = v + pp[_U(s8 + i)] * w8
        for t in range(kh * kw if kh * kw != 9 else 0):
            at = starts[t]
            wt = w[ch, t]
            if t == 0:
                for i in range(run):
                    acc[_U(i)] = pp[_U(at + i)] * wt
            else:
                for i in range(run):
                    acc[_U(i)] = acc[_U(i)] + pp[_U(at + i)] * wt
        dst = p * oh * ow
        b = bias[ch]
        for oy in range(oh):
            row, line = dst + oy * ow, oy * width
            if with_bias:
                for ox in range(ow):
                    out[_U(row + ox)] = acc[_U(line + ox)] + b
            else:
                for ox in range(ow):
                    out[_U(row + ox)] = acc[_U(line + ox)]


def _weight_grad_loop(g, x, n_, c_, geo, layout, zero, gw, c0, c1, tasks, values, pp, g_rows,
                      sums):
    """Per channel, each tap's products added over the images position by position into
    ``sums`` (rows of ``width``), then each tap's positions summed by ``_pairwise.pairwise``
    (NumPy's pairwise_sum), those past ``ow`` in a row as +0.0."""
    h, wd, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = geo
    width, starts = layout[1], layout[3]
    run = g_rows.shape[0]
    taps = kh * kw
    for ch in range(c0, c1):
        for i in range(taps * run):
            sums[_U(i)] = zero
        for n in range(n_):
            p = n * c_ + ch
            _pad_plane(x, p * h * wd, geo, layout, pp)    # noqa: F821
            gat = p * oh * ow
            for oy in range(oh):
                for ox in range(ow):
                    g_rows[_U(oy * width + ox)] = g[_U(gat + oy * ow + ox)]
            for t in range(taps):
                at, dst = starts[t], t * run
                for i in range(run):
                    sums[_U(dst + i)] = sums[_U(dst + i)] + g_rows[_U(i)] * pp[_U(at + i)]
        for t in range(taps):
            dst = t * run
            for oy in range(oh - 1):
                for j in range(ow, width):
                    sums[_U(dst + oy * width + j)] = zero
            gw[ch, t] = _pairwise(sums, dst, run, zero, tasks, values)  # noqa: F821


def _input_grad_loop(g, w, c_, geo, layout, zero, big, gx, gp, g_rows, p0, p1):
    h, wd, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = geo
    rows, width, spans, starts = layout
    run = g_rows.shape[0]
    for p in range(p0, p1):
        ch = p % c_
        gat = p * oh * ow
        for i in range(gp.shape[0]):
            gp[_U(i)] = zero
        finite = True
        for t in range(kh * kw):
            finite = finite and abs(w[ch, t]) <= big
        if finite:
            # g's rows spread to ``width`` with zeros between: a zero's product with a finite
            # weight is a signed zero, and adding one to a sum that began at +0.0 changes
            # nothing (such a sum is never -0.0), so whole runs give the rows' bits
            for oy in range(oh):
                for ox in range(ow):
                    g_rows[_U(oy * width + ox)] = g[_U(gat + oy * ow + ox)]
            for t in range(kh * kw):
                start = starts[t]
                wt = w[ch, t]
                for i in range(run):
                    at = _U(start + i)
                    gp[at] = gp[at] + g_rows[_U(i)] * wt
        else:
            for t in range(kh * kw):
                start = starts[t]
                wt = w[ch, t]
                for oy in range(oh):
                    line = start + oy * width
                    grow = gat + oy * ow
                    for ox in range(ow):
                        at = _U(line + ox)
                        gp[at] = gp[at] + g[_U(grow + ox)] * wt
        dst = p * h * wd
        for iy in range(h):     # the input positions back, walked as _pad_plane walks them
            rr, i = (iy + ph) % sh, (iy + ph) // sh
            for rc in range(sw):
                at = ((rr * sw + rc) * rows + i) * width
                line = dst + iy * wd + rc - pw
                for j in range(spans[rc, 0], spans[rc, 1]):
                    gx[_U(line + j * sw)] = gp[_U(at + j)]


_pad_plane = _jit.Kernel(_pad_plane_loop, inline=True)
_forward = _jit.Kernel(_forward_loop, {"_pad_plane": _pad_plane})
_weight_grad = _jit.Kernel(_weight_grad_loop, {"_pad_plane": _pad_plane,
                                               "_pairwise": _pw.pairwise})
_input_grad = _jit.Kernel(_input_grad_loop)
