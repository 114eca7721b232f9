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
# steps were unchanged); one resnet18_v1 image 16-20 against 25-32 images/s. Never over a value
# of the user's, and also where NumPy is loaded already (docs/compat.md).
from ._openblas_idle import shorten_spin as _shorten_spin

_shorten_spin()

from . import base
from .base import MXNetError
from .context import Context, cpu, cpu_pinned, current_context, gpu, num_gpus

__version__ = "0.1.0"

_ALIASES = {
    "nd": "ndarray", "ndarray": "ndarray", "autograd": "autograd", "gluon": "gluon",
    "optimizer": "optimizer", "lr_scheduler": "lr_scheduler", "kvstore": "kvstore", "kv": "kvstore",
    "init": "initializer", "initializer": "initializer", "random": "random", "context": "context",
    "metric": "metric", "io": "io", "sym": "symbol", "symbol": "symbol",
    "image": "image", "img": "image", "profiler": "profiler", "test_utils": "test_utils",
    "recordio": "recordio", "contrib": "contrib", "operator": "operator",
}

# MXNet 1.9 modules that trainer_cli deliberately does not provide (docs/porting.md). Using one
# raises an error that says so, never a bare AttributeError or "No module named".
_ABSENT = {
    "mod": "Module API (mxnet.module)", "module": "Module API (mxnet.module)",
    "model": "FeedForward model API (mxnet.model)",
    "np": "NumPy-compatible array API (mxnet.numpy)", "numpy": "NumPy-compatible array API (mxnet.numpy)",
    "npx": "NumPy extension API (mxnet.numpy_extension)",
    "numpy_extension": "NumPy extension API (mxnet.numpy_extension)",
    "rnn": "symbolic RNN cells (mxnet.rnn; Gluon's are gluon.rnn)",
    "visualization": "graph plotting (mxnet.visualization)",
    "viz": "graph plotting (mxnet.visualization)", "callback": "Module callbacks (mxnet.callback)",
    "monitor": "executor monitor (mxnet.monitor)", "mon": "executor monitor (mxnet.monitor)",
    "rtc": "runtime CUDA compiler (mxnet.rtc)",
    "engine": "engine controls (mxnet.engine)",
    "executor": "symbolic executor (mxnet.executor)", "torch": "Torch bridge (mxnet.torch)",
    "th": "Torch bridge (mxnet.torch)", "library": "operator library loader (mxnet.library)",
    "name": "symbol naming scopes (mxnet.name: NameManager, Prefix)",
    "attribute": "symbol attribute scopes (mxnet.attribute: AttrScope)",
    "util": "NumPy-interface switches (mxnet.util: use_np, is_np_array)",
}

__all__ = (["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus", "MXNetError",
            "base"] + sorted(_ALIASES))

_sys.meta_path.append(base.AbsentModuleFinder(__name__, _ABSENT))


def __getattr__(name):
    target = _ALIASES.get(name)
    if target is None:
        if name in _ABSENT:
            module = globals()[name] = base.AbsentModule(__name__ + "." + name, _ABSENT[name])
            return module
        raise AttributeError("module 'trainer_cli' has no attribute %r" % name)
    if target == "random":
        importlib.import_module(".ndarray", __name__)    # which gives mx.random nd.random's draws
    module = importlib.import_module("." + target, __name__)
    globals()[name] = module
    return module
