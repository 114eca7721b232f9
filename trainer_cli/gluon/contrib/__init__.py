"""``gluon.contrib``: MXNet 1.9's contributed Gluon blocks that trainer_cli provides
(``contrib.nn.SparseEmbedding``), ``contrib.data.IntervalSampler`` and ``contrib.estimator``."""
import importlib

from . import data, nn

__all__ = ["data", "nn", "estimator"]


def __getattr__(name):
    # The estimator drives a Trainer, three layers above gluon's blocks: load it on first use.
    if name == "estimator":
        module = importlib.import_module(".estimator", __name__)
        globals()["estimator"] = module
        return module
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
