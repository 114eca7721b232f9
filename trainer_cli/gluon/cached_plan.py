"""``hybridize()``: a block's forward and backward run from a cached plan.

A plan is the block tree flattened into a list of steps, worked out once (``build``) and kept
until something it depends on changes (``epoch``). A call runs the steps on raw arrays and
records one tape node for the whole block, whose backward runs the steps' backwards in reverse:
no Block dispatch, hooks, parameter lookups by name or tape walk per layer.

Two kinds of step, both computing exactly what the eager layer computes:

- ``_DenseStep`` (Dense, with its ReLU fused when it has one): ``ops.fc_forward`` and
  ``ops.fc_backward``, the very functions the eager FullyConnected op runs, on raw arrays: no
  NDArray and no tape node of its own.
- ``_OpStep`` (every other layer that declares ``_plan_step = "op"``: activations, Dropout,
  BatchNorm, convolutions, pooling, ...): the layer's own ``hybrid_forward`` on the nd module,
  called directly each time, so Dropout draws from the random stream in the same order, BatchNorm
  updates its running statistics and any branch in the layer is taken afresh. Its backward walks
  the few nodes it recorded. Their arithmetic outweighs dispatch, which is what a plan saves.

A block the plan cannot hold (a layer without a declaration, a user's ``hybrid_forward`` or
``forward``, forward hooks, sparse or ``grad_req='add'`` parameters, uninitialized ones) is
``Unplannable``: it runs imperatively, as without ``hybridize()``. Parameters are read live at
every call (``Parameter.data``), so ``set_data`` is seen at once; what changes a plan's structure
(hooks, children, ``grad_req``, ``cast``, re-initialization, ``hybridize``) bumps ``epoch``.
"""
from __future__ import annotations

from .. import autograd as _ag
from .. import ndarray as _nd
from ..ndarray import NDArray
from ..ndarray import ops as _ops
from ..ndarray.ndarray import _recorded, _wrap

__all__ = ["Unplannable", "build", "bump_epoch", "epoch"]


class _Epoch:
    """A counter bumped by every change that may invalidate a plan (one int compare per call)."""
    value = 0


epoch = _Epoch()


def bump_epoch():
    epoch.value += 1


class Unplannable(Exception):
    """The block (or one inside it) cannot run from a plan; it runs imperatively."""


_state = _ag._state


