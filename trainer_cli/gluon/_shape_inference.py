"""Shape inference through a recorded symbol graph, for parameters whose shapes are deferred.

MXNet's Gluon finds the unknown shapes of a block's parameters (declared with 0 dimensions and
``allow_deferred_init=True``) by building the block's graph and running each operator's shape
rule over it, forward and backward, from the inputs' shapes (``Symbol.infer_shape``). ``infer``
does the same over this library's graphs. The rules below are MXNet's ``FInferShape`` for the
operators that take parameters (FullyConnected, Convolution, Deconvolution, the norms,
Embedding, PReLU, RNN, a Python operator's ``infer_shape``, the deformable convolutions) and
for the element-wise ones, through which a shape also flows backward (``x + bias``); any other
operator whose inputs are all known runs once on arrays of those shapes (the given inputs,
zeros elsewhere) to find its outputs' shapes.

Shapes are tuples in MXNet's legacy notation: 0 an unknown dimension, None an unknown number
of dimensions. ``block_shapes`` serves ``HybridBlock.infer_shape`` (a user's block), and
``SymbolBlock`` calls ``infer`` for the parameters of a graph made with ``mx.sym``.
"""
from __future__ import annotations

import warnings

import numpy

from .. import autograd as _ag
from .. import ndarray as _nd
from ..ndarray import NDArray
from ..symbol import MXNetSymbolError
from ..symbol.symbol import _topological, listed_inputs, op_entry
from .parameter import DeferredInitializationError, ParameterError

__all__ = ["ShapeInferenceError", "infer", "block_shapes"]

_FAILED = "Deferred initialization failed because shape cannot be inferred. "


class ShapeInferenceError(DeferredInitializationError, ValueError):
    """A deferred parameter's shape cannot be inferred from the inputs (MXNet raises a
    ValueError there, with the same message)."""


class _Inconsistent(Exception):
    """Two rules give a dimension different sizes."""


class _Unready(Exception):
    """A rule needs shapes not known yet (it is tried again on the next sweep)."""


# ---------------------------------------------------------------------- shapes
def _known(shape):
    return shape is not None and all(d > 0 for d in shape)


def _merge(old, new):
    """``old`` with what ``new`` adds (negative dimensions count as unknown)."""
    if new is None:
        return old
    new = tuple(int(d) if d > 0 else 0 for d in new)
    if old is None:
        return new
    if len(old) != len(new) or any(a and b and a != b for a, b in zip(old, new)):
        raise _Inconsistent(old, new)
    return tuple(a or b for a, b in zip(old, new))


def _mx_provided(shape):
    # MXNet's message writes a provided shape as [4,-1] and the inferred one as (3,3).
    return "[%s]" % ",".join(str(d) if d else "-1" for d in shape)


def _mx_inferred(shape):
    return "(%s)" % ",".join(str(d) if d else "-1" for d in shape)


def _inconsistent(node, old, new):
    return ShapeInferenceError(
        "%sMXNetError: Error in operator %s: Shape inconsistent, Provided = %s, inferred "
        "shape=%s" % (_FAILED, node.name, _mx_provided(old), _mx_inferred(new)))


def _shown(shape):
    # MXNet's "Cannot decide shape" list: (0,) for a known rank, () for an unknown one.
    return str(tuple(shape)) if shape is not None else "()"


def _tuple(value, n=None, default=0):
    if value is None or value == ():
        return (default,) * (n or 0)
    if isinstance(value, (int, float)):
        value = (value,)
    return tuple(int(v) for v in value)


def _prod(dims):
    out = 1
    for d in dims:
        out *= d
    return out


# ---------------------------------------------------------------------- rules
# Each rule gets the node, its parsed attributes and the lists of its inputs' and outputs'
# shapes, and writes into them what the operator's shape rule gives; the caller merges that
# with what was known (an inconsistency is MXNet's "Shape inconsistent").
def _same_shape(node, a, ins, outs):
    """Element-wise: the (first) input and the output have one shape, known from either."""
    shape = _merge(ins[0] if ins else None, outs[0])
    n = len(ins) if node.op in _ELEMWISE_BINARY else min(len(ins), 1)
    for i in range(n):
        shape = _merge(shape, ins[i])
    for i in range(n):
        ins[i] = shape
    for i in range(len(outs) if node.op in _ALL_OUTPUTS_SAME else 1):
        outs[i] = shape


