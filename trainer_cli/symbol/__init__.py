"""The symbol namespace (``mx.sym``), as far as exporting Gluon blocks and importing MXNet's
symbol files need it: variables, the operators of Gluon's layers and common ``F`` functions
recorded as graph nodes (``contrib``: MXNet's contributed operators that ``nd.contrib``
computes; ``linalg``: those of ``nd.linalg``), ``Group``, ``load``/``load_json`` and ``Symbol.tojson``/``save``.

Symbols here are not executed (no ``bind``/``eval``/``simple_bind``, no shape inference):
``gluon.SymbolBlock`` runs a graph with ``nd`` (docs/compat.md).
"""
from ._op_table import OPS as _OPS
from . import contrib, linalg
from .graph_json import load_graph as load, parse_graph as load_json
from .symbol import (Group, MXNetSymbolError, Symbol, Variable, make_op as _make_op,
                     op_namespace as _op_namespace, var)
from .custom import Custom

__all__ = ["Symbol", "var", "Variable", "Group", "load", "load_json", "MXNetSymbolError", "zeros",
           "ones", "contrib", "linalg", "Custom"]


def zeros(shape, dtype=None, **kwargs):
    """A node of zeros (``_zeros``); a 0 in ``shape`` is filled in when the graph runs."""
    return _make_op("_zeros")(shape=shape, dtype="float32" if dtype is None else dtype, **kwargs)


def ones(shape, dtype=None, **kwargs):
    return _make_op("_ones")(shape=shape, dtype="float32" if dtype is None else dtype, **kwargs)


class _Internal:
    """``F._internal``: the operators MXNet keeps there (``_rnn_param_concat``, ``_plus_scalar``)."""

    def __getattr__(self, name):
        if name in _OPS:
            return _make_op(name)
        raise AttributeError("symbol._internal has no operator %r here (docs/compat.md)" % name)


_internal = _Internal()


__getattr__ = _op_namespace(globals(), "", lambda name: AttributeError(
    "module 'trainer_cli.symbol' has no attribute %r: the symbol namespace here covers "
    "exporting Gluon blocks and importing their symbol files (docs/compat.md)" % name))
