"""Whether a model's weights and optimizer states are finite, and undoing one update.

The NaN check before an update looks at the loss and the gradients; an update with finite
gradients can still overflow (``learning_rate: 1e39``, or Adam's second moment of a huge
gradient). So after each update :func:`broken_part` looks at the weights and states too, and a
checkpoint is never written while either is NaN/Inf. Under ``nan_policy: skip`` a
:class:`StepUndo` taken before the update (a copy of the trainable weights, their optimizer
states and the update counts: once more the memory of the weights and states) puts the step back.
"""
from __future__ import annotations

import numpy

from ..gluon.trainer import STORE
from ..gluon.parameter import DeferredInitializationError
from ..ndarray import NDArray
from ..ndarray.finite import KeptCheck, all_finite
from ..ndarray.interop import raw

__all__ = ["broken_part", "update_was_finite", "StepUndo", "state_updaters"]


def _leaves(state):
    if isinstance(state, NDArray):
        yield state
    elif isinstance(state, (tuple, list)):
        for item in state:
            yield from _leaves(item)


def state_updaters(trainer) -> list:
    """The Updaters holding ``trainer``'s optimizer states (the kvstore's when it updates)."""
    if trainer.mode == STORE:
        updater = getattr(trainer._kvstore, "_updater", None)
        return [updater] if updater is not None else []
    return list(trainer._updaters)


def update_was_finite(trainer, with_grads=False) -> bool:
    """Whether the weights and states the Trainer's last local update wrote hold no NaN/Inf, by
    each Updater's check of the arrays it wrote (grouped once, so a step pays only for the
    looking; from the second step on, Adam's kernels tell it from the values they write, and
    only the other tensors are read again); False when an Updater cannot tell (updates on the
    kvstore, a step it did not prepare, row_sparse gradients): then :func:`broken_part` decides.
    Weights and states the update did not write are as the previous check found them.
    ``with_grads``: the gradients the update read as well, in the same call (False also when
    those cannot be told)."""
    updaters = trainer._updaters
    if trainer.mode == STORE or not updaters:
        return False
    return all([updater.updated_finite(with_grads) is True for updater in updaters])


def broken_part(params, trainer, trainable_only=False, whole_tables=False,
                kept: KeptCheck | None = None) -> str | None:
    """``"parameters"`` or ``"optimizer states"`` when one of them holds NaN/Inf, else None.

    A row_sparse weight lives in the kvstore, whole; reading it all is O(table), so it is looked
    at only with ``whole_tables`` (before a checkpoint), not after every step (its states are,
    and a NaN row it serves shows in the next loss). ``kept``: a caller asking again and again
    about the same arrays keeps their grouping there (of the live arrays only: a table's whole
    value is a copy made for this call, never kept)."""
    weights, tables = [], []
    for param in params:
        if trainable_only and param.grad_req == "null":
            continue
        if param.stype != "default":
            if whole_tables:
                tables.append(param._reduce())
            continue
        try:
            arrays = param.list_data()
        except DeferredInitializationError:  # no values yet, so none that are NaN
            continue
        weights.extend(arrays)
    states = [leaf for updater in state_updaters(trainer)
              for state in updater.states.values() for leaf in _leaves(state)]
    live = weights + states
    finite = kept([raw(a) for a in live]) if kept is not None else all_finite(live)
    if finite and (not tables or all_finite(tables)):       # the usual answer
        return None
    return "parameters" if not all_finite(weights + tables) else "optimizer states"


def _copy(state):
    if isinstance(state, NDArray):
        return state.copy()
    if isinstance(state, (tuple, list)):
        return type(state)(_copy(s) for s in state)
    return state


def _put_back(saved, live) -> bool:
    """Copy ``saved`` into the arrays of ``live`` in place; False when their layouts differ."""
    if isinstance(saved, NDArray):
        if not isinstance(live, NDArray) or live.shape != saved.shape:
            return False
        saved.copyto(live)
        return True
    if isinstance(saved, (tuple, list)):
        return (isinstance(live, type(saved)) and len(live) == len(saved)
                and all(_put_back(s, v) for s, v in zip(saved, live)))
    return saved is live


class StepUndo:
    """What one local update changes, kept to put back: trainable weights, optimizer states,
    update counts and any extra optimizer state. Not for updates made on the kvstore.

    Kept from step to step: :meth:`capture` (before each update) copies into the arrays it
    copied into the step before wherever the live arrays are the same ones, instead of
    allocating a copy of the model per step (a tiny model's step lost a fifth to that, a large
    one page-faults on every page of a fresh copy)."""

    def __init__(self, params, trainer):
        self._params, self._trainer = params, trainer
        self.weights = []       # (live, saved)
        self.states = []        # (updater, {index: live state} at the capture, {index: saved})
        self.capture()

    def capture(self):
        """Take what the next update may change, as it is now."""
        live = [d for p in self._params if p.grad_req != "null" for d in p.list_data()]
        if len(live) == len(self.weights) and all(map(_same_leaves, live,
                                                      (w for w, _ in self.weights))):
            for w, saved in self.weights:
                w.copyto(saved)
        else:
            self.weights = [(d, d.copy()) for d in live]
        before = {id(u): (u, seen, saved) for u, seen, saved in self.states}
        states = []
        for u in state_updaters(self._trainer):
            now = dict(u.states)
            u0, seen, saved = before.get(id(u), (None, None, None))
            if u0 is u and _same_states(seen, now):
                for i, state in now.items():
                    _put_back(state, saved[i])
            else:
                saved = {i: _copy(state) for i, state in now.items()}
            states.append((u, now, saved))
        self.states = states
        opt = self.optimizer = self._trainer.optimizer
        self.num_update = opt.num_update
        self.counts = {dev: dict(counts) for dev, counts in opt._all_index_update_counts.items()}
        scalars, arrays = opt._extra_state()
        self.extra = (dict(scalars), {k: numpy.array(_host(a)) for k, a in arrays.items()})

    def restore(self):
        for live, saved in self.weights:
            saved.copyto(live)
        # Put back in place where possible (the Updater's prepared step keeps the state arrays);
        # states set anew are other arrays than the capture saw, so the next one copies afresh.
        for updater, _, saved in self.states:
            if set(updater.states) != set(saved) or not all(
                    _put_back(saved[i], updater.states[i]) for i in saved):
                updater.set_states_dict(saved)
        opt = self.optimizer
        opt.num_update = self.num_update
        for dev, counts in opt._all_index_update_counts.items():
            counts.clear()  # the same dicts: the optimizer points at the current device's
            counts.update(self.counts.get(dev, {}))
        scalars, arrays = self.extra
        if scalars or arrays:
            opt._set_extra_state(dict(scalars), dict(arrays))


def _same_states(seen, now) -> bool:
    """Whether the states ``now`` hold the very arrays of ``seen``, in the same structure."""
    return seen is not None and seen.keys() == now.keys() and all(
        _same_leaves(seen[i], now[i]) for i in now)


def _same_leaves(a, b) -> bool:
    if isinstance(a, (tuple, list)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same_leaves(x, y) for x, y in zip(a, b)))
    # A row_sparse state is copied afresh (its rows change with each update).
    return a is b and getattr(a, "stype", "default") == "default"


def _host(array):
    if isinstance(array, NDArray):
        return array.asnumpy()
    return array.get() if hasattr(array, "get") else array
