"""Devices and the array module that backs each of them.

A CPU context is backed by NumPy; a GPU context by CuPy. CuPy is imported here and nowhere else,
and only when a GPU context is first asked for its array module.
"""
from __future__ import annotations

import sys
import threading
import warnings

from .base import MXNetError

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus", "GPUUnavailableError"]


def _numpy():
    # NumPy is imported on first use, not with the package, so that the ``trainer`` command's
    # start-up (``--help``, ``validate``) does not pay for it.
    numpy = sys.modules.get("numpy")
    if numpy is None:
        import numpy
    return numpy


class GPUUnavailableError(MXNetError):
    """Raised when a GPU context is used on a machine without CuPy or without a GPU (an
    ``MXNetError``, a ``RuntimeError``, as MXNet's is)."""


_cupy = None


def _import_cupy():
    global _cupy
    if _cupy is None:
        try:
            import cupy
        except ImportError as exc:
            raise GPUUnavailableError(
                "A GPU context needs CuPy, which is not installed. Install the GPU extra with "
                "`pip install -e .[gpu]` (or `pip install trainer-cli[gpu]`) on a machine with an "
                "NVIDIA GPU and CUDA driver."
            ) from exc
        _cupy = cupy
    return _cupy


def num_gpus() -> int:
    """The number of GPUs CuPy can see; 0 where CuPy or a GPU is missing."""
    try:
        cupy = _import_cupy()
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


class _ContextType(type):
    """``Context.default_ctx`` as a class attribute (MXNet's deprecated spelling of
    ``current_context()``; setting it sets this thread's default context)."""

    @property
    def default_ctx(cls):
        warnings.warn("Context.default_ctx has been deprecated. Please use "
                      "Context.current_context() instead.", DeprecationWarning, stacklevel=2)
        return current_context()

    @default_ctx.setter
    def default_ctx(cls, value):
        warnings.warn("Context.default_ctx has been deprecated. Please use "
                      "Context.current_context() instead.", DeprecationWarning, stacklevel=2)
        Context._local.value = value


class Context(metaclass=_ContextType):
    """A device: ``cpu(i)`` or ``gpu(i)``. Usable as a ``with`` block to set the default context."""

    __slots__ = ("device_type", "device_id", "_old")
    devtype2str = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
    devstr2type = {v: k for k, v in devtype2str.items()}
    _local = threading.local()

    def __init__(self, device_type, device_id: int = 0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in self.devstr2type:
            raise ValueError(f"unknown device type {device_type!r}; expected 'cpu' or 'gpu'")
        self.device_type = device_type
        self.device_id = int(device_id)
        self._old = None

    @property
    def device_typeid(self) -> int:
        return self.devstr2type[self.device_type]

    @property
    def is_gpu(self) -> bool:
        return self.device_type == "gpu"

    @property
    def xp(self):
        """The array module for this device: numpy, or cupy for a GPU."""
        if self.device_type != "gpu":
            return _numpy()
        cupy = _import_cupy()
        count = num_gpus()
        if self.device_id >= count:
            raise GPUUnavailableError(
                f"gpu({self.device_id}) was asked for but CuPy sees {count} GPU(s) on this machine."
            )
        return cupy

    def device_scope(self):
        """A context manager making this device current for CuPy allocations (a no-op on CPU)."""
        if self.device_type == "gpu":
            return self.xp.cuda.Device(self.device_id)
        return _NULL_SCOPE

    def __hash__(self):
        return hash((self.device_type, self.device_id))

    def __eq__(self, other):
        return (isinstance(other, Context) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __repr__(self):
        return f"{self.device_type}({self.device_id})"

    __str__ = __repr__

    def __enter__(self):
        self._old = current_context()
        Context._local.value = self
        return self

    def __exit__(self, *exc):
        Context._local.value = self._old
        return False

    def empty_cache(self):
        if self.device_type == "gpu":
            self.xp.get_default_memory_pool().free_all_blocks()


class _NullScope:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_NULL_SCOPE = _NullScope()


def cpu(device_id: int = 0) -> Context:
    return Context("cpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    return Context("cpu_pinned", device_id)


def gpu(device_id: int = 0) -> Context:
    return Context("gpu", device_id)


_DEFAULT = Context("cpu", 0)


def current_context() -> Context:
    return getattr(Context._local, "value", None) or _DEFAULT


def array_module_of(data):
    """numpy or cupy, whichever owns ``data``."""
    if _cupy is not None and isinstance(data, _cupy.ndarray):
        return _cupy
    return _numpy()


def is_cupy_array(data) -> bool:
    """Whether ``data`` is a CuPy array (False, without importing CuPy, where it is not loaded)."""
    return _cupy is not None and isinstance(data, _cupy.ndarray)
