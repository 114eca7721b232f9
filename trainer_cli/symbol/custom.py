"""``sym.Custom`` (``F.Custom`` in a ``hybrid_forward`` being recorded): MXNet's ``Custom`` node
for an operator registered with ``mx.operator.register``.

The node records ``op_type`` and the other keyword arguments as strings (``str()`` of each, as
MXNet writes them); its inputs are the prop's arguments then its auxiliary states (inputs the
operator writes to: variables there are auxiliary states of the graph), its outputs those of
``list_outputs``, named ``<node>_<output>``. A missing input becomes a variable
``<node>_<argument>`` carrying the node's attributes, as in MXNet. The prop is made from the
node's attributes whenever its lists are needed; a node whose ``op_type`` is not registered (a
graph loaded before its operator is registered) has the outputs its file says and no auxiliary
states.
"""
from __future__ import annotations

from .. import operator as _operator
from . import naming
from .symbol import MXNetSymbolError, Symbol, _Node

__all__ = ["Custom"]


def _prop(attrs):
    """The prop a node with these attributes stands for, or None when not registered."""
    op_type = attrs.get("op_type")
    prop_cls = _operator.find_prop(op_type) if op_type else None
    if prop_cls is None:
        return None
    kwargs = {k: v for k, v in attrs.items() if k != "op_type"
              and not (k.startswith("__") and k.endswith("__"))}
    return prop_cls(**kwargs)


def _lists(attrs):
    prop = _prop(attrs)
    if prop is None:
        return None
    return (list(prop.list_arguments()), list(prop.list_outputs()),
            list(prop.list_auxiliary_states()))


def output_names(node):
    """The names of a Custom node's outputs (its prop's ``list_outputs``), or None."""
    lists = _lists(node.attrs)
    return None if lists is None else lists[1]


def mutated_inputs(node):
    """The positions of a Custom node's auxiliary-state inputs."""
    lists = _lists(node.attrs)
    if lists is None:
        return ()
    return tuple(range(len(lists[0]), len(lists[0]) + len(lists[2])))


def num_outputs(attrs):
    """(outputs, visible outputs) of a Custom node with these attributes, or None."""
    lists = _lists(attrs)
    return None if lists is None else (len(lists[1]), len(lists[1]))


def Custom(*data, op_type=None, name=None, attr=None, **kwargs):  # noqa: N802 - MXNet's name
    """Record a node applying the custom operator ``op_type``: ``data`` (Symbols) are its
    arguments then its auxiliary states, in order; an input may also be given by its name
    (``data=``, ``label=``). The other keyword arguments are the prop's (as strings)."""
    if op_type is None:
        raise MXNetSymbolError("Custom: Required argument `op_type` is missing.")
    op_type = str(op_type)
    prop_cls = _operator.find_prop(op_type)
    if prop_cls is None:
        raise MXNetSymbolError("Custom: Cannot find custom operator %s" % op_type)
    inputs_by_name, attrs = {}, {}
    for key, value in kwargs.items():
        if isinstance(value, Symbol):
            inputs_by_name[key] = value
        else:
            attrs[key] = str(value)
    lists = _lists(dict(attrs, op_type=op_type))
    arguments, outputs, auxs = lists
    slots = arguments + auxs
    positional = [d for d in data if d is not None]
    if len(positional) > len(slots):
        raise MXNetSymbolError("Custom operator %r takes %d inputs (arguments %s, then auxiliary "
                               "states %s), got %d" % (op_type, len(slots), arguments, auxs,
                                                       len(positional)))
    unknown = set(inputs_by_name) - set(slots)
    if unknown:
        raise MXNetSymbolError("Custom operator %r has no input named %s; its inputs are %s"
                               % (op_type, sorted(unknown), slots))
    node_attrs = {"op_type": op_type}
    node_attrs.update(attrs)
    if attr:
        node_attrs.update({k: str(v) for k, v in attr.items()})
    node = _Node("Custom", naming.current().get(name, "custom"), node_attrs,
                 num_outputs=len(outputs), num_visible=len(outputs))
    given = dict(zip(slots, positional))
    for key, value in inputs_by_name.items():
        if key in given:
            raise MXNetSymbolError("Custom operator %r: input %r is given twice" % (op_type, key))
        given[key] = value
    for position, slot in enumerate(slots):
        symbol = given.get(slot)
        if symbol is None:
            # As nnvm's Compose: the new variable carries the node's attributes.
            symbol = Symbol([(_Node("null", "%s_%s" % (node.name, slot), node.attrs), 0)])
        if not isinstance(symbol, Symbol) or len(symbol._heads) != 1:
            raise MXNetSymbolError("Custom operator %r: input %r must be one Symbol output"
                                   % (op_type, slot))
        source, index = symbol._heads[0]
        version = 0
        if position >= len(arguments) and source.is_variable():
            # An auxiliary state: MXNet bumps the version of a variable an operator writes.
            source.version += 1
            version = source.version
        node.inputs.append((source, index, version))
    return Symbol([(node, i) for i in range(len(outputs))])
