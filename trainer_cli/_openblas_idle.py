"""How long OpenBLAS's idle threads spin before they sleep: 2**20 cycles instead of its 2**28
(about 0.1 s), unless the user set ``OPENBLAS_THREAD_TIMEOUT``.

A spinning thread takes its core from the work that follows a GEMM: a convolution's pieces on
the other threads (``ndarray.host_threads``), numba's passes. OpenBLAS reads the variable when
its thread pool starts, which is when NumPy loads it. Before NumPy is loaded, setting the
variable is enough. After (most programs import NumPy first), the loaded OpenBLAS is told to
read its environment again and its pool is stopped; the next threaded GEMM starts it again with
the new timeout. That is the pool's fork-time shutdown (OpenBLAS's own ``pthread_atfork``
handler calls it), done once, at ``import trainer_cli``. A library without these functions (not
OpenBLAS, another build) is left as it is.
"""
from __future__ import annotations

import os
import sys

__all__ = ["SPIN_EXPONENT", "shorten_spin"]

# OpenBLAS spins for 2**SPIN_EXPONENT cycles (it takes 4 to 30).
SPIN_EXPONENT = "20"
_VARIABLE = "OPENBLAS_THREAD_TIMEOUT"


def shorten_spin() -> list:
    """Set the spin where the user has not; returns the paths of the loaded OpenBLAS libraries
    that were told (none where NumPy was not loaded yet, or the user chose the value)."""
    if _VARIABLE in os.environ:
        return []
    os.environ[_VARIABLE] = SPIN_EXPONENT
    if "numpy" not in sys.modules:
        return []           # OpenBLAS reads it when NumPy loads it
    import ctypes

    told = []
    for path in _loaded_openblas():
        try:
            lib = ctypes.CDLL(path)
            read_env, shutdown = lib.openblas_read_env, lib.blas_thread_shutdown_
            timeout = lib.openblas_thread_timeout
        except (OSError, AttributeError):
            continue
        timeout.restype = ctypes.c_uint
        if timeout() != 0:      # a value OpenBLAS was given some other way: keep it
            continue
        read_env()
        shutdown()
        told.append(path)
    return told


def _loaded_openblas() -> list:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [info["filepath"] for info in threadpool_info()
            if info.get("internal_api") == "openblas"]
