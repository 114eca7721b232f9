"""``hybridize()``: a block's forward and backward run from a cached plan.

A plan is the block tree flattened into a list of steps, worked out once (``build``) and kept
until something it depends on changes (``epoch``). A call runs the steps on raw arrays and
records one tape node for the whole block, whose backward runs the steps' backwards in reverse
(``ndarray/plan_steps.py``, which owns that array and tape work): no Block dispatch, hooks,
parameter lookups by name or tape walk per layer.

Three kinds of step, each computing exactly what the eager layers compute:

- ``_DenseStep`` (Dense, with its ReLU fused when it has one): ``ops.fc_forward`` and
  ``ops.fc_backward``, the very functions the eager FullyConnected op runs, on raw arrays: no
  NDArray and no tape node of its own.
- ``_ReLUFusedStep``: a BatchNorm or a convolution and the ReLU after it in a sequence as one
  op, the pairs an eager sequence takes (``block._relu_fused_steps``), with the two layers'
  numbers (a Dense and the ReLU after it: a ``_DenseStep`` with its ReLU).
- ``_OpStep`` (every other layer whose class declares ``_plan_step = "op"``: activations,
  Dropout, BatchNorm, convolutions, pooling, ...): the layer's own ``hybrid_forward`` on the nd
  module, called directly each time, so Dropout draws from the random stream in the same order,
  BatchNorm updates its running statistics and any branch in the layer is taken afresh. Their
  arithmetic outweighs dispatch, which is what a plan saves.

The declaration says that the layer's ``hybrid_forward`` computes from its input and its own
parameters only (a user's block may read other arrays, whose gradients a plan would not know
to pass on).
A block the plan cannot hold (a layer without a declaration, a user's ``hybrid_forward`` or
``forward``, forward hooks, sparse or ``grad_req='add'`` parameters, uninitialized ones) is
``Unplannable``: it runs imperatively, as without ``hybridize()``. Parameters are read live at
every call (``Parameter.data``), so ``set_data`` is seen at once; what changes a plan's structure
(hooks, children, ``grad_req``, ``cast``, re-initialization, ``hybridize``) bumps ``epoch``.
"""
from __future__ import annotations

from .. import ndarray as _nd
from ..ndarray import plan_steps as _steps

__all__ = ["Unplannable", "build", "bump_epoch", "epoch"]


class _Epoch:
    """A counter bumped by every change that may invalidate a plan (one int compare per call)."""
    value = 0


epoch = _Epoch()


def bump_epoch():
    epoch.value += 1


class Unplannable(Exception):
    """The block (or one inside it) cannot run from a plan; it runs imperatively."""


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
        if param.stype != "default" or param.grad_stype != "default":
            raise Unplannable("parameter %s is sparse" % param.name)
        if param.grad_req == "add":
            raise Unplannable("parameter %s has grad_req='add'" % param.name)
        if param._data is None:
            raise Unplannable("parameter %s is not initialized yet" % param.name)


def _check_no_params(block):
    if block._reg_params:
        raise Unplannable("%s has parameters inside a layer" % block.name)


def _check_hooks(block):
    if block._forward_hooks or block._forward_pre_hooks:
        raise Unplannable("%s has forward hooks" % block.name)


def _add_steps(block, steps):
    _check_hooks(block)
    kind = _kind(block)
    if kind == "sequence":
        from .block import _relu_fused_steps
        for child, relu in _relu_fused_steps(block):
            if relu is None:
                _add_steps(child, steps)
            else:
                _check_params(child)
                # A Dense's step takes the ReLU as it takes its own activation='relu'.
                steps.append(_DenseStep(child, True) if _kind(child) == "dense"
                             else _ReLUFusedStep(child))
        return
    _check_params(block)
    # What the layer calls itself (a Dense's or a convolution's activation) runs inside its
    # step: hooks there would be skipped by the plan, and the step hands on the gradients of
    # the layer's own parameters only.
    block.apply(_check_hooks)
    for child in block._children.values():
        child.apply(_check_no_params)
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


class _DenseStep(_steps.FCStep):
    __slots__ = ("block",)

    def __init__(self, block, relu):
        super().__init__(block._flatten, relu)
        self.block = block

    def params(self, ctx):
        block = self.block
        weight = block.weight.data(ctx)
        return (weight,) if block.bias is None else (weight, block.bias.data(ctx))

    def forward(self, x, ctx, params, record, input_needs):
        try:
            return super().forward(x, ctx, params, record, input_needs)
        except Exception as exc:
            _name_block(exc, self.block, x)
            raise


def _name_block(exc, block, x):
    """The failing layer named on the error, as ``Block.__call__`` names it."""
    if getattr(exc, "failed_block", None) is None:
        from .block import _block_call_text
        try:
            exc.failed_block = _block_call_text(block, (x,))
        except Exception:  # noqa: BLE001 - the error itself is what matters
            pass


class _OpStep(_steps.OpStep):
    __slots__ = ("block", "names", "param_objects")

    def __init__(self, block):
        self.block = block
        self.names = tuple(block._reg_params)
        self.param_objects = tuple(block._reg_params.values())

    def params(self, ctx):
        return tuple([p.data(ctx) for p in self.param_objects])

    def call(self, x, params):
        block = self.block
        try:
            return block.hybrid_forward(_nd, x, **dict(zip(self.names, params)))
        except Exception as exc:
            _name_block(exc, block, x)
            raise


class _ReLUFusedStep(_OpStep):
    """A layer and the ReLU after it as the layer's one op (``_forward_relu``)."""

    __slots__ = ()

    def call(self, x, params):
        try:
            return self.block._forward_relu(x, params)
        except Exception as exc:
            _name_block(exc, self.block, x)
            raise


class _Plan:
    """The steps of a block, run on raw arrays with one tape node for all of them."""

    __slots__ = ("block", "steps")

    def __init__(self, block, steps):
        self.block = block
        self.steps = steps

    def run(self, x):
        return _steps.run_steps(x, self.steps, self.block.name)
