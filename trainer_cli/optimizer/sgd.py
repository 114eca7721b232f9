"""SGD with momentum and weight decay (``sgd``; ``ccsgd`` is MXNet's deprecated alias).

The rule, MXNet's ``sgd_update`` / ``sgd_mom_update`` (and their ``multi_`` forms), three times:
the NumPy body (the reference), the CPU loop and the CUDA element, which do its operations in
the same order and precision (``kernels`` runs whichever fits); then MXNet's row_sparse kernels
(a NumPy body and a ``RowKernel`` over the rows a gradient holds, chosen in ``sgd_sparse_rule``);
then the optimizer class.

Row_sparse gradients (``SparseRows``), MXNet 1.9.1's ``SGDUpdateDnsRspImpl``,
``SGDMomLazyUpdateDnsRspDnsImpl`` and ``SGDMomStdUpdateDnsRspDnsImpl``:

* lazy (``lazy_update=True``, the default): only the rows present in the gradient change, weight
  decay and momentum included. With momentum each present row takes the dense rule; without,
  ``w = (1 - lr*wd)*w - lr*clip(rescale*g)`` (MXNet's single-tensor kernel, which rounds the
  decay differently from the dense multi-tensor one). Cost: O(rows present).
* standard (``lazy_update=False``): every row, absent rows with gradient 0. Without momentum
  MXNet first scales every row by ``(1 - lr*wd)``, then subtracts the present rows' steps.
"""
from __future__ import annotations

import os
from functools import partial
from math import copysign as _copysign
from operator import is_

import numpy

from ..context import array_module_of
from . import kernels as _kernels
from .kernels import CUDA_CLIP, Kernel, RowKernel, clip as _clip
from .optimizer import Optimizer, Plan, SparseRows, param_type, register, zeros_like

__all__ = ["SGD", "ccSGD", "sgd_rule", "sgd_sparse_rule"]

_np_ndarray = numpy.ndarray
_is_none = partial(is_, None)


# ----------------------------------------------------------------------------- the math
def _sgd_numpy(w, g, mom, lr, wd, momentum, rescale, clip):
    """``mom = momentum*mom - lr*wd*w - lr*clip(rescale*g); w += mom`` (no state: the same step
    applied directly). The state is the NEGATIVE velocity (MXNet's convention)."""
    t = param_type(w.dtype)
    scale, lr_wd, minus_lr_wd = _scalars_of(t, lr, wd, rescale)
    if clip is None and type(w) is _np_ndarray:
        step = numpy.multiply(g, scale, dtype=t)   # _step_of's, without its call
    else:
        step = _step_of(w, g, t(lr), rescale, clip)
    # The decay term even when wd is 0, as MXNet's kernels compute it: 0 * inf is NaN, so an
    # infinite weight turns NaN at its next step there, and here too.
    if mom is None:
        # MXNet's multi_sgd_update: w += (0 - lr*wd*w) - step, in that order. The value of
        # w - (step + lr*wd*w), but a zero result is +0.0 wherever w was -0.0 (MXNet's never is
        # -0.0), and of two NaNs the weight's decay term's is the one kept.
        if minus_lr_wd is not None:
            # One operation fewer: w*(-lr_wd) is 0 - lr*wd*w except where lr*wd*w is +0.0 (it
            # gives -0.0 there). With lr_wd's sign bit clear that is only where w >= +0, and
            # there w + (-0.0 - step) is w + (+0.0 - step), whatever step is.
            decayed = w * minus_lr_wd
            decayed -= step
            w += decayed
            return
        xp = numpy if type(w) is _np_ndarray else array_module_of(w)
        decayed = w * lr_wd
        xp.subtract(t(0), decayed, out=decayed)
        decayed -= step
        w += decayed
        return
    mom *= t(momentum)
    mom -= w * lr_wd
    mom -= step
    w += mom


# (dtype, lr, wd, rescale and their signs) -> (lr * rescale, lr * wd, -(lr * wd) or None when
# lr * wd has its sign bit set), each in that dtype: making these scalars from Python floats at
# every step costs a tiny model's step (the tutorial's perceptron) as much as one of its array
# operations per tensor. The signs are part of the key because -0.0 == 0.0 (and hashes alike),
# while a step of -0.0 * g leaves zero weights with another sign than 0.0 * g.
_STEP_SCALARS = {}


