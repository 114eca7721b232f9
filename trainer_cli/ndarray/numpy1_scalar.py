"""What ``asscalar()`` returns for a float32 or float16 array: NumPy's scalar of that type, which
computes with Python numbers as the NumPy 1.x under MXNet 1.9.1 did.

MXNet-era training loops sum their losses in Python: ``total += nd.sum(loss).asscalar()``,
``moving = 0.99 * moving + 0.01 * loss.asscalar()``, ``total / num_batches``. NumPy 1.x turned a
``float32`` scalar met with a Python ``int`` or ``float`` into ``float64``; NumPy 2 keeps
``float32`` (NEP 50). So the same loop, with the same arrays, sums in float64 on MXNet and in
float32 on NumPy 2, and prints other digits after the seventh. These subclasses keep NumPy 1.x's
rule for exactly that case (a Python ``int`` or ``float``, not a ``bool``, not a NumPy scalar or
array, whose rules NumPy 2 kept); everything else (printing, comparisons, ``dtype``,
``isinstance(x, numpy.float32)``) is the plain scalar's. Results are plain NumPy scalars.
"""
from __future__ import annotations

import operator

import numpy

__all__ = ["Float32", "Float16", "numpy1_scalar"]

_OPERATORS = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
              "truediv": operator.truediv, "floordiv": operator.floordiv, "mod": operator.mod,
              "pow": operator.pow}


def _method(base, name, fn, reflected):
    plain = getattr(base, name)

    def method(self, other):
        kind = type(other)
        if kind is int or kind is float:     # exactly: bool, NumPy scalars keep NumPy 2's rules
            wide = numpy.float64(self)
            return fn(other, wide) if reflected else fn(wide, other)
        return plain(self, other)
    method.__name__ = name
    return method


def _promoting_class(base, name):
    namespace = {"__slots__": (), "__module__": __name__,
                 "__doc__": "``numpy.%s`` meeting Python numbers as in NumPy 1.x (float64)."
                            % base.__name__}
    for op, fn in _OPERATORS.items():
        namespace["__%s__" % op] = _method(base, "__%s__" % op, fn, False)
        namespace["__r%s__" % op] = _method(base, "__r%s__" % op, fn, True)
    return type(name, (base,), namespace)


Float32 = _promoting_class(numpy.float32, "Float32")
Float16 = _promoting_class(numpy.float16, "Float16")
_BY_TYPE = {numpy.float32: Float32, numpy.float16: Float16}


def numpy1_scalar(value):
    """``value`` (a NumPy scalar) as its promoting subclass where it has one, else unchanged."""
    kind = _BY_TYPE.get(type(value))
    return value if kind is None else kind(value)
