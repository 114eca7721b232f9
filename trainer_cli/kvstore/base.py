"""The KVStore interface and ``create``: one table maps a type name to its store class."""
from __future__ import annotations

import warnings

__all__ = ["KVStoreBase", "create", "names", "register"]

_registry: dict = {}
# The types ``create`` builds itself (MXNet's names; see ``create``).
_BUILTIN = ("local", "device", "dist_sync", "dist_device_sync", "dist_async", "dist_device_async")


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
        """Sum ``value`` (one array per device) and hand it to the updater, or without one make
        it the stored value (a row_sparse sum replaces a dense value, storage type included)."""
        raise NotImplementedError

    def pull(self, key, out=None, priority=0, ignore_sparse=True):
        """Copy the stored value into ``out``; row_sparse outs are skipped unless
        ``ignore_sparse=False``."""
        raise NotImplementedError

    def pushpull(self, key, value, out=None, priority=0):
        raise NotImplementedError

    def broadcast(self, key, value, out, priority=0):
        raise NotImplementedError

    def set_optimizer(self, optimizer):
        raise NotImplementedError

    def set_gradient_compression(self, compression_params):
        raise NotImplementedError

    # Gradient compression's error-feedback residuals are state that an exact resume needs. Every
    # store names them the same way (a checkpoint's ``kvstore.npz`` holds these names):
    # ``r<key>_<position>`` for an in-process store's residual of the gradient from source
    # device ``position``, ``r<key>_w<rank>`` for a dist worker's residual of what it sends.
    def compression_state(self) -> dict:
        """Compression's residuals as ``{name: host array}``; empty without compression.

        A dist store gathers every worker's: a collective that every rank calls at the same
        point; rank 0 gets them all, the other ranks an empty dict."""
        return {}

    def load_compression_state(self, state: dict, contexts=None, where="the saved state"):
        """Adopt residuals saved by ``compression_state`` (after compression is set up, which
        starts them at zero), ignoring names that are not this kind of store's. ``contexts``
        are the source devices by position (an in-process store's residuals live on them).
        Returns None, or a note (naming ``where``) when a dist job cannot use what was saved
        and its residuals restart at zero; a residual that does not fit raises ValueError or
        KeyError."""
        return None

    def save_optimizer_states(self, fname, dump_optimizer=False, param_names=None):
        raise NotImplementedError

    def load_optimizer_states(self, fname):
        raise NotImplementedError

    def barrier(self):
        """Wait for every worker (nothing to wait for in one process)."""

    def row_sparse_pull(self, key, out=None, priority=0, row_ids=None):
        """Copy the rows ``row_ids`` (sorted and de-duplicated; rows the store lacks as zeros)
        of a row_sparse key into row_sparse ``out``: one array, or a list with one ``row_ids``
        array for all or one per out. A dense key, or a dense out, raises ValueError."""
        raise NotImplementedError


def names() -> list:
    """The store types ``create`` takes, sorted: MXNet's and the registered classes'."""
    return sorted(set(_BUILTIN) | set(_registry))


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