def _scalars_of(t, lr, wd, rescale):
    key = (t, lr, wd, rescale, _copysign(1.0, lr), _copysign(1.0, wd), _copysign(1.0, rescale))
    found = _STEP_SCALARS.get(key)
    if found is None:
        if len(_STEP_SCALARS) >= 256:    # a scheduler's rate is another key at every step
            _STEP_SCALARS.clear()
        lr_wd = t(lr) * t(wd)
        found = _STEP_SCALARS[key] = (t(lr) * t(rescale), lr_wd,
                                      -lr_wd if _copysign(1.0, lr_wd) > 0 else None)
    return found


def _step_of(w, g, lr, rescale, clip):
    """A new array ``lr*clip(rescale*g)`` in ``w``'s dtype (``lr`` already of that dtype).
    MXNet's kernels round (lr*rescale)*g when not clipping and lr*clip(rescale*g) when
    clipping."""
    t = param_type(w.dtype)
    xp = numpy if type(w) is _np_ndarray else array_module_of(w)
    if clip is None:
        return xp.multiply(g, lr * t(rescale), dtype=t)
    step = xp.multiply(g, t(rescale), dtype=t)
    xp.clip(step, t(-clip), t(clip), out=step)
    step *= lr
    return step


def _sgd_rows_numpy(w, rows, g, mom, lr, wd, momentum, rescale, clip):
    """MXNet's lazy row_sparse kernels on rows ``rows`` of ``w`` (and ``mom``), ``g`` the
    gradient's values: with momentum the dense rule on those rows; without,
    ``w = (1 - lr*wd)*w - lr*clip(rescale*g)``."""
    if mom is not None:
        rows_w, rows_mom = w[rows], mom[rows]
        _sgd_numpy(rows_w, g, rows_mom, lr, wd, momentum, rescale, clip)
        mom[rows] = rows_mom
        w[rows] = rows_w
        return
    t = param_type(w.dtype)
    lr = t(lr)
    step = _step_of(w, g, lr, rescale, clip)
    rows_w = w[rows]
    keep = _keep(w.dtype, lr, wd)
    if keep != 1:
        rows_w *= keep
    rows_w -= step
    w[rows] = rows_w


def _keep(dtype, lr, wd):
    """``1 - lr*wd`` in ``dtype``: the factor MXNet's row_sparse SGD kernel scales rows by."""
    t = param_type(dtype)
    return t(1) - t(lr) * t(wd)


def _sgd_std_numpy(w, grad, mom, lr, wd, momentum, rescale, clip):
    """MXNet's standard (not lazy) update with a row_sparse gradient ``grad``: with momentum the
    dense rule, absent rows with gradient 0; without, every row scaled by ``1 - lr*wd``, then
    the present rows' steps subtracted."""
    if mom is not None:
        sgd_rule(w, grad.dense(), mom, lr=lr, wd=wd, momentum=momentum, rescale=rescale,
                 clip=clip)
        return
    keep = _keep(w.dtype, lr, wd)
    if keep != 1:
        w *= keep
    if len(grad.rows):
        _sgd_rows_numpy(w.reshape(w.shape[0], -1), grad.rows,
                        grad.values.reshape(len(grad.rows), -1), None, lr, 0.0, 0.0, rescale,
                        clip)


# ----------------------------------------------------------------------------- the kernels
# The NumPy body one element at a time: the CPU loop (numba) and the CUDA element, side by side.
_SCALARS = ("lr", "wd", "rescale", "lo", "hi", "momentum", "clipping")


def _sgd_cpu(w, g, s):
    lr, wd, rescale, lo, hi, clipping = s[0], s[1], s[2], s[3], s[4], s[6]
    scale = rescale if clipping else lr * rescale
    lr_wd = lr * wd
    zero = clipping - clipping      # +0.0 in the scalars' dtype (a literal would be float64)
    for i in range(w.shape[0]):
        step = g[i] * scale
        if clipping:
            step = _clip(step, lo, hi) * lr
        m = (zero - w[i] * lr_wd) - step
        w[i] = w[i] + m


_SGD_CUDA = ("T g, T lr, T wd, T rescale, T lo, T hi, T momentum, T clipping", "T w", """
    T x = g * (clipping != 0 ? rescale : lr * rescale);
    if (clipping != 0) {""" + CUDA_CLIP + """
        x = x * lr;
    }
    T m = (T(0) - w * (lr * wd)) - x;
    w = w + m;
""")


