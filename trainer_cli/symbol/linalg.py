"""``mx.sym.linalg`` (``F.linalg`` in a ``hybrid_forward`` being recorded): MXNet 1.9.1's
linear-algebra operators that ``nd.linalg`` computes, each recording the node MXNet's function
makes (``F.linalg.gemm2(a, b)`` records op ``_linalg_gemm2`` named ``gemm20``), so that
``HybridBlock.export`` writes MXNet's files and ``gluon.SymbolBlock`` runs them with
``nd.linalg``."""
from ._op_table import OPS as _OPS
from .symbol import make_op as _make_op

__all__ = sorted(key[len("linalg."):] for key in _OPS if key.startswith("linalg."))


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    key = "linalg." + name
    if key in _OPS:
        fn = globals()[name] = _make_op(key)
        return fn
    raise AttributeError(
        "module 'trainer_cli.symbol.linalg' has no attribute %r: it holds the linalg "
        "operators that nd.linalg computes (docs/compat.md)" % name)
