"""``trainer_cli.contrib``: MXNet's ``mxnet.contrib`` names that Gluon training code uses (``amp``)."""
from . import amp

__all__ = ["amp"]
