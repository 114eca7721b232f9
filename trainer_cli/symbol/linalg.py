"""``mx.sym.linalg`` (``F.linalg`` in a ``hybrid_forward`` being recorded): MXNet 1.9.1's
linear-algebra operators that ``nd.linalg`` computes, each recording the node MXNet's function
makes (``F.linalg.gemm2(a, b)`` records op ``_linalg_gemm2`` named ``gemm20``), so that
``HybridBlock.export`` writes MXNet's files and ``gluon.SymbolBlock`` runs them with
``nd.linalg``."""
from ._op_table import OPS as _OPS
from .symbol import op_namespace as _op_namespace

__all__ = sorted(key[len("linalg."):] for key in _OPS if key.startswith("linalg."))

__getattr__ = _op_namespace(globals(), "linalg.", lambda name: AttributeError(
    "module 'trainer_cli.symbol.linalg' has no attribute %r: it holds the linalg operators "
    "that nd.linalg computes (docs/compat.md)" % name))