def _sgd_mom_cpu(w, g, mom, s):
    lr, wd, rescale, lo, hi, momentum, clipping = s[0], s[1], s[2], s[3], s[4], s[5], s[6]
    scale = rescale if clipping else lr * rescale
    lr_wd = lr * wd
    for i in range(w.shape[0]):
        step = g[i] * scale
        if clipping:
            step = _clip(step, lo, hi) * lr
        m = mom[i] * momentum - w[i] * lr_wd - step
        mom[i] = m
        w[i] = w[i] + m


_SGD_MOM_CUDA = ("T g, T lr, T wd, T rescale, T lo, T hi, T momentum, T clipping",
                 "T w, T mom", """
    T x = g * (clipping != 0 ? rescale : lr * rescale);
    if (clipping != 0) {""" + CUDA_CLIP + """
        x = x * lr;
    }
    T m = mom * momentum - w * (lr * wd) - x;
    mom = m;
    w = w + m;
""")

def _sgd_lazy_cpu(w, g, s):
    # The row_sparse kernel without momentum: ``keep`` is 1 - lr*wd (the NumPy body's _keep).
    lr, rescale, lo, hi, clipping, keep = s[0], s[2], s[3], s[4], s[6], s[7]
    scale = rescale if clipping else lr * rescale
    for i in range(w.shape[0]):
        step = g[i] * scale
        if clipping:
            step = _clip(step, lo, hi) * lr
        if keep != 1:
            w[i] = w[i] * keep - step
        else:
            w[i] = w[i] - step


_SGD_LAZY_CUDA = ("T g, T lr, T rescale, T lo, T hi, T clipping, T keep", "T w", """
    T x = g * (clipping != 0 ? rescale : lr * rescale);
    if (clipping != 0) {""" + CUDA_CLIP + """
        x = x * lr;
    }
    w = keep != 1 ? w * keep - x : w - x;
""")


SGD_KERNEL = Kernel("sgd", scalars=_SCALARS, arrays=2, cpu=_sgd_cpu, cuda=_SGD_CUDA)
SGD_MOM_KERNEL = Kernel("sgd_mom", scalars=_SCALARS, arrays=3, cpu=_sgd_mom_cpu,
                        cuda=_SGD_MOM_CUDA)


_ROW_SCALARS = _SCALARS + ("keep",)
SGD_ROWS_KERNEL = RowKernel("sgd_lazy", scalars=_ROW_SCALARS, arrays=2, one=_sgd_lazy_cpu,
                            params=True, computed=("keep",), cuda=_SGD_LAZY_CUDA)
SGD_MOM_ROWS_KERNEL = RowKernel("sgd_mom", scalars=_ROW_SCALARS, arrays=3, one=_sgd_mom_cpu,
                                params=True, computed=("keep",), cuda=_SGD_MOM_CUDA)


def _scalars(dtype, lr, wd, momentum, rescale, clip):
    clipping = clip is not None
    return dict(lr=lr, wd=wd, rescale=rescale, lo=-clip if clipping else 0,
                hi=clip if clipping else 0, momentum=momentum, clipping=clipping,
                keep=_keep(dtype, lr, wd))


# ----------------------------------------------------------------------------- the rule
def sgd_rule(w, g, mom, *, lr, wd, momentum, rescale, clip, single=False):
    """MXNet's sgd(_mom)_update on raw arrays, in place (``mom`` None: no momentum state).

    ``single``: MXNet's single-tensor ``sgd_update`` without momentum (what its NAG without
    momentum and LBSGD call): ``w = (1 - lr*wd)*w - step``, whose zero results keep the sign
    ``w - step`` gives them, where the multi-tensor kernel that SGD uses makes them +0.0, and
    whose decay rounds as a factor (and keeps an infinite weight infinite)."""
    if single and mom is None:
        t = param_type(w.dtype)
        step = _step_of(w, g, t(lr), rescale, clip)
        keep = _keep(w.dtype, lr, wd)
        if keep != 1:       # 1*w is w, infinities, NaNs and zero signs included
            w *= keep
        w -= step
        return
    arrays, kernel = ((w, g), SGD_KERNEL) if mom is None else ((w, g, mom), SGD_MOM_KERNEL)
    if kernel.declines(w) or not kernel.run(arrays, _scalars(w.dtype, lr, wd, momentum, rescale,
                                                             clip)):
        _sgd_numpy(w, g, mom, lr, wd, momentum, rescale, clip)


