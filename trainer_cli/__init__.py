"""trainer_cli: an exact, small re-implementation of the MXNet 1.9 Gluon training stack.

Gluon code runs by swapping ``mxnet`` for ``trainer_cli`` in its imports::

    from trainer_cli import gluon, nd, autograd, optimizer

Submodules load on first use so that the ``trainer`` command starts quickly.
"""
import importlib
import os as _os
import sys as _sys

# OpenBLAS's idle threads spin for 2**28 cycles (about 0.1 s) after each GEMM before they sleep,
# and a spinning thread takes its core from the work that follows: the pieces of a convolution
# (``ndarray.host_threads``), numba's passes. A LeNet step on two threads took 20-26 ms with
# them spinning, 13-14 ms with 2**20 cycles (well over the gap between a step's GEMMs: the MLP
# steps were unchanged). OpenBLAS reads it once, when NumPy loads it: set only where NumPy is not
# loaded yet, and never over a value of the user's (docs/compat.md).
if "numpy" not in _sys.modules:
    _os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "20")

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
