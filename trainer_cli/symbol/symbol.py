"""Symbols: graphs of operator nodes, as far as ``HybridBlock.export`` and
``gluon.SymbolBlock.imports`` need them.

A ``Symbol`` is a list of outputs (``(node, index)``) of ``_Node`` objects, each recording an
operator's name, its attributes as MXNet writes them (strings) and its inputs. Calling
``hybrid_forward(F, ...)`` with ``F`` this module's namespace records a block's graph instead of
computing; nothing here runs an operator (``gluon.SymbolBlock`` runs a graph with ``nd``).
"""
from __future__ import annotations

import numbers

import numpy

from . import naming
from ._op_table import MUTATED_INPUTS, OPS, OUTPUT_NAMES

__all__ = ["Symbol", "var", "Variable", "Group", "make_op", "op_namespace", "MXNetSymbolError",
           "op_entry"]

# Inputs an operator writes to (auxiliary states): MXNet bumps the variable's version there.
_MUTATED_INPUTS = {"BatchNorm": (3, 4)}
# Operators of any number of inputs that record how many they got.
_NUM_ARGS_OPS = {"Concat", "add_n", "stack", "_rnn_param_concat"}
# Outputs of a node that MXNet names other than ``output``/``output%d``.
_OUTPUT_NAMES = {"BatchNorm": ("output", "mean", "var"), "Dropout": ("output", "mask"),
                 "LayerNorm": ("output", "mean", "std"), "GroupNorm": ("output", "mean", "std"),
                 "InstanceNorm": ("output", "mean", "var")}
# The rest as the generated table has them (contrib.BatchNormWithReLU, MultiBoxTarget, ...).
for _op, _value in MUTATED_INPUTS.items():
    _MUTATED_INPUTS.setdefault(_op, _value)
for _op, _value in OUTPUT_NAMES.items():
    _OUTPUT_NAMES.setdefault(_op, _value)
# Table entries by the operator a node records, for the functions named otherwise
# (``contrib.box_nms`` records ``_contrib_box_nms``).
_BY_OP = {}
for _name, _entry in sorted(OPS.items()):
    if _entry[0] and _entry[0] not in OPS:
        _BY_OP.setdefault(_entry[0], _entry)
del _op, _value, _name, _entry


def op_entry(op):
    """The table entry of the operator ``op`` as a node records it, or None."""
    return OPS.get(op) or _BY_OP.get(op)


_DTYPE_CODES = {numpy.float32: 0, numpy.float64: 1, numpy.float16: 2, numpy.uint8: 3,
                numpy.int32: 4, numpy.int8: 5, numpy.int64: 6, numpy.bool_: 7}
_STYPE_CODES = {"default": 0, "row_sparse": 1, "csr": 2}


class MXNetSymbolError(ValueError):
    """A symbol graph that cannot be built or read."""


class _Node:
    __slots__ = ("op", "name", "attrs", "inputs", "num_outputs", "num_visible", "version")

    def __init__(self, op, name, attrs=None, inputs=(), num_outputs=1, num_visible=1):
        self.op = op
        self.name = name
        self.attrs = dict(attrs or {})
        self.inputs = list(inputs)        # [(node, output index, version)]
        self.num_outputs = num_outputs    # all outputs, as node_row_ptr counts them
        self.num_visible = num_visible    # those a symbol shows
        self.version = 0                  # variables: bumped by each operator that writes them

    def is_variable(self):
        return self.op == "null"

    def output_names(self):
        if self.is_variable():
            return [self.name]
        names = _OUTPUT_NAMES.get(self.op)
        if self.op == "Custom":
            names = _custom().output_names(self)
        if names is None:
            names = ["output"] if self.num_outputs == 1 else \
                ["output%d" % i for i in range(self.num_outputs)]
        return ["%s_%s" % (self.name, n) for n in names[:self.num_visible]]


def _custom():
    # Custom nodes take their outputs and auxiliary states from the registered operator.
    from . import custom
    return custom


def _mutated_inputs(node):
    if node.op == "Custom":
        return _custom().mutated_inputs(node)
    return _MUTATED_INPUTS.get(node.op, ())


