"""trainer_cli: an exact, small re-implementation of the MXNet 1.9 Gluon training stack.

Gluon code runs by swapping ``mxnet`` for ``trainer_cli`` in its imports::

    from trainer_cli import gluon, nd, autograd, optimizer

Submodules load on first use so that the ``trainer`` command starts quickly.
"""
import importlib

from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus

__version__ = "0.1.0"

_ALIASES = {
    "nd": "ndarray", "ndarray": "ndarray", "autograd": "autograd", "gluon": "gluon",
    "optimizer": "optimizer", "lr_scheduler": "lr_scheduler", "kvstore": "kvstore", "kv": "kvstore",
    "init": "initializer", "initializer": "initializer", "random": "random", "context": "context",
    "metric": "metric",
}

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus"] + sorted(_ALIASES)


def __getattr__(name):
    target = _ALIASES.get(name)
    if target is None:
        raise AttributeError("module 'trainer_cli' has no attribute %r" % name)
    module = importlib.import_module("." + target, __name__)
    globals()[name] = module
    return module
