"""What a config will need in memory, estimated before it is allocated.

``hidden: [4000000000]`` or ``num_samples: 1e11`` would otherwise end in a MemoryError halfway
through building the run, or worse, with memory overcommitted, in a machine that swaps until the
kernel kills something. The estimates are lower bounds (the parameters and their gradients; the
synthetic arrays while they are generated): a config refused here could not have run, and one
accepted may still find less memory than it needs later.
"""
from __future__ import annotations

import math
import os

__all__ = ["MemoryEstimateError", "available_bytes", "check_fits", "size_text"]


class MemoryEstimateError(ValueError):
    """A config needs more memory than the machine has free (the CLI exits 2)."""


def available_bytes() -> int | None:
    """The memory free for a new allocation now (Linux's MemAvailable), or None where unknown."""
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f.read(1 << 16).splitlines():
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def size_text(nbytes: float) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if nbytes >= scale:
            return "%.1f %s" % (nbytes / scale, unit)
    return "%d KiB" % math.ceil(nbytes / 1024)


def check_fits(needed: int, what: str) -> None:
    """MemoryEstimateError when ``needed`` bytes exceed the memory available; ``what`` says what
    needs them (it begins the message)."""
    free = available_bytes()
    if free is not None and needed > free:
        raise MemoryEstimateError("%s needs at least %s of memory, more than the %s available"
                                  % (what, size_text(needed), size_text(free)))
