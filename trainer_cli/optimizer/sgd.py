"""SGD with momentum and weight decay (``sgd``; ``ccsgd`` is MXNet's deprecated alias)."""
from __future__ import annotations

import os

import numpy

from ..context import array_module_of
from . import _cuda, _fused
from .optimizer import Optimizer, register, zeros_like

__all__ = ["SGD", "ccSGD", "sgd_rule"]

_np_ndarray = numpy.ndarray


def sgd_rule(w, g, mom, *, lr, wd, momentum, rescale, clip):
    """MXNet's multi_sgd(_mom)_update kernel.

    ``mom = momentum*mom - lr*wd*w - lr*clip(rescale*g); w += mom``. The state is the NEGATIVE
    velocity (MXNet's convention); without a state the same step is applied directly."""
    _sgd_step(w, g, mom, lr, wd, momentum, rescale, clip)


# The kernels' scalars, by position (per tensor in a group: lr, wd and momentum).
_LR, _WD, _MOMENTUM = 0, 1, 5


def _scalars(dtype, lr, wd, rescale, clip, momentum):
    """One conversion for all scalars: each rounds to ``dtype`` as ``dtype(x)`` would."""
    clipping = clip is not None
    return numpy.array([lr, wd, rescale, -clip if clipping else 0, clip if clipping else 0,
                        momentum], dtype=dtype)


def _sgd_step(w, g, mom, lr, wd, momentum, rescale, clip):
    t = w.dtype.type
    if w.size >= _fused.MIN_SIZE and (
            _sgd_kernel.fits(w, g) if mom is None else _sgd_mom_kernel.fits(w, g, mom)):
        clipping = clip is not None
        scalars = _scalars(t, lr, wd, rescale, clip, momentum)
        if w.ndim != 1:
            w, g, mom = w.ravel(), g.ravel(), None if mom is None else mom.ravel()
        if mom is None:
            _sgd_kernel(w, g, scalars, clipping, bool(scalars[1]))
        else:
            _sgd_mom_kernel(w, g, mom, scalars, clipping, bool(scalars[1]))
        return
    if type(w) is not _np_ndarray and (
            _cuda.handles(w, g) if mom is None else _cuda.handles(w, g, mom)):
        if mom is None:
            _cuda.sgd(w, g, lr=lr, wd=wd, rescale=rescale, clip=clip)
        else:
            _cuda.sgd_mom(w, g, mom, lr=lr, wd=wd, momentum=momentum, rescale=rescale, clip=clip)
        return
    lr, wd = t(lr), t(wd)
    xp = numpy if type(w) is _np_ndarray else array_module_of(w)
    # The kernel rounds (lr*rescale)*g when not clipping and lr*clip(rescale*g) when clipping.
    if clip is None:
        step = xp.multiply(g, lr * t(rescale), dtype=t)
    else:
        step = xp.multiply(g, t(rescale), dtype=t)
        xp.clip(step, t(-clip), t(clip), out=step)
        step *= lr
    if mom is None:
        if wd:
            step += w * (lr * wd)
        w -= step
        return
    mom *= t(momentum)
    if wd:
        mom -= w * (lr * wd)
    mom -= step
    w += mom


# The NumPy body above, one element at a time (see ``_fused``): the same operations, in the same
# order, on scalars of the weight's dtype.
def _sgd_loop(w, g, scalars, clipping, decay):
    lr, wd, rescale, lo, hi = scalars[0], scalars[1], scalars[2], scalars[3], scalars[4]
    scale = rescale if clipping else lr * rescale
    lr_wd = lr * wd
    for i in range(w.shape[0]):
        step = g[i] * scale
        if clipping:
            step = _clip(step, lo, hi) * lr
        if decay:
            step = step + w[i] * lr_wd
        w[i] = w[i] - step


def _sgd_mom_loop(w, g, mom, scalars, clipping, decay):
    lr, wd, rescale, lo, hi = scalars[0], scalars[1], scalars[2], scalars[3], scalars[4]
    momentum = scalars[5]
    scale = rescale if clipping else lr * rescale
    lr_wd = lr * wd
    for i in range(w.shape[0]):
        step = g[i] * scale
        if clipping:
            step = _clip(step, lo, hi) * lr
        m = mom[i] * momentum
        if decay:
            m = m - w[i] * lr_wd
        m = m - step
        mom[i] = m
        w[i] = w[i] + m


_clip = None        # bound to ``_fused.clip`` when a loop compiles
_sgd_kernel = _fused.Kernel(_sgd_loop, "_clip", _fused.clip)
_sgd_mom_kernel = _fused.Kernel(_sgd_mom_loop, "_clip", _fused.clip)