def _topological(heads):
    """Nodes in MXNet's order: depth first from the heads, each after its inputs."""
    order, seen = [], set()
    for head, _ in heads:
        if id(head) in seen:
            continue
        stack = [(head, iter(head.inputs))]
        seen.add(id(head))
        while stack:
            node, pending = stack[-1]
            for entry in pending:
                child = entry[0]
                if id(child) not in seen:
                    seen.add(id(child))
                    stack.append((child, iter(child.inputs)))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


class Symbol:
    """The outputs of a graph of operators (MXNet's ``mx.sym.Symbol``, for export and import)."""

    def __init__(self, heads):
        self._heads = list(heads)   # [(node, output index)]

    # ------------------------------------------------------------------ structure
    @property
    def name(self):
        node = self._node()
        return None if node is None else node.name

    def _node(self):
        # The node whose outputs these all are (MXNet answers name/attr for a multi-output
        # node's symbol, not for a group of several nodes), or None.
        node = self._heads[0][0] if self._heads else None
        if any(head is not node for head, _ in self._heads):
            return None
        return node

    def __len__(self):
        return len(self._heads)

    def __iter__(self):
        return (Symbol([head]) for head in self._heads)

    def __getitem__(self, index):
        if isinstance(index, str):
            names = self.list_outputs()
            if index not in names:
                raise ValueError("There is no output named %r; outputs: %s" % (index, names))
            index = names.index(index)
        if not isinstance(index, numbers.Integral):
            raise TypeError("Symbol index must be an int or an output name, got %r" % (index,))
        return Symbol([self._heads[index]])

    def get_internals(self):
        heads = []
        for node in _topological(self._heads):
            heads += [(node, i) for i in range(node.num_visible)]
        return Symbol(heads)

    def list_outputs(self):
        return [node.output_names()[index] for node, index in self._heads]

    def _variables(self):
        nodes = _topological(self._heads)
        aux = {id(entry[0]) for node in nodes for i, entry in enumerate(node.inputs)
               if i in _mutated_inputs(node)}
        return [node for node in nodes if node.is_variable()], aux

    def list_inputs(self):
        return [node.name for node in self._variables()[0]]

    def list_arguments(self):
        variables, aux = self._variables()
        return [node.name for node in variables if id(node) not in aux]

    def list_auxiliary_states(self):
        variables, aux = self._variables()
        return [node.name for node in variables if id(node) in aux]

    def attr(self, key):
        node = self._node()
        return None if node is None else node.attrs.get(key)

    def list_attr(self):
        node = self._node()
        return {} if node is None else dict(node.attrs)

    def __repr__(self):
        if len(self._heads) == 1:
            return "<Symbol %s>" % self.name
        return "<Symbol group [%s]>" % ", ".join(node.name for node, _ in self._heads)

    # ------------------------------------------------------------------ saving
    def tojson(self, remove_amp_cast=True):
        from .graph_json import dump_graph
        return dump_graph(self)

    def save(self, fname, remove_amp_cast=True):
        from .._atomic import atomic_write
        text = self.tojson().encode("utf-8")
        with atomic_write(fname) as f:
            f.write(text)

    # ------------------------------------------------------------------ arithmetic
    def _binary(self, other, op, scalar_op, reverse_scalar_op=None, reverse=False):
        if isinstance(other, Symbol):
            return make_op(op)(other, self) if reverse else make_op(op)(self, other)
        if isinstance(other, numbers.Number):
            return make_op(reverse_scalar_op if reverse else scalar_op)(self, scalar=other)
        raise TypeError("type %s not supported" % type(other).__name__)

    def __add__(self, other):
        return self._binary(other, "_Plus", "_PlusScalar")

    def __radd__(self, other):
        return self._binary(other, "_Plus", "_PlusScalar")

    def __sub__(self, other):
        return self._binary(other, "_Minus", "_MinusScalar")

    def __rsub__(self, other):
        return self._binary(other, "_Minus", "_MinusScalar", "_RMinusScalar", reverse=True)

    def __mul__(self, other):
        return self._binary(other, "_Mul", "_MulScalar")

    def __rmul__(self, other):
        return self._binary(other, "_Mul", "_MulScalar")

    def __truediv__(self, other):
        return self._binary(other, "_Div", "_DivScalar")

    def __rtruediv__(self, other):
        return self._binary(other, "_Div", "_DivScalar", "_RDivScalar", reverse=True)

    def __pow__(self, other):
        return self._binary(other, "_Power", "_PowerScalar")

    def __rpow__(self, other):
        return self._binary(other, "_Power", "_PowerScalar", "_rpower_scalar", reverse=True)

    def __neg__(self):
        return self.__mul__(-1.0)

    # MXNet's comparisons (``mask = x > 0``, ``x == 0`` in a hybrid_forward). A symbol stays
    # hashable by identity (the recorder keys dicts by symbols, which compare by identity
    # first); its truth value is refused, as MXNet's, so that no ``in`` or ``if`` over symbols
    # can take a recorded ``==`` for an answer.
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError("a Symbol has no truth value (it records a graph node: "
                        "F.where(x == y, ...) rather than if x == y)")

    def __eq__(self, other):
        return self._binary(other, "_equal", "_equal_scalar")

    def __ne__(self, other):
        return self._binary(other, "_not_equal", "_not_equal_scalar")

    def __gt__(self, other):
        return self._binary(other, "_greater", "_greater_scalar")

    def __ge__(self, other):
        return self._binary(other, "_greater_equal", "_greater_equal_scalar")

    def __lt__(self, other):
        return self._binary(other, "_lesser", "_lesser_scalar")

    def __le__(self, other):
        return self._binary(other, "_lesser_equal", "_lesser_equal_scalar")

    def __getattr__(self, name):
        # The operator methods MXNet's Symbol has (``x.reshape``, ``x.swapaxes``, ...).
        if name.startswith("_") or name not in OPS or not name.islower():
            raise AttributeError("'Symbol' object has no attribute %r" % name)
        op = make_op(name)
        return lambda *args, **kwargs: op(self, *args, **kwargs)

    def astype(self, dtype):
        return make_op("cast")(self, dtype=dtype)


