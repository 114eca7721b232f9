"""Begin states of batch size 0 made inside a hybridized block.

MXNet code writes ``cell.begin_state(batch_size=0, func=F.zeros)`` in ``hybrid_forward``: in
MXNet's cached graph a 0 is an unknown dimension, which shape inference fills in from the inputs
the states meet. Here a hybridized block runs eagerly, so ``begin_state`` remembers how it made
such a state, and the cell or layer that receives it (hybridized, as the state's maker was) makes
it again at the batch size of its inputs. Not hybridized, a batch-0 state stays what it is and is
refused where it meets the inputs, as MXNet refuses it then.
"""
from __future__ import annotations

import weakref

from ...ndarray import NDArray

# id(state) -> (a weak reference to the state, func, its keyword arguments). Keyed by id, not by
# the array (NDArray's == is elementwise); an entry goes with its state.
_MADE = {}


def remember(state, func, kwargs):
    """Note how ``state`` (made with an unknown, 0, batch size) was made."""
    if isinstance(state, NDArray) and 0 in state.shape:
        key = id(state)
        _MADE[key] = (weakref.ref(state, lambda _, key=key: _MADE.pop(key, None)), func,
                      dict(kwargs))
    return state


def resolve(block, states, batch_size):
    """``states`` with each remembered batch-0 state made again for ``batch_size``, when
    ``block`` is hybridized; otherwise ``states`` unchanged."""
    if not block._active or not _MADE or not isinstance(states, (list, tuple)):
        return states
    out = []
    for state in states:
        made = _MADE.get(id(state))
        if made is not None and made[0]() is state:
            _, func, kwargs = made
            shape = tuple(batch_size if d == 0 else d for d in state.shape)
            state = func(**dict(kwargs, shape=shape))
        out.append(state)
    return type(states)(out) if isinstance(states, tuple) else out
