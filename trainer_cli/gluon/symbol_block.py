"""``SymbolBlock``: a Block whose forward is a symbol graph (an MXNet ``*-symbol.json``), run with
this library's ``nd`` operators.

Every node's attributes are the strings MXNet wrote; they are read as plain values (numbers,
booleans, tuples, names), never evaluated. MXNet's contributed operators (``_contrib_<name>``
nodes, which ``F.contrib.<name>`` records) run as ``nd.contrib.<name>``, all their outputs
included. A graph with an operator this module does not run is refused when the block is made,
naming the operator and the node.
"""
from __future__ import annotations

import re
import warnings

from .. import autograd as _ag
from .. import ndarray as _nd
from .. import symbol as _sym
from ..ndarray import NDArray
from ..symbol import MXNetSymbolError, Symbol
from ..symbol._op_table import OPS as _OPS
from ..symbol.symbol import _topological
from . import _unknown_dims as _dims
from .block import HybridBlock
from .parameter import DeferredInitializationError, ParameterDict

__all__ = ["SymbolBlock"]

_INT = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-?(inf|nan)$")


def parse_attr(text):
    """An attribute string as MXNet wrote it (``str()`` of a Python value) back as that value:
    a scalar, or a flat tuple of numbers (MXNet's shapes, kernels, axes)."""
    if len(text) >= 2 and text[0] + text[-1] in ("()", "[]"):
        inner = text[1:-1].strip()
        if not inner:
            return ()
        items = [item.strip() for item in inner.split(",")]
        if items[-1] == "":
            items.pop()
        # Items are scalars only: a nested tuple never parses as one (its commas split it), and
        # a hostile "((((...))))" would otherwise recurse once per parenthesis.
        values = [_parse_scalar(item) for item in items]
        if all(v is None or isinstance(v, (int, float)) for v in values):
            return tuple(values)
        return text
    return _parse_scalar(text)


def _parse_scalar(text):
    if text in ("True", "False"):
        return text == "True"
    if text == "None":
        return None
    if _INT.match(text) and len(text) <= 40:
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


_CHANNELS_LAST = {"NWC": "NCW", "NHWC": "NCHW", "NDHWC": "NCDHW"}


def _to_first(x):
    return _nd.transpose(x, (0, x.ndim - 1) + tuple(range(1, x.ndim - 1)))


def _to_last(x):
    return _nd.transpose(x, (0,) + tuple(range(2, x.ndim)) + (1,))


def _laid_out(fn, transposed_inputs):
    """``fn`` for MXNet's channels-last layouts: the channels-first operator between transposes."""
    def run(*inputs, layout=None, **attrs):
        if layout not in _CHANNELS_LAST:
            if layout is not None:
                attrs["layout"] = layout
            return fn(*inputs, **attrs)
        inputs = [_to_first(x) if i < transposed_inputs else x for i, x in enumerate(inputs)]
        return _to_last(fn(*inputs, layout=_CHANNELS_LAST[layout], **attrs))
    return run


def _scalar(fn):
    return lambda x, scalar, is_int=None: fn(x, float(scalar))


def _dropout(x, p=0.5, mode="training", axes=(), cudnn_off=None):
    if mode == "always" or _ag.is_training():
        return _nd.Dropout(x, p=p, mode=mode, axes=axes)
    return x


def _zeros(shape=(), dtype="float32", ctx=None):
    return _nd.zeros(shape if isinstance(shape, tuple) else (shape,), dtype=dtype)


def _ones(shape=(), dtype="float32", ctx=None):
    return _nd.ones(shape if isinstance(shape, tuple) else (shape,), dtype=dtype)


def _reshape(x, shape=None, reverse=False, **attrs):
    return _nd.reshape(x, shape=shape if isinstance(shape, tuple) else (shape,), reverse=reverse,
                       **attrs)


