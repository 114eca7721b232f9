"""``Updater``: applies an optimizer to (index, grad, weight) triples, keeping one state per index."""
from __future__ import annotations

from operator import is_

import numpy

from ..ndarray import NDArray
from .optimizer import STATE_SLABS, Optimizer, raw_state

__all__ = ["Updater", "get_updater"]


class Updater:
    """MXNet's ``Updater``: lazy state creation, states moved to the weight's device on first use
    after a load, and per-device update counts (the optimizer is told the weight's device id).

    ``get_states``/``set_states`` use trainer-cli's state format (an ``.npz`` with a JSON header,
    never pickle; see ``state_file``)."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.states = {}
        self.states_synced = {}
        self.aggregate_updates = optimizer.aggregate_num > 0
        self._last = None       # the previous call's arguments, prepared (see _Prepared)

    def __call__(self, index, grad, weight):
        """Update ``weight`` from ``grad`` (note the order); each may be a single item or a list."""
        if not isinstance(index, (list, tuple)):
            self.update_lists([index], [grad], [weight])
        else:
            weights = list(weight)
            if weights:
                self.update_lists(list(index), list(grad), weights)

    def update_lists(self, indices, grads, weights):
        """``self(indices, grads, weights)`` on non-empty lists of the caller's that this may
        change (the Trainer's, made for the call)."""
        optimizer = self.optimizer
        optimizer._set_current_context(weights[0]._ctx.device_id)
        states, synced = self.states, self.states_synced
        last = self._last
        if last is not None and last.repeats(optimizer, indices, grads, weights, states):
            # A training loop's every step: the same arrays and states as the previous call.
            self._plan_and_step(last.indices, last.weights, last.grads, last.runs, last.raw)
            return
        self._last = None
        for i, idx in enumerate(indices):
            if isinstance(idx, bytes):
                idx = indices[i] = idx.decode("utf-8")
            if idx not in states:
                states[idx] = optimizer.create_state_multi_precision(idx, weights[i])
                synced[idx] = True
            elif not synced.get(idx, False):
                states[idx] = self.sync_state_context(states[idx], weights[i].context)
                synced[idx] = True
        given = (indices, grads, weights)
        if not self.aggregate_updates:
            runs = [(0, len(indices))]
        else:
            # Grouped by dtype, in chunks of aggregate_num: the order in which MXNet's aggregated
            # updates count steps and query the scheduler.
            indices, weights, grads, runs = _by_dtype(indices, weights, grads)
        if not _plans_ahead(optimizer, weights):
            # Through update_multi_precision: custom optimizers and float16 master copies.
            if not self.aggregate_updates:
                update = optimizer.update_multi_precision
                for idx, w, g in zip(indices, weights, grads):
                    update(idx, w, g, states[idx])
                return
            for start, stop in _chunks(runs, optimizer.aggregate_num):
                optimizer.update_multi_precision(indices[start:stop], weights[start:stop],
                                                 grads[start:stop],
                                                 [states[i] for i in indices[start:stop]])
            return
        kept = [states[i] for i in indices]
        raw = ([w._data for w in weights], [g._data for g in grads],
               [raw_state(s) for s in kept])
        if all(map(_fixed_state, kept)):
            self._last = _Prepared(optimizer, given, indices, weights, grads, runs, kept, raw)
        self._plan_and_step(indices, weights, grads, runs, raw)

    def _plan_and_step(self, indices, weights, grads, runs, raw):
        # Every chunk is planned first, then all tensors step in one call.
        optimizer = self.optimizer
        size = optimizer.aggregate_num if self.aggregate_updates else 1
        if optimizer._counts_each_index:
            size = len(indices)       # planning a list counts index by index anyway
        plans = []
        for start, stop in _chunks(runs, size):
            plans += optimizer._plan(indices[start:stop], weights[start:stop], grads[start:stop])
        optimizer._steps(*raw, plans)

    def sync_state_context(self, state, context):
        """``state`` with every array moved to ``context`` (tuples stay tuples, lists lists).

        Arrays are copied even where they already are, into the optimizer's state buffers: loaded
        states then sit in memory as created ones do (see ``ndarray.slabs``)."""
        if isinstance(state, NDArray):
            return STATE_SLABS.copy(state, context)
        if isinstance(state, (tuple, list)):
            synced = [self.sync_state_context(s, context) for s in state]
            return tuple(synced) if isinstance(state, tuple) else synced
        return state

    def device_id(self):
        """The device the states live on (that of the first state array; 0 when there is none)."""
        for state in self.states.values():
            array = _first_array(state)
            if array is not None:
                return array.context.device_id
        return 0

    def get_states(self, dump_optimizer=False) -> bytes:
        """The states (and, with ``dump_optimizer``, the optimizer) in trainer-cli's state format."""
        from .state_file import dumps_states
        return dumps_states({self.device_id(): self.states},
                            self.optimizer if dump_optimizer else None)

    def set_states(self, states: bytes, device_id=None):
        """Load what ``get_states`` (or ``state_file.dumps_states``) wrote. A file holding an
        optimizer replaces ``self.optimizer`` (hyper-parameters and counts come from the file, as
        in MXNet). From a file of several devices, the entry for ``device_id`` is taken (default:
        the lowest device id). States move to each weight's device on its next update."""
        from .state_file import StateFileError, loads_states
        by_device, optimizer = loads_states(states)
        if device_id is not None and device_id in by_device:
            chosen = by_device[device_id]
        elif by_device:
            chosen = by_device[min(by_device)]
        else:
            chosen = {}
        if not isinstance(chosen, dict):
            raise StateFileError("<bytes>: malformed states")
        if optimizer is not None:
            self.optimizer = optimizer
            self.aggregate_updates = optimizer.aggregate_num > 0
        self.set_states_dict(chosen)

    def set_states_dict(self, states: dict):
        """Adopt ``{index: state}`` (as loaded from a file); each moves to its weight's device on
        that weight's next update."""
        self.states = dict(states)
        self.states_synced = dict.fromkeys(self.states, False)
        self._last = None


class _Prepared:
    """One ``update_lists`` call's arguments, regrouped and with their raw arrays, for the next
    call with the same ones (every step of a training loop): that call skips the regrouping and
    hands ``_steps`` the same raw lists, which the kernels' own cache then knows at a glance.

    The same means the same objects: indices, weight and gradient NDArrays, the optimizer (with
    the same ``multi_precision``) and the state objects now in ``states`` (which a load or a user
    may have replaced), all created and synced by the first call (``set_states_dict``, which
    unsyncs states, forgets this). NDArrays never change the array they hold, and the states kept
    here are NDArrays, tuples of them or None (``_fixed_state``), so the raw lists stay valid.
    Nothing may change the lists handed to ``_steps``."""

    __slots__ = ("optimizer", "multi_precision", "given", "indices", "weights", "grads", "runs",
                 "kept", "raw")

    def __init__(self, optimizer, given, indices, weights, grads, runs, kept, raw):
        self.optimizer, self.multi_precision = optimizer, optimizer.multi_precision
        self.given = tuple(tuple(items) for items in given)
        # Copies: the caller's lists are its own once the call returns.
        self.indices, self.weights, self.grads = list(indices), list(weights), list(grads)
        self.runs = runs
        self.kept, self.raw = kept, raw

    def repeats(self, optimizer, indices, grads, weights, states) -> bool:
        given_indices, given_grads, given_weights = self.given
        return (optimizer is self.optimizer and optimizer.multi_precision == self.multi_precision
                and len(weights) == len(given_weights) and tuple(indices) == given_indices
                and all(map(is_, weights, given_weights)) and all(map(is_, grads, given_grads))
                and all(map(is_, map(states.get, self.indices), self.kept)))


def _fixed_state(state) -> bool:
    return state is None or type(state) is NDArray or (
        type(state) is tuple and all(type(s) is NDArray for s in state))


def _plans_ahead(optimizer, weights) -> bool:
    """Whether ``optimizer`` updates through ``_plan``/``_steps`` (not a custom ``update``) and
    no float16 master copy is involved."""
    klass = type(optimizer)
    if klass.update is not Optimizer.update \
            or klass.update_multi_precision is not Optimizer.update_multi_precision:
        return False
    return not optimizer.multi_precision or all(w.dtype != numpy.float16 for w in weights)


def _by_dtype(indices, weights, grads):
    """The items regrouped by weight dtype (groups in order of first sight, items in order within
    each), and ``(begin, end)`` of each group."""
    dtypes = [w._data.dtype for w in weights]
    rank = {}
    for dtype in dtypes:
        rank.setdefault(dtype, len(rank))
    if len(rank) == 1:
        return indices, weights, grads, [(0, len(indices))]
    order = sorted(range(len(indices)), key=lambda k: rank[dtypes[k]])
    runs, begin = [], 0
    for k in range(1, len(order) + 1):
        if k == len(order) or dtypes[order[k]] != dtypes[order[begin]]:
            runs.append((begin, k))
            begin = k
    return ([indices[k] for k in order], [weights[k] for k in order], [grads[k] for k in order],
            runs)


def _chunks(runs, size):
    """``(start, stop)`` slices of at most ``size`` items, none crossing a run's end."""
    for begin, end in runs:
        for start in range(begin, end, size):
            yield start, min(start + size, end)


def get_updater(optimizer) -> Updater:
    return Updater(optimizer)


def _first_array(state):
    if isinstance(state, NDArray):
        return state
    if isinstance(state, (tuple, list)):
        for s in state:
            found = _first_array(s)
            if found is not None:
                return found
    return None
