"""``gluon.Trainer``: applies an optimizer to a set of Parameters, through a kvstore when useful.

How gradients travel is decided once, the first time it is needed (a step, or reading
``Trainer.mode``), into one of three modes, which ``Trainer.mode`` names for everyone (the runner
reads it rather than repeating these rules):

============  =====================================================  =========================
mode          when                                                   a step does
============  =====================================================  =========================
``local``     no kvstore (one device, or ``kvstore=None``)           update each device's copy
                                                                     with its own gradient
``reduce``    a kvstore, ``update_on_kvstore`` False                 sum gradients in place on
                                                                     every device, then update
                                                                     each copy locally
``store``     a kvstore, ``update_on_kvstore`` True                  push gradients, the store
                                                                     updates its weight, pull
                                                                     it into every copy
============  =====================================================  =========================

MXNet's rules pick them, by what the parameters hold:

=================================  ==================================================================
parameters                         kvstore and ``update_on_kvstore``
=================================  ==================================================================
a row_sparse weight                always a store (created even for one device); always ``store``;
(``Parameter(stype=...)``)         ``kvstore=None`` is a TypeError, ``update_on_kvstore=False`` a
                                   ValueError
dense weights, some row_sparse     the store as for dense ones (none for one device unless ``dist``);
gradients (``grad_stype``,         ``update_on_kvstore`` defaults to whether it is ``dist`` (the
``Embedding(sparse_grad=True)``)   environment variable is ignored); False on ``dist`` is a ValueError
dense weights and gradients        a ``kvstore`` named by a string is dropped for a single device
                                   unless it is a ``dist`` one; ``update_on_kvstore=None`` means
                                   ``default_update_on_kvstore`` (by default the
                                   ``MXNET_UPDATE_ON_KVSTORE`` environment variable, 1 unless set),
                                   except that an async dist store always updates on the store, and
                                   a store that cannot run the optimizer never does
=================================  ==================================================================

row_sparse gradients travel as (rows, values): ``reduce`` pushes them and pulls the sum (the union
of rows) back into every device's gradient; ``store`` pushes them and pulls the dense weight, or
for a row_sparse weight pulls nothing (``Parameter.row_sparse_data`` pulls the rows a batch needs).
"""
from __future__ import annotations

import os

import numpy

from .. import kvstore as _kvstore
from .. import optimizer as opt
from .._atomic import atomic_write
from .._npz import write_npz
from ..kvstore.local import KVStoreLocal
from ..ndarray import NDArray, sparse as _sparse
from ..ndarray.interop import grad_buffer as _grad_buffer, is_fresh as _is_fresh
from ..ndarray.interop import is_sparse as _is_sparse, mark_stale as _mark_stale
from ..optimizer import state_file
from . import cached_plan as _plans
from .parameter import Parameter, ParameterDict

__all__ = ["Trainer", "StaleGradientError", "LOCAL", "REDUCE", "STORE"]

LOCAL, REDUCE, STORE = "local", "reduce", "store"
# A 'local' store keeps full copies on the host; past this size MXNet stops updating there.
_BIG_PARAM = 1024 * 1024 * 16


class StaleGradientError(UserWarning):
    """A parameter's gradient was not written by ``backward`` since the last step.

    A ``UserWarning`` subclass because MXNet raises ``UserWarning`` here and code catches that.
    """


def _env_update_on_kvstore() -> bool:
    return bool(int(os.getenv("MXNET_UPDATE_ON_KVSTORE", "1")))


