"""``mxnet.contrib.symbol`` as an importable module path (``from mxnet.contrib.symbol import
MultiBoxPrior``): ``sym.contrib`` itself, as ``contrib.sym`` and ``contrib.symbol`` are."""
import sys

from ..symbol import contrib as _contrib

sys.modules[__name__] = _contrib