def _rnn(data, parameters, *states, **attrs):
    # Begin states exported as zeros of batch size 0 (unknown when the graph was recorded)
    # take the batch size of the data, as MXNet's shape inference gives them.
    states = [_nd.zeros((s.shape[0], data.shape[1]) + tuple(s.shape[2:]), dtype=s.dtype)
              if s.ndim == 3 and s.shape[1] == 0 else s for s in states]
    if not attrs.get("use_sequence_length") and len(states) == 2 and attrs.get("mode") != "lstm":
        raise ValueError("RNN mode %r takes one state" % attrs.get("mode"))
    return _nd.RNN(data, parameters, *states, **attrs)


def _without(fn, *names):
    def run(*inputs, **attrs):
        for name in names:
            attrs.pop(name, None)
        return fn(*inputs, **attrs)
    return run


# Operators whose MXNet attributes need adapting to the nd function; the rest of _DIRECT run as
# ``nd.<op>(*inputs, **attrs)``.
_ADAPTED = {
    "Convolution": _laid_out(_without(_nd.Convolution, "workspace", "cudnn_tune", "cudnn_off"), 2),
    "Deconvolution": _laid_out(_without(_nd.Deconvolution, "workspace", "cudnn_tune", "cudnn_off"),
                               2),
    "Pooling": _laid_out(_without(_nd.Pooling, "cudnn_off"), 1),
    "Dropout": _dropout,
    "Concat": _without(_nd.concat, "num_args"),
    "add_n": _without(_nd.add_n, "num_args"),
    "stack": _without(_nd.stack, "num_args"),
    "_copy": _nd.identity,
    "SwapAxis": _nd.swapaxes,
    "Reshape": _reshape,
    "_zeros": _zeros,
    "_ones": _ones,
    "RNN": _rnn,
    "_rnn_param_concat": _without(_nd.concat, "num_args"),
    "Pad": _nd.pad,
    "Cast": _nd.cast,
    "SliceChannel": _nd.split,
    "BlockGrad": _nd.stop_gradient,
    "BatchNorm": _without(_nd.BatchNorm, "cudnn_off", "min_calib_range", "max_calib_range"),
    "_plus_scalar": _scalar(lambda x, s: x + s),
    "_minus_scalar": _scalar(lambda x, s: x - s),
    "_rminus_scalar": _scalar(lambda x, s: s - x),
    "_mul_scalar": _scalar(lambda x, s: x * s),
    "_div_scalar": _scalar(lambda x, s: x / s),
    "_rdiv_scalar": _scalar(lambda x, s: s / x),
    "_power_scalar": _scalar(lambda x, s: x ** s),
    "_rpower_scalar": _scalar(lambda x, s: s ** x),
    "_maximum_scalar": _scalar(_nd.maximum),
    "_minimum_scalar": _scalar(_nd.minimum),
    "_greater_scalar": _scalar(lambda x, s: x > s),
    "_greater_equal_scalar": _scalar(lambda x, s: x >= s),
    "_lesser_equal_scalar": _scalar(lambda x, s: x <= s),
    "_lesser_scalar": _scalar(lambda x, s: x < s),
    "_equal_scalar": _scalar(lambda x, s: x == s),
    "_not_equal_scalar": _scalar(lambda x, s: x != s),
    "_power": _nd.power,
    "_maximum": _nd.maximum,
    "_minimum": _nd.minimum,
    "_greater": lambda a, b: a > b,
    "_greater_equal": lambda a, b: a >= b,
    "_lesser_equal": lambda a, b: a <= b,
    "_lesser": lambda a, b: a < b,
    "_equal": lambda a, b: a == b,
    "_not_equal": lambda a, b: a != b,
}


def _contrib(name):
    # Looked up when the node runs: nd.contrib's names are wrapped (out=, sparse inputs).
    return lambda *inputs, **attrs: getattr(_nd.contrib, name)(*inputs, **attrs)


