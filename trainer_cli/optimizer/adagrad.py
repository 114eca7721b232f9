"""AdaGrad (``adagrad``) and GroupAdaGrad (``groupadagrad``, MXNet's optimizer.contrib).

Row_sparse gradients (``SparseRows``): both are row-wise in MXNet 1.9.1 (no ``lazy_update``
argument): only the rows present change, history included (``AdagradDnsRspDnsKernel``: the dense
rule's operations on those rows; weight decay is refused, AdaGrad's with MXNet's "not
implemented" error, GroupAdaGrad's with its assertion, here a ValueError).
"""
from __future__ import annotations

import numpy

from ..context import array_module_of
from ..ndarray import zeros as _nd_zeros
from .. import _jit
from ..ndarray._fc_kernels import pairwise_block_inline
from . import kernels as _kernels
from .kernels import RowKernel, clip as _clip, handles_rows
from .optimizer import Optimizer, on_rows, register, scaled_grad, zeros_like

__all__ = ["AdaGrad", "GroupAdaGrad", "adagrad_rule", "adagrad_rows_rule", "group_adagrad_rule",
           "group_adagrad_rows_rule"]

_BLOCK = 128        # the longest row NumPy sums in one pairwise block


def adagrad_rule(w, g, history, *, lr, wd, eps, rescale, clip):
    """``G = clip(rescale*g); history += G*G; w += (G/sqrt(history + eps) + w*wd) * -lr``:
    eps sits inside the square root and wd outside the adaptive term."""
    xp = array_module_of(w)
    G = scaled_grad(g, rescale, clip)
    history += xp.square(G)
    div = history + eps
    xp.sqrt(div, out=div)
    xp.divide(G, div, out=div)
    div += w * wd
    div *= -lr
    w += div


# adagrad_rule one element at a time, for the row_sparse loop (numba): the same operations in
# the same order and precision, so the same bits (``tests/test_optim_sparse.py``).
_ROW_SCALARS = ("rescale", "lo", "hi", "clipping", "eps", "neg_lr", "wd")


def _adagrad_cpu(w, g, history, s):
    rescale, lo, hi, clipping, eps, neg_lr, wd = s[0], s[1], s[2], s[3], s[4], s[5], s[6]
    for i in range(w.shape[0]):
        G = g[i] * rescale
        if clipping:
            G = _clip(G, lo, hi)
        h = history[i] + G * G
        history[i] = h
        d = G / numpy.sqrt(h + eps)
        d = d + w[i] * wd
        w[i] = w[i] + d * neg_lr


ADAGRAD_ROWS_KERNEL = RowKernel("adagrad", scalars=_ROW_SCALARS, arrays=3, one=_adagrad_cpu)


def adagrad_rows_rule(w, grad, history, *, lr, wd, eps, rescale, clip):
    """``adagrad_rule`` on the rows ``grad`` (``SparseRows``) holds, history included: the numba
    row loop where it takes the arrays, else the rule on the gathered rows."""
    rows = grad.rows
    if not len(rows):
        return
    if w.flags.c_contiguous and history.flags.c_contiguous:
        width = w.size // w.shape[0]
        w2 = w.reshape(w.shape[0], width)
        scalars = dict(rescale=rescale, lo=-clip if clip is not None else 0,
                       hi=clip if clip is not None else 0, clipping=clip is not None, eps=eps,
                       neg_lr=-lr, wd=wd)
        if ADAGRAD_ROWS_KERNEL.run(w2, rows, grad.values.reshape(len(rows), width),
                                   (history.reshape(w2.shape),), scalars):
            return
    on_rows(adagrad_rule, w, grad, [history], lr=lr, wd=wd, eps=eps, rescale=rescale, clip=clip)


def group_adagrad_rule(w, g, history, *, lr, eps, rescale, clip):
    """One accumulator per row: ``history += mean(G*G, axis=1)``; ``w -= lr*G/sqrt(history+eps)``."""
    xp = array_module_of(w)
    G = scaled_grad(g, rescale, clip)
    history += xp.mean(xp.square(G), axis=1, keepdims=True)
    G *= lr
    G /= xp.sqrt(history + eps)
    w -= G


