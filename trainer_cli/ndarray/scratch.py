"""Large scratch arrays (a convolution's column matrices) kept from one training step to the next.

``_malloc.tune`` keeps freed blocks of up to 32 MiB in glibc's heap, so a step's arrays come back
without page faults; that is glibc's ceiling. Anything larger is served by a fresh ``mmap`` and
unmapped when freed, and the kernel zeroes every page again at the next step. A convolution's
column matrix passes it easily: a batch of 32 images of 64 channels at 32x32 gives a 75 MB
matrix in the forward pass and another for its gradient, in each such layer, at every step. On
the CIFAR-sized benchmark that was about 50 ms of kernel time in a 420 ms step.

``take`` hands out an array of the asked shape and dtype, reusing one that ``give`` returned;
``give`` keeps an array for the next ``take`` of its shape. Only arrays of at least
``MIN_BYTES`` are kept, at most ``PER_SHAPE`` of one shape and ``MAX_BYTES`` in all, the
longest-unused going first; what is kept is memory the previous step had in use anyway (its
peak is unchanged), held between steps instead of being unmapped. Only the code that allocated
an array through ``take`` gives it back, once nothing else can see it. ``release`` empties the
pool; ``TRAINER_MALLOC_TUNE=0``, which leaves glibc's defaults alone, turns the pool off too.
"""
from __future__ import annotations

import os
import threading
import weakref
from collections import OrderedDict, deque

import numpy

__all__ = ["take", "give", "give_when_dropped", "release", "held_bytes", "MIN_BYTES", "MAX_BYTES",
           "PER_SHAPE", "ENABLED"]

MIN_BYTES = 32 << 20        # below it, glibc's heap keeps freed blocks (``_malloc``)
MAX_BYTES = 1 << 30
PER_SHAPE = 8
ENABLED = os.environ.get("TRAINER_MALLOC_TUNE", "1") != "0"

_lock = threading.Lock()
_free: OrderedDict = OrderedDict()      # (shape, dtype) -> [arrays], least recently kept first
_held = 0
# What ``give`` was handed, kept on the next ``take``. ``give`` runs from finalizers, which the
# garbage collector may start inside any allocation, ``take``'s under the lock included: it only
# appends (atomic), so it can never wait for the lock.
_given: deque = deque()


def take(shape, dtype) -> numpy.ndarray:
    """An uninitialized C-contiguous NumPy array of ``shape`` and ``dtype``, reused if one is kept."""
    global _held
    key = (tuple(shape), numpy.dtype(dtype))
    with _lock:
        while _given:
            _keep(_given.popleft())
        kept = _free.get(key)
        if kept:
            array = kept.pop()
            if not kept:
                del _free[key]
            _held -= array.nbytes
            return array
    return numpy.empty(key[0], key[1])


def give(array) -> None:
    """Keep ``array`` (from ``take``, no longer used by anyone) for a later ``take``."""
    if ENABLED and type(array) is numpy.ndarray and MIN_BYTES <= array.nbytes <= MAX_BYTES \
            and array.base is None and array.flags.c_contiguous:
        _given.append(array)


def give_when_dropped(owner, array) -> None:
    """``give(array)`` once ``owner`` (a gradient function holding it) is garbage: the tape drops
    it after the backward pass that used it, or with the graph when none runs."""
    if ENABLED and type(array) is numpy.ndarray and array.nbytes >= MIN_BYTES:
        weakref.finalize(owner, give, array).atexit = False


def release() -> None:
    """Forget every kept array (their memory goes back to the system)."""
    global _held
    with _lock:
        _given.clear()
        _free.clear()
        _held = 0


def held_bytes() -> int:
    """What the pool holds (given back and not yet taken)."""
    with _lock:
        return _held + sum(a.nbytes for a in list(_given))


def _keep(array) -> None:
    global _held
    key = (array.shape, array.dtype)
    kept = _free.pop(key, None) or []
    if len(kept) >= PER_SHAPE:
        _free[key] = kept
        return
    kept.append(array)
    _free[key] = kept           # now the most recently kept
    _held += array.nbytes
    while _held > MAX_BYTES:
        oldest = next(iter(_free))
        arrays = _free[oldest]
        _held -= arrays.pop(0).nbytes
        if not arrays:
            del _free[oldest]