def sgd_sparse_rule(w, grad, mom, *, lr, wd, momentum, rescale, clip, lazy):
    """MXNet's sgd(_mom)_update with a row_sparse gradient ``grad`` (``SparseRows``) on raw
    arrays, in place: lazy (only the present rows) or standard (see the module docstring)."""
    if not lazy:
        grad.checked_for(w)
        _sgd_std_numpy(w, grad, mom, lr, wd, momentum, rescale, clip)
        return
    grad.checked_for(w, rows=False)
    rows = grad.rows
    if not len(rows):
        return          # MXNet: no stored row, nothing changes
    width = w.size // w.shape[0]
    w2, g2 = w.reshape(w.shape[0], width), grad.values.reshape(len(rows), width)
    mom2 = None if mom is None else mom.reshape(w2.shape)
    kernel, states = (SGD_ROWS_KERNEL, ()) if mom is None else (SGD_MOM_ROWS_KERNEL, (mom2,))
    dtype = w.dtype
    key = (dtype, lr, wd, momentum, rescale, clip, _zero_signs(lr, wd, momentum, rescale, clip))
    row = kernel.kept_row(key, dtype, lambda: _scalars(dtype, lr, wd, momentum, rescale, clip))
    if not kernel.run(w2, rows, g2, states, row):
        grad.checked_for(w)
        _sgd_rows_numpy(w2, rows, g2, mom2, lr, wd, momentum, rescale, clip)


def _zero_signs(lr, wd, momentum, rescale, clip):
    """The sign of each value that is zero (None for the others): what tells the rows of
    scalars for -0.0 and 0.0 apart in a key of values that compare equal."""
    return (_copysign(1.0, lr) if lr == 0 else None, _copysign(1.0, wd) if wd == 0 else None,
            _copysign(1.0, momentum) if momentum == 0 else None,
            _copysign(1.0, rescale) if rescale == 0 else None,
            _copysign(1.0, clip) if clip is not None and clip == 0 else None)


def sgd_steps(step, plans, rescale, clip, lazy=True):
    """``sgd_rule`` for each tensor of a ``PreparedStep`` (``plans``: each one's ``Plan``), the
    tensors a kernel takes in one call per dtype; ``sgd_sparse_rule`` for row_sparse
    gradients (``lazy``: MXNet's ``lazy_update``)."""
    weights, grads, moms = step.weights, step.grads, step.states
    if all(map(_is_none, moms)):
        kernel, columns = SGD_KERNEL, (weights, grads)
    elif not any(map(_is_none, moms)):
        kernel, columns = SGD_MOM_KERNEL, (weights, grads, moms)
    else:
        kernel, columns = None, None

    def rows_of(positions):
        chosen = plans if len(positions) == len(plans) else [plans[p] for p in positions]
        dtype = weights[positions[0]].dtype
        key = (rescale, clip, chosen)

        def build():
            return _kernel_rows(kernel, dtype, chosen, rescale, clip)
        # Equal keys mean equal bits, except for zeros (-0.0 == 0.0). A zero momentum never
        # reaches the arithmetic; a zero rate or rescale would, and a weight decay of -0.0.
        return step.rows((kernel.name, positions[0]), key, build,
                         reusable=bool(rescale) and all([p.lr for p in chosen])
                         and all([p.wd or _copysign(1.0, p.wd) > 0 for p in chosen]))

    rest = range(len(weights)) if kernel is None else \
        kernel.run_groups(step.split(kernel, lambda: columns), rows_of)
    if rest:
        rest = _small_steps(step, plans, rest, kernel is None, rescale, clip)
    for p in rest:
        plan, w, g = plans[p], weights[p], grads[p]
        if type(g) is SparseRows:
            sgd_sparse_rule(w, g, moms[p], lr=plan.lr, wd=plan.wd, momentum=plan.momentum,
                            rescale=rescale, clip=clip, lazy=lazy)
        elif SGD_KERNEL.declines(w):        # tensors too small for a kernel: straight to NumPy
            _sgd_numpy(w, g, moms[p], plan.lr, plan.wd, plan.momentum, rescale, clip)
        else:
            sgd_rule(w, g, moms[p], lr=plan.lr, wd=plan.wd, momentum=plan.momentum,
                     rescale=rescale, clip=clip)