# MXNet's contributed operators (``_contrib_<name>`` nodes, F.contrib.<name>) run as
# ``nd.contrib.<name>``; these few need their attributes adapted.
_ADAPTED.update({
    "_contrib_BatchNormWithReLU": _without(_contrib("BatchNormWithReLU"), "cudnn_off",
                                           "min_calib_range", "max_calib_range"),
    "_contrib_SparseEmbedding": _without(_contrib("SparseEmbedding"), "sparse_grad"),
    # The array is made on the input's device, whatever device the graph was recorded for.
    "_contrib_arange_like": _without(_contrib("arange_like"), "ctx"),
    "CTCLoss": _nd.CTCLoss,
    "ROIPooling": _nd.ROIPooling,
    "_np_cumsum": _nd.cumsum,
})
# ... and ``_linalg_<name>`` nodes (F.linalg.<name>) as ``nd.linalg.<name>``.
_ADAPTED.update({entry[0]: getattr(_nd.linalg, key[len("linalg."):])
                 for key, entry in sorted(_OPS.items()) if key.startswith("linalg.")})
_ADAPTED.update({op: _contrib(op[len("_contrib_"):]) for op in sorted(
    entry[0] for key, entry in _OPS.items() if key.startswith("contrib."))
    if op.startswith("_contrib_") and op not in _ADAPTED})

_DIRECT = {
    "FullyConnected", "Activation", "LeakyReLU", "Flatten", "Embedding", "LayerNorm",
    "InstanceNorm", "GroupNorm", "relu", "sigmoid", "tanh", "softsign", "exp", "log", "sqrt",
    "rsqrt", "square", "abs", "sign", "negative", "reciprocal", "erf", "floor", "ceil", "round",
    "cos", "sin", "clip", "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div",
    "broadcast_add", "broadcast_sub", "broadcast_mul", "broadcast_div", "broadcast_maximum",
    "broadcast_minimum", "broadcast_power", "broadcast_to", "broadcast_like", "reshape_like",
    "transpose", "expand_dims", "squeeze", "slice", "slice_axis", "tile", "repeat", "flip",
    "reverse", "softmax", "log_softmax", "SoftmaxActivation", "mean", "sum", "max", "min", "norm",
    "argmax", "argmin", "dot", "batch_dot", "where", "zeros_like", "ones_like", "take", "pick",
    "sort", "L2Normalization", "SequenceMask", "SequenceLast", "SequenceReverse", "swapaxes",
    "argsort", "batch_take", "broadcast_axis", "broadcast_equal", "broadcast_not_equal",
    "broadcast_greater", "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal",
    "diag", "erfinv", "gamma", "gammaln", "gather_nd", "make_loss", "nansum", "prod",
    "slice_like", "softmax_cross_entropy", "topk", "logical_not", "arccos", "arcsin", "arctan",
    "log1p", "expm1", "log2", "log10", "sinh", "cosh",
}


def _custom_runner(node):
    # A Python operator (mx.operator.register): its attributes go to the prop as the strings
    # MXNet wrote, as MXNet passes them.
    from .. import operator as _operator
    from ..ndarray.custom import Custom
    op_type = node.attrs.get("op_type")
    if not op_type or _operator.find_prop(op_type) is None:
        raise MXNetSymbolError(
            "SymbolBlock cannot run node %r: Cannot find custom operator %s (register it with "
            "mx.operator.register before loading the graph)" % (node.name, op_type))
    attrs = {key: value for key, value in node.attrs.items()
             if not (key.startswith("__") and key.endswith("__"))}
    return Custom, attrs


def _runner(node):
    if node.op == "Custom":
        return _custom_runner(node)
    fn = _ADAPTED.get(node.op)
    if fn is None and node.op in _DIRECT:
        fn = getattr(_nd, node.op, None)
    if fn is None:
        raise MXNetSymbolError(
            "SymbolBlock cannot run operator %r (node %r): it runs the operators of MXNet's Gluon "
            "layers, common F functions and the contrib operators nd.contrib computes "
            "(docs/compat.md)" % (node.op, node.name))
    attrs = {key: parse_attr(value) for key, value in node.attrs.items()
             if not (key.startswith("__") and key.endswith("__"))}
    return fn, attrs


