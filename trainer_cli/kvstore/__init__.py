"""Key-value stores that reduce gradients across devices and workers (MXNet's ``mx.kv``).

Gradient compression (``2bit``, ``1bit``) with error feedback lives in
:mod:`trainer_cli.kvstore.compression`.
"""
from .base import KVStoreBase, create, names, register
from .local import KVStoreLocal

KVStore = KVStoreLocal

__all__ = ["KVStoreBase", "KVStore", "KVStoreLocal", "create", "names", "register"]


def __getattr__(name):
    # MXNet's parameter-server process: the dist_* stores here run over MPI, without servers.
    if name in ("KVStoreServer", "kvstore_server"):
        from ..base import NotInTrainerCLIError, absent_message
        raise NotInTrainerCLIError(absent_message(
            __name__ + "." + name, "parameter-server process (dist_* stores run over MPI here)"))
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
