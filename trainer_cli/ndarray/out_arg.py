"""MXNet's ``out=`` argument for the functions of the ``nd`` namespace.

``nd.exp(x, out=y)`` writes the result into ``y`` (in place, so views of ``y`` see it) and
returns ``y``. The library's own code calls ``ops`` directly and never pays for the wrapper; only
the names the ``nd`` package exports get it. While recording, ``y`` takes the result's place in
the graph, as MXNet's output array does; an array marked with ``attach_grad`` cannot be written
while recording (MXNet refuses it too: its gradient would be undefined).
"""
from __future__ import annotations

import functools
import inspect

from .. import autograd as _ag
from .ndarray import NDArray

__all__ = ["with_out", "write_out"]


def write_out(result, out):
    """Copy ``result`` (an NDArray) into ``out`` and return ``out``."""
    if not isinstance(out, NDArray):
        raise TypeError("out must be an NDArray, got %s" % type(out).__name__)
    if tuple(out.shape) != tuple(result.shape):
        raise ValueError("out has shape %s, but the result has shape %s"
                         % (tuple(out.shape), tuple(result.shape)))
    node = result._node
    if node is not None and _ag._state.recording and out._grad is not None:
        raise ValueError("cannot write a recorded result into an array marked with "
                         "attach_grad() (out=) inside autograd.record(): its gradient would be "
                         "undefined; write into a fresh array")
    xp = out._xp
    if out._ctx != result._ctx:
        raise ValueError("out is on %s, but the result is on %s" % (out._ctx, result._ctx))
    xp.copyto(out._data, result._data, casting="unsafe")
    if node is not None:
        out._node = node
    return out


def _without_name(fn):
    @functools.wraps(fn)
    def wrapper(*args, name=None, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


def with_out(fn):
    """``fn`` taking ``out=`` and MXNet's ``name=`` (a graph node's name, which eager calls
    ignore: ``hybrid_forward(F, ...)`` code passes it); ``fn`` itself is returned when it already
    has both arguments."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return fn
    if "name" not in params:
        fn = _without_name(fn)
    if "out" in params:
        return fn

    @functools.wraps(fn)
    def wrapper(*args, out=None, **kwargs):
        result = fn(*args, **kwargs)
        if out is None:
            return result
        if isinstance(result, NDArray):
            return write_out(result, out)
        outs = out if isinstance(out, (list, tuple)) else [out]
        if len(outs) != len(result):
            raise ValueError("%s gives %d outputs, out= has %d" % (fn.__name__, len(result), len(outs)))
        return [write_out(r, o) for r, o in zip(result, outs)]
    return wrapper
