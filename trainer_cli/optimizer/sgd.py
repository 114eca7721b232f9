"""SGD with momentum and weight decay (``sgd``; ``ccsgd`` is MXNet's deprecated alias).

The rule, MXNet's ``sgd_update`` / ``sgd_mom_update`` (and their ``multi_`` forms), three times:
the NumPy body (the reference), the CPU loop and the CUDA element, which do its operations in
the same order and precision (``kernels`` runs whichever fits); then the optimizer class.
A row_sparse path (issue 15) would be a second NumPy body and ``Kernel`` pair over the rows a
gradient holds, chosen in ``sgd_rule``.
"""
from __future__ import annotations

import os

import numpy

from ..context import array_module_of
from .kernels import CUDA_CLIP, Kernel, clip as _clip
from .optimizer import Optimizer, Plan, register, zeros_like

__all__ = ["SGD", "ccSGD", "sgd_rule"]

_np_ndarray = numpy.ndarray


# ----------------------------------------------------------------------------- the math
def _sgd_numpy(w, g, mom, lr, wd, momentum, rescale, clip):
    """``mom = momentum*mom - lr*wd*w - lr*clip(rescale*g); w += mom`` (no state: the same step
    applied directly). The state is the NEGATIVE velocity (MXNet's convention)."""
    t = w.dtype.type
    lr, wd = t(lr), t(wd)
    xp = numpy if type(w) is _np_ndarray else array_module_of(w)
    # MXNet's kernel rounds (lr*rescale)*g when not clipping and lr*clip(rescale*g) when clipping.
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


# ----------------------------------------------------------------------------- the kernels
# The NumPy body one element at a time: the CPU loop (numba) and the CUDA element, side by side.
_SCALARS = ("lr", "wd", "rescale", "lo", "hi", "momentum", "clipping", "decay")


def _sgd_cpu(w, g, s):
    lr, wd, rescale, lo, hi, clipping, decay = s[0], s[1], s[2], s[3], s[4], s[6], s[7]
    scale = rescale if clipping else lr * rescale
    lr_wd = lr * wd
    for i in range(w.shape[0]):
        step = g[i] * scale
        if clipping:
            step = _clip(step, lo, hi) * lr
        if decay:
            step = step + w[i] * lr_wd
        w[i] = w[i] - step


_SGD_CUDA = ("T g, T lr, T wd, T rescale, T lo, T hi, T momentum, T clipping, T decay", "T w", """
    T x = g * (clipping != 0 ? rescale : lr * rescale);
    if (clipping != 0) {""" + CUDA_CLIP + """
        x = x * lr;
    }
    if (decay != 0) x = x + w * (lr * wd);
    w = w - x;
""")


def _sgd_mom_cpu(w, g, mom, s):
    lr, wd, rescale, lo, hi, momentum, clipping, decay = s[0], s[1], s[2], s[3], s[4], s[5], \
        s[6], s[7]
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


_SGD_MOM_CUDA = ("T g, T lr, T wd, T rescale, T lo, T hi, T momentum, T clipping, T decay",
                 "T w, T mom", """
    T x = g * (clipping != 0 ? rescale : lr * rescale);
    if (clipping != 0) {""" + CUDA_CLIP + """
        x = x * lr;
    }
    T m = mom * momentum;
    if (decay != 0) m = m - w * (lr * wd);
    m = m - x;
    mom = m;
    w = w + m;
""")

SGD_KERNEL = Kernel("sgd", scalars=_SCALARS, arrays=2, cpu=_sgd_cpu, cuda=_SGD_CUDA)
SGD_MOM_KERNEL = Kernel("sgd_mom", scalars=_SCALARS, arrays=3, cpu=_sgd_mom_cpu,
                        cuda=_SGD_MOM_CUDA)


def _scalars(dtype, lr, wd, momentum, rescale, clip):
    clipping = clip is not None
    return dict(lr=lr, wd=wd, rescale=rescale, lo=-clip if clipping else 0,
                hi=clip if clipping else 0, momentum=momentum, clipping=clipping,
                decay=dtype.type(wd) != 0)        # the NumPy body's ``if wd`` on t(wd)


# ----------------------------------------------------------------------------- the rule
def sgd_rule(w, g, mom, *, lr, wd, momentum, rescale, clip):
    """MXNet's sgd(_mom)_update on raw arrays, in place (``mom`` None: no momentum state)."""
    arrays, kernel = ((w, g), SGD_KERNEL) if mom is None else ((w, g, mom), SGD_MOM_KERNEL)
    if not kernel.run(arrays, _scalars(w.dtype, lr, wd, momentum, rescale, clip)):
        _sgd_numpy(w, g, mom, lr, wd, momentum, rescale, clip)


def sgd_steps(step, plans, rescale, clip):
    """``sgd_rule`` for each tensor of a ``PreparedStep`` (``plans``: each one's ``Plan``), the
    tensors a kernel takes in one call per dtype."""
    weights, grads, moms = step.weights, step.grads, step.states
    if all(m is None for m in moms):
        kernel, columns = SGD_KERNEL, (weights, grads)
    elif all(m is not None for m in moms):
        kernel, columns = SGD_MOM_KERNEL, (weights, grads, moms)
    else:
        kernel, columns = None, None

    def rows_of(positions):
        chosen = plans if len(positions) == len(plans) else [plans[p] for p in positions]
        dtype = weights[positions[0]].dtype
        key = (rescale, clip, chosen)

        def build():
            lrs = [p.lr for p in chosen]
            rows = kernel.rows(dtype, len(chosen), _scalars(dtype, 0, 0, 0, rescale, clip), {
                "lr": lrs, "wd": [p.wd for p in chosen], "momentum": [p.momentum for p in chosen]})
            rows[:, _SCALARS.index("decay")] = rows[:, _SCALARS.index("wd")] != 0
            return rows
        # Equal keys mean equal bits, except for zeros (-0.0 == 0.0). A zero weight decay or
        # momentum never reaches the arithmetic; a zero rate or rescale would.
        return step.rows((kernel.name, positions[0]), key, build,
                         reusable=bool(rescale) and all([p.lr for p in chosen]))

    rest = range(len(weights)) if kernel is None else \
        kernel.run_groups(step.split(kernel, lambda: columns), rows_of)
    for p in rest:
        plan = plans[p]
        sgd_rule(weights[p], grads[p], moms[p], lr=plan.lr, wd=plan.wd, momentum=plan.momentum,
                 rescale=rescale, clip=clip)


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
        self.lazy_update = lazy_update      # row-sparse gradients only; all arrays here are dense
        self.aggregate_num = int(os.getenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "4"))

    def create_state(self, index, weight):
        return zeros_like(weight) if self.momentum != 0.0 else None

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
        sgd_steps(step, plans, self.rescale_grad, self._clip)


@register
class ccSGD(SGD):  # noqa: N801  (the registry name is the lower-cased class name)
    """[DEPRECATED] Same as ``SGD``; kept for backward compatibility."""