# Each tensor of a group with its own row of scalars (the single kernels' layout); the kernel
# names and ``_column`` are bound by ``_fused.MultiKernel`` when it compiles these.
_sgd_one = _sgd_mom_one = _column = None


def _sgd_multi_loop(table, rows, clipping, spans):
    for j in range(spans.shape[0]):
        k, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
        _sgd_one(_column(table, k, 1, rows)[a:b], _column(table, k, 2, rows)[a:b], rows[k],
                 clipping, rows[k, 1] != 0)


def _sgd_mom_multi_loop(table, rows, clipping, spans):
    for j in range(spans.shape[0]):
        k, a, b = spans[j, 0], spans[j, 1], spans[j, 2]
        _sgd_mom_one(_column(table, k, 1, rows)[a:b], _column(table, k, 2, rows)[a:b],
                     _column(table, k, 3, rows)[a:b], rows[k], clipping, rows[k, 1] != 0)


_sgd_multi = _fused.MultiKernel(_sgd_multi_loop, _sgd_kernel, "_sgd_one")
_sgd_mom_multi = _fused.MultiKernel(_sgd_mom_multi_loop, _sgd_mom_kernel, "_sgd_mom_one")


# The scalar tables of the last few steps: a loop without a schedule asks for the same one at
# every step, and building it costs more than the Python around the kernel call.
_known_rows = {}


def _rows(dtype, positions, plans, rescale, clip):
    chosen = plans if len(positions) == len(plans) else [plans[p] for p in positions]
    key = (dtype, rescale, clip, tuple(chosen))
    rows = _known_rows.get(key)
    if rows is None:
        template = _scalars(dtype, 0, 0, rescale, clip, 0)
        rows = _fused.scalar_rows(template, len(chosen), {
            _LR: [p[0] for p in chosen], _WD: [p[1] for p in chosen],
            _MOMENTUM: [p[2] for p in chosen]})
        # Equal keys mean equal bits, except for zeros (-0.0 == 0.0). A zero weight decay and a
        # zero momentum never reach the arithmetic; a zero rate or rescale would.
        if rescale and all([p[0] for p in chosen]):
            if len(_known_rows) >= 16:
                _known_rows.clear()
            rows.flags.writeable = False
            _known_rows[key] = rows
    return rows


def sgd_steps(cache, weights, grads, moms, plans, rescale, clip):
    """``_sgd_step`` for each tensor (``plans``: its ``(lr, wd, momentum)``), the tensors a
    kernel handles in one call per dtype."""
    if all(m is None for m in moms):
        groups, rest = cache.groups((weights, grads))
    elif all(m is not None for m in moms):
        groups, rest = cache.groups((weights, grads, moms))
    else:
        groups, rest = (), range(len(weights))
    clipping = clip is not None
    for positions, table, spans in groups:
        rows = _rows(weights[positions[0]].dtype, positions, plans, rescale, clip)
        multi = _sgd_multi if table.shape[1] == 3 else _sgd_mom_multi
        multi.run(table, rows, clipping, spans=spans)
    for p in rest:
        lr, wd, momentum = plans[p]
        _sgd_step(weights[p], grads[p], moms[p], lr, wd, momentum, rescale, clip)


@register
class SGD(Optimizer):
    """SGD: ``w += mom`` with ``mom = momentum*mom - lr*(clip(rescale*g) + wd*w)``.

    Updates run aggregated (``aggregate_num`` tensors per call, as the Updater groups them), which
    matters only for the order of scheduler calls; every tensor gets the same rule."""

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update      # row-sparse gradients only; all arrays here are dense
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))

    def create_state(self, index, weight):
        return zeros_like(weight) if self.momentum != 0.0 else None

    def _mp_pack(self, weight32, state):
        return (state, weight32)

    def _mp_unpack(self, state):
        return state[1], state[0]

    def _lrs_wds(self, indices, weights, grads):
        return self._get_lrs_wds(indices)

    def _momentum(self):
        # MXNet passes momentum to the kernel only when > 0 (a negative one creates a state but
        # runs without momentum).
        return self.momentum if self.momentum > 0 else 0.0

    _counts_each_index = False

    def _plan(self, indices, weights, grads):
        # An aggregated update counts its indices together, then asks for their rates (MXNet).
        self._update_count(indices)
        lrs, wds = self._lrs_wds(indices, weights, grads)
        momentum = self._momentum()     # after the rates: LARS's depends on them
        return [(lr, wd, momentum) for lr, wd in zip(lrs, wds)]

    def _steps(self, weights, grads, states, plans):
        sgd_steps(self._fused_tables(), weights, grads, states, plans, self.rescale_grad,
                  self._clip)


@register
class ccSGD(SGD):  # noqa: N801  (the registry name is the lower-cased class name)
    """[DEPRECATED] Same as ``SGD``; kept for backward compatibility."""

