"""``Updater``: applies an optimizer to (index, grad, weight) triples, keeping one state per index."""
from __future__ import annotations

from operator import is_

import numpy

from ..ndarray import NDArray
from ..ndarray.finite import FiniteCheck
from ..ndarray.interop import raw as _raw_array
from ..ndarray.sparse import CSRNDArray, RowSparseNDArray
from .optimizer import STATE_SLABS, PreparedStep, raw, state_leaves

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
        # One prepared step per list of indices seen (see _Prepared): a Trainer calls with one
        # list, a kvstore with one key at a time.
        self._prepared = {}
        # The prepared step the last update_lists call ran (None: it ran none; see
        # ``updated_finite``).
        self._last = None

    def __call__(self, index, grad, weight):
        """Update ``weight`` from ``grad`` (note the order); each may be a single item or a list."""
        if not isinstance(index, (list, tuple)):
            self.update_lists([index], [grad], [weight])
        else:
            weights = list(weight)
            if weights:
                self.update_lists(list(index), list(grad), weights)

    def _update_csr_weights(self, indices, grads, weights):
        """MXNet 1.9.1 updates a csr weight through its storage fallback: the dense update of
        the dense weight with the dense gradient (every entry, weight decay included), the result
        stored back as csr (its non-zero entries). The states are dense."""
        dense_weights = [w.tostype("default") if type(w) is CSRNDArray else w for w in weights]
        dense_grads = [g.tostype("default") if type(w) is CSRNDArray and g._sparse else g
                       for w, g in zip(weights, grads)]
        self.update_lists(indices, dense_grads, dense_weights)
        for w, d in zip(weights, dense_weights):
            if d is not w:
                d.copyto(w)

    def update_lists(self, indices, grads, weights):
        """``self(indices, grads, weights)`` on non-empty lists of the caller's that this may
        change (the Trainer's, made for the call)."""
        optimizer = self.optimizer
        states = self.states
        try:
            key = tuple(indices)
            prepared = self._prepared.get(key)
        except TypeError:           # an unhashable index: nothing is kept for it
            key = prepared = None
        if prepared is not None:
            # (A prepared step holds dense weights only: no csr weight among the same ones.)
            if prepared.serves(optimizer, grads, weights, states):
                # A training loop's every step: the same weights and states as last time.
                optimizer._set_current_context(weights[0].context.device_id)
                self._last = prepared
                self._plan_and_step(prepared)
                if prepared.grads_change:
                    prepared.forget_grads()
                return
            del self._prepared[key]
        if any(type(w) is CSRNDArray for w in weights):
            return self._update_csr_weights(indices, grads, weights)
        optimizer._set_current_context(weights[0].context.device_id)
        synced = self.states_synced
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
        given = (grads, weights)
        order = None
        if not self.aggregate_updates:
            runs = [(0, len(indices))]
        else:
            # Grouped by dtype, in chunks of aggregate_num: the order in which MXNet's aggregated
            # updates count steps and query the scheduler.
            order, runs = _by_dtype(weights)
            if order is not None:
                indices, weights, grads = ([items[k] for k in order]
                                           for items in (indices, weights, grads))
        if not optimizer.plans_ahead or (optimizer.multi_precision and any(
                w.dtype == numpy.float16 for w in weights)):
            # Through update_multi_precision: optimizers with their own update, float16 master
            # copies.
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
        prepared = _Prepared(optimizer, given, indices, weights, grads, order, runs, kept, key)
        # Row_sparse weights change their arrays from step to step: a step with any of them is
        # prepared again at every call (row_sparse gradients are taken anew by ``serves``).
        if key is not None and all(map(_fixed_state, kept)) and _all_dense(weights) and all(
                type(g) is NDArray or type(g) is RowSparseNDArray for g in grads):
            if len(self._prepared) >= _MAX_PREPARED:
                self._prepared.clear()
            self._prepared[key] = prepared
            self._last = prepared
        self._plan_and_step(prepared)

    def updated_finite(self, with_grads=False):
        """Whether the weights and states the last ``update_lists`` call wrote are free of
        NaN/Inf, looked at in one call over arrays grouped once (a training loop asks after
        every update); None when that call ran no kept prepared step or had row_sparse
        gradients (their tables are not looked at whole here): the caller checks another way.
        ``with_grads``: the gradients it read too, in the same call (None where they were other
        arrays than at the step before)."""
        prepared = self._last
        return None if prepared is None else prepared.updated_finite(with_grads)

    def kept_step(self, grads, weights):
        """The prepared step the last ``update_lists`` call ran and kept, when that call had
        these very gradient and weight NDArrays (dense ones); else None. A caller that comes
        back with the same arrays and nothing else changed runs it with ``update_again``."""
        prepared = self._last
        if prepared is None or prepared.sparse_grads or prepared.grads is None:
            return None
        given_grads, given_weights = prepared.given
        if len(grads) != len(given_grads) or len(weights) != len(given_weights) or not (
                all(map(is_, grads, given_grads)) and all(map(is_, weights, given_weights))):
            return None
        return prepared

    def serves_again(self, prepared) -> bool:
        """Whether ``update_again(prepared)`` does what ``update_lists`` would do with the
        arrays ``prepared`` holds: the same optimizer (and ``multi_precision``), states neither
        loaded nor replaced since, and its gradients kept."""
        optimizer = self.optimizer
        return (self._prepared.get(prepared.key) is prepared and prepared.grads is not None
                and optimizer is prepared.optimizer
                and optimizer.multi_precision == prepared.multi_precision
                and all(map(is_, map(self.states.get, prepared.indices), prepared.kept)))

    def update_again(self, prepared):
        """``update_lists`` with the arrays ``prepared`` holds, once ``serves_again`` said yes:
        the counts, rates and arithmetic of a step, none of its checks and regrouping."""
        optimizer = self.optimizer
        optimizer._set_current_context(prepared.device_id)
        self._last = prepared
        prepared.step.seen = None       # what a watching kernel counts is of this step only
        if not optimizer._steps_again(prepared.step, prepared.indices, self._chunks(prepared)):
            self._plan_and_step(prepared)

    def _chunks(self, prepared):
        """``(start, stop)`` of each chunk of ``prepared``'s items that one ``_plan`` call
        counts and rates: runs of one dtype, cut at the optimizer's ``aggregate_num``."""
        optimizer = self.optimizer
        size = optimizer.aggregate_num if self.aggregate_updates else 1
        if optimizer.counts_each_index:
            size = len(prepared.indices)    # planning a list counts index by index anyway
        kept = prepared.chunks
        if kept is None or kept[0] != size:
            runs, count = prepared.runs, len(prepared.indices)
            chunks = [(0, count)] if len(runs) == 1 and count <= size \
                else list(_chunks(runs, size))
            kept = prepared.chunks = (size, chunks)
        return kept[1]

    def _plan_and_step(self, prepared):
        # Every chunk is planned first, then all tensors step in one call.
        optimizer = self.optimizer
        indices, weights, grads = prepared.indices, prepared.weights, prepared.grads
        prepared.step.seen = None       # what a watching kernel counts is of this step only
        chunks = self._chunks(prepared)
        if len(chunks) == 1:
            plans = optimizer._plan(indices, weights, grads)      # one chunk: a small model's
        else:
            plans = []
            for start, stop in chunks:
                plans += optimizer._plan(indices[start:stop], weights[start:stop],
                                         grads[start:stop])
        optimizer._steps(prepared.step, plans)

    def sync_state_context(self, state, context):
        """``state`` with every array moved to ``context`` (tuples stay tuples, lists lists).

        Arrays are copied even where they already are, into the optimizer's state buffers: loaded
        states then sit in memory as created ones do (see ``ndarray.slabs``)."""
        if isinstance(state, NDArray):
            if state.stype != "default":
                return state.copyto(context)    # a row_sparse state stays row_sparse
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
        self._prepared.clear()
        self._last = None
        self.set_states_dict(chosen)

    def set_states_dict(self, states: dict):
        """Adopt ``{index: state}`` (as loaded from a file); each moves to its weight's device on
        that weight's next update."""
        self.states = dict(states)
        self.states_synced = dict.fromkeys(self.states, False)
        self._prepared.clear()
        self._last = None


