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
- the weights' gradient: per channel and tap, the sum of ``g * x_t`` over the batch and the
  plane in NumPy's order for ``(g * x_t).sum(axis=(0, 2, 3))`` (each image's plane by pairwise
  summation, ``_bn_kernels.pairwise``, added to a total from +0.0 image by image); the bias's,
  NumPy's ``g.sum(axis=(0, 2, 3))``.

``np_forward`` and ``np_backward`` are those operations in NumPy (whole arrays, tap by tap); the
numba loops do them element by element in the same order and precision, so both give the same
bits (``tests/test_depthwise.py``; where two NaNs meet, which one's sign comes out is the
compiler's choice), and the loops run where numba is available. Planes are
worked in ranges on the BLAS's thread count of threads; a value's arithmetic does not depend on
the range. The fused ReLU of ``Conv2D(activation='relu')`` is left to the column path.
"""
from __future__ import annotations

import numpy

from .. import _jit
from . import _bn_kernels as _bk
from . import _conv_kernels as _ck
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
        for ky in range(kh):
            for kx in range(kw):
                gw[:, 0, ky, kx] = (g * _tap(padded, ky, kx, stride, dilate, out_sp)).sum(
                    axis=(0, 2, 3))
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
def forward(x, w, b, stride, dilate, pad, out_sp):
    """``np_forward``'s output by the loops, or None where numba is not available."""
    if not _jit.ready():
        return None
    n, c = x.shape[:2]
    out = numpy.empty((n, c) + tuple(out_sp), x.dtype)
    geo = _geometry(x, w, stride, dilate, pad, out_sp)
    bias = b if b is not None else numpy.zeros(c, x.dtype)
    _host_threads.in_ranges(n * c, out.size, SPLIT_SIZE, lambda p0, p1: _forward(
        x.reshape(-1), w.reshape(c, -1), bias, b is not None, geo, x.dtype.type(0),
        out.reshape(-1), p0, p1))
    return out


def backward(g, x, w, stride, dilate, pad, out_sp, need_x, need_w):
    """``np_backward`` by the loops, or None where numba is not available (or ``g`` is not a
    C-contiguous array of ``x``'s dtype)."""
    if not _jit.ready() or type(g) is not _np_ndarray or g.dtype != x.dtype \
            or not g.flags.c_contiguous:
        return None
    n, c = x.shape[:2]
    geo = _geometry(x, w, stride, dilate, pad, out_sp)
    zero = x.dtype.type(0)
    gx = gw = None
    if need_w:
        gw = numpy.empty(w.shape, w.dtype)
        def weights(c0, c1):
            tasks, values, scratch = _bk.workspace(x.dtype, out_sp[0] * out_sp[1])
            _weight_grad(g.reshape(-1), x.reshape(-1), n, c, geo, zero, gw.reshape(c, -1),
                         c0, c1, tasks, values, scratch)
        _host_threads.in_ranges(c, g.size, SPLIT_SIZE, weights)
    if need_x:
        gx = numpy.empty(x.shape, x.dtype)
        def inputs(p0, p1):
            plane = numpy.empty((x.shape[2] + 2 * pad[0]) * (x.shape[3] + 2 * pad[1]), x.dtype)
            _input_grad(g.reshape(-1), w.reshape(c, -1), c, geo, zero, gx.reshape(-1), plane,
                        p0, p1)
        _host_threads.in_ranges(n * c, g.size, SPLIT_SIZE, inputs)
    return gx, gw


# ----------------------------------------------------------------------------- the loops
# Flat arrays, indices cast to uint64 where they are used (see _conv_kernels: numba's check for
# negative indices keeps LLVM from vectorizing); each tap's positions inside the input run in
# one branch-free loop, those on the padding take the padding's ``0 * w`` in loops of their own.
_U = numpy.uint64


def _forward_loop(x, w, bias, with_bias, geo, zero, out, p0, p1):
    h, wd, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = geo
    for p in range(p0, p1):
        ch = p % w.shape[0]
        src = p * h * wd
        dst = p * oh * ow
        for ky in range(kh):
            y0, y1 = span(h, ky * dh, sh, ph, oh)      # noqa: F821
            for kx in range(kw):
                x0, x1 = span(wd, kx * dw, sw, pw, ow)     # noqa: F821
                wt = w[ch, ky * kw + kx]
                pad_term = zero * wt
                first = ky == 0 and kx == 0
                for oy in range(oh):
                    row = dst + oy * ow
                    if oy < y0 or oy >= y1:
                        for ox in range(ow):
                            at = _U(row + ox)
                            out[at] = pad_term if first else out[at] + pad_term
                        continue
                    line = src + (oy * sh + ky * dh - ph) * wd + kx * dw - pw
                    for ox in range(x0):
                        at = _U(row + ox)
                        out[at] = pad_term if first else out[at] + pad_term
                    if first:
                        for ox in range(x0, x1):
                            out[_U(row + ox)] = x[_U(line + ox * sw)] * wt
                    else:
                        for ox in range(x0, x1):
                            at = _U(row + ox)
                            out[at] = out[at] + x[_U(line + ox * sw)] * wt
                    for ox in range(x1, ow):
                        at = _U(row + ox)
                        out[at] = pad_term if first else out[at] + pad_term
        if with_bias:
            b = bias[ch]
            for i in range(oh * ow):
                out[_U(dst + i)] = out[_U(dst + i)] + b


def _weight_grad_loop(g, x, n_, c_, geo, zero, gw, c0, c1, tasks, values, scratch):
    h, wd, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = geo
    plane = oh * ow
    for ch in range(c0, c1):
        for ky in range(kh):
            y0, y1 = span(h, ky * dh, sh, ph, oh)      # noqa: F821
            for kx in range(kw):
                x0, x1 = span(wd, kx * dw, sw, pw, ow)     # noqa: F821
                total = zero
                for n in range(n_):
                    src = (n * c_ + ch) * h * wd
                    gat = (n * c_ + ch) * plane
                    for oy in range(oh):
                        row = oy * ow
                        if oy < y0 or oy >= y1:
                            for ox in range(ow):
                                scratch[_U(row + ox)] = g[_U(gat + row + ox)] * zero
                            continue
                        line = src + (oy * sh + ky * dh - ph) * wd + kx * dw - pw
                        for ox in range(x0):
                            scratch[_U(row + ox)] = g[_U(gat + row + ox)] * zero
                        for ox in range(x0, x1):
                            scratch[_U(row + ox)] = g[_U(gat + row + ox)] * x[_U(line + ox * sw)]
                        for ox in range(x1, ow):
                            scratch[_U(row + ox)] = g[_U(gat + row + ox)] * zero
                    total = total + pairwise(scratch, 0, plane, zero, tasks, values)  # noqa: F821
                gw[ch, ky * kw + kx] = total


def _input_grad_loop(g, w, c_, geo, zero, gx, plane, p0, p1):
    h, wd, kh, kw, sh, sw, dh, dw, ph, pw, oh, ow = geo
    pwd = wd + 2 * pw
    size = (h + 2 * ph) * pwd
    for p in range(p0, p1):
        ch = p % c_
        gat = p * oh * ow
        for i in range(size):
            plane[_U(i)] = zero
        for ky in range(kh):
            for kx in range(kw):
                wt = w[ch, ky * kw + kx]
                for oy in range(oh):
                    line = (oy * sh + ky * dh) * pwd + kx * dw
                    grow = gat + oy * ow
                    for ox in range(ow):
                        at = _U(line + ox * sw)
                        plane[at] = plane[at] + g[_U(grow + ox)] * wt
        dst = p * h * wd
        for iy in range(h):
            line = (iy + ph) * pwd + pw
            for ix in range(wd):
                gx[_U(dst + iy * wd + ix)] = plane[_U(line + ix)]


_forward = _jit.Kernel(_forward_loop, {"span": _ck.span})
_weight_grad = _jit.Kernel(_weight_grad_loop, {"pairwise": _bk.pairwise, "span": _ck.span})
_input_grad = _jit.Kernel(_input_grad_loop)