def _kernel_rows(kernel, dtype, plans, rescale, clip):
    """A kernel group's rows of scalars, one per tensor of ``plans``."""
    return kernel.rows(dtype, len(plans), _scalars(dtype, 0, 0, 0, rescale, clip), {
        "lr": [p.lr for p in plans], "wd": [p.wd for p in plans],
        "momentum": [p.momentum for p in plans]})


# ----------------------------------------------------------------------------- small tensors
# A tensor under the kernels' MIN_SIZE runs the NumPy body, where a tiny model's step is a few
# NumPy calls per tensor on a handful of values: there, allocating the temporaries and working out
# the scalars cost about as much as the arithmetic. A prepared step keeps each small tensor's
# arrays with two scratch arrays of its shape, and the scalars of the last step while the plans
# stay equal; the calls are those of ``_sgd_numpy``, in its order, on the same values.
_mul, _sub, _add = numpy.multiply, numpy.subtract, numpy.add


def _small_steps(step, plans, rest, mixed, rescale, clip):
    """The NumPy body for the small dense tensors among positions ``rest`` of ``step``, with
    the scratch arrays and scalars it keeps; returns the positions left to the caller."""
    tensors, others = step.worked_out(("sgd_small", mixed), _small_tensors, step, rest)
    if not tensors:
        return others
    chosen = plans if len(tensors) == len(plans) else [plans[t[0]] for t in tensors]
    # Equal keys mean equal bits except for zeros (-0.0 == 0.0), whose sign every value here
    # carries into the arithmetic: keys with a -0.0 are not kept.
    scalars = step.rows(("sgd_small", mixed), (rescale, clip, chosen),
                        lambda: _small_scalars(tensors, chosen, rescale, clip),
                        reusable=_plus(rescale) and all([
                            _plus(p.lr) and _plus(p.wd) and _plus(p.momentum) for p in chosen]))
    _run_small(tensors, scalars, step.grads, clip is not None)
    return others


def _plus(x) -> bool:
    """Whether ``x`` is not -0.0 (the one value equal to another of other bits)."""
    return bool(x) or _copysign(1.0, x) > 0


def _run_small(tensors, scalars, grads, clipping):
    """``_sgd_numpy``'s calls, in its order, for each of ``tensors`` (from ``_small_tensors``)
    with its ``scalars`` (from ``_small_scalars``), into the scratch arrays."""
    for (p, w, mom, st, dec), (scale, lr_wd, minus_lr_wd, momentum, zero) in zip(tensors,
                                                                                 scalars):
        if clipping:
            rescale_t, lo, hi, lr = scale
            _mul(grads[p], rescale_t, st)
            numpy.clip(st, lo, hi, out=st)
            _mul(st, lr, st)
        else:
            _mul(grads[p], scale, st)
        if mom is None:
            if minus_lr_wd is not None:
                _mul(w, minus_lr_wd, dec)
            else:
                _mul(w, lr_wd, dec)
                _sub(zero, dec, dec)
            _sub(dec, st, dec)
            _add(w, dec, w)
        else:
            _mul(mom, momentum, mom)
            _mul(w, lr_wd, dec)
            _sub(mom, dec, mom)
            _sub(mom, st, mom)
            _add(w, mom, w)


def _small_tensors(step, rest):
    """``([(position, w, mom, step scratch, decay scratch)], other positions)``: the tensors of
    ``rest`` that ``_small_steps`` runs (NumPy, under the kernels' MIN_SIZE, a dense gradient and
    a state of the weight's dtype and shape), and the rest."""
    weights, grads, moms = step.weights, step.grads, step.states
    tensors, others, small = [], [], _kernels.MIN_SIZE
    for p in rest:
        w, g, mom = weights[p], grads[p], moms[p]
        if type(w) is _np_ndarray and type(g) is _np_ndarray and w.size < small \
                and g.dtype is w.dtype and g.shape == w.shape and w.dtype.kind == "f" and (
                    mom is None or (type(mom) is _np_ndarray and mom.dtype is w.dtype
                                    and mom.shape == w.shape)):
            tensors.append((p, w, mom, numpy.empty_like(w), numpy.empty_like(w)))
        else:
            others.append(p)
    return tensors, others


