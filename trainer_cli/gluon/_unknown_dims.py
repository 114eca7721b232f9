"""The unknown dimensions of an imported graph's ``_zeros``/``_ones`` nodes, found from the
shapes they meet.

Gluon records the begin states of recurrent cells as ``zeros(shape=(0, hidden))``: batch size 0,
unknown until MXNet's shape inference fills it in from the arrays the states are combined with
(``h2h = FullyConnected(state)`` is added to ``i2h = FullyConnected(x)``). ``SymbolBlock`` defers
such nodes and the nodes computed from them, carrying their shapes with placeholder dimensions
through the rules below, and runs them as soon as the arrays they meet fix every placeholder.
"""
from __future__ import annotations

from ..symbol import MXNetSymbolError

__all__ = ["Dim", "has_unknown", "placeholder_shape", "resolved", "infer"]


class Dim:
    """A placeholder dimension: unknown, equal to other placeholders, or found."""

    __slots__ = ("parent", "value")

    def __init__(self):
        self.parent = None
        self.value = None

    def root(self):
        dim = self
        while dim.parent is not None:
            dim = dim.parent
        return dim


def _value(dim):
    return dim.root().value if isinstance(dim, Dim) else dim


def has_unknown(shape):
    return isinstance(shape, tuple) and any(d == 0 for d in shape)


def placeholder_shape(shape):
    return tuple(Dim() if d == 0 else d for d in shape)


def resolved(shape):
    """``shape`` as integers, or None while a placeholder in it is unknown."""
    values = tuple(_value(d) for d in shape)
    return None if any(v is None for v in values) else values


def _unify(a, b):
    a = a.root() if isinstance(a, Dim) else a
    b = b.root() if isinstance(b, Dim) else b
    if a is b:
        return
    if isinstance(a, Dim) and isinstance(b, Dim):
        if a.value is None:
            a.parent = b
        elif b.value is None:
            b.parent = a
        return
    if isinstance(b, Dim):
        a, b = b, a
    if isinstance(a, Dim) and a.value is None:
        a.value = b
    # Two different known sizes: the operator reports the mismatch when it runs.


def _unify_shapes(shapes):
    first = shapes[0]
    for shape in shapes[1:]:
        if len(shape) == len(first):
            for a, b in zip(first, shape):
                _unify(a, b)
    return first


_SAME_SHAPE = {
    "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_Plus", "_Minus", "_Mul",
    "_Div", "_plus", "_minus", "_mul", "_div", "where", "_maximum", "_minimum", "_power",
    "_greater", "_lesser", "_equal", "add_n", "ElementWiseSum",
}
_UNARY = {
    "Activation", "LeakyReLU", "Dropout", "relu", "sigmoid", "tanh", "softsign", "exp", "log",
    "sqrt", "rsqrt", "square", "abs", "sign", "negative", "reciprocal", "erf", "floor", "ceil",
    "round", "cos", "sin", "clip", "zeros_like", "ones_like", "_copy", "identity", "BlockGrad",
    "stop_gradient", "Cast", "cast", "softmax", "log_softmax", "SequenceMask", "SequenceReverse",
}


def _axis(attrs, default, ndim):
    axis = attrs.get("axis", default)
    return axis + ndim if axis < 0 else axis


def infer(op, attrs, shapes):
    """The output shapes of a node of ``op`` on inputs of ``shapes`` (placeholders allowed),
    fixing placeholders that must equal known sizes. Raises for an operator without a rule."""
    if op in _SAME_SHAPE:
        return [_unify_shapes(shapes)]
    if op in _UNARY or op.endswith("_scalar") or op.endswith("Scalar"):
        return [shapes[0]]
    if op == "FullyConnected":
        data = shapes[0]
        if attrs.get("flatten", True) is False:
            return [data[:-1] + (attrs["num_hidden"],)]
        return [(data[0], attrs["num_hidden"])]
    if op == "SliceChannel":
        data, n = shapes[0], attrs.get("num_outputs", 1)
        axis = _axis(attrs, 1, len(data))
        if attrs.get("squeeze_axis", False):
            out = data[:axis] + data[axis + 1:]
        else:
            size = _value(data[axis])
            out = data[:axis] + ((size // n) if size is not None else Dim(),) + data[axis + 1:]
        return [out] * n
    if op == "stack":
        first = _unify_shapes(shapes)
        axis = _axis(attrs, 0, len(first) + 1)
        return [first[:axis] + (len(shapes),) + first[axis:]]
    if op == "Concat":
        axis = _axis({"axis": attrs.get("dim", 1)}, 1, len(shapes[0]))
        for shape in shapes[1:]:
            if len(shape) == len(shapes[0]):
                for i, (a, b) in enumerate(zip(shapes[0], shape)):
                    if i != axis:
                        _unify(a, b)
        sizes = [_value(s[axis]) for s in shapes]
        total = sum(sizes) if None not in sizes else Dim()
        return [shapes[0][:axis] + (total,) + shapes[0][axis + 1:]]
    if op == "SequenceLast":
        data = shapes[0]
        axis = _axis(attrs, 0, len(data))
        return [data[:axis] + data[axis + 1:]]
    if op in ("swapaxes", "SwapAxis"):
        out = list(shapes[0])
        a, b = attrs.get("dim1", 0), attrs.get("dim2", 0)
        out[a], out[b] = out[b], out[a]
        return [tuple(out)]
    if op == "RNN":
        # States (layers, batch, hidden) take the batch of the data (steps, batch, features).
        for state in shapes[2:]:
            if len(state) == 3 and len(shapes[0]) == 3:
                _unify(state[1], shapes[0][1])
        return None
    raise MXNetSymbolError(
        "SymbolBlock cannot infer the unknown (0) dimensions of a zeros/ones node through "
        "operator %r; give the begin states' shapes in full" % op)
