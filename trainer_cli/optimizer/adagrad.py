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
from .kernels import RowKernel, clip as _clip
from .optimizer import Optimizer, on_rows, register, scaled_grad, zeros_like

__all__ = ["AdaGrad", "GroupAdaGrad", "adagrad_rule", "adagrad_rows_rule", "group_adagrad_rule"]


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
        on_rows(group_adagrad_rule, w, grad, [history], lr=lr, eps=self.float_stable_eps,
                rescale=self.rescale_grad, clip=self._clip)

