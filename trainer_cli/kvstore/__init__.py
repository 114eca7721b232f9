"""Key-value stores that reduce gradients across devices and workers (MXNet's ``mx.kv``).

Gradient compression (``2bit``, ``1bit``) with error feedback lives in
:mod:`trainer_cli.kvstore.compression`.
"""
from .base import KVStoreBase, create, names, register
from .local import KVStoreLocal

KVStore = KVStoreLocal

__all__ = ["KVStoreBase", "KVStore", "KVStoreLocal", "create", "names", "register"]
