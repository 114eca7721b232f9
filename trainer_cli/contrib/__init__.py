"""``trainer_cli.contrib``: MXNet's ``mxnet.contrib`` names that Gluon training code uses
(``amp``, ``text``, ``io.DataLoaderIter``, and the contributed operators as
``nd``/``ndarray``/``sym``/``symbol``)."""
import importlib

from . import text

__all__ = ["amp", "text", "io", "nd", "ndarray", "sym", "symbol"]


# MXNet's mx.contrib.nd / .ndarray and .sym / .symbol: the contributed operators (d2l's code
# calls contrib.nd.MultiBoxPrior).
# mx.contrib.io (DataLoaderIter) sits on mx.io, which reads gluon's data sets: loaded on first
# use, as amp is, since gluon's data sets import contrib.text.
_OPERATORS = {"nd": "..ndarray.contrib", "ndarray": "..ndarray.contrib",
              "sym": "..symbol.contrib", "symbol": "..symbol.contrib", "io": ".io"}


def __getattr__(name):
    # amp drives the Trainer, a layer above the text utilities that gluon's data sets use:
    # loaded on first use, so that importing ``contrib.text`` does not pull the Trainer in.
    if name == "amp":
        module = globals()["amp"] = importlib.import_module(".amp", __name__)
        return module
    if name in _OPERATORS:
        module = globals()[name] = importlib.import_module(_OPERATORS[name], __name__)
        return module
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