def _where(node, a, ins, outs):
    shape = _merge(_merge(ins[1], ins[2]), outs[0])
    ins[1] = ins[2] = outs[0] = shape


def _broadcast(node, a, ins, outs):
    lhs, rhs = ins
    if not (_known(lhs) and _known(rhs)):
        return
    n = max(len(lhs), len(rhs))
    lhs, rhs = (1,) * (n - len(lhs)) + lhs, (1,) * (n - len(rhs)) + rhs
    out = []
    for x, y in zip(lhs, rhs):
        if x != y and 1 not in (x, y):
            raise _Inconsistent(ins[0], ins[1])
        out.append(max(x, y) if 1 in (x, y) else x)
    outs[0] = tuple(out)


def _creation(node, a, ins, outs):
    outs[0] = _tuple(a.get("shape"))


def _positions(node):
    """{input name: position} of the node's inputs, as the operator lists them."""
    entry = op_entry(node.op)
    names = listed_inputs(node.op, entry[1], node.attrs) if entry else []
    if len(names) != len(node.inputs):
        names = list(entry[1][:len(node.inputs)]) if entry else []
    return {name: i for i, name in enumerate(names)}


def _fully_connected(node, a, ins, outs):
    data, known_out = ins[0], outs[0]
    if data is None:
        return
    hidden = int(a["num_hidden"])
    flatten = a.get("flatten", True) not in (False, 0)
    rest = data[1:] if flatten else data[-1:]
    ins[1] = (hidden, _prod(rest) if all(rest) else 0)
    pos = _positions(node)
    if "bias" in pos:
        bias = ins[pos["bias"]]
        ins[pos["bias"]] = (hidden, 1) if bias is not None and len(bias) == 2 else (hidden,)
    outs[0] = (data[0], hidden) if flatten else data[:-1] + (hidden,)
    if known_out and known_out[0] and not data[0]:
        # MXNet's backward step: the batch size, known from the output (an RNN cell's begin
        # state recorded as zeros of batch 0, added to the projection of the input).
        ins[0] = (known_out[0],) + tuple(data[1:])


_CHANNELS_LAST = ("NWC", "NHWC", "NDHWC")


def _conv_geometry(node, a, data):
    kernel = _tuple(a["kernel"])
    k = len(kernel)
    if len(data) != k + 2:
        raise ValueError("%s: input data should be %dD (batch, channels and %d spatial "
                         "dimensions), got shape %s" % (node.op, k + 2, k, data))
    last = a.get("layout") in _CHANNELS_LAST
    channels = data[-1] if last else data[1]
    spatial = data[1:-1] if last else data[2:]
    return kernel, last, channels, spatial


def _arrange(last, n, c, spatial):
    return (n,) + tuple(spatial) + (c,) if last else (n, c) + tuple(spatial)


def _convolution(node, a, ins, outs):
    """Convolution and the deformable ones (their offset and mask come before the weight)."""
    data = ins[0]
    if data is None:
        return
    kernel, last, channels, spatial = _conv_geometry(node, a, data)
    k = len(kernel)
    filters, groups = int(a["num_filter"]), int(a.get("num_group") or 1)
    pos = _positions(node)
    weight_at = pos.get("weight", 1)
    per_group = channels // groups if channels else 0
    ins[weight_at] = ((filters,) + kernel + (per_group,)) if last else \
        (filters, per_group) + kernel
    if "bias" in pos:
        ins[pos["bias"]] = (filters,)
    stride = _tuple(a.get("stride"), k, 1)
    dilate = _tuple(a.get("dilate"), k, 1)
    pad = _tuple(a.get("pad"), k, 0)
    out = [(s + 2 * p - (d * (kk - 1) + 1)) // st + 1 if s else 0
           for s, kk, st, d, p in zip(spatial, kernel, stride, dilate, pad)]
    outs[0] = _arrange(last, data[0], filters, out)


