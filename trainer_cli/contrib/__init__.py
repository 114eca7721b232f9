"""``trainer_cli.contrib``: MXNet's ``mxnet.contrib`` names that Gluon training code uses
(``amp``, ``text``)."""
from . import amp, text

__all__ = ["amp", "text"]
