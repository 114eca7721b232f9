"""``trainer_cli.contrib``: MXNet's ``mxnet.contrib`` names that Gluon training code uses
(``amp``, ``text``)."""
import importlib

from . import text

__all__ = ["amp", "text"]


def __getattr__(name):
    # amp drives the Trainer, a layer above the text utilities that gluon's data sets use:
    # loaded on first use, so that importing ``contrib.text`` does not pull the Trainer in.
    if name == "amp":
        module = globals()["amp"] = importlib.import_module(".amp", __name__)
        return module
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
