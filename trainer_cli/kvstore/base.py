"""The KVStore interface and ``create``: one table maps a type name to its store class."""
from __future__ import annotations

import warnings

__all__ = ["KVStoreBase", "create", "register"]

_registry: dict = {}


def register(klass):
    """Register a store class under its lower-cased class name (``kvstore.create`` finds it);
    replacing a registered class warns, as MXNet does."""
    if not isinstance(klass, type):
        raise TypeError("register takes a KVStore class, got %r" % (klass,))
    name = klass.__name__.lower()
    if name in _registry:
        warnings.warn("WARNING: New kvstore %s.%s is overriding existing kvstore %s.%s"
                      % (klass.__module__, klass.__name__, _registry[name].__module__,
                         _registry[name].__name__))
    _registry[name] = klass
    return klass


class KVStoreBase:
    """What every store offers; the Trainer talks to stores only through these methods."""

    OPTIMIZER = "optimizer"
    # MXNet's spelling: ``@kvstore.KVStoreBase.register`` on a subclass makes
    # ``kvstore.create('<its lower-cased name>')`` build it. A store whose ``is_capable(OPTIMIZER)``
    # is False only reduces gradients; the Trainer then updates on each device.
    kv_registry = _registry
    register = staticmethod(register)

    @property
    def type(self) -> str:
        raise NotImplementedError

    @property
    def rank(self) -> int:
        return 0

    @property
    def num_workers(self) -> int:
        return 1

    def is_capable(self, capability) -> bool:
        raise NotImplementedError

    def init(self, key, value):
        raise NotImplementedError

    def push(self, key, value, priority=0):
        raise NotImplementedError

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        raise NotImplementedError

    def pushpull(self, key, value, out=None, priority=0):
        raise NotImplementedError

    def broadcast(self, key, value, out, priority=0):
        raise NotImplementedError

    def set_optimizer(self, optimizer):
        raise NotImplementedError

    def set_gradient_compression(self, compression_params):
        raise NotImplementedError

    def save_optimizer_states(self, fname, dump_optimizer=False, param_names=None):
        raise NotImplementedError

    def load_optimizer_states(self, fname):
        raise NotImplementedError

    def barrier(self):
        """Wait for every worker (nothing to wait for in one process)."""

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        raise NotImplementedError("row-sparse arrays are not supported by trainer_cli")


def create(name="local") -> KVStoreBase:
    """A store by type name.

    ``dist*`` names give the MPI stores; any other name gives a store inside this process, which
    merges on the devices when the name contains ``device`` (MXNet chooses by substring too).
    """
    if not isinstance(name, str):
        raise TypeError("name must be a string, got %r" % (name,))
    lowered = name.lower()
    if lowered in _registry:
        return _registry[lowered]()
    if "dist" in lowered:
        from .dist import create_dist
        return create_dist(lowered)
    if "nccl" in lowered:
        raise ValueError("kvstore %r: NCCL stores are not supported; use 'device'" % name)
    from .local import KVStoreLocal
    return KVStoreLocal(lowered)
