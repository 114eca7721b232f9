"""The seedable random generators behind ``nd.random``, initializers, Dropout and data shuffling.

One generator per device: NumPy's PCG64 for CPU contexts, CuPy's for GPUs. Their state can be
exported as plain JSON-able data so that a run resumes with the exact same random stream.
"""
from __future__ import annotations

import random as _py_random
import threading

import numpy

from .context import Context

__all__ = ["seed", "generator", "get_state", "set_state"]

_DEFAULT_SEED = 0
_generators: dict = {}
_gpu_seeds: dict = {}    # "gpuN" -> the seed its generator starts from when first made
_keyed = threading.local()   # .stream: the cpu_stream this thread is inside, if any


def _new_cpu_generator(seed_value):
    return numpy.random.Generator(numpy.random.PCG64(seed_value))


def generator(ctx: Context | None = None):
    """The generator for ``ctx``: a numpy ``Generator`` on CPU, a cupy ``RandomState`` on GPU."""
    key = "gpu%d" % ctx.device_id if ctx is not None and ctx.is_gpu else "cpu"
    if key == "cpu":
        stream = getattr(_keyed, "stream", None)
        if stream is not None:
            return stream.cpu_generator()
    gen = _generators.get(key)
    if gen is None:
        if key == "cpu":
            gen = _new_cpu_generator(_DEFAULT_SEED)
        else:
            with ctx.device_scope():
                gen = ctx.xp.random.RandomState(_gpu_seeds.get(key, _DEFAULT_SEED))
        _generators[key] = gen
    return gen


def seed(seed_state: int, ctx="all") -> None:
    """Seed the generators of every device (``ctx='all'``) or of one context."""
    global _DEFAULT_SEED
    seed_state = int(seed_state)
    if ctx == "all":
        _DEFAULT_SEED = seed_state
        _generators.clear()
        _gpu_seeds.clear()
        return
    ctx = Context(ctx)
    if ctx.is_gpu:
        # Made at its first draw: seeding a GPU's stream needs no GPU (MXNet accepts it anywhere).
        key = "gpu%d" % ctx.device_id
        _gpu_seeds[key] = seed_state
        _generators.pop(key, None)
    else:
        _generators["cpu"] = _new_cpu_generator(seed_state)


def get_state() -> dict:
    """The CPU generator's state as JSON-able data (GPU streams are re-seeded on resume)."""
    return {"default_seed": _DEFAULT_SEED, "cpu": generator(None).bit_generator.state}


def set_state(state: dict) -> None:
    """Restore :func:`get_state`'s data; ValueError/TypeError when it is not such data (a seed
    that is not an integer from 0 to 2**64 - 1, a generator state numpy refuses)."""
    global _DEFAULT_SEED
    seed_value = state["default_seed"]
    if type(seed_value) is not int or not 0 <= seed_value < 1 << 64:
        raise ValueError("default_seed: expected an integer from 0 to 2**64 - 1, got %.40r"
                         % (seed_value,))
    _DEFAULT_SEED = seed_value
    _generators.clear()
    _gpu_seeds.clear()
    gen = generator(None)
    gen.bit_generator.state = state["cpu"]


def py_random():
    """The source of the library's draws from Python's ``random`` (the image transforms that
    draw as MXNet's do): the ``random`` module itself, or inside a :class:`cpu_stream` on this
    thread, that stream's own ``random.Random``."""
    stream = getattr(_keyed, "stream", None)
    return _py_random if stream is None else stream.python()


class cpu_stream:
    """``with cpu_stream(key):`` this thread's CPU generator, and the Python ``random`` of
    :func:`py_random`, are fresh streams of ``key`` (an int or a sequence of ints, as NumPy's
    ``SeedSequence`` takes): a draw inside depends on ``key`` alone. Other threads, the run's
    own streams and Python's ``random`` module are not touched, so samples can be made on a
    thread beside training. The streams are made at their first draw (a sample whose
    transforms draw nothing costs nothing): the generator a ``PCG64`` of the key's
    ``SeedSequence``, the Python one seeded with that sequence's first 64-bit word."""

    __slots__ = ("_key", "_seq", "_gen", "_py", "_outer")

    def __init__(self, key):
        self._key = key
        self._seq = self._gen = self._py = self._outer = None

    def _sequence(self):
        if self._seq is None:
            self._seq = numpy.random.SeedSequence(self._key)
        return self._seq

    def cpu_generator(self):
        if self._gen is None:
            self._gen = numpy.random.Generator(numpy.random.PCG64(self._sequence()))
        return self._gen

    def python(self):
        if self._py is None:
            self._py = _py_random.Random(int(self._sequence().generate_state(1, numpy.uint64)[0]))
        return self._py

    def __enter__(self):
        self._outer = getattr(_keyed, "stream", None)
        _keyed.stream = self
        return self

    def __exit__(self, *exc):
        _keyed.stream = self._outer
        return False
