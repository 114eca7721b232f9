"""``std::shuffle`` over ``std::mt19937(seed)`` as MXNet 1.9.1's C++ iterators shuffle.

MXNet's Linux wheels were built against a libstdc++ whose ``std::shuffle`` swaps element ``i``
with one drawn by ``uniform_int_distribution(0, i)`` for ``i = 1 .. n-1`` (newer libstdc++
draws two positions from one number), and whose distribution scales a 32-bit draw down,
rejecting the draws at or past the last whole multiple of the range. NumPy's legacy
``RandomState(seed)`` is the same Mersenne Twister, seeded the same way, so its 32-bit outputs
are ``std::mt19937(seed)``'s. tests/test_io_mnist.py compares orders with the real MXNet's.
"""
from __future__ import annotations

import numpy

__all__ = ["shuffled_order"]

_RANGE = 1 << 32
_BLOCK = 4096


class _Draws:
    """``std::mt19937(seed)``'s outputs, one at a time, made in blocks."""

    def __init__(self, seed):
        self._state = numpy.random.RandomState(seed)
        self._block, self._next = [], 0

    def __call__(self) -> int:
        if self._next == len(self._block):
            self._block = self._state.randint(0, _RANGE, size=_BLOCK, dtype=numpy.uint32).tolist()
            self._next = 0
        self._next += 1
        return self._block[self._next - 1]


def shuffled_order(n: int, seed: int) -> numpy.ndarray:
    """``range(n)`` as ``std::shuffle(v.begin(), v.end(), std::mt19937(seed))`` leaves it."""
    if not 0 <= seed < _RANGE:
        seed %= _RANGE      # std::mt19937 takes the seed as an unsigned 32-bit value
    order = list(range(n))
    draw = _Draws(seed)
    for i in range(1, n):
        scaling = (_RANGE - 1) // (i + 1)
        past = (i + 1) * scaling
        value = draw()
        while value >= past:
            value = draw()
        j = value // scaling
        order[i], order[j] = order[j], order[i]
    return numpy.array(order, dtype=numpy.int64)
