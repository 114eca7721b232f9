"""MXNet's ``out=`` argument for the functions of the ``nd`` namespace.

``nd.exp(x, out=y)`` writes the result into ``y`` (in place, so views of ``y`` see it) and
returns ``y``. The dispatch point (``storage``) calls ``write_out`` for every name the ``nd``
package exports; the library's own code calls ``ops`` directly and never pays for it. While
recording, ``y`` takes the result's place in the graph, as MXNet's output array does; an array
marked with ``attach_grad`` cannot be written while recording (MXNet refuses it too: its
gradient would be undefined).
"""
from __future__ import annotations

from .. import autograd as _ag
from .ndarray import NDArray

__all__ = ["write_out"]


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
