"""``mxnet.contrib.ndarray`` as an importable module path.

MXNet code imports the contributed operators by path, ``from mxnet.contrib.ndarray import
MultiBoxPrior`` (the SSD chapter of "The Straight Dope" does), as well as reaching them as
``mx.contrib.nd``. Both name the same module in MXNet, so this one puts ``nd.contrib`` itself in
its place: the path, ``contrib.nd`` and ``contrib.ndarray`` are then one module.
"""
import sys

from ..ndarray import contrib as _contrib

sys.modules[__name__] = _contrib