# More index lists than this (a kvstore with that many keys, each its own list) and the
# prepared steps are dropped and made again.
_MAX_PREPARED = 4096


class _Prepared:
    """One ``update_lists`` call prepared for the next call with the same indices (every step of
    a training loop, or every push of a key to a kvstore): the items regrouped for planning,
    and their raw arrays as an ``optimizer.PreparedStep``, which keeps what the kernels worked
    out about them.

    It serves a call with the same objects: optimizer (with the same ``multi_precision``),
    weight NDArrays, and state objects now in ``states`` (which a load or a user may have
    replaced); the Updater forgets every prepared step when states are loaded. NDArrays never
    change the array they hold, and the states kept here are NDArrays, tuples of them or None
    (``_fixed_state``), so the raw arrays stay valid. Other gradient NDArrays (a kvstore's sum
    may be new at each push) are taken in place of the previous ones; gradients that change
    from call to call are not kept once the call is over (a parameter server would otherwise
    hold the last gradient of every key)."""

    __slots__ = ("optimizer", "multi_precision", "given", "indices", "weights", "grads", "order",
                 "runs", "kept", "key", "device_id", "chunks", "step", "grads_change",
                 "sparse_grads", "_finite", "_rest")

    def __init__(self, optimizer, given, indices, weights, grads, order, runs, kept, key):
        self.optimizer, self.multi_precision = optimizer, optimizer.multi_precision
        self.key, self.device_id = key, weights[0].context.device_id
        self.chunks = None          # (size, the chunks of that size): Updater._chunks
        given_grads, given_weights = given
        self.given = (tuple(given_grads), tuple(given_weights))
        # Copies: the caller's lists are its own once the call returns.
        self.indices, self.weights, self.grads = list(indices), list(weights), list(grads)
        self.order, self.runs, self.kept = order, runs, kept
        self.step = PreparedStep.of(weights, grads, kept)
        self.grads_change = False
        # A row_sparse gradient NDArray gets new rows in place: its arrays are taken anew at
        # every call, even when the same object comes back.
        self.sparse_grads = any(type(g) is RowSparseNDArray for g in grads)
        self._finite = [None, None]   # the check without, and with, the gradients
        self._rest = {}     # (with_grads, positions the kernels looked at) -> check of the others

    def serves(self, optimizer, grads, weights, states) -> bool:
        given_grads, given_weights = self.given
        if not (optimizer is self.optimizer and optimizer.multi_precision == self.multi_precision
                and len(weights) == len(given_weights) and all(map(is_, weights, given_weights))
                and all(map(is_, map(states.get, self.indices), self.kept))):
            return False
        self.grads_change = False
        if self.sparse_grads or len(grads) != len(given_grads) \
                or not all(map(is_, grads, given_grads)):
            if len(grads) != len(given_weights) or not all(
                    type(g) is NDArray or type(g) is RowSparseNDArray for g in grads):
                return False
            self.given = (tuple(grads), given_weights)
            order = self.order
            self.grads = list(grads) if order is None else [grads[k] for k in order]
            # A row_sparse gradient (new at every step) as its rows and values.
            self.step.new_grads([raw(g) for g in self.grads])
            self.grads_change = True
            self._finite[True] = None
            self._rest.clear()
        return True

    def updated_finite(self, with_grads=False):
        """``Updater.updated_finite`` for this step's weights and states (and gradients).

        Asked once, it has the kernels count NaN/Inf as they write from the next step on
        (``PreparedStep.watch``): then only the tensors no kernel looked at are read again,
        and the whole check runs only when a kernel counted one (to tell a gradient, which
        counts too, from what the update wrote)."""
        if self.sparse_grads or (with_grads and self.grads_change):
            return None
        step = self.step
        seen, step.watch = step.seen, True
        if seen is not None and not seen[0]:
            key = (with_grads, seen[1])
            rest = self._rest.get(key)
            if rest is None:
                if len(self._rest) > 4:
                    self._rest.clear()
                others = [p for p in range(len(step.weights)) if p not in seen[1]]
                arrays = [step.weights[p] for p in others] + state_leaves(
                    [step.states[p] for p in others])
                if with_grads:
                    arrays += [step.grads[p] for p in others]
                rest = self._rest[key] = FiniteCheck(arrays)
            return rest()
        check = self._finite[with_grads]
        if check is None:
            arrays = list(self.step.weights) + state_leaves(self.step.states)
            check = FiniteCheck(arrays + list(self.step.grads) if with_grads else arrays)
            self._finite[with_grads] = check
        return check()

    def forget_grads(self):
        self.given = ((), self.given[1])
        self.grads = None
        self.step.new_grads(None)


def _all_dense(arrays) -> bool:
    return all(type(a) is NDArray for a in arrays)


def _fixed_state(state) -> bool:
    return state is None or type(state) is NDArray or (
        type(state) is tuple and all(type(s) is NDArray for s in state))


def _by_dtype(weights):
    """The order that regroups items by weight dtype (groups in order of first sight, items in
    order within each; None when there is one dtype), and ``(begin, end)`` of each group."""
    dtypes = [_raw_array(w).dtype for w in weights]
    rank = {}
    for dtype in dtypes:
        rank.setdefault(dtype, len(rank))
    if len(rank) == 1:
        return None, [(0, len(weights))]
    order = sorted(range(len(weights)), key=lambda k: rank[dtypes[k]])
    runs, begin = [], 0
    for k in range(1, len(order) + 1):
        if k == len(order) or dtypes[order[k]] != dtypes[order[begin]]:
            runs.append((begin, k))
            begin = k
    return order, runs


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
