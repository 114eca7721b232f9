"""What ``asnumpy()`` returns for a one-element array: a NumPy array that converts to a number.

MXNet's full reductions (``loss.mean()``, ``acc.sum()``) have shape ``(1,)``, and MXNet-era code
turns them into numbers with ``float(x.asnumpy())`` or ``'%f' % x.asnumpy()``. NumPy 2.4 refuses
``float()`` of an array with ``ndim > 0`` (NumPy 1.25 to 2.3 warn), so that code would stop
where it ran on MXNet. ``asnumpy()`` of an array holding exactly one element therefore returns
this subclass of ``numpy.ndarray``: the same shape, dtype and values, and in every other respect
an ``ndarray``, whose ``float()``, ``int()`` and ``complex()`` convert its element as NumPy 1.x
did. Arrays of any other size are plain ``ndarray`` (docs/porting.md).
"""
from __future__ import annotations

import numpy

__all__ = ["OneElementArray", "one_element"]


class OneElementArray(numpy.ndarray):
    """A NumPy array of one element that ``float()``/``int()``/``complex()`` accept at any ndim."""

    # Below plain ndarrays: in an operation with a plain array the result is a plain array.
    __array_priority__ = -1.0

    def _element(self):
        if self.size != 1:
            return None
        return self.reshape(-1).view(numpy.ndarray)[0]

    def __float__(self):
        element = self._element()
        return numpy.ndarray.__float__(self) if element is None else float(element)

    def __int__(self):
        element = self._element()
        return numpy.ndarray.__int__(self) if element is None else int(element)

    def __complex__(self):
        element = self._element()
        return numpy.ndarray.__complex__(self) if element is None else complex(element)

    def __repr__(self):
        return repr(self.view(numpy.ndarray))


def one_element(host: numpy.ndarray) -> numpy.ndarray:
    """``host`` (a plain ndarray the caller owns) as a ``OneElementArray`` when it has one
    element and at least one axis; else ``host`` itself."""
    if host.size == 1 and host.ndim:
        return host.view(OneElementArray)
    return host
