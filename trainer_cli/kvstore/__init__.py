"""Key-value stores that reduce gradients across devices and workers (MXNet's ``mx.kv``).

Gradient compression (``2bit``, ``1bit``) with error feedback lives in
:mod:`trainer_cli.kvstore.compression`.
"""
from .base import KVStoreBase, create, names, register
from .local import KVStoreLocal

KVStore = KVStoreLocal

__all__ = ["KVStoreBase", "KVStore", "KVStoreLocal", "create", "names", "register"]


# MXNet's parameter-server process: the dist_* stores here run over MPI, without servers.
_ABSENT = dict.fromkeys(("KVStoreServer", "kvstore_server"),
                        "parameter-server process (dist_* stores run over MPI here)")


def __getattr__(name):
    from ..base import missing_attribute
    raise missing_attribute(__name__, name, _ABSENT)