def _owner(cls, name):
    """The class in ``cls``'s MRO that defines ``name``."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass
    return None


def _kind(block):
    """``"dense"``, ``"sequence"`` or ``"op"``: how the plan holds ``block``; Unplannable when
    its class (or a subclass's override of ``forward``/``hybrid_forward``) declares nothing."""
    from .block import HybridBlock
    cls = type(block)
    if _owner(cls, "__call__") is not HybridBlock:
        raise Unplannable("%s overrides __call__" % cls.__name__)
    forward_owner = _owner(cls, "forward")
    hybrid_owner = _owner(cls, "hybrid_forward")
    if forward_owner is HybridBlock:
        kind = hybrid_owner.__dict__.get("_plan_step")
        if kind == "op":
            return kind
    else:
        kind = forward_owner.__dict__.get("_plan_step")
        if kind == "sequence" and hybrid_owner is HybridBlock:
            return kind
        if kind == "dense" and hybrid_owner is forward_owner \
                and _owner(cls, "_dense") is forward_owner:
            return kind
    raise Unplannable("%s has a forward of its own" % cls.__name__)


def _check_params(block):
    for param in block._reg_params.values():
        if param._stype != "default" or param._grad_stype != "default":
            raise Unplannable("parameter %s is sparse" % param.name)
        if param._grad_req == "add":
            raise Unplannable("parameter %s has grad_req='add'" % param.name)
        if param._data is None:
            raise Unplannable("parameter %s is not initialized yet" % param.name)


def _check_hooks(block):
    if block._forward_hooks or block._forward_pre_hooks:
        raise Unplannable("%s has forward hooks" % block.name)


def _add_steps(block, steps):
    _check_hooks(block)
    kind = _kind(block)
    if kind == "sequence":
        for child in block._children.values():
            _add_steps(child, steps)
        return
    _check_params(block)
    # What the layer calls itself (a Dense's or a convolution's activation) runs inside its
    # step: hooks there would be skipped by the plan, so they make it unplannable.
    block.apply(_check_hooks)
    if kind == "dense":
        act = block.act
        if act is None or (type(act) is _relu_class() and act._act_type == "relu"):
            steps.append(_DenseStep(block, act is not None))
            return
        steps.append(_DenseStep(block, False))
        _add_steps(act, steps)
        return
    steps.append(_OpStep(block))


def _relu_class():
    from .nn.basic_layers import Activation
    return Activation


def build(block):
    """The plan of ``block``, or raise Unplannable."""
    steps = []
    _add_steps(block, steps)
    if not steps:
        raise Unplannable("%s has no layers" % block.name)
    if len(steps) == 1 and steps[0].block is block:
        # A lone layer is its own op already (a Dense one tape node): its own forward is the
        # plan, and the cheaper call.
        raise Unplannable("%s is a single layer" % block.name)
    return _Plan(block, steps)


class _DenseStep:
    __slots__ = ("block", "relu")

    def __init__(self, block, relu):
        self.block = block
        self.relu = relu

    def params(self, ctx):
        block = self.block
        weight = block.weight.data(ctx)
        return (weight,) if block.bias is None else (weight, block.bias.data(ctx))

    def forward(self, x, ctx, params, record, input_needs=False):
        weight = params[0]
        bias = params[1] if len(params) == 2 else None
        out, x2 = _ops.fc_forward(x, weight._data, None if bias is None else bias._data,
                                  self.block._flatten, self.relu)
        return out, ((x.shape, x2, out) if record else None)

    def backward(self, g, saved, params, need_x):
        x_shape, x2, out = saved
        weight = params[0]
        bias = params[1] if len(params) == 2 else None
        grads = _ops.fc_backward(g, need_x, weight._grad is not None,
                                 bias is not None and bias._grad is not None, x_shape, x2,
                                 weight._data, out, self.relu, weight, bias)
        return grads[0], grads[1:]


def _sink():
    """A node standing for a step's input, and ``([gradient that reached it], itself)``."""
    got = [None]

    def vjp(g, needs):
        got[0] = g
        return ()
    node = _ag.Node((), vjp)
    return node, (got, node)


class _OpStep:
    __slots__ = ("block", "names")

    def __init__(self, block):
        self.block = block
        self.names = tuple(block._reg_params)

    def params(self, ctx):
        return tuple([p.data(ctx) for p in self.block._reg_params.values()])

    def forward(self, x, ctx, params, record, input_needs=False):
        block = self.block
        xw = _wrap(x, ctx)
        box = None
        if input_needs:
            # The input's gradient is wanted: the op records a node for it (which it would not
            # for an input that needs none: the first layer's gradient is never computed).
            xw._node, box = _sink()
        try:
            out = block.hybrid_forward(_nd, xw, **dict(zip(self.names, params)))
        except Exception as exc:
            if getattr(exc, "failed_block", None) is None:
                from .block import _block_call_text
                exc.failed_block = _block_call_text(block, (xw,))
            raise
        if type(out) is not NDArray:
            raise TypeError("%s returned %s, where a plan step gives one NDArray"
                            % (type(block).__name__, type(out).__name__))
        return out._data, ((out, box) if record else None)

    def backward(self, g, saved, params, need_x):
        out, box = saved
        node = out._node
        if node is None:
            return None, (None,) * len(params)
        inputs = node.inputs
        sink = box[1] if box is not None else None
        if len(set(map(id, inputs))) == len(inputs) and all(
                x._node is None or x._node is sink for x in inputs):
            # One recorded op on the step's input and parameters (each once), the usual layer:
            # its vjp called as the tape walk below would call it, without the walk.
            grads = node.vjp(g, tuple([x._node is not None or x._grad is not None
                                       for x in inputs]))
            by_input = {id(x): gx for x, gx in zip(inputs, grads)}
            gx = None
            if sink is not None:
                gx = next((gx for x, gx in zip(inputs, grads) if x._node is sink), None)
            return gx, [by_input.get(id(arr)) for arr in params]
        var_grads = {}
        # Retained: the outer node frees this step with itself (or keeps it, with retain_graph).
        _ag._propagate(_ag._topological_nodes([out]), {node: g}, var_grads, True)
        grads = []
        for arr in params:
            entry = var_grads.get(id(arr))
            grads.append(None if entry is None else entry[1])
        return (box[0][0] if box is not None else None), grads


class _Plan:
    """The steps of a block, run on raw arrays with one tape node for all of them."""

    def __init__(self, block, steps):
        self.block = block
        self.steps = steps

    def run(self, x):
        ctx = x._ctx
        raw = x._data
        if not _state.recording:
            for step in self.steps:
                raw = step.forward(raw, ctx, step.params(ctx), False)[0]
            return _wrap(raw, ctx)
        # Whether each step's input carries a gradient: the block's input does, or a parameter
        # of an earlier step does.
        needs = x._node is not None or x._grad is not None
        records = []
        for step in self.steps:
            params = step.params(ctx)
            raw, saved = step.forward(raw, ctx, params, True, needs)
            trained = [p._grad is not None for p in params]
            records.append((step, params, saved, needs, trained, all(trained)))
            if not needs and any(trained):
                needs = True
        if not needs:
            return _wrap(raw, ctx)
        # Backward runs the steps last to first, and the parameters' slots on the node are in
        # that order: a parameter shared by several steps then sums its gradients in the order
        # the imperative tape would.
        records.reverse()
        slots = [x]
        for _, params, _, _, trained, _ in records:
            slots.extend([p for p, t in zip(params, trained) if t])

        def vjp(g, needs_in):
            grads_out = [None]
            for step, params, saved, input_needs, trained, all_trained in records:
                g, grads = step.backward(g, saved, params, input_needs)
                if all_trained:
                    grads_out.extend(grads)
                else:
                    grads_out.extend([gp for gp, t in zip(grads, trained) if t])
                if g is None:
                    break
            if needs_in[0]:
                grads_out[0] = g
            if len(grads_out) < len(slots):
                grads_out.extend([None] * (len(slots) - len(grads_out)))
            return grads_out
        vjp.cached_plan_of = self.block.name      # what autograd.grad(create_graph) names
        return _recorded(raw, ctx, tuple(slots), vjp)