@register
class AdaGrad(Optimizer):
    """AdaGrad (Duchi et al. 2011). The history is float32 whatever the weight's dtype (MXNet)."""

    _param_attr = {"eps": "float_stable_eps"}

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return zeros_like(weight, numpy.float32)

    def _step(self, index, w, g, history, lr, wd):
        adagrad_rule(w, g, history, lr=lr, wd=wd, eps=self.float_stable_eps,
                     rescale=self.rescale_grad, clip=self._clip)

    def _sparse_step(self, index, w, grad, history, lr, wd, rsp_weight):
        if wd != 0:
            raise RuntimeError("sparse adagrad_update does not support wd (MXNet: Operator not "
                               "implemented); use wd=0 with row_sparse gradients")
        adagrad_rows_rule(w, grad, history, lr=lr, wd=0.0, eps=self.float_stable_eps,
                          rescale=self.rescale_grad, clip=self._clip)


# group_adagrad_rule on the rows a row_sparse gradient holds (numba): per row, the scaled
# gradient, the mean of its squares by NumPy's pairwise sum (``_fc_kernels.pairwise_block``, rows
# of up to 128 values), the history and the step, in the rule's order and precision.
def _group_adagrad_rows_loop(w, rows, g, history, s, scaled, squares):
    rescale, lo, hi, clipping, lr, eps, width = s[0], s[1], s[2], s[3], s[4], s[5], s[6]
    if not in_range(rows, w.shape[0]):  # noqa: F821
        return False
    for r in range(rows.shape[0]):
        i = rows[r]
        gr, wi = g[r], w[i]
        for j in range(wi.shape[0]):
            G = gr[j] * rescale
            if clipping:
                G = _clip(G, lo, hi)
            scaled[j] = G
            squares[j] = G * G
        h = history[i, 0] + _pairwise_block(squares) / width
        history[i, 0] = h
        d = numpy.sqrt(h + eps)
        for j in range(wi.shape[0]):
            wi[j] = wi[j] - scaled[j] * lr / d
    return True


_GROUP_ADAGRAD_ROWS = _jit.Kernel(_group_adagrad_rows_loop,
                                  {"_clip": _kernels._clip_kernel,
                                   "in_range": _kernels._in_range_kernel,
                                   "_pairwise_block": pairwise_block_inline})


def group_adagrad_rows_rule(w, grad, history, *, lr, eps, rescale, clip):
    """``group_adagrad_rule`` on the rows ``grad`` (``SparseRows``) holds: the numba row loop for
    a float32 table of rows up to 128 values (NumPy's pairwise sum of a row in one block), else
    the rule on the gathered rows."""
    rows, values = grad.rows, grad.values
    if not len(rows):
        return
    if type(w) is numpy.ndarray and w.dtype == numpy.float32 and w.ndim == 2 \
            and 0 < w.shape[1] <= _BLOCK and values.size >= _kernels.MIN_SIZE and _jit.ready() \
            and handles_rows(w, rows, values, ()) and type(history) is numpy.ndarray \
            and history.dtype == numpy.float32 and history.shape == (w.shape[0], 1) \
            and history.flags.c_contiguous and not numpy.may_share_memory(history, w):
        s = numpy.array([rescale, -clip if clip is not None else 0, clip if clip is not None else 0,
                         clip is not None, lr, eps, w.shape[1]], dtype=numpy.float32)
        width = w.shape[1]
        if not _GROUP_ADAGRAD_ROWS(w, rows, values, history, s, numpy.empty(width, w.dtype),
                                   numpy.empty(width, w.dtype)):
            raise _kernels.row_ids_error(w.shape[0])
        return
    on_rows(group_adagrad_rule, w, grad, [history], lr=lr, eps=eps, rescale=rescale, clip=clip)


@register
class GroupAdaGrad(Optimizer):
    """AdaGrad with one accumulator per row of a 2-D weight (embeddings); no weight decay."""

    _param_attr = {"eps": "float_stable_eps"}

    def __init__(self, eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        if len(weight.shape) != 2:
            raise ValueError("GroupAdaGrad needs a 2-D weight, got shape %s" % (weight.shape,))
        return _nd_zeros((weight.shape[0], 1), ctx=weight.context, dtype=numpy.float32)

    def _step(self, index, w, g, history, lr, wd):
        if wd != 0:
            raise ValueError("Weight decay is not supported for GroupAdaGrad")
        group_adagrad_rule(w, g, history, lr=lr, eps=self.float_stable_eps,
                           rescale=self.rescale_grad, clip=self._clip)

    def _sparse_step(self, index, w, grad, history, lr, wd, rsp_weight):
        if wd != 0:
            raise ValueError("Weight decay is not supported for GroupAdaGrad")
        group_adagrad_rows_rule(w, grad, history, lr=lr, eps=self.float_stable_eps,
                                rescale=self.rescale_grad, clip=self._clip)

