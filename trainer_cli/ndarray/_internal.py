"""``nd._internal``: MXNet's internal names of the element-wise arithmetic operators.

MXNet generates this namespace from its operator registry (hundreds of names, most of them the
kernels behind public operators). Gluon code reaches into it for one thing: the aliases of
``elemwise_add``, ``elemwise_sub``, ``elemwise_mul`` and ``elemwise_div`` that MXNet's own
recurrent cells once called (``F._internal._plus(...)``, ``F._internal._mul(...)``), kept by code
written from them, MXNet's tree-LSTM example among it. The package binds those aliases to its
exported operators (``ALIASES``); any other name is an error saying that it is MXNet's and absent.
"""
from ..base import NotInTrainerCLIError, absent_message

# MXNet's registry: elemwise_add is also _add, _plus, _Plus; elemwise_sub _sub, _minus, _Minus;
# elemwise_mul _mul, _Mul; elemwise_div _div, _Div.
ALIASES = {"_add": "elemwise_add", "_plus": "elemwise_add", "_Plus": "elemwise_add",
           "_sub": "elemwise_sub", "_minus": "elemwise_sub", "_Minus": "elemwise_sub",
           "_mul": "elemwise_mul", "_Mul": "elemwise_mul",
           "_div": "elemwise_div", "_Div": "elemwise_div"}


def __getattr__(name):
    if name.startswith("__") and name.endswith("__"):
        raise AttributeError(name)
    raise NotInTrainerCLIError(absent_message(
        "mx.nd._internal." + name,
        "internal operator (only the element-wise arithmetic aliases %s are here)"
        % ", ".join(sorted(ALIASES))))
