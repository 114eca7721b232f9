"""The recurrent state a language model carries from batch to batch.

A model for text data takes and returns its state as gluon's recurrent layers do:
``out, state = net(x, state)``, with ``net.begin_state(batch_size, ctx=ctx)`` the state a
stream starts from. The loop keeps one state per device (each device reads the same streams
every batch), detached from the graph after each batch so that gradients stop at the batch's
start (truncated back-propagation through time), and starts afresh at each epoch.

A checkpoint holds the state (``loop.carried`` in meta.json: each array's dtype, shape and
base64 bytes, ``layout.meta_array``), so a resumed run continues the streams with exactly the
state an uninterrupted run would have had. The loop hands the arrays over as they are: the
process that writes meta.json encodes them, off the training thread when a writer process saves.
"""
from __future__ import annotations

import base64
import math

import numpy

__all__ = ["CarriedState", "check_encoded", "StatefulModelError"]

_DTYPES = ("float16", "float32", "float64")
# A carried state larger than this is refused when read from a checkpoint (meta.json is bounded
# anyway; this names the problem).
MAX_STATE_BYTES = 64 << 20


class StatefulModelError(TypeError):
    """The model cannot carry a state (no ``begin_state``, or it returns no state)."""


class CarriedState:
    """The state of each device, and the forward pass that takes and returns it."""

    def __init__(self, net):
        if not callable(getattr(net, "begin_state", None)):
            raise StatefulModelError(
                "text data trains a language model that carries its recurrent state from batch "
                "to batch: the model needs begin_state(batch_size, ctx=...) and forward(x, "
                "state) returning (output, state), as the built-in rnn_lm has")
        self._net = net
        self._states: dict = {}
        self._restored: dict = {}

    def reset(self) -> None:
        self._states.clear()
        self._restored.clear()

    def forward(self, device: int, x, ctx):
        """The output of ``x`` on ``device``, the state carried on (detached)."""
        state = self._states.get(device)
        if state is None:
            saved = self._restored.pop(device, None)
            if saved is not None:
                from ..ndarray import array
                state = [array(a, ctx=ctx, dtype=a.dtype) for a in saved]
            else:
                state = self._net.begin_state(x.shape[0], ctx=ctx)
        result = self._net(x, state)
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            raise StatefulModelError("the model called with (x, state) must return (output, "
                                     "state), got %s" % type(result).__name__)
        out, state = result
        state = list(state) if isinstance(state, (tuple, list)) else [state]
        self._states[device] = [s.detach() for s in state]
        return out

    def get_state(self) -> dict:
        """The states: ``{device number as text: [host arrays]}``, copies taken now, which
        meta.json holds encoded (see the module's docstring)."""
        out = {}
        for device, arrays in sorted(self._states.items()):
            out[str(device)] = [a.asnumpy() for a in arrays]
        for device, arrays in self._restored.items():   # not yet used since the resume
            out.setdefault(str(device), list(arrays))
        return out

    def set_state(self, data: dict) -> None:
        """The states :meth:`get_state` gave, in meta.json's encoding (checked by
        :func:`check_encoded` on reading)."""
        self.reset()
        self._restored = {int(device): [_decode(e) for e in arrays]
                          for device, arrays in (data or {}).items()}


def _decode(entry: dict) -> numpy.ndarray:
    raw = base64.b64decode(entry["data"].encode("ascii"), validate=True)
    return numpy.frombuffer(raw, dtype=entry["dtype"]).reshape(entry["shape"]).copy()


def check_encoded(value) -> str | None:
    """None when ``value`` is a carried state as :meth:`CarriedState.get_state` writes it, else
    what was expected."""
    expected = "a mapping of device numbers to lists of {dtype, shape, data} arrays"
    if not isinstance(value, dict):
        return expected
    total = 0
    for device, arrays in value.items():
        if not (isinstance(device, str) and device.isdigit()) or not isinstance(arrays, list):
            return expected
        for entry in arrays:
            if not isinstance(entry, dict) or entry.get("dtype") not in _DTYPES \
                    or not isinstance(entry.get("shape"), list) \
                    or not all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 1 << 31
                               for d in entry["shape"]) \
                    or not isinstance(entry.get("data"), str):
                return expected
            nbytes = math.prod(entry["shape"]) * numpy.dtype(entry["dtype"]).itemsize
            total += nbytes
            if total > MAX_STATE_BYTES:
                return "a carried state of at most %d bytes" % MAX_STATE_BYTES
            try:
                raw = base64.b64decode(entry["data"].encode("ascii"), validate=True)
            except (ValueError, UnicodeEncodeError):
                return expected + " (data: base64)"
            if len(raw) != nbytes:
                return "arrays whose data holds shape x dtype bytes"
    return None
