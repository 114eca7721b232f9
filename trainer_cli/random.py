"""The seedable random generators behind ``nd.random``, initializers, Dropout and data shuffling.

One generator per device: NumPy's PCG64 for CPU contexts, CuPy's for GPUs. Their state can be
exported as plain JSON-able data so that a run resumes with the exact same random stream.
"""
from __future__ import annotations

import numpy

from .context import Context

__all__ = ["seed", "generator", "get_state", "set_state"]

_DEFAULT_SEED = 0
_generators: dict = {}
_gpu_seeds: dict = {}    # "gpuN" -> the seed its generator starts from when first made


def _new_cpu_generator(seed_value):
    return numpy.random.Generator(numpy.random.PCG64(seed_value))


def generator(ctx: Context | None = None):
    """The generator for ``ctx``: a numpy ``Generator`` on CPU, a cupy ``RandomState`` on GPU."""
    key = "gpu%d" % ctx.device_id if ctx is not None and ctx.is_gpu else "cpu"
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


class cpu_stream:
    """``with cpu_stream(key):`` the CPU generator (and Python's ``random``, which some image
    transforms draw from as MXNet's do) is a fresh stream of ``key`` (an int or a sequence of
    ints, as NumPy's ``SeedSequence`` takes), and both are restored after: a draw inside depends
    on ``key`` alone, and the run's own stream is left where it was."""

    def __init__(self, key):
        self._seq = numpy.random.SeedSequence(key)

    def __enter__(self):
        import random as _py_random

        self._saved = (_generators.get("cpu"), _py_random.getstate())
        _generators["cpu"] = numpy.random.Generator(numpy.random.PCG64(self._seq))
        _py_random.seed(int(self._seq.generate_state(1, numpy.uint64)[0]))
        return self

    def __exit__(self, *exc):
        import random as _py_random

        gen, py_state = self._saved
        if gen is None:
            _generators.pop("cpu", None)
        else:
            _generators["cpu"] = gen
        _py_random.setstate(py_state)
        return False
