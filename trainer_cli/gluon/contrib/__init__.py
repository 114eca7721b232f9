"""``gluon.contrib``: MXNet 1.9's contributed Gluon blocks (``contrib.nn``, the ``contrib.rnn``
cells, the ``contrib.cnn`` deformable convolutions), ``contrib.data`` (``IntervalSampler``, the
WikiText corpora) and ``contrib.estimator``."""
import importlib

from . import cnn, data, nn, rnn

__all__ = ["cnn", "data", "nn", "rnn", "estimator"]


def __getattr__(name):
    # The estimator drives a Trainer, three layers above gluon's blocks: load it on first use.
    if name == "estimator":
        module = importlib.import_module(".estimator", __name__)
        globals()["estimator"] = module
        return module
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