def _small_scalars(tensors, plans, rescale, clip):
    """Each tensor's scalars for ``_small_steps``, made as ``_sgd_numpy`` makes them."""
    found = []
    for (_, w, _, _, _), plan in zip(tensors, plans):
        t = param_type(w.dtype)
        scale, lr_wd, minus_lr_wd = _scalars_of(t, plan.lr, plan.wd, rescale)
        if clip is not None:
            scale = (t(rescale), t(-clip), t(clip), t(plan.lr))
        found.append((scale, lr_wd, minus_lr_wd, t(plan.momentum), t(0)))
    return found


class _Again:
    """What ``SGD._steps_again`` keeps about a prepared step whose every tensor one kernel's
    groups take (``kernel``, ``split``) or ``_small_steps`` runs (``tensors``): their
    Parameters, and the scalars of the last step (per tensor, or a group's rows by its first
    position, made when the group asks) with what they were made from (identical objects, or
    equal values that are not -0.0)."""

    __slots__ = ("tensors", "kernel", "split", "weights", "param_dict", "params", "scalars",
                 "plans", "made_with", "lrs", "rescale", "mults", "wd", "momentum", "clip")

    def __init__(self, tensors=None, kernel=None, split=None, weights=None):
        self.tensors, self.kernel, self.split, self.weights = tensors, kernel, split, weights
        self.param_dict = self.params = self.scalars = self.lrs = None

    def rows_of(self, positions):
        """A kernel group's rows (``Kernel.run_groups`` asks for each group)."""
        rows = self.scalars.get(positions[0])
        if rows is None:
            rescale, clip = self.made_with
            plans = self.plans
            rows = self.scalars[positions[0]] = _kernel_rows(
                self.kernel, self.weights[positions[0]].dtype, [plans[p] for p in positions],
                rescale, clip)
        return rows


def _again_of(step, cls):
    """An ``_Again`` for ``step`` when ``cls`` is plain SGD and ``sgd_steps`` would run every
    tensor of it through one kernel's groups, or every one through ``_small_steps`` (every
    tensor small and dense); else False."""
    if not _plain_sgd(cls):
        return False
    moms = step.states
    if all(map(_is_none, moms)):
        kernel, columns = SGD_KERNEL, (step.weights, step.grads)
    elif not any(map(_is_none, moms)):
        kernel, columns = SGD_MOM_KERNEL, (step.weights, step.grads, moms)
    else:
        return False
    split = step.split(kernel, lambda: columns)
    found, rest = split
    if found:
        return False if len(rest) else _Again(kernel=kernel, split=split, weights=step.weights)
    if len(rest) != len(step.weights):
        return False
    tensors, others = step.worked_out(("sgd_small", False), _small_tensors, step, rest)
    return False if others or not tensors else _Again(tensors)


