"""A hybridized block's cached plan, the part that works on arrays and the tape: a list of steps
run on raw arrays with one tape node for all of them (``run_steps``), and the two kinds of step.

A step has ``params(ctx)`` (its parameters' arrays, read live at every call), ``forward(x, ctx,
params, record, input_needs)`` -> ``(raw output, what its backward keeps)`` and ``backward(g,
saved, params, need_x)`` -> ``(input gradient, one gradient per parameter)``; a gradient may be
``autograd.WRITTEN``, gone straight into the parameter's buffer as the eager op would have put
it. ``gluon/cached_plan.py`` builds the steps from a block tree and gives them their parameters.

- ``FCStep``: FullyConnected (with its ReLU when fused) through ``ops.fc_forward`` and
  ``ops.fc_backward``, the functions the eager op runs: no NDArray and no node of its own.
- ``OpStep``: a layer's own forward on an NDArray standing for its input (``call``), which
  records as usual; its backward calls the one node it recorded (or walks the few it recorded).
"""
from __future__ import annotations

from .. import autograd as _ag
from . import ops as _ops
from .ndarray import NDArray, _recorded, _wrap

__all__ = ["run_steps", "FCStep", "OpStep"]

_state = _ag._state


def run_steps(x, steps, name):
    """``steps`` applied to ``x``: the result wrapped, with one tape node whose backward runs
    the steps' backwards in reverse when recording and a gradient is wanted (``name`` says
    whose plan it is, in ``autograd.grad(create_graph=True)``'s refusal)."""
    ctx = x._ctx
    raw = x._data
    if not _state.recording:
        for step in steps:
            raw = step.forward(raw, ctx, step.params(ctx), False, False)[0]
        return _wrap(raw, ctx)
    # Whether each step's input carries a gradient: the block's input does, or a parameter of
    # an earlier step does.
    needs = x._node is not None or x._grad is not None
    records = []
    for step in steps:
        params = step.params(ctx)
        raw, saved = step.forward(raw, ctx, params, True, needs)
        trained = [p._grad is not None for p in params]
        records.append((step, params, saved, needs, trained, all(trained)))
        if not needs and any(trained):
            needs = True
    if not needs:
        return _wrap(raw, ctx)
    # Backward runs the steps last to first, and the parameters' slots on the node are in that
    # order: a parameter shared by several steps then sums its gradients in the order the
    # imperative tape would.
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
    vjp.cached_plan_of = name       # what autograd.grad(create_graph=True) names
    return _recorded(raw, ctx, tuple(slots), vjp)


class FCStep:
    """FullyConnected on raw arrays; ``params`` are (weight,) or (weight, bias)."""

    __slots__ = ("flatten", "relu")

    def __init__(self, flatten, relu):
        self.flatten = flatten
        self.relu = relu

    def forward(self, x, ctx, params, record, input_needs):
        bias = params[1] if len(params) == 2 else None
        out, x2 = _ops.fc_forward(x, params[0]._data, None if bias is None else bias._data,
                                  self.flatten, self.relu)
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


class OpStep:
    """A layer's own forward, ``call(x, params)`` on NDArrays (a subclass defines it)."""

    __slots__ = ()

    def call(self, x, params):
        raise NotImplementedError

    def forward(self, x, ctx, params, record, input_needs):
        xw = _wrap(x, ctx)
        box = None
        if input_needs:
            # The input's gradient is wanted: the op records a node for it (it would not for an
            # input that needs none: the first layer's input gradient is never computed).
            xw._node, box = _sink()
        out = self.call(xw, params)
        if type(out) is not NDArray:
            raise TypeError("%s returned %s, where a plan step gives one NDArray"
                            % (type(self).__name__, type(out).__name__))
        return out._data, ((out, box) if record else None)

    def backward(self, g, saved, params, need_x):
        out, box = saved
        node = out._node
        if node is None:
            return None, (None,) * len(params)
        if box is not None and node is box[1]:
            # The layer handed its input on as it is (Identity, Dropout at rate 0): the
            # gradient passes through to the steps before it.
            return g, (None,) * len(params)
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