class SymbolBlock(HybridBlock):
    """A Block running the graph ``outputs`` on ``inputs`` (variables), its other variables being
    parameters: arguments (trained) and auxiliary states (``grad_req='null'``)."""

    def __init__(self, outputs, inputs, params=None):
        # As MXNet: named by the global counter (symbolblock0), its parameters keep their names.
        super().__init__(prefix=None, params=None)
        object.__setattr__(self, "_prefix", "")
        object.__setattr__(self, "_params", ParameterDict("", params))
        if isinstance(inputs, Symbol):
            inputs = list(inputs)
        if isinstance(outputs, (list, tuple)):
            outputs = _sym.Group(list(outputs))
        if not isinstance(outputs, Symbol):
            raise TypeError("SymbolBlock outputs must be a Symbol or a list of Symbols")
        input_names = []
        for symbol in inputs:
            if not isinstance(symbol, Symbol) or len(symbol) != 1 or \
                    not symbol._heads[0][0].is_variable():
                raise TypeError("SymbolBlock inputs must be variables (sym.var), got %r" % (symbol,))
            input_names.append(symbol.name)
        self._input_names = input_names
        self._graph = outputs
        self._nodes = _topological(outputs._heads)
        self._order = {id(node): i for i, node in enumerate(self._nodes)}
        self._runners = {id(node): _runner(node) for node in self._nodes
                         if not node.is_variable()}
        used = set(outputs.list_inputs())
        unused = ["%d-th" % i for i, name in enumerate(input_names) if name not in used]
        if unused:
            # MXNet's words: such an input is accepted and ignored.
            warnings.warn("The %s input to HybridBlock is not used by any computation. Is this "
                          "intended?" % ", ".join(unused), stacklevel=3)
        for name in outputs.list_arguments():
            if name not in input_names:
                self.params.get(name, allow_deferred_init=True)
        for name in outputs.list_auxiliary_states():
            if name not in input_names:
                self.params.get(name, grad_req="null", allow_deferred_init=True)

    @staticmethod
    def imports(symbol_file, input_names, param_file=None, ctx=None, allow_missing=False,
                ignore_extra=False):
        """The block of an exported model: ``symbol_file`` (``*-symbol.json``), its inputs' names
        and optionally its parameters (``*-NNNN.params``)."""
        graph = _sym.load(symbol_file)
        if isinstance(input_names, str):
            input_names = [input_names]
        inputs = [_sym.var(name) for name in input_names]
        block = SymbolBlock(graph, inputs)
        if param_file is not None:
            block.collect_params().load(param_file, ctx, allow_missing, ignore_extra,
                                        cast_dtype=True, dtype_source="saved")
        return block

    def forward(self, x, *args):
        if isinstance(x, Symbol):
            raise TypeError("SymbolBlock cannot be called on Symbols here (docs/compat.md)")
        arrays = (x,) + args
        if len(arrays) != len(self._input_names):
            raise ValueError("SymbolBlock takes %d inputs (%s), got %d"
                             % (len(self._input_names), ", ".join(self._input_names), len(arrays)))
        ctx = x.context if isinstance(x, NDArray) else None
        given = dict(zip(self._input_names, arrays))
        values = {}
        # Nodes waiting for unknown dimensions (zeros of batch size 0): id -> output shapes.
        deferred = {}
        for node in self._nodes:
            if node.is_variable():
                if node.name in given:
                    values[id(node)] = [given[node.name]]
                    continue
                try:
                    values[id(node)] = [self.params[node.name].data(ctx)]
                except DeferredInitializationError:
                    # Initialized with shapes unknown (a graph made with mx.sym): they are
                    # inferred from the inputs' now, and every parameter initialized.
                    self._deferred_infer_shape(given)
                    values[id(node)] = [self.params[node.name].data(ctx)]
                continue
            fn, attrs = self._runners[id(node)]
            if node.op in ("_zeros", "_ones") and _dims.has_unknown(attrs.get("shape")):
                deferred[id(node)] = [_dims.placeholder_shape(attrs["shape"])]
                continue
            if any(id(src) in deferred for src, _, _ in node.inputs):
                if not self._meet_unknown(node, attrs, values, deferred):
                    continue
            self._run(node, values)
        missing = [node.name for node, _ in self._graph._heads if id(node) in deferred]
        if missing:
            raise MXNetSymbolError(
                "SymbolBlock cannot run the graph: the unknown (0) dimensions of its zeros/ones "
                "nodes (begin states recorded with batch size 0) are not fixed by any array "
                "they meet on the way to output %r" % missing[0])
        outs = [values[id(node)][index] for node, index in self._graph._heads]
        return outs[0] if len(outs) == 1 else outs

    def _deferred_infer_shape(self, given):
        """Infer the parameters' unknown shapes through the graph from the inputs ``given``
        ({name: array}), as MXNet does at the first call, then finish their initialization in
        the order of the graph's inputs (MXNet's)."""
        from ._shape_inference import infer
        params = dict(self.params.items())
        shapes = infer(self._graph, given, params)
        for name, param in params.items():
            if shapes.get(name) is not None and param._data is None:
                param.shape = shapes[name]
        for node in self._nodes:
            if node.is_variable() and node.name in params and node.name not in given:
                params[node.name]._finish_deferred_init()

    def _run(self, node, values):
        fn, attrs = self._runners[id(node)]
        inputs = []
        for src, index, _ in node.inputs:
            outs = values[id(src)]
            if index >= len(outs):
                raise MXNetSymbolError("node %r uses output %d of %r, which is not computed "
                                       "here" % (node.name, index, src.name))
            inputs.append(outs[index])
        try:
            result = fn(*inputs, **attrs)
        except (TypeError, ValueError) as exc:
            raise type(exc)("SymbolBlock node %r (%s): %s" % (node.name, node.op, exc)) from exc
        values[id(node)] = list(result) if isinstance(result, (list, tuple)) else [result]

    def _meet_unknown(self, node, attrs, values, deferred):
        """For ``node``, some of whose inputs wait for unknown dimensions: infer its output
        shapes; when that fixes every unknown dimension its inputs wait for, run them and
        return True (``node`` runs next); else defer ``node`` too and return False."""
        shapes = []
        for src, index, _ in node.inputs:
            if id(src) in deferred:
                outs = deferred[id(src)]
                if index >= len(outs):
                    raise MXNetSymbolError("node %r uses output %d of %r, which is not computed "
                                           "here" % (node.name, index, src.name))
                shapes.append(outs[index])
            else:
                shapes.append(tuple(values[id(src)][index].shape))
        try:
            out_shapes = _dims.infer(node.op, attrs, shapes)
        except (IndexError, KeyError, TypeError, ValueError) as exc:
            raise MXNetSymbolError("SymbolBlock node %r (%s): %s" % (node.name, node.op, exc)) \
                from exc
        waiting = self._deferred_ancestors(node, deferred)
        roots = [n for n in waiting if not any(id(src) in deferred for src, _, _ in n.inputs)]
        if all(_dims.resolved(deferred[id(n)][0]) is not None for n in roots):
            for ancestor in waiting:     # in graph order: each after its inputs
                if ancestor in roots:
                    fn, root_attrs = self._runners[id(ancestor)]
                    shape = _dims.resolved(deferred[id(ancestor)][0])
                    values[id(ancestor)] = [fn(**dict(root_attrs, shape=shape))]
                else:
                    self._run(ancestor, values)
                del deferred[id(ancestor)]
            return True
        if out_shapes is None:
            raise MXNetSymbolError(
                "SymbolBlock cannot run node %r (%s): the unknown (0) dimensions of the zeros/ones "
                "it takes are not fixed by its other inputs" % (node.name, node.op))
        deferred[id(node)] = out_shapes
        return False

    def _deferred_ancestors(self, node, deferred):
        found, stack = {}, [node]
        while stack:
            for src, _, _ in stack.pop().inputs:
                if id(src) in deferred and id(src) not in found:
                    found[id(src)] = src
                    stack.append(src)
        return sorted(found.values(), key=lambda n: self._order[id(n)])

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError

    def _trace(self, args):
        names = self._input_names
        return [_sym.var(name) for name in names], self._graph
