"""glibc's malloc kept from handing large freed blocks back to the kernel between steps.

A training step allocates and frees the same large arrays every time (activations, their
gradients, a convolution's column matrices: up to megabytes each). By default glibc serves a
block above its mmap threshold with a fresh ``mmap`` and unmaps it when freed, and trims the top
of the heap once more than the trim threshold is free there; either way the next step takes a
page fault on every 4 KiB page of those arrays, and the kernel zeroes each page again. On the
LeNet benchmark step that was about 3,000 faults and 6 ms of kernel time a step, a quarter of
the step (PyTorch, whose CPU allocator is glibc's too, pays the same). ``tune`` fixes the mmap
threshold at its largest (32 MiB: larger blocks are still mapped and unmapped) and the trim
threshold at 1 GiB, so freed blocks stay in the heap and the next step reuses them without
faults. The cost: the process keeps up to that much freed memory mapped instead of returning it
at once (the peak is unchanged).
(A convolution works a few images at a time: its column matrices are about 1 MiB, or one
image's where that is more.)

It runs once, when ``trainer_cli.ndarray`` is imported, on glibc only; ``TRAINER_MALLOC_TUNE=0``
turns it off (then glibc's defaults and ``MALLOC_*_`` environment variables apply as usual).
Explicit ``MALLOC_MMAP_THRESHOLD_`` / ``MALLOC_TRIM_THRESHOLD_`` settings are left alone.
"""
from __future__ import annotations

import ctypes
import os
import sys

__all__ = ["tune", "MMAP_THRESHOLD", "TRIM_THRESHOLD"]

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20       # glibc's ceiling for it on 64-bit (HEAP_MAX_SIZE / 2)
TRIM_THRESHOLD = 1 << 30
_done = None


def tune() -> bool:
    """Set the thresholds (once per process); whether they are set."""
    global _done
    if _done is None:
        _done = _apply()
    return _done


def _apply() -> bool:
    if os.environ.get("TRAINER_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        mallopt, version = libc.mallopt, libc.gnu_get_libc_version
    except (OSError, AttributeError):        # not glibc (musl has no mallopt thresholds)
        return False
    version.restype = ctypes.c_char_p
    version()
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    done = False
    if "MALLOC_MMAP_THRESHOLD_" not in os.environ:
        done = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) or done
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        done = bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)) or done
    return done
