"""``Deconvolution`` (transposed convolution), MXNet's operator for ``Conv1D/2D/3DTranspose``.

It is the adjoint of ``Convolution``: one GEMM per group turns every input position into a
kernel-sized patch of columns, which are added into the (stride-spaced, dilated) output frame
offset by offset; the padding is then cropped off and ``adj`` extra positions kept at the end.
Its input gradient is an ordinary convolution of the output gradient (a strided window view and a
GEMM), its weight gradient the GEMM of the input with those windows. Channels first, over the
array module of the input, so NumPy and CuPy share it; on the CPU the convolution's compiled
loops (``_conv_kernels``) add the columns into the output and take the gradient's windows, the
same values as the NumPy frame.
"""
from __future__ import annotations

import itertools
import math

import numpy

from ..base import ShapeError
from . import _conv_kernels as _ck
from .ndarray import _recording_for, _result, _wrap, _xp_of
from .nn import _tuple

__all__ = ["Deconvolution"]


def _window(offset, dilate, stride, count):
    return tuple(slice(o * d, o * d + s * (n - 1) + 1, s)
                 for o, d, s, n in zip(offset, dilate, stride, count))


def Deconvolution(data=None, weight=None, bias=None, kernel=None, stride=None, dilate=None,
                  pad=None, adj=None, target_shape=None, num_filter=None, num_group=1,
                  workspace=512, no_bias=True, cudnn_tune=None, cudnn_off=False, layout=None,
                  **kwargs):
    """Transposed N-D convolution of ``data`` ``(N, C, *in)`` with ``weight``
    ``(C, num_filter / num_group, *kernel)``: output ``(N, num_filter, *out)`` with
    ``out = (in - 1) * stride - 2 * pad + dilate * (kernel - 1) + 1 + adj``."""
    x, w = data._data, weight._data
    xp = _xp_of(x)
    nsp = x.ndim - 2
    expected = {1: "NCW", 2: "NCHW", 3: "NCDHW"}.get(nsp)
    if expected is None or (layout is not None and layout != expected):
        raise NotImplementedError("Deconvolution runs channels first (%s); got data %s with "
                                  "layout %r" % (expected, x.shape, layout))
    if target_shape:
        raise NotImplementedError("Deconvolution's target_shape is not supported; give pad and adj")
    kernel = _tuple(kernel if kernel is not None else w.shape[2:], nsp, 1)
    stride, dilate = _tuple(stride, nsp, 1), _tuple(dilate, nsp, 1)
    pad, adj = _tuple(pad, nsp, 0), _tuple(adj, nsp, 0)
    n, c = x.shape[:2]
    groups = int(num_group)
    f = w.shape[1] * groups
    if num_filter is not None and int(num_filter) != f:
        raise ValueError("num_filter=%s does not match weight shape %s with num_group=%d"
                         % (num_filter, w.shape, groups))
    if w.shape[0] != c or c % groups or tuple(w.shape[2:]) != kernel:
        raise ShapeError("weight shape %s does not fit data shape %s with kernel %s and "
                         "num_group=%d" % (w.shape, x.shape, kernel, groups))
    if any(a >= max(s, d) for a, s, d in zip(adj, stride, dilate)):
        raise ValueError("adj %s must be smaller than stride %s or dilate %s"
                         % (adj, stride, dilate))
    in_sp = x.shape[2:]
    full = tuple((i - 1) * s + d * (k - 1) + 1 for i, s, d, k in zip(in_sp, stride, dilate, kernel))
    out_sp = tuple(fl - 2 * p + a for fl, p, a in zip(full, pad, adj))
    if min(out_sp) <= 0:
        raise ValueError("padding %s leaves no output from data %s" % (pad, x.shape))
    frame_sp = tuple(max(fl, p + o) for fl, p, o in zip(full, pad, out_sp))
    ksize, length = math.prod(kernel), n * math.prod(in_sp)
    xm = xp.moveaxis(x, 1, 0).reshape(groups, c // groups, length)
    wm = w.reshape(groups, c // groups, (f // groups) * ksize)
    cols = xp.matmul(wm.transpose(0, 2, 1), xm)
    lead = (slice(None), slice(None))
    crop = tuple(slice(p, p + o) for p, o in zip(pad, out_sp))
    # On the CPU the columns are summed into the cropped output by the convolution's own loop
    # (its input gradient's: the same sums in window-offset order from zero, 1 to 3-D).
    host = type(x) is numpy.ndarray
    out = numpy.empty((n, f) + out_sp, dtype=x.dtype) if host else None
    flat_cols = cols.reshape(f * ksize, length)
    if not host or not _ck.col2im(flat_cols, kernel, stride, dilate, pad, in_sp, out):
        cols = cols.reshape((f,) + kernel + (n,) + in_sp)
        frame = xp.zeros((f, n) + frame_sp, dtype=x.dtype)
        for offset in itertools.product(*(range(k) for k in kernel)):
            frame[lead + _window(offset, dilate, stride, in_sp)] += cols[(slice(None),) + offset]
        out = xp.moveaxis(frame[lead + crop], 0, 1)
    use_bias = bias is not None and not no_bias
    if use_bias:
        out = out + bias._data.reshape((f,) + (1,) * nsp)
    else:
        out = xp.ascontiguousarray(out)
    inputs = (data, weight, bias) if use_bias else (data, weight)
    if not _recording_for(*inputs):
        return _wrap(out, data._ctx)

    def _windows(g):
        """The output gradient's windows ``(F * kernel, N * in)`` by the convolution's column
        loop (the padding's zeros included; a copy, so the same values), or None."""
        if not host or type(g) is not numpy.ndarray or g.dtype != x.dtype:
            return None
        g = numpy.ascontiguousarray(g)
        made = numpy.empty((f * ksize, length), dtype=g.dtype)
        if _ck.im2col(g, kernel, stride, dilate, pad, in_sp, made):
            return made
        return None

    def vjp(g, needs):
        gcols = _windows(g)
        if gcols is None:
            gframe = xp.zeros((f, n) + frame_sp, dtype=g.dtype)
            gframe[lead + crop] = xp.moveaxis(g, 1, 0)
            st = gframe.strides
            # The frame seen through the forward's windows: (F, *kernel, N, *in), one GEMM
            # operand.
            view = xp.lib.stride_tricks.as_strided(
                gframe, shape=(f,) + kernel + (n,) + in_sp,
                strides=(st[0],) + tuple(st[2 + i] * dilate[i] for i in range(nsp)) + (st[1],)
                + tuple(st[2 + i] * stride[i] for i in range(nsp)))
            gcols = view
        gcols = gcols.reshape(groups, (f // groups) * ksize, length)
        gx = gw = None
        if needs[0]:
            gx = xp.matmul(wm, gcols).reshape((c, n) + in_sp)
            gx = xp.ascontiguousarray(xp.moveaxis(gx, 0, 1))
        if needs[1]:
            gw = xp.matmul(xm, gcols.transpose(0, 2, 1)).reshape(w.shape)
        if use_bias:
            return gx, gw, (g.sum(axis=(0,) + tuple(range(2, g.ndim))) if needs[2] else None)
        return gx, gw
    return _result(out, data._ctx, inputs, vjp)
