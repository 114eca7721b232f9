"""``gluon.contrib``: MXNet 1.9's contributed Gluon blocks that trainer_cli provides
(``contrib.nn.SparseEmbedding``, the ``contrib.rnn`` cells), ``contrib.data.IntervalSampler``
and ``contrib.estimator``."""
import importlib

from ...base import AbsentModule

from . import data, nn, rnn

__all__ = ["data", "nn", "rnn", "estimator"]


# MXNet 1.9 gluon.contrib modules not provided (docs/porting.md): using one says so.
_ABSENT = {"cnn": "contributed convolutions (DeformableConvolution, ModulatedDeformableConvolution)"}


def __getattr__(name):
    # The estimator drives a Trainer, three layers above gluon's blocks: load it on first use.
    if name == "estimator":
        module = importlib.import_module(".estimator", __name__)
        globals()["estimator"] = module
        return module
    if name in _ABSENT:
        module = globals()[name] = AbsentModule(__name__ + "." + name, _ABSENT[name])
        return module
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
