"""Gluon: parameters, blocks, layers, losses, data, and the Trainer."""
import importlib

from . import contrib, data, loss, nn, rnn, utils
from .block import Block, HybridBlock, HybridSequential, Sequential
from .parameter import Constant, DeferredInitializationError, Parameter, ParameterDict


def __getattr__(name):
    # The Trainer sits three layers above gluon's building blocks; load it on first use.
    if name in ("Trainer", "trainer"):
        module = importlib.import_module(".trainer", __name__)
        globals()["trainer"] = module
        globals()["Trainer"] = module.Trainer
        return globals()[name]
    raise AttributeError("module 'trainer_cli.gluon' has no attribute %r" % name)
