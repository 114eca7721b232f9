"""``mx.sym.contrib`` (``F.contrib`` in a ``hybrid_forward`` being recorded): MXNet 1.9.1's
contributed operators that ``nd.contrib`` computes, each recording the node MXNet's function
makes (``F.contrib.box_nms(x)`` records op ``_contrib_box_nms`` named ``box_nms0``, its
arguments written as MXNet writes them), so that ``HybridBlock.export`` writes MXNet's files and
``gluon.SymbolBlock`` runs them with ``nd.contrib``.

MXNet's Python-level compositions (``foreach``, ``while_loop``, ``cond``, which record
subgraphs, and ``rand_zipfian``) are not here: a block calling them runs eagerly but cannot be
exported (docs/compat.md).
"""
from ._op_table import OPS as _OPS
from .symbol import op_namespace as _op_namespace

__all__ = sorted(key[len("contrib."):] for key in _OPS if key.startswith("contrib."))

_SUBGRAPHS = ("foreach", "while_loop", "cond", "rand_zipfian")


def _missing(name):
    if name in _SUBGRAPHS:
        return AttributeError(
            "symbol.contrib.%s is not available here: MXNet's symbol version records a subgraph "
            "(or several operators), which export does not write; the block runs eagerly "
            "(docs/compat.md)" % name)
    return AttributeError(
        "module 'trainer_cli.symbol.contrib' has no attribute %r: it holds the contrib "
        "operators that nd.contrib computes (docs/compat.md)" % name)


__getattr__ = _op_namespace(globals(), "contrib.", _missing)