# ----------------------------------------------------------------------------- the optimizer
@register
class SGD(Optimizer):
    """SGD: ``w += mom`` with ``mom = momentum*mom - lr*(clip(rescale*g) + wd*w)``.

    Updates run aggregated (``aggregate_num`` tensors per call, as the Updater groups them), which
    matters only for the order of scheduler calls; every tensor gets the same rule."""

    # An aggregated update counts its indices together, then asks for their rates (MXNet).
    counts_each_index = False

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.lazy_update = lazy_update      # row_sparse gradients only (sgd_sparse_rule)
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))

    def create_state(self, index, weight):
        # Lazy: a row_sparse weight gets a row_sparse momentum (MXNet).
        if self.momentum == 0.0:
            return None
        return zeros_like(weight, stype=weight.stype if self.lazy_update else "default")

    def _mp_pack(self, weight32, state):
        return (state, weight32)

    def _mp_unpack(self, state):
        return state[1], state[0]

    def _lrs_wds(self, indices, weights, grads):
        """The rates of a counted chunk (LARS scales them by its trust ratio)."""
        return self._rates(indices)

    def _momentum(self):
        # MXNet passes momentum to the kernel only when > 0 (a negative one creates a state but
        # runs without momentum).
        return self.momentum if self.momentum > 0 else 0.0

    def _plan(self, indices, weights, grads):
        self._update_count(indices)
        lrs, wds = self._lrs_wds(indices, weights, grads)
        momentum = self._momentum()     # after the rates: LARS's depends on them
        return [Plan(index, lr, wd, momentum) for index, lr, wd in zip(indices, lrs, wds)]

    def _steps(self, step, plans):
        sgd_steps(step, plans, self.rescale_grad, self._clip, self.lazy_update)

    def _steps_again(self, step, indices, chunks):
        """``_plan`` for each of ``chunks`` then ``_steps``, for a prepared step whose tensors
        one kernel's groups take, or all small (see ``_small_steps``): the same counts, scheduler
        calls and arithmetic, with the scalars of the last step kept while what they are made
        from stays the same. A tiny model's every step runs this, so the bookkeeping is
        inlined."""
        again = step.worked_out("sgd_again", _again_of, step, type(self))
        if again is False:
            return False
        param_dict = self.param_dict
        if param_dict is not again.param_dict:
            params = self._params_of(indices)
            if params is None:
                return False
            again.param_dict, again.params = param_dict, params
        if len(chunks) == 1:
            # _update_count, then _global_lr.
            counts, begin, num_update = self._index_update_count, self.begin_num_update, \
                self.num_update
            for index in indices:
                count = counts.get(index, begin) + 1
                counts[index] = count
                if not num_update > count:      # max(count, num_update), ties to count
                    num_update = count
            self.num_update = num_update
            scheduler = self.lr_scheduler
            lrs = [scheduler(num_update) if scheduler is not None else self.lr]
        else:
            lrs = []
            for start, stop in chunks:
                self._update_count(indices[start:stop])
                lrs.append(self._global_lr())
        rescale, wd, momentum, clip = self.rescale_grad, self.wd, self.momentum, \
            self.clip_gradient
        if not momentum > 0:                    # _momentum
            momentum = 0.0
        if clip is not None and not clip > 0:   # _clip
            clip = None
        kept_lrs = again.lrs
        # Kept scalars were made from values none of which is -0.0; a value is the same when it
        # is the same object, or equal and not -0.0 itself.
        same = kept_lrs is not None and wd is again.wd and momentum is again.momentum \
            and clip is again.clip and len(lrs) == len(kept_lrs) and (
                rescale is again.rescale or (rescale == again.rescale and _plus(rescale)))
        if same:
            for lr, kept in zip(lrs, kept_lrs):
                if lr is not kept and not (lr == kept and _plus(lr)):
                    same = False
                    break
            else:
                for param, (lr_mult, wd_mult) in zip(again.params, again.mults):
                    if param.lr_mult is not lr_mult or param.wd_mult is not wd_mult:
                        same = False
                        break
        if not same:
            self._again_scalars(again, chunks, lrs, rescale, wd, momentum, clip)
        if again.kernel is None:
            _run_small(again.tensors, again.scalars, step.grads, clip is not None)
        else:
            again.kernel.run_groups(again.split, again.rows_of)
        return True

    def _again_scalars(self, again, chunks, lrs, rescale, wd, momentum, clip):
        """``again.scalars`` from the rates ``_plan`` would give, and what they were made from
        (for the next step to compare) unless some of it is -0.0."""
        mults = [(p.lr_mult, p.wd_mult) for p in again.params]
        plans = []
        for (start, stop), lr in zip(chunks, lrs):
            plans += [Plan(None, lr * lr_mult, wd * wd_mult, momentum)
                      for lr_mult, wd_mult in mults[start:stop]]
        if again.kernel is None:
            again.scalars = _small_scalars(again.tensors, [plans[t[0]] for t in again.tensors],
                                           rescale, clip)
        else:       # each group's rows, made when it asks (Kernel.run_groups)
            again.scalars, again.plans, again.made_with = {}, plans, (rescale, clip)
        again.lrs = None
        if _plus(rescale) and all(map(_plus, lrs)) and all(
                _plus(p.lr) and _plus(p.wd) and _plus(p.momentum) for p in plans):
            again.lrs, again.rescale, again.mults = lrs, rescale, mults
            again.wd, again.momentum, again.clip = wd, momentum, clip


# Whether a class computes SGD's rates and steps as SGD does (LARS, for one, does not).
_PLAIN_SGD = {}
_PLAN_PARTS = ("_plan", "_lrs_wds", "_momentum", "_steps", "_rates", "_global_lr",
               "_update_count", "_params_of", "_steps_again", "_again_scalars")


def _plain_sgd(cls) -> bool:
    found = _PLAIN_SGD.get(cls)
    if found is None:
        found = _PLAIN_SGD[cls] = all(getattr(cls, name) is getattr(SGD, name)
                                      for name in _PLAN_PARTS)
    return found


@register
class ccSGD(SGD):  # noqa: N801  (the registry name is the lower-cased class name)
    """[DEPRECATED] Same as ``SGD``; kept for backward compatibility."""