def _attr_string(key, value):
    if key == "dtype":
        return numpy.dtype(value).name
    return str(value)


def op_namespace(module_globals, prefix, missing):
    """The module ``__getattr__`` of a namespace of operator functions (``mx.sym``,
    ``sym.contrib``, ``sym.linalg``): ``F.<name>`` is the table's ``<prefix><name>``, made on
    first use and kept in the module; ``missing(name)`` is the error for any other name."""
    def __getattr__(name):
        if not name.startswith("__") and prefix + name in OPS:
            fn = module_globals[name] = make_op(prefix + name)
            return fn
        raise missing(name)
    return __getattr__


def make_op(fname):
    """The function ``F.<fname>`` of the symbol namespace: records a node of that operator."""
    entry = OPS.get(fname)
    if entry is None:
        raise MXNetSymbolError(
            "the operator %r is not available for symbols here: export and SymbolBlock know "
            "the operators of MXNet's Gluon layers and common F functions (docs/compat.md)"
            % fname)
    op, input_names, arg_names, variadic, outputs, visible = entry
    op = op or fname
    # MXNet's hint is the function's own name: ``F.contrib.box_nms`` makes ``box_nms0``.
    hint = fname.rsplit(".", 1)[-1].lower()

    def create(*args, name=None, attr=None, **kwargs):
        inputs, attrs, slots = [], {}, {}
        if variadic:
            inputs = [a for a in args if a is not None]
            if op in _NUM_ARGS_OPS:
                attrs["num_args"] = str(len(inputs))
        else:
            positional = list(args)
            for input_name in input_names:
                if not positional or not (positional[0] is None or isinstance(positional[0], Symbol)):
                    break
                value = positional.pop(0)
                if value is not None:
                    slots[input_name] = value
            if len(positional) > len(arg_names):
                raise TypeError("%s takes at most %d arguments beside its inputs, got %d"
                                % (fname, len(arg_names), len(positional)))
            kwargs = dict(zip(arg_names, positional), **kwargs)
            for input_name in input_names:
                value = kwargs.get(input_name)
                if isinstance(value, Symbol):
                    slots[input_name] = kwargs.pop(input_name)
                elif input_name in kwargs and value is None:
                    kwargs.pop(input_name)
        for key, value in kwargs.items():
            if isinstance(value, Symbol):
                raise TypeError("%s: argument %s is a Symbol but not one of the operator's inputs %s"
                                % (fname, key, list(input_names)))
            attrs[key] = _attr_string(key, value)   # None too: MXNet writes "None"
        if attr:
            attrs.update({k: str(v) for k, v in attr.items()})
        num_outputs, num_visible = _outputs(op, attrs, outputs, visible)
        node = _Node(op, naming.current().get(name, hint), attrs, num_outputs=num_outputs,
                     num_visible=num_visible)
        if not variadic:
            inputs = _composed_inputs(node, input_names, slots)
        mutated = _MUTATED_INPUTS.get(op, ())
        for position, symbol in enumerate(inputs):
            if len(symbol._heads) != 1:
                raise MXNetSymbolError("%s: input %d is a group of %d outputs; give one output"
                                       % (fname, position, len(symbol._heads)))
            source, index = symbol._heads[0]
            if source.is_variable() and op in _VAR_INIT_ON_COMPOSE:
                init = _VAR_INIT_ON_COMPOSE[op].get(_input_name(node, input_names, slots,
                                                                  position))
                if init is not None:
                    source.attrs.setdefault("__init__", init)
            version = 0
            if position in mutated and source.is_variable():
                source.version += 1
                version = source.version
            node.inputs.append((source, index, version))
        return Symbol([(node, i) for i in range(num_visible)])

    create.__name__ = fname
    return create