def _deconvolution(node, a, ins, outs):
    data = ins[0]
    if data is None:
        return
    kernel, last, channels, _ = _conv_geometry(node, a, data)
    filters, groups = int(a["num_filter"]), int(a.get("num_group") or 1)
    pos = _positions(node)
    ins[pos.get("weight", 1)] = ((channels,) + kernel + (filters // groups,)) if last else \
        (channels, filters // groups) + kernel
    if "bias" in pos:
        ins[pos["bias"]] = (filters,)
    # The output (target_shape, adj) comes from running the operator once.


def _batch_norm(node, a, ins, outs):
    data = ins[0]
    if data is None:
        return
    axis = int(a.get("axis", 1))
    axis = axis + len(data) if axis < 0 else axis
    if not 0 <= axis < len(data):
        raise ValueError("%s: axis %s is out of range for data of shape %s"
                         % (node.op, a.get("axis"), data))
    channels = (data[axis],)
    for i in range(1, min(len(ins), 5)):
        ins[i] = channels
    outs[0] = data
    if len(outs) >= 3:
        outs[1] = outs[2] = channels


def _layer_norm(node, a, ins, outs):
    data = ins[0]
    if data is None:
        return
    axis = int(a.get("axis", -1))
    axis = axis + len(data) if axis < 0 else axis
    if not 0 <= axis < len(data):
        raise ValueError("LayerNorm: axis %s is out of range for data of shape %s"
                         % (a.get("axis"), data))
    ins[1] = ins[2] = (data[axis],)
    outs[0] = data
    moments = tuple(1 if i == axis else d for i, d in enumerate(data))
    for i in range(1, len(outs)):
        outs[i] = moments


def _group_norm(node, a, ins, outs):
    data = ins[0]
    if data is None:
        return
    groups = int(a.get("num_groups", 1))
    # MXNet 1.9.1: gamma and beta have one value per group.
    ins[1] = ins[2] = (groups,)
    outs[0] = data
    for i in range(1, len(outs)):
        outs[i] = (data[0], groups)


def _instance_norm(node, a, ins, outs):
    data = ins[0]
    if data is None:
        return
    if len(data) < 3:
        raise ValueError("InstanceNorm: data should have at least 3 dimensions, got shape %s"
                         % (data,))
    ins[1] = ins[2] = (data[1],)
    outs[0] = data
    for i in range(1, len(outs)):
        outs[i] = (data[0], data[1])


def _embedding(node, a, ins, outs):
    ins[1] = (int(a["input_dim"]), int(a["output_dim"]))
    if ins[0] is not None:
        outs[0] = ins[0] + (int(a["output_dim"]),)


def _leaky_relu(node, a, ins, outs):
    data = _merge(ins[0], outs[0])
    if data is None:
        return
    ins[0] = data
    # PReLU's gamma is given (C,) only where even its rank is unknown, as in MXNet: a gamma
    # declared (0,) stays unknown.
    if a.get("act_type") == "prelu" and len(ins) > 1 and ins[1] is None and len(data) > 1:
        ins[1] = (data[1],)
    for i in range(len(outs)):
        outs[i] = data


def _rnn(node, a, ins, outs):
    from ..ndarray.rnn import param_size
    data = ins[0]
    if data is None:
        return
    if len(data) != 3:
        raise ValueError("RNN: input data should be rank-3 (sequence length, batch size, input "
                         "size), got shape %s" % (data,))
    steps, batch, width = data
    dirs = 2 if a.get("bidirectional") in (True, 1) else 1
    layers, hidden = int(a.get("num_layers", 1)), int(a["state_size"])
    projection = a.get("projection_size")
    state = int(projection) if projection else hidden
    mode = a["mode"]
    pos = _positions(node)
    if "state" in pos:
        ins[pos["state"]] = (dirs * layers, batch, state)
    if "state_cell" in pos:
        ins[pos["state_cell"]] = (dirs * layers, batch, hidden)
    if "parameters" in pos and width:
        ins[pos["parameters"]] = (param_size(mode, width, hidden, layers, dirs == 2,
                                             int(projection) if projection else None),)
    if "sequence_length" in pos:
        ins[pos["sequence_length"]] = (batch,)
    outs[0] = (steps, batch, dirs * state)
    if len(outs) > 1:
        outs[1] = (dirs * layers, batch, state)
    if len(outs) > 2:
        outs[2] = (dirs * layers, batch, hidden)


def _custom(node, a, ins, outs):
    """The prop's ``infer_shape``, given the arguments' shapes as MXNet gives them (an unknown
    dimension -1, an unknown rank []); what it returns for each input, output and auxiliary
    state is merged."""
    from ..symbol.custom import _prop
    prop = _prop(node.attrs)
    if prop is None:
        raise _Unready()
    n_args = len(prop.list_arguments())
    n_outs, n_aux = len(prop.list_outputs()), len(prop.list_auxiliary_states())
    args = ins[:n_args]
    shapes = [[d if d else -1 for d in s] if s is not None else [] for s in args]
    try:
        ret = list(prop.infer_shape(shapes))
        if len(ret) == 2:
            ret.append([])
        ishapes, oshapes, ashapes = (list(part) for part in ret)
        if (len(ishapes), len(oshapes), len(ashapes)) != (n_args, n_outs, n_aux):
            raise ValueError("infer_shape returned %d input, %d output and %d aux shapes for "
                             "%d, %d and %d" % (len(ishapes), len(oshapes), len(ashapes),
                                                n_args, n_outs, n_aux))
        converted = [tuple(int(d) for d in s) for s in ishapes + oshapes + ashapes]
    except Exception as exc:  # noqa: BLE001 - the user's method; unknown inputs may be why
        if not all(_known(s) for s in args):
            raise _Unready() from exc
        raise ValueError("Custom operator %r: infer_shape raised %s: %s"
                         % (node.attrs.get("op_type"), type(exc).__name__, exc)) from exc

    def given(shape, old):
        # [] for an input whose rank is unknown leaves it unknown.
        return None if old is None and shape == () else shape
    for i in range(n_args):
        ins[i] = given(converted[i], ins[i])
    for i in range(n_outs):
        if i < len(outs):
            outs[i] = converted[n_args + i]
    for i in range(n_aux):
        if n_args + i < len(ins):
            ins[n_args + i] = given(converted[n_args + n_outs + i], ins[n_args + i])


_ELEMWISE_BINARY = {
    "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_power", "_maximum",
    "_minimum", "_equal", "_not_equal", "_greater", "_greater_equal", "_lesser",
    "_lesser_equal", "_hypot", "add_n",
}
_ALL_OUTPUTS_SAME = {"Dropout"}
_ELEMWISE_UNARY = {
    "Activation", "relu", "sigmoid", "tanh", "softsign", "exp", "log", "sqrt", "rsqrt", "square",
    "abs", "sign", "negative", "reciprocal", "erf", "floor", "ceil", "round", "cos", "sin",
    "clip", "_copy", "BlockGrad", "Cast", "zeros_like", "ones_like", "SoftmaxActivation",
    "log_softmax", "softmax", "Dropout", "L2Normalization", "_contrib_gradientmultiplier",
    "_contrib_round_ste", "_contrib_sign_ste", "_contrib_quadratic", "_contrib_div_sqrt_dim",
    "_plus_scalar", "_minus_scalar", "_rminus_scalar", "_mul_scalar", "_div_scalar",
    "_rdiv_scalar", "_power_scalar", "_rpower_scalar", "_maximum_scalar", "_minimum_scalar",
    "_greater_scalar", "_greater_equal_scalar", "_lesser_scalar", "_lesser_equal_scalar",
    "_equal_scalar", "_not_equal_scalar",
}
_BROADCAST = {
    "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_maximum",
    "broadcast_minimum", "broadcast_power", "broadcast_equal", "broadcast_not_equal",
    "broadcast_greater", "broadcast_greater_equal", "broadcast_lesser",
    "broadcast_lesser_equal",
}
_RULES = {
    "FullyConnected": _fully_connected,
    "Convolution": _convolution,
    "Deconvolution": _deconvolution,
    "BatchNorm": _batch_norm,
    "_contrib_BatchNormWithReLU": _batch_norm,
    "LayerNorm": _layer_norm,
    "GroupNorm": _group_norm,
    "InstanceNorm": _instance_norm,
    "Embedding": _embedding,
    "_contrib_SparseEmbedding": _embedding,
    "LeakyReLU": _leaky_relu,
    "RNN": _rnn,
    "Custom": _custom,
    "_contrib_DeformableConvolution": _convolution,
    "_contrib_ModulatedDeformableConvolution": _convolution,
    "where": _where,
    "_zeros": _creation,
    "_ones": _creation,
}
_RULES.update({op: _same_shape for op in _ELEMWISE_UNARY | _ELEMWISE_BINARY})
_RULES.update({op: _broadcast for op in _BROADCAST})
# Never run to find shapes: they draw random numbers or call the user's code.
_NEVER_RUN = {"Custom", "Dropout", "LeakyReLU"}


# ---------------------------------------------------------------------- the graph walk
class _Walk:
    """The shapes (and, where an operator ran, the values) of a graph's entries."""

    def __init__(self, graph, inputs, params):
        from .symbol_block import parse_attr
        self.nodes = _topological(graph._heads)
        self.shape, self.value, self.dtype = {}, {}, {}
        self.attrs, self.tried, self.failures, self.custom_seen = {}, set(), [], {}
        self.ctx = None
        for node in self.nodes:
            key = (id(node), 0)
            if not node.is_variable():
                self.attrs[id(node)] = {k: parse_attr(v) for k, v in node.attrs.items()
                                        if not (k.startswith("__") and k.endswith("__"))}
                continue
            array = inputs.get(node.name)
            if isinstance(array, NDArray):
                self.value[key] = array
                self.dtype[key] = array.dtype
                self.shape[key] = _merge(None, array.shape)
                if self.ctx is None:
                    self.ctx = array.context
                continue
            shape = None
            text = node.attrs.get("__shape__")
            if text:
                declared = parse_attr(text)
                if isinstance(declared, tuple) and all(isinstance(d, int) for d in declared):
                    shape = _merge(None, declared) if declared else None
            param = params.get(node.name)
            if param is not None:
                if param.shape is not None:
                    try:
                        shape = _merge(shape, param.shape)
                    except _Inconsistent:
                        shape = _merge(None, param.shape)
                self.dtype[key] = numpy.dtype(param._dtype)
            self.shape[key] = shape

    def run(self):
        ops = [node for node in self.nodes if not node.is_variable()]
        for sweep in range(2 * len(ops) + 2):
            changed = False
            for node in (ops if sweep % 2 == 0 else reversed(ops)):
                changed |= self._step(node)
            if not changed:
                break

    def _step(self, node):
        keys_in = [(id(src), index) for src, index, _ in node.inputs]
        keys_out = [(id(node), i) for i in range(node.num_outputs)]
        ins = [self.shape.get(k) for k in keys_in]
        outs = [self.shape.get(k) for k in keys_out]
        rule = _RULES.get(node.op)
        changed = False
        if rule is not None:
            new_ins, new_outs = list(ins), list(outs)
            if node.op == "Custom":
                seen = (tuple(ins), tuple(outs))
                if self.custom_seen.get(id(node)) == seen:
                    rule = None
                self.custom_seen[id(node)] = seen
            if rule is not None:
                try:
                    rule(node, self.attrs[id(node)], new_ins, new_outs)
                except _Unready:
                    new_ins, new_outs = ins, outs
                except _Inconsistent as exc:
                    raise _inconsistent(node, *exc.args) from None
                except (KeyError, IndexError, TypeError, ValueError) as exc:
                    raise ShapeInferenceError("%sError in operator %s: %s"
                                              % (_FAILED, node.name, exc)) from exc
            for key, old, new in zip(keys_in + keys_out, ins + outs, new_ins + new_outs):
                changed |= self._assign(node, key, old, new)
        if all(_known(self.shape.get(k)) for k in keys_in) and node.op not in _NEVER_RUN \
                and not all(_known(self.shape.get(k)) for k in keys_out[:node.num_visible]) \
                and id(node) not in self.tried:
            self.tried.add(id(node))
            changed |= self._run(node, keys_in, keys_out)
        return changed

    def _assign(self, node, key, old, new):
        try:
            merged = _merge(old, new)
        except _Inconsistent:
            raise _inconsistent(node, old, new) from None
        if merged == old:
            return False
        self.shape[key] = merged
        return True

    def _array(self, key):
        value = self.value.get(key)
        if value is None:
            value = _nd.zeros(self.shape[key], ctx=self.ctx,
                              dtype=self.dtype.get(key, numpy.float32))
        return value

    def _run(self, node, keys_in, keys_out):
        """Run ``node`` once on arrays of its inputs' shapes; its outputs' shapes (and values,
        for the operators after it) are then known. False where it cannot run."""
        from .symbol_block import _runner
        try:
            fn, attrs = _runner(node)
            arrays = [self._array(k) for k in keys_in]
            with _ag.pause(), numpy.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = fn(*arrays, **attrs)
        except Exception as exc:  # noqa: BLE001 - reported if a shape stays unknown
            self.failures.append((node, exc))
            return False
        results = list(result) if isinstance(result, (list, tuple)) else [result]
        changed = False
        for key, out in zip(keys_out, results):
            if isinstance(out, NDArray):
                self.value[key] = out
                self.dtype[key] = out.dtype
                changed |= self._assign(node, key, self.shape.get(key), out.shape)
        return changed

    def variable_shapes(self):
        shapes = {}
        for node in self.nodes:
            if node.is_variable():
                shapes[node.name] = self.shape.get((id(node), 0))
        return shapes


def infer(graph, inputs, params):
    """{variable name: shape} of every variable of ``graph`` (a Symbol), from ``inputs``
    ({name: NDArray}) and the shapes, maybe partial, of ``params`` ({name: Parameter}) and of
    the variables' ``__shape__``. Raises ``ShapeInferenceError`` with MXNet's message where a
    variable's shape stays unknown or two rules disagree."""
    walk = _Walk(graph, inputs, params)
    walk.run()
    shapes = walk.variable_shapes()
    unknown = [name for name, shape in shapes.items() if not _known(shape)]
    if unknown:
        raise ShapeInferenceError(_undecided(unknown, shapes, walk.failures))
    return shapes


def _undecided(names, shapes, failures=()):
    listed = ["%s: %s" % (name, _shown(shapes.get(name))) for name in names[:10]]
    if len(names) > 10:
        listed.append("...")
    text = ("%sCannot decide shape for the following arguments (0s in shape means unknown "
            "dimensions). Consider providing them as input:\n\t%s"
            % (_FAILED, "\n\t".join(listed)))
    if failures:
        node, exc = failures[0]
        text += "\n(operator %s (%s) could not be run to find its output shapes: %s)" \
            % (node.name, node.op, exc)
    return text


def trace(block, args):
    """``block``'s graph on ``args`` as ``_trace`` records it, leaving the versions of its
    parameters' variables as they were: a graph recorded only to infer shapes is not one MXNet
    records (``export`` writes the versions)."""
    kept = []
    for param in block.collect_params().values():
        var = getattr(param, "_var", None)
        if var is not None:
            node = var._heads[0][0]
            kept.append((node, node.version))
    try:
        return block._trace(args)
    except MXNetSymbolError as exc:
        raise ShapeInferenceError(_FAILED + str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - any failure of the user's hybrid_forward
        raise ShapeInferenceError("%s%s: %s" % (_FAILED, type(exc).__name__, exc)) from exc
    finally:
        for node, version in kept:
            node.version = version


def block_shapes(block, graph, args):
    """Set the unknown shapes of ``block``'s parameters (its children's too, as MXNet) from
    ``graph`` (``(input variables, output symbol)`` of ``block`` on ``args``)."""
    from .block import _flatten_arrays
    inputs, out = graph
    flat = _flatten_arrays(list(args))[0]
    given = {sym.name: array for sym, array in zip(inputs, flat)}
    params = {}
    for param in block.collect_params().values():
        params.setdefault(param.name, param)
    shapes = infer(out, given, params)
    for name, param in params.items():
        shape = shapes.get(name)
        if shape is not None:
            try:
                param.shape = shape
            except ParameterError as exc:
                raise ShapeInferenceError(_FAILED + str(exc)) from None
    unused = [name for name, param in params.items()
              if name not in shapes and param._data is None and not _known(param.shape)]
    if unused:
        # MXNet fails here with a KeyError naming the parameter its graph does not use.
        raise ShapeInferenceError(_undecided(unused, {n: params[n].shape for n in unused}))
