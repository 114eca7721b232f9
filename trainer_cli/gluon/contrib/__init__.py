"""``gluon.contrib``: MXNet 1.9's contributed Gluon blocks that trainer_cli provides
(``contrib.nn.SparseEmbedding``)."""
from . import nn

__all__ = ["nn"]