# MXNet's FListInputNames where it depends on the attributes: (input, attribute, default,
# the attribute's value that makes the operator take that input); the others take every input
# the table lists.
_NO_BIAS = {"FullyConnected": False, "Convolution": False, "Deconvolution": True,
            "_contrib_DeformableConvolution": False,
            "_contrib_ModulatedDeformableConvolution": False}
_CONDITIONAL_INPUTS = {
    "LeakyReLU": (("gamma", "act_type", "leaky", "prelu"),),
    "RNN": (("state_cell", "mode", None, "lstm"),
            ("sequence_length", "use_sequence_length", "False", True)),
    "softmax": (("length", "use_length", "False", True),),
    "SequenceMask": (("sequence_length", "use_sequence_length", "False", True),),
    "SequenceLast": (("sequence_length", "use_sequence_length", "False", True),),
    "SequenceReverse": (("sequence_length", "use_sequence_length", "False", True),),
    "CTCLoss": (("data_lengths", "use_data_lengths", "False", True),
                ("label_lengths", "use_label_lengths", "False", True)),
    "_contrib_BilinearResize2D": (("like", "mode", "size", "like"),),
}
# MXNet's FSetInputVarAttrOnCompose: the initializer an operator gives the variables it takes
# at these inputs, where they have none.
_VAR_INIT_ON_COMPOSE = {
    "BatchNorm": {"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
    "_contrib_BatchNormWithReLU": {"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
    "LeakyReLU": {"gamma": '["Constant", {"value": 0.25}]'},
}


def _flag(text):
    return text is not None and text.strip().lower() in ("true", "1")


def listed_inputs(op, input_names, attrs):
    """The inputs a node of ``op`` with these attributes takes, in order (MXNet's
    ``FListInputNames``): ``no_bias`` drops ``bias``, ``act_type='prelu'`` adds ``gamma``, ..."""
    names = list(input_names)
    if op in _NO_BIAS:
        value = attrs.get("no_bias")
        if (_flag(value) if value is not None else _NO_BIAS[op]) and "bias" in names:
            names.remove("bias")
    for name, key, default, wanted in _CONDITIONAL_INPUTS.get(op, ()):
        value = attrs.get(key, default)
        taken = _flag(value) if wanted is True else value == wanted
        if not taken and name in names:
            names.remove(name)
    return names


def _composed_inputs(node, input_names, slots):
    """The input symbols of ``node`` in the operator's order: those given, and for each other
    input it takes a new variable ``<node>_<input>`` carrying the node's attributes (nnvm's
    Compose: ``FullyConnected(x, num_hidden=3, name='fc')`` takes ``fc_weight`` and
    ``fc_bias``)."""
    listed = set(listed_inputs(node.op, input_names, node.attrs))
    inputs = []
    for input_name in input_names:
        if input_name in slots:
            inputs.append(slots[input_name])
        elif input_name in listed:
            inputs.append(Symbol([(_Node("null", "%s_%s" % (node.name, input_name),
                                         node.attrs), 0)]))
    return inputs


def _input_name(node, input_names, slots, position):
    """The name of the operator's input at ``position`` among the node's inputs."""
    listed = set(listed_inputs(node.op, input_names, node.attrs))
    present = [n for n in input_names if n in slots or n in listed]
    return present[position] if position < len(present) else None


def _outputs(op, attrs, outputs, visible):
    """(all outputs, visible outputs) of a node of ``op`` with these attributes."""
    if op == "Custom":
        return _custom().num_outputs(attrs) or (1, 1)
    if op in ("SliceChannel",):
        n = int(attrs.get("num_outputs", 1))
        return n, n
    if op == "Pooling":
        # MXNet's oneDNN build keeps a workspace output for max pooling in its supported layouts.
        kernel_dims = attrs.get("kernel", "()").count(",") + (0 if attrs.get("kernel", "()")
                                                               .endswith(",)") else 1)
        layout = attrs.get("layout", "None")
        if attrs.get("pool_type", "max") == "max" and 1 <= kernel_dims <= 3 \
                and layout in ("None", "NCW", "NCHW", "NCDHW"):
            return 2, 1
        return 1, 1
    if op == "LeakyReLU":
        return (2, 1) if attrs.get("act_type") == "rrelu" else (1, 1)
    if op == "topk":
        # The values and their indices (one shown for 'value', both for 'both'); indices or
        # mask alone, one.
        kind = attrs.get("ret_typ", "indices")
        return {"value": (2, 1), "both": (2, 2)}.get(kind, (1, 1))
    if op == "RNN":
        n = 1
        if attrs.get("state_outputs") == "True":
            n += 2 if attrs.get("mode") == "lstm" else 1
        return n, n
    if attrs.get("output_mean_var") == "True" and outputs:
        # The output, the mean and the variance (or std); BatchNormWithReLU keeps a fourth.
        names = _OUTPUT_NAMES.get(op)
        return outputs, min(outputs, len(names)) if names else outputs
    return (outputs or 1), (visible or 1)


def var(name, attr=None, shape=None, lr_mult=None, wd_mult=None, dtype=None, init=None,
        stype=None, **kwargs):
    """A variable (a graph input), with MXNet's ``__shape__``/``__dtype__``/... attributes."""
    if not isinstance(name, str):
        raise TypeError("Expect a string for variable `name`")
    attrs = dict(attr or {})
    if shape is not None:
        attrs["__shape__"] = str(shape)
    if lr_mult is not None:
        attrs["__lr_mult__"] = str(lr_mult)
    if wd_mult is not None:
        attrs["__wd_mult__"] = str(wd_mult)
    if dtype is not None:
        attrs["__dtype__"] = str(_DTYPE_CODES[numpy.dtype(dtype).type])
    if init is not None:
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if stype is not None:
        attrs["__storage_type__"] = str(_STYPE_CODES[stype])
    for key, value in kwargs.items():
        if not (key.startswith("__") and key.endswith("__")):
            raise ValueError("Attribute name=%s is not supported." % key)
        attrs[key] = str(value)
    return Symbol([(_Node("null", name, attrs), 0)])


Variable = var


def Group(symbols):  # noqa: N802 - MXNet's name
    """One symbol of all the outputs of ``symbols``."""
    heads = []
    for symbol in symbols:
        if not isinstance(symbol, Symbol):
            raise TypeError("Expected a list of symbols as input")
        heads += symbol._heads
    return Symbol(heads)