def _create_kvstore(kvstore, num_device, params, default_update_on_kvstore=None):
    """MXNet's ``model._create_kvstore``: the store to use and whether it may run the optimizer."""
    update_on_kvstore = (_env_update_on_kvstore() if default_update_on_kvstore is None
                         else bool(default_update_on_kvstore))
    if kvstore is None:
        kv = None
    elif isinstance(kvstore, _kvstore.KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        if num_device == 1 and "dist" not in kvstore:
            kv = None
        else:
            kv = _kvstore.create(kvstore)
            if kvstore == "local":
                biggest = max((int(numpy.prod(p.shape)) for p in params), default=0)
                if biggest > _BIG_PARAM:
                    update_on_kvstore = False
    else:
        raise TypeError("kvstore must be a KVStore, a str or None, got %r" % (kvstore,))
    if kv is None:
        return None, False
    return kv, update_on_kvstore and kv.is_capable(_kvstore.KVStoreBase.OPTIMIZER)


def _create_sparse_kvstore(kvstore):
    """MXNet's ``model._create_sparse_kvstore``: a row_sparse weight lives in a store, always."""
    if isinstance(kvstore, _kvstore.KVStoreBase):
        kv = kvstore
    elif isinstance(kvstore, str):
        kv = _kvstore.create(kvstore)
    else:
        raise TypeError("Cannot create '%s' KVStore with row_sparse parameters. The type must be "
                        "KVStore or str." % (kvstore,))
    if not kv.is_capable(_kvstore.KVStoreBase.OPTIMIZER):
        raise ValueError("KVStore with sparse weight requires optimizer support. However, %s does "
                         "not support optimizer. Please consider other kvstore backends (e.g. "
                         "dist_device) instead." % type(kv).__name__)
    return kv, True


def _copies(param):
    """Every device's copy of ``param`` (``list_data`` refuses row_sparse weights)."""
    return param._check_and_get(param._data, list)


class Trainer:
    """Applies an Optimizer on a set of Parameters; use it after ``autograd`` backward passes.

    ``params`` is a dict (taken in sorted-name order, which fixes each parameter's index) or a
    list; ``optimizer`` a name with ``optimizer_params`` or an Optimizer instance.
    ``default_update_on_kvstore`` (not in MXNet, keyword only) is what ``update_on_kvstore=None``
    means where the store leaves the choice open; None reads ``MXNET_UPDATE_ON_KVSTORE`` as MXNet
    does. ``mode`` says what was decided (see the module docstring).
    """

    def __init__(self, params, optimizer, optimizer_params=None, kvstore="device",
                 compression_params=None, update_on_kvstore=None, *,
                 default_update_on_kvstore=None):
        if isinstance(params, (dict, ParameterDict)):
            params = [params[key] for key in sorted(params.keys())]
        if not isinstance(params, (list, tuple)):
            raise ValueError("First argument must be a list or dict of Parameters, got %s." % type(params))
        self._params = []
        self._param2idx = {}
        self._contains_sparse_weight = self._contains_sparse_grad = False
        for i, param in enumerate(params):
            if not isinstance(param, Parameter):
                raise ValueError("First argument must be a list or dict of Parameters, got list of %s."
                                 % type(param))
            self._param2idx[param.name] = i
            self._params.append(param)
            param._set_trainer(self)
            self._contains_sparse_weight |= param.stype != "default"
            self._contains_sparse_grad |= param.grad_stype != "default"
        self._compression_params = compression_params
        self._contexts = self._check_contexts()
        self._init_optimizer(optimizer, optimizer_params or {})
        self._scale = self._optimizer.rescale_grad
        self._amp_loss_scaler = None  # set by contrib.amp.init_trainer
        self._kept_step = None        # see _KeptStep
        self._kvstore_params = {"kvstore": kvstore, "update_on_kvstore": update_on_kvstore,
                                "default": default_update_on_kvstore}
        self._reset_kvstore()

    def _check_contexts(self):
        contexts = None
        for param in self._params:
            ctx = param.list_ctx()
            if contexts is not None and contexts != ctx:
                raise ValueError(
                    "All Parameters must be initialized on the same set of contexts, but Parameter "
                    "%s is initialized on %s while previous Parameters are initialized on %s."
                    % (param.name, ctx, contexts))
            contexts = ctx
        return contexts or []

    def _init_optimizer(self, optimizer, optimizer_params):
        param_dict = {i: param for i, param in enumerate(self._params)}
        if isinstance(optimizer, opt.Optimizer):
            if optimizer_params:
                raise ValueError("optimizer_params must be None if optimizer is an instance of "
                                 "Optimizer instead of str")
            self._optimizer = optimizer
            # Not a copy: changing a Parameter's lr_mult/wd_mult must reach the optimizer.
            self._optimizer.param_dict = param_dict
        else:
            self._optimizer = opt.create(optimizer, param_dict=param_dict, **optimizer_params)
        self._updaters = [opt.get_updater(self._optimizer) for _ in self._contexts]
        self._states_memo = state_file.LayoutMemo()

    # ----------------------------------------------------------------- the kvstore, decided once
    def _reset_kvstore(self):
        if getattr(self, "_kvstore", None) is not None and "dist" in self._kvstore.type:
            raise RuntimeError("Cannot reset distributed KVStore.")
        self._kv_initialized = False
        self._stepped = False
        self._kvstore = None
        self._distributed = None
        self._update_on_kvstore = None
        self._mode = None
        self._params_to_init = list(self._params)

    def _resolve_kvstore(self):
        """Create the store and pick the mode (see the module docstring)."""
        config = self._kvstore_params
        if self._contains_sparse_weight:
            kv, update_on_kvstore = _create_sparse_kvstore(config["kvstore"])
            self._distributed = "dist" in kv.type
            if config["update_on_kvstore"] is False:
                raise ValueError("Cannot set update_on_kvstore=False when sparse weights are present.")
        elif self._contains_sparse_grad:
            kv, _ = _create_kvstore(config["kvstore"], len(self._contexts), self._params,
                                    config["default"])
            self._distributed = kv is not None and "dist" in kv.type
            update_on_kvstore = self._distributed
            if config["update_on_kvstore"] is not None:
                if config["update_on_kvstore"] is False and self._distributed:
                    raise ValueError("Cannot set update_on_kvstore=False on dist kvstore when sparse "
                                     "gradients are present.")
                update_on_kvstore = config["update_on_kvstore"]
            if kv is not None and not isinstance(kv, KVStoreLocal):
                raise ValueError("Cannot use %s for multi-device training with sparse gradients"
                                 % type(kv))
        else:
            kv, update_on_kvstore = self._dense_kvstore(config)
        if self._compression_params and kv is None:
            raise ValueError(
                "compression_params were given but this Trainer uses no kvstore (%d context(s), "
                "kvstore=%r), so gradients would never be compressed. Use kvstore='device' with "
                "several contexts, a dist kvstore, or drop compression_params."
                % (len(self._contexts), config["kvstore"]))
        if kv is not None:
            if self._compression_params:
                kv.set_gradient_compression(self._compression_params)
            if update_on_kvstore:
                kv.set_optimizer(self._optimizer)
            self._kvstore = kv
            self._update_on_kvstore = bool(update_on_kvstore)
            self._mode = STORE if update_on_kvstore else REDUCE
        else:
            self._kvstore = None
            self._update_on_kvstore = None
            self._mode = LOCAL
        self._kv_initialized = True

    # MXNet's name for _resolve_kvstore: its tutorials (the learning-rate finder) and Gluon
    # toolkits call trainer._init_kvstore() to set the store up before a first step.
    _init_kvstore = _resolve_kvstore

    def _dense_kvstore(self, config):
        kv, update_on_kvstore = _create_kvstore(config["kvstore"], len(self._contexts), self._params,
                                                config["default"])
        self._distributed = kv is not None and "dist" in kv.type
        if self._distributed and "async" in kv.type:
            if config["update_on_kvstore"] is False:
                raise ValueError("Please set update_on_kvstore=True when training in async mode.")
            update_on_kvstore = True
        if config["update_on_kvstore"] is not None:
            update_on_kvstore = config["update_on_kvstore"]
        if kv is not None and update_on_kvstore and not kv.is_capable(_kvstore.KVStoreBase.OPTIMIZER):
            if config["update_on_kvstore"]:
                raise ValueError("Please set update_on_kvstore=False when training with %s" % type(kv))
            update_on_kvstore = False
        return kv, update_on_kvstore

    def _init_params(self):
        """Give the store each ready parameter; device 0's copy becomes every device's value.

        A row_sparse weight is stored whole (the store updates it). A dense weight whose
        row_sparse gradients are only summed by the store (``reduce``) is not: the store would
        hold a table-sized copy that the first push replaces, so the copies are synced directly
        and the key starts empty."""
        waiting = []
        for param in self._params_to_init:
            if param._deferred_init:
                waiting.append(param)
            elif self._kvstore is not None:
                copies = _copies(param)
                key = self._param2idx[param.name]
                if param.stype != "default":
                    self._kvstore.init(key, copies[0])
                elif param.grad_stype != "default" and not self._update_on_kvstore:
                    for copy in copies[1:]:
                        copies[0].copyto(copy)
                    self._kvstore.init(key, _sparse.zeros(param.grad_stype, param.shape,
                                                          copies[0].context, param.dtype))
                else:
                    self._kvstore.broadcast(key, copies[0], copies)
        self._params_to_init = waiting

    def _prepare(self):
        if not self._kv_initialized:
            self._resolve_kvstore()
        if self._params_to_init:
            self._init_params()

    # ----------------------------------------------------------------- properties
    @property
    def mode(self) -> str:
        """How a step moves gradients, decided once: ``LOCAL`` (``"local"``: no kvstore, each
        device updates its copy), ``REDUCE`` (``"reduce"``: the kvstore sums gradients, each device
        updates; ``allreduce_grads`` + ``update`` are allowed) or ``STORE`` (``"store"``: the
        kvstore runs the optimizer; only ``step``). Reading it decides the mode (creating a store
        named by a string) if no step has yet."""
        if not self._kv_initialized:
            self._resolve_kvstore()
        return self._mode

    @property
    def kvstore(self):
        """The kvstore in use (None in ``LOCAL`` mode), decided as ``mode`` is."""
        if not self._kv_initialized:
            self._resolve_kvstore()
        return self._kvstore

    @property
    def learning_rate(self):
        return self._optimizer.learning_rate

    @property
    def optimizer(self):
        return self._optimizer

    def set_learning_rate(self, lr):
        self._optimizer.set_learning_rate(lr)

    # ----------------------------------------------------------------- stepping
    def _check_and_rescale_grad(self, scale):
        # MXNet checks once an earlier step has handed the store its optimizer (its store is
        # created by the first step); reading ``mode`` before any step must not count as one.
        if self._update_on_kvstore and self._distributed and self._stepped:
            if self._optimizer.rescale_grad != scale:
                raise UserWarning(
                    "Possible change in the `batch_size` from previous `step` detected. Optimizer "
                    "gradient normalizing factor will not change w.r.t new batch_size when "
                    "update_on_kvstore=True and when distributed kvstore is used.")
        self._optimizer.rescale_grad = scale

    def step(self, batch_size, ignore_stale_grad=False):
        """One update with gradients normalized by ``1/batch_size``: reduce, then update."""
        if type(batch_size) is not int:
            batch_size = _number(batch_size)
        kept = self._kept_step
        if kept is not None and kept.run(self, batch_size):
            return
        self._check_and_rescale_grad(self._scale / batch_size)
        self._prepare()
        self._stepped = True
        if self._mode == STORE:
            self._check_fresh(ignore_stale_grad)
            if self._amp_overflow():
                return
            self._push_pull_weights(ignore_stale_grad)
        else:
            self._allreduce_grads()
            self._update(ignore_stale_grad)

    def allreduce_grads(self):
        """Sum each parameter's gradients over the devices (before a separate ``update``)."""
        self._prepare()
        self._forbid_on_store("allreduce_grads")
        self._allreduce_grads()

    def update(self, batch_size, ignore_stale_grad=False):
        """Apply the optimizer to the (already reduced) gradients, normalized by ``1/batch_size``."""
        if type(batch_size) is not int:
            batch_size = _number(batch_size)
        kept = self._kept_step
        if kept is not None and kept.run(self, batch_size):
            return
        self._prepare()
        self._forbid_on_store("update")
        self._check_and_rescale_grad(self._scale / batch_size)
        self._update(ignore_stale_grad)

    def _forbid_on_store(self, what):
        if self._mode == STORE:
            raise RuntimeError(
                "%s() when parameters are updated on kvstore is not supported. Try setting "
                "`update_on_kvstore` to False when creating trainer." % what)

    def _trainable(self):
        return [(i, p) for i, p in enumerate(self._params) if p.grad_req != "null"]

    def _allreduce_grads(self):
        if self._kvstore is None:
            return
        kv = self._kvstore
        for i, param in self._trainable():
            grads = param.list_grad()
            if _is_sparse(grads[0]):
                # Push the rows, pull their sum (the union of rows) back into every gradient.
                kv.push(i, grads, priority=-i)
                kv.pull(i, grads, priority=-i, ignore_sparse=self._distributed)
            else:
                kv.pushpull(i, grads, priority=-i)

    def _row_sparse_pull(self, parameter, out, row_id, full_idx=False):
        """Pull the rows ``row_id`` of row_sparse ``parameter`` from the store into ``out`` (one
        array or a list); ``full_idx`` (``row_id`` names every row) pulls the whole value."""
        self._prepare()
        idx = self._param2idx[parameter.name]
        if full_idx and "dist" not in self._kvstore.type:
            if row_id.size != out.shape[0]:
                raise ValueError("full_idx=True needs one row id per row of out (%d ids, %d rows)"
                                 % (row_id.size, out.shape[0]))
            self._kvstore.pull(idx, out=out, priority=-idx, ignore_sparse=False)
        else:
            self._kvstore.row_sparse_pull(idx, out=out, row_ids=row_id, priority=-idx)

    def _check_fresh(self, ignore_stale_grad, trainable=None):
        """Raise before anything changes if a gradient was not refreshed by ``backward``."""
        if ignore_stale_grad:
            return
        for _, param in (self._trainable() if trainable is None else trainable):
            for data in _copies(param):
                if not _is_fresh(data):
                    raise StaleGradientError(
                        "Gradient of Parameter `%s` on context %s has not been updated by backward "
                        "since last `step`. This could mean a bug in your model that made it only "
                        "use a subset of the Parameters (Blocks) for this iteration. If you are "
                        "intentionally only using a subset, call step with ignore_stale_grad=True "
                        "to suppress this warning and skip updating of Parameters with stale "
                        "gradient" % (param.name, data.context))

    def _push_pull_weights(self, ignore_stale_grad):
        kv = self._kvstore
        for i, param in self._trainable():
            copies = _copies(param)
            if ignore_stale_grad and not all(_is_fresh(d) for d in copies):
                continue
            grads = param.list_grad()
            if param.stype != "default":
                if not _is_sparse(grads[0]):
                    raise RuntimeError(
                        "Parameter '%s' has a %s weight and dense gradients: the kvstore updates a "
                        "row_sparse weight from row_sparse gradients only; create it with "
                        "grad_stype='row_sparse'" % (param.name, param.stype))
                # The store updates its row_sparse weight; row_sparse_data pulls the rows needed.
                kv.push(i, grads, priority=-i)
            elif _is_sparse(grads[0]):
                kv.push(i, grads, priority=-i)
                kv.pull(i, copies, priority=-i, ignore_sparse=self._distributed)
            else:
                kv.pushpull(i, grads, out=copies, priority=-i)
            for data in copies:
                _mark_stale(data)

    def _amp_overflow(self) -> bool:
        """With AMP, whether this step's gradients overflowed (the step is then skipped whole).
        On a dist store the ranks would have to agree first: refused rather than risk a hang."""
        if self._amp_loss_scaler is None:
            return False
        if self._mode == STORE and self._distributed:
            raise RuntimeError("AMP with update_on_kvstore on a distributed kvstore is not "
                               "supported; create the Trainer with update_on_kvstore=False")
        return self._amp_loss_scaler.has_overflow(self._params)

    def _update(self, ignore_stale_grad=False):
        if self._amp_loss_scaler is not None and self._amp_overflow():
            return
        # One pass over the parameters (this runs at every step): a stale gradient raises before
        # anything changed, or is skipped with ignore_stale_grad.
        updaters = self._updaters
        per_device = [([], [], []) for _ in updaters]
        for i, param in enumerate(self._params):
            if param._grad_req == "null":
                continue
            for (indices, grads, weights), data in zip(per_device,
                                                       param._data or _copies(param)):
                if not _is_fresh(data):
                    if not ignore_stale_grad:
                        self._check_fresh(False)        # raises, naming the first stale one
                    continue
                indices.append(i)
                grads.append(_grad_buffer(data))
                weights.append(data)
        for _, _, weights in per_device:
            for data in weights:
                _mark_stale(data)
        for updater, (indices, grads, weights) in zip(updaters, per_device):
            if indices:
                updater.update_lists(indices, grads, weights)
        self._kept_step = _KeptStep.after(self, per_device)

    # ----------------------------------------------------------------- states
    def save_states(self, fname):
        """Write the optimizer and its per-parameter states (every device's) to ``fname``."""
        arrays = self.states_arrays(copy=False)
        if arrays is not None:
            with atomic_write(fname) as f:
                write_npz(f, arrays)
            return
        if self._params_to_init:
            raise RuntimeError("Cannot save trainer states when some parameters are not yet "
                               "initialized in kvstore.")
        names = {i: param.name for i, param in enumerate(self._params)}
        self._kvstore.save_optimizer_states(fname, dump_optimizer=True, param_names=names)

    def _values_replaced(self, param):
        """``param``'s values were replaced (``Parameter.set_data``, ``load_parameters``): the
        float32 master copies a ``multi_precision`` optimizer keeps of its float16 weights take
        the new values. MXNet leaves them, and the next update writes the old values back over
        the new ones (docs/compat.md). With ``update_on_kvstore`` the store is rebuilt instead,
        as in MXNet. Only dense masters are kept here (a row_sparse float16 weight's master is
        left as MXNet leaves it)."""
        if self._mode is None or self._mode == STORE:
            return
        index = next((i for i, p in enumerate(self._params) if p is param), None)
        if index is None:
            return
        opt = self._optimizer
        for updater, data in zip(self._updaters, param._data or ()):
            state = updater.states.get(index)
            if state is None or not opt._uses_mp(data) or data.stype != "default":
                continue
            master = opt._mp_unpack(state)[0]
            if isinstance(master, NDArray) and master.stype == "default" \
                    and master.shape == data.shape:
                data.astype(numpy.float32).copyto(master)

    def states_arrays(self, copy=True) -> dict | None:
        """The members of the file ``save_states`` writes (name -> host array); None when the
        kvstore holds the states (it writes its own file). ``copy=False`` gives the live host
        arrays, for a write that ends before the next update."""
        self._prepare()
        if self._mode == STORE:
            return None
        names = {i: param.name for i, param in enumerate(self._params)}
        states = {pos: updater.states for pos, updater in enumerate(self._updaters)}
        return state_file.states_arrays(states, self._optimizer, names, copy, self._states_memo)

    def load_states(self, fname):
        """Restore what ``save_states`` wrote; the optimizer (lr, counts, scheduler) comes from it."""
        self._prepare()
        self._states_memo = state_file.LayoutMemo()   # nor keeps the replaced states alive
        if self._mode == STORE:
            self._kvstore.load_optimizer_states(fname)
            self._optimizer = self._kvstore._updater.optimizer
        else:
            states_by_device, optimizer = state_file.load_states_file(fname)
            saved = [states_by_device[k] for k in sorted(states_by_device)]
            for pos, updater in enumerate(self._updaters):
                updater.optimizer = optimizer
                # Fewer saved devices than now (e.g. a file from the store): reuse the first.
                updater.set_states_dict(saved[pos] if pos < len(saved) else (saved[0] if saved else {}))
            self._optimizer = optimizer
        self._optimizer.param_dict = {i: param for i, param in enumerate(self._params)}


def _number(batch_size):
    """``batch_size`` as a Python number: a one-element array (d2l's ``num_tokens =
    valid_len.sum()``) as its value, which MXNet refuses to parse and an integer array would
    otherwise divide as integers (``rescale_grad`` 0: no update at all)."""
    if isinstance(batch_size, (int, float)):
        return batch_size
    if hasattr(batch_size, "asnumpy"):
        batch_size = batch_size.asnumpy()
    values = numpy.asarray(batch_size)
    if values.size != 1 or values.dtype.kind not in "iuf":
        raise TypeError("batch_size must be a number (or an array of one), got %r"
                        % (batch_size,))
    return values.reshape(()).item()


class _KeptStep:
    """A Trainer's step kept for the next one with nothing changed: the usual training loop's.

    Kept after a ``local`` step on one device that updated every trainable parameter, without
    AMP, whose Updater kept its prepared step (``Updater.kept_step``). The next ``step`` runs
    it when the parameters' arrays and ``grad_req`` are those of that step (the plans' epoch is
    unchanged and each parameter holds the same list of arrays), the Trainer has the same
    optimizer and mode, every gradient is fresh and the Updater says it still serves: then the
    step is one freshness compare per parameter and the optimizer's counts, rates and
    arithmetic (``Updater.update_again``), the same calls in the same order as the general
    path, so the same bits. Anything else falls back to the general path (which raises for a
    stale gradient, or skips it), and that step keeps a new one where it can."""

    __slots__ = ("epoch", "optimizer", "params", "lists", "datas", "updater", "prepared")

    @classmethod
    def after(cls, trainer, per_device):
        """The step to keep after ``trainer._update`` ran ``per_device`` (its lists), or None."""
        if len(per_device) != 1 or trainer._mode != LOCAL or trainer._amp_loss_scaler is not None \
                or trainer._params_to_init:
            return None
        indices, grads, weights = per_device[0]
        trainable = [param for param in trainer._params if param.grad_req != "null"]
        if not indices or len(indices) != len(trainable):
            return None
        updater = trainer._updaters[0]
        prepared = updater.kept_step(grads, weights)
        if prepared is None:
            return None
        kept = cls()
        kept.epoch, kept.optimizer = _plans.epoch.value, trainer._optimizer
        kept.params, kept.datas = trainable, weights
        kept.lists = [param._data for param in trainable]
        kept.updater, kept.prepared = updater, prepared
        return kept

    def run(self, trainer, batch_size) -> bool:
        """The step, if nothing changed; False (and nothing done) otherwise."""
        if _plans.epoch.value != self.epoch or trainer._optimizer is not self.optimizer \
                or trainer._mode != LOCAL or trainer._amp_loss_scaler is not None \
                or trainer._params_to_init or not trainer._kv_initialized:
            return False
        for param, data_list, data in zip(self.params, self.lists, self.datas):
            if param._data is not data_list or not _is_fresh(data):
                return False
        updater, prepared = self.updater, self.prepared
        if not updater.serves_again(prepared):
            return False
        self.optimizer.rescale_grad = trainer._scale / batch_size
        trainer._stepped = True
        for data in self.datas:
            _mark_stale(data)
        updater.update_again(prepared)
        return True
