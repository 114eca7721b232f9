"""Gluon: parameters, blocks, layers, losses, data, and the Trainer."""
import importlib

from . import contrib, data, loss, nn, rnn, utils
from .block import Block, HybridBlock, HybridSequential, Sequential
from .symbol_block import SymbolBlock
from .parameter import Constant, DeferredInitializationError, Parameter, ParameterDict
from ..base import AbsentModule, NotInTrainerCLIError, absent_message

# MXNet 1.9 gluon names that are not built here yet: using one says so (an entry goes when its
# module lands).
_ABSENT = {
}


def __getattr__(name):
    # The Trainer sits three layers above gluon's building blocks; load it on first use.
    if name in ("Trainer", "trainer"):
        module = importlib.import_module(".trainer", __name__)
        globals()["trainer"] = module
        globals()["Trainer"] = module.Trainer
        return globals()[name]
    if name == "model_zoo":
        module = importlib.import_module(".model_zoo", __name__)
        globals()["model_zoo"] = module
        return module
    if name in _ABSENT:
        if name[0].isupper():
            raise NotInTrainerCLIError(absent_message(__name__ + "." + name, _ABSENT[name]))
        module = globals()[name] = AbsentModule(__name__ + "." + name, _ABSENT[name])
        return module
    raise AttributeError("module 'trainer_cli.gluon' has no attribute %r" % name)
