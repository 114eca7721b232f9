"""``contrib.amp``: automatic mixed precision for Gluon training (MXNet keeps it in the module
``contrib.amp.amp``, which programs also import: ``from mxnet.contrib.amp import amp``)."""
from . import amp
from .amp import *  # noqa: F401,F403
from .amp import __all__
