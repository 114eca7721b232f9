"""The ``Optimizer`` base class and registry, with MXNet 1.9's bookkeeping.

What lives here is what every optimizer shares: the learning rate and its scheduler, per-parameter
``lr_mult``/``wd_mult``, per-device per-index update counts, ``rescale_grad`` and
``clip_gradient``, multi-precision (float16 weights with a float32 master copy), and the registry
behind ``create(name)``. Each optimizer module adds only its hyper-parameters, its state and one
update rule on raw arrays.

**Row_sparse gradients and weights** (MXNet 1.9.1's sparse optimizer path; semantics §10):

* ``Optimizer.update``/``update_multi_precision(index, weight, grad, state)`` and
  ``Updater(index, grad, weight)`` take a ``RowSparseNDArray`` ``grad``. The rules see it as a
  ``SparseRows`` (rows, values, shape); "present" rows are the stored ones, zeros included.
  Bookkeeping (update counts, rates, Adam's bias correction) is the same as for a dense
  gradient: an empty gradient still counts.
* Optimizers with a row_sparse kernel in MXNet run it (SGD and Adam with ``lazy_update``, in
  their own ``_steps``); every other one densifies the gradient (``Optimizer._sparse_step``):
  exactly its dense update with the absent rows as zeros.
* A ``RowSparseNDArray`` *weight* must store every row (indices ``0..n-1``), as a kvstore holds
  a row_sparse parameter: the rules update its values in place as the full table, the
  indices never change (MXNet's kernels refuse a weight with rows missing; so does
  ``raw_weight``, with a ValueError). ``create_state`` gives MXNet's states for it: row_sparse
  (``zeros_like(weight, stype='row_sparse')``, no row stored) for lazy SGD and Adam, which store
  every row, as zeros, the first time an update uses them (``raw_state``; MXNet's
  ``FillDnsZerosRspImpl``); dense for the others.
* The Updater never keeps a prepared step (``updater._Prepared``) holding a row_sparse gradient
  or weight: their arrays change from step to step.
"""
from __future__ import annotations

import inspect
import warnings
from typing import NamedTuple

import numpy

from ..context import array_module_of
from ..ndarray import NDArray
from ..ndarray.interop import raw as _raw_array, row_ids as _row_ids
from ..ndarray.slabs import Slabs
from ..ndarray.sparse import RowSparseNDArray, RowsAndValues, all_rows as _all_rows_of
from ..ndarray.sparse import zeros as _sparse_zeros
from .. import lr_scheduler as _lr_scheduler
from .kernels import row_ids_error

__all__ = ["Optimizer", "Plan", "PreparedStep", "SparseRows", "on_rows", "register", "create",
           "scaled_grad", "raw", "raw_weight", "raw_state", "zeros_like", "densified",
           "in_float32", "param_type", "state_leaves"]

_MISSING = object()


class Plan(NamedTuple):
    """What one tensor's step needs, decided by an update's bookkeeping phase (``_plan``)."""

    index: object           # the parameter's index (its update count is already taken)
    lr: float               # the rate this step uses: lr * lr_mult, and what the optimizer
                            # folds in (Adam's bias correction, LARS's trust ratio)
    wd: float               # wd * wd_mult
    momentum: float = 0.0   # SGD-like optimizers: the momentum of this step (LARS corrects it)


class PreparedStep:
    """An update's raw arrays, in the order of its plans, and what the kernels worked out about
    them (their groups, ``kernels.groups``; rows of scalars worth keeping). Whoever keeps a
    prepared step keeps its arrays alive, so the groups' addresses stay valid: the Updater
    keeps one per index list across the steps of a training loop (``updater.Updater``); a
    direct ``Optimizer.update`` call makes one for the call."""

    __slots__ = ("weights", "grads", "states", "rsp_weights", "_splits", "_rows", "watch",
                 "seen", "_covers", "_worked")

    def __init__(self, weights, grads, states, rsp_weights=()):
        self.weights, self.grads, self.states = weights, grads, states
        # Which weights are RowSparseNDArrays (empty: none is): Ftrl and AdaGrad are lazy there.
        self.rsp_weights = rsp_weights
        self._splits, self._rows, self._worked = {}, {}, {}
        # ``watch``: the kernels count the NaN/Inf of what they read and write (a training loop
        # that asks after every update sets it); ``seen``: what they counted in the step being
        # run (see ``saw``), None until a kernel reports. ``_covers``: per kernel, the positions
        # whose weight, gradient and every state array are among the kernel's arrays (and per
        # group of its split, those of the group), kept with the splits.
        self.watch = False
        self.seen = None
        self._covers = {}

    @classmethod
    def of(cls, weights, grads, states):
        """The raw arrays of NDArray ``weights``, ``grads`` (row_sparse ones as ``SparseRows``)
        and ``states``."""
        rsp = tuple(isinstance(w, RowSparseNDArray) for w in weights)
        return cls([raw_weight(w) for w in weights], [raw(g) for g in grads],
                   [raw_state(s) for s in states], rsp if any(rsp) else ())

    def split(self, kernel, columns):
        """``kernels.groups(columns())`` for ``kernel``, worked out once."""
        found = self._splits.get(kernel.name)
        if found is None:
            if all([type(g) is SparseRows for g in self.grads]):
                # Only row_sparse gradients (an embedding model): no group; nothing to keep.
                return (), range(len(self.grads))
            from .kernels import groups
            arrays = columns()
            found = self._splits[kernel.name] = groups(arrays)
            self._covers[kernel.name] = self._covered(arrays)
        return found

    def _covered(self, columns):
        """The positions whose weight, gradient and state arrays all are among ``columns``."""
        covered = set()
        for p in range(len(self.weights)):
            have = {id(column[p]) for column in columns}
            if all(id(a) in have for a in [self.weights[p], self.grads[p]]
                   + state_leaves([self.states[p]])):
                covered.add(p)
        return covered

    def saw(self, kernel, positions, nonfinite):
        """What a watching kernel reports after running on the group ``positions`` (a list its
        split keeps): ``nonfinite``, how many of its spans met a NaN/Inf. ``seen`` gathers, for
        the step, the count and the frozenset of positions whose every array was looked at."""
        key = (kernel.name, id(positions))
        looked = self._covers.get(key)
        if looked is None:
            covers = self._covers.get(kernel.name, ())
            looked = self._covers[key] = frozenset(p for p in positions if p in covers)
        if self.seen is None:
            self.seen = (nonfinite, looked)
        else:
            self.seen = (self.seen[0] + nonfinite, self.seen[1] | looked)

    def rows(self, slot, key, build, reusable):
        """``build()``, or the rows built for ``slot`` by the previous step when its ``key``
        was equal and both are ``reusable`` (equal values are equal bits: no zeros whose sign
        counts). A key that is not reusable is never compared: -0.0 == 0.0."""
        kept = self._rows.get(slot)
        if reusable and kept is not None and kept[0] == key:
            return kept[1]
        rows = build()
        if reusable:
            self._rows[slot] = (key, rows)
        else:
            self._rows.pop(slot, None)
        return rows

    def worked_out(self, name, build, *args):
        """``build(*args)``, worked out once about these arrays (a rule's layout of them, with
        scratch arrays of their shapes): kept until other gradients come (``new_grads``)."""
        found = self._worked.get(name)
        if found is None:
            found = self._worked[name] = build(*args)
        return found

    def new_grads(self, grads):
        """The same weights and states with other gradient arrays (a kvstore hands a new sum at
        every push): the groups, which hold the gradients' addresses, and what else was worked
        out about the arrays are worked out again."""
        self.grads = grads
        self._splits.clear()
        self._covers.clear()
        self._worked.clear()


def state_leaves(states) -> list:
    """The arrays of raw states (None, arrays, tuples and lists of them)."""
    found = []
    for state in states:
        if isinstance(state, (tuple, list)):
            found += state_leaves(state)
        elif state is not None:
            found.append(state)
    return found


_OWN_PARAMS: dict = {}     # optimizer class -> its own constructor arguments (_own_params)


class Optimizer:
    """Base class of all optimizers (MXNet 1.9's constructor and attributes).

    Subclasses implement ``create_state(index, weight)`` and ``_step(index, w, g, state, lr, wd)``,
    where ``w``, ``g`` and the arrays of ``state`` are raw NumPy/CuPy arrays updated in place.

    **The update protocol.** An update of a list of tensors runs in two phases:

    1. ``_plan(indices, weights, grads) -> [Plan]``, the bookkeeping, in MXNet's order: update
       counts (``_update_count``), then the rates (``_rates``, the one function computing
       ``lr * lr_mult`` and ``wd * wd_mult``; the scheduler is read there), then whatever the
       optimizer folds into a tensor's ``Plan`` (Adam's bias-corrected rate, SGD's momentum).
       ``counts_each_index`` says whether a list is counted index by index, each rate read
       right after its count (as separate calls would), or counted together first (SGD's
       aggregated updates).
    2. ``_steps(step, plans)``, the arithmetic: ``step`` is a ``PreparedStep`` (raw arrays of
       the weights, gradients and states, in plan order); the default runs ``_step`` per tensor,
       SGD and Adam hand every tensor to their kernels at once (``kernels``).

    The Updater plans every chunk of a step first, then runs one ``_steps`` over all of them,
    with a ``PreparedStep`` it keeps while the same arrays come back. An optimizer that defines
    its own ``update`` (MXNet's way of writing one; LBSGD, Test) declares ``plans_ahead =
    False`` and is called through ``update_multi_precision`` instead; a subclass defining
    ``update`` without declaring it gets False. Float16 weights with a float32 master copy take
    that path too.
    """

    opt_registry: dict = {}

    # Whether the Updater may run this optimizer's updates through ``_plan``/``_steps``.
    plans_ahead = True
    # Whether ``_plan`` counts a list of indices one by one (as single calls would) or together.
    counts_each_index = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Written MXNet's way, with its own update(): the Updater must call that.
        if "plans_ahead" not in vars(cls) and (
                "update" in vars(cls) or "update_multi_precision" in vars(cls)):
            cls.plans_ahead = False

    def __init__(self, rescale_grad=1., param_idx2name=None, wd=0., clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None):
        if isinstance(lr_scheduler, dict):
            lr_scheduler = _lr_scheduler.from_dict(lr_scheduler)
        self.rescale_grad = rescale_grad
        if lr_scheduler is None and learning_rate is None:
            learning_rate = _lr_scheduler.DEFAULT_LEARNING_RATE
        self.lr = learning_rate
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is not None and learning_rate is not None \
                and lr_scheduler.base_lr != learning_rate:
            warnings.warn(UserWarning("learning rate from ``lr_scheduler`` has been overwritten "
                                      "by ``learning_rate`` in optimizer."), stacklevel=2)
            lr_scheduler.base_lr = learning_rate
        self.wd = wd
        self.lr_mult = {}
        self.wd_mult = {}
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        self.aggregate_num = 0
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise ValueError("param_idx2name should be a dict of param indexes to names.")
        self.idx2name = param_idx2name.copy()
        if sym is not None:
            # MXNet reads the __lr_mult__/__wd_mult__ attributes of a Symbol's variables from
            # it; ignoring it would silently drop those multipliers.
            raise TypeError("Optimizer(sym=...) is not supported: the multipliers a Symbol's "
                            "variables carry are not read here; give them with set_lr_mult/"
                            "set_wd_mult or the Parameters' lr_mult/wd_mult")
        self.sym_info = ()
        self.param_dict = param_dict if param_dict else {}
        self.allow_np_array = False
        self.set_lr_mult({})
        self.set_wd_mult({})

    # ------------------------------------------------------------------ registry
    @staticmethod
    def register(klass):
        """Register ``klass`` under ``klass.__name__.lower()`` (a second one warns and wins)."""
        if not isinstance(klass, type):
            raise TypeError("register expects a class, got %r" % (klass,))
        name = klass.__name__.lower()
        old = Optimizer.opt_registry.get(name)
        if old is not None and old is not klass:
            warnings.warn("WARNING: New optimizer %s.%s is overriding existing optimizer %s.%s"
                          % (klass.__module__, klass.__name__, old.__module__, old.__name__))
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name, **kwargs):
        """An optimizer by registry name (case-insensitive)."""
        klass = Optimizer.opt_registry.get(str(name).lower())
        if klass is None:
            raise ValueError("Cannot find optimizer %s; valid names: %s"
                             % (name, ", ".join(sorted(Optimizer.opt_registry))))
        return klass(**kwargs)

    @property
    def registry_name(self) -> str:
        return type(self).__name__.lower()

    # ------------------------------------------------------------------ learning rate
    @property
    def learning_rate(self):
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def set_learning_rate(self, lr):
        if self.lr_scheduler is not None:
            raise UserWarning("LRScheduler of the optimizer has already been defined. Note that "
                              "set_learning_rate can mutate the value of the learning rate of the "
                              "optimizer only when the LRScheduler of the optimizer is undefined.")
        self.lr = lr

    def set_lr_scale(self, args_lrscale):
        raise DeprecationWarning

    def set_lr_mult(self, args_lr_mult):
        self.lr_mult = dict(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        """Names in ``param_idx2name`` not ending in _weight or _gamma get no weight decay."""
        self.wd_mult = {n: 0.0 for n in self.idx2name.values()
                        if not (n.endswith("_weight") or n.endswith("_gamma"))}
        self.wd_mult.update(args_wd_mult)

    def _rates(self, indices, count_each=False):
        """``(lrs, wds)``: each index's ``lr * lr_mult`` and ``wd * wd_mult``, the one place rates
        are computed. ``lr`` is the scheduler's at the current ``num_update``; with
        ``count_each`` every index is counted just before its rate is read (MXNet's order for a
        list of single updates, where a count can move ``num_update`` and the scheduler)."""
        if not count_each:
            chosen = self._params_of(indices)
            if chosen is not None:
                # _all_mults's hot path, the rates made in the same pass over the Parameters.
                wd = self.wd
                wds = [wd * p.wd_mult for p in chosen]
                lr = self._global_lr()
                return [lr * p.lr_mult for p in chosen], wds
        lr_mults, wd_mults = self._all_mults(indices)
        wd = self.wd
        wds = [wd * m for m in wd_mults]
        if not count_each:
            lr = self._global_lr()
            return [lr * m for m in lr_mults], wds
        # _global_lr() after each count, inlined: hundreds of tensors pay it at every step.
        scheduler = self.lr_scheduler
        counts, begin, lr = self._index_update_count, self.begin_num_update, self.lr
        num_update, lrs = self.num_update, []
        for index, lr_mult in zip(indices, lr_mults):
            count = counts.get(index, begin) + 1
            counts[index] = count
            if not num_update > count:      # max(count, num_update), ties to count
                num_update = self.num_update = count
            lrs.append((scheduler(num_update) if scheduler is not None else lr) * lr_mult)
        return lrs, wds

    def _global_lr(self):
        """The learning rate before multipliers: the scheduler's at ``num_update``, or ``lr``."""
        return self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr

    def _params_of(self, indices):
        """Each index's Parameter, or None unless every index has one (a Trainer's updates)."""
        params = self.param_dict
        if params:
            try:
                return [params[index] for index in indices]
            except KeyError:
                pass
        return None

    def _all_mults(self, indices):
        """Each index's ``(lr_mult, wd_mult)`` lists, in one pass over the Parameters when every
        index has its Parameter (the hot path under a Trainer)."""
        chosen = self._params_of(indices)
        if chosen is not None:
            return [p.lr_mult for p in chosen], [p.wd_mult for p in chosen]
        return (self._mults(indices, "lr_mult", self.lr_mult),
                self._mults(indices, "wd_mult", self.wd_mult))

    # MXNet's names for the rates (custom optimizers written MXNet's way call them).
    def _get_lrs(self, indices):
        return self._rates(indices)[0]

    def _get_wds(self, indices):
        wd = self.wd        # without reading the learning rate (a scheduler call)
        return [wd * m for m in self._all_mults(indices)[1]]

    def _mults(self, indices, attr, table):
        if not self.param_dict and not table and not self.idx2name:
            return [1.0] * len(indices)
        return [self._mult(index, attr, table) for index in indices]

    def _mult(self, index, attr, table):
        # A live Gluon Parameter wins, so changing param.lr_mult mid-training takes effect.
        param = self.param_dict.get(index, _MISSING)
        if param is not _MISSING:
            return getattr(param, attr)
        mult = table.get(index, _MISSING)
        if mult is not _MISSING:
            return mult
        name = self.idx2name.get(index, _MISSING)
        if name is not _MISSING:
            return table.get(name, 1.0)
        return 1.0

    def _get_lr(self, index):
        return self._rates([index])[0][0]

    def _get_wd(self, index):
        return self._get_wds([index])[0]

    # ------------------------------------------------------------------ update counts
    def _set_current_context(self, device_id):
        self._index_update_count = self._all_index_update_counts.setdefault(device_id, {})

    def _update_count(self, index):
        counts, begin = self._index_update_count, self.begin_num_update
        num_update = self.num_update
        for idx in index if isinstance(index, (list, tuple)) else (index,):
            count = counts.get(idx, begin) + 1
            counts[idx] = count
            if not num_update > count:      # max(count, num_update), ties to count
                num_update = count
        self.num_update = num_update

    @property
    def _clip(self):
        """The clipping bound, or None: one rule for every optimizer (see docs/compat)."""
        c = self.clip_gradient
        return c if c is not None and c > 0 else None

    # ------------------------------------------------------------------ states and updates
    def create_state(self, index, weight):
        return None

    def create_state_multi_precision(self, index, weight):
        """``(weight32, state)`` for a float16 weight when ``multi_precision`` is on."""
        if self._uses_mp(weight):
            if self._mp_falls_back(weight):
                # MXNet's mp_sgd* updates have no row_sparse kernel: its storage fallback runs
                # the dense update on a dense float32 master copy (every row, gradient
                # densified). The other optimizers update a row_sparse float32 master as they
                # would a float32 row_sparse weight.
                weight32 = weight.tostype("default").astype(numpy.float32)
            else:
                weight32 = weight.astype(numpy.float32)
            return self._mp_pack(weight32, self.create_state(index, weight32))
        if weight.dtype == numpy.float16:
            warnings.warn("Accumulating with float16 in optimizer can lead to poor accuracy or "
                          "slow convergence. Consider using multi_precision=True option of the "
                          "optimizer")
        return self.create_state(index, weight)

    def _mp_falls_back(self, weight):
        """A row_sparse float16 weight of an optimizer with its own mp_* kernel (SGD, NAG)."""
        return isinstance(weight, RowSparseNDArray) and \
            type(self)._mp_pack is not Optimizer._mp_pack

    def _uses_mp(self, weight):
        return self.multi_precision and weight.dtype == numpy.float16

    # Layout of a multi-precision state: the base class puts the master copy first, SGD-like
    # optimizers (their own mp_* kernels in MXNet) put it last.
    def _mp_pack(self, weight32, state):
        return (weight32, state)

    def _mp_unpack(self, state):
        return state[0], state[1]

    def update(self, index, weight, grad, state):
        """Update ``weight`` (an NDArray, in place) from ``grad``; lists update several in turn."""
        if isinstance(index, (list, tuple)):
            indices, weights, grads, states = index, weight, grad, state
        else:
            indices, weights, grads, states = [index], [weight], [grad], [state]
        plans = self._plan(indices, weights, grads)
        self._steps(PreparedStep.of(weights, grads, states), plans)

    def _plan(self, indices, weights, grads):
        """The bookkeeping phase: count the indices, then return each one's ``Plan``."""
        if self.counts_each_index:
            lrs, wds = self._rates(indices, count_each=True)
        else:
            self._update_count(indices)
            lrs, wds = self._rates(indices)
        return [Plan(index, lr, wd) for index, lr, wd in zip(indices, lrs, wds)]

    def _steps_again(self, step, indices, chunks) -> bool:
        """What the Updater runs for a step it kept (``Updater.update_again``): ``_plan`` on
        each ``(start, stop)`` of ``chunks`` of ``indices``, then ``_steps``, where an optimizer
        can do the same with what it kept about ``step`` (SGD on small tensors does). False:
        nothing done, the Updater runs the two phases."""
        return False

    def _steps(self, step, plans):
        """The arithmetic phase: ``_step`` for each tensor of ``step`` with its plan (a
        row_sparse gradient: ``_sparse_step``)."""
        rsp = step.rsp_weights
        for p, (w, g, s, plan) in enumerate(zip(step.weights, step.grads, step.states, plans)):
            if type(g) is SparseRows:
                self._sparse_step(plan.index, w, g, s, plan.lr, plan.wd, bool(rsp and rsp[p]))
            else:
                self._step(plan.index, w, g, s, plan.lr, plan.wd)

    def _sparse_step(self, index, weight, grad, state, lr, wd, rsp_weight):
        """``_step`` with a row_sparse ``grad`` (``SparseRows``) on ``weight`` (the full table;
        ``rsp_weight``: the weight is a RowSparseNDArray). MXNet has no row_sparse kernel for
        most rules and densifies the gradient (its storage fallback): exactly the dense update,
        absent rows with gradient 0. Optimizers with a row_sparse kernel override this."""
        self._step(index, weight, grad.dense(), state, lr, wd)

    def update_multi_precision(self, index, weight, grad, state):
        """``update``, through the float32 master copy for float16 weights under multi_precision."""
        if not self.multi_precision:
            return self.update(index, weight, grad, state)
        many = isinstance(index, (list, tuple))
        weights = weight if many else [weight]
        if not weights or not self._uses_mp(weights[0]):
            return self.update(index, weight, grad, state)
        grads, states = (grad, state) if many else ([grad], [state])
        unpacked = [self._mp_unpack(s) for s in states]
        masters = [m for m, _ in unpacked]
        inner = [s for _, s in unpacked]
        grads32 = [(g.tostype("default") if self._mp_falls_back(w) and g._sparse else g)
                   .astype(numpy.float32) for w, g in zip(weights, grads)]
        if many:
            self.update(list(index), masters, grads32, inner)
        else:
            self.update(index, masters[0], grads32[0], inner[0])
        for w, m in zip(weights, masters):
            raw_weight(w)[...] = raw_weight(m)

    def _step(self, index, weight, grad, state, lr, wd):
        raise NotImplementedError()

    # ------------------------------------------------------------------ description
    def hyperparams(self) -> dict:
        """The constructor arguments that rebuild this optimizer, as JSON-able values."""
        hp = {
            "learning_rate": self.lr,
            "wd": self.wd,
            "rescale_grad": _number(self.rescale_grad),
            "clip_gradient": self.clip_gradient,
            "begin_num_update": self.begin_num_update,
            "multi_precision": bool(self.multi_precision),
            "lr_scheduler": None if self.lr_scheduler is None else self.lr_scheduler.to_dict(),
            "param_idx2name": [[k, v] for k, v in self.idx2name.items()],
        }
        for name in self._own_params():
            hp[name] = _jsonable(getattr(self, self._param_attr.get(name, name)))
        return hp

    # Constructor arguments stored under another attribute name (MXNet's spelling).
    _param_attr: dict = {}

    @classmethod
    def _own_params(cls):
        """The subclass's constructor arguments (beyond the base class's), from its signatures
        (read once per class: a checkpoint describes the optimizer every time)."""
        names = _OWN_PARAMS.get(cls)
        if names is None:
            names = _OWN_PARAMS[cls] = tuple(cls._read_own_params())
        return list(names)

    @classmethod
    def _read_own_params(cls):
        base = set(inspect.signature(Optimizer.__init__).parameters)
        names = []
        for klass in reversed(cls.__mro__):
            if klass is object or klass is Optimizer or "__init__" not in vars(klass):
                continue
            for p in inspect.signature(klass.__init__).parameters.values():
                if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self" \
                        and p.name not in base and p.name not in names:
                    names.append(p.name)
        return names

    def _extra_state(self) -> tuple[dict, dict]:
        """Scalar state beyond the update counts (JSON) and arrays that go with it, for saving."""
        return {}, {}

    def _set_extra_state(self, scalars: dict, arrays: dict) -> None:
        if scalars or arrays:
            raise ValueError("%s keeps no extra state, but the file has some" % type(self).__name__)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("param_dict", None)   # live Parameters: the Trainer re-attaches them
        return state

    def __setstate__(self, state):
        self.__dict__ = state
        self.param_dict = {}

    def __repr__(self):
        try:
            items = [kv for kv in self.hyperparams().items() if kv[0] != "param_idx2name"]
        except AttributeError:          # not fully constructed
            return object.__repr__(self)
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % kv for kv in items))


register = Optimizer.register
create = Optimizer.create_optimizer


# ---------------------------------------------------------------------- helpers for the rules
class SparseRows(RowsAndValues):
    """A row_sparse gradient as the rules take it (``rows``, ``values``, ``shape``; ``dense()``
    is MXNet's storage fallback). "Present" is structural: a listed row of zeros is present."""

    __slots__ = ()

    def checked_for(self, w, rows=True):
        """``self``, after checking that it fits weight ``w``: same shape, and with ``rows``
        row ids in range (NumPy's fancy indexing would wrap negative ids; a ``RowKernel``
        checks them itself)."""
        if tuple(w.shape) != self.shape:
            raise ValueError("row_sparse gradient of shape %s for a weight of shape %s"
                             % (self.shape, tuple(w.shape)))
        if not rows:
            return self
        rows = self.rows
        if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= self.shape[0]):
            raise row_ids_error(self.shape[0])
        return self


def on_rows(rule, w, grad, states, **kw):
    """``rule(w, g, *states, **kw)`` on just the rows ``grad`` (``SparseRows``) holds: the rows of
    ``w`` and of each state gathered, updated, put back (MXNet's row-wise sparse kernels run the
    dense rule's operations on those rows). O(rows present); absent rows keep their bits. Row
    ids outside ``w`` are refused before anything changes (fancy indexing would wrap a negative
    one onto the last rows)."""
    rows = grad.checked_for(w).rows
    if not len(rows):
        return
    parts = [w[rows]] + [s[rows] for s in states]
    rule(parts[0], grad.values, *parts[1:], **kw)
    for target, part in zip([w] + list(states), parts):
        target[rows] = part


def raw(x):
    """The NumPy/CuPy array behind an NDArray (or ``x`` itself when already raw); a
    RowSparseNDArray gives its ``SparseRows``."""
    if type(x) is NDArray:
        return _raw_array(x)
    if isinstance(x, RowSparseNDArray):
        return SparseRows(_row_ids(x), _raw_array(x), x.shape)
    return _raw_array(x) if isinstance(x, NDArray) else x


def raw_weight(w):
    """The array a rule updates in place for weight ``w``: a dense NDArray's own array, or the
    values of a RowSparseNDArray holding every row (as a kvstore holds a row_sparse parameter;
    MXNet's kernels refuse one with rows missing, and so does this)."""
    if isinstance(w, RowSparseNDArray):
        return _all_rows(w, "weights", fill=False)
    return raw(w)


def _all_rows(rsp, what, fill):
    """The values of row_sparse ``rsp`` as the dense table, every row stored. With ``fill``, an
    array storing no row first stores them all as zeros (MXNet's ``FillDnsZerosRspImpl`` on a
    fresh row_sparse state)."""
    stored, total = rsp.indices.shape[0], rsp.shape[0]
    if stored == 0 and fill and total:
        _all_rows_of(rsp).copyto(rsp)
    elif stored != total:
        raise ValueError("an optimizer update of a RowSparse %s is only implemented for RowSparse "
                         "%s with all rows present: %s.data.shape[0] (%d) != %s.shape[0] (%d)"
                         % (what, what, what, stored, what, total))
    return _raw_array(rsp.data)


def densified(g):
    """``g`` as a dense raw array (a ``SparseRows`` densified, anything else as it is)."""
    return g.dense() if type(g) is SparseRows else g


def raw_state(state):
    if type(state) is NDArray:
        return _raw_array(state)
    if isinstance(state, RowSparseNDArray):
        return _all_rows(state, "states", fill=True)
    if isinstance(state, NDArray):
        return _raw_array(state)
    if type(state) is tuple:
        if len(state) == 2 and type(state[0]) is NDArray and type(state[1]) is NDArray:
            return (_raw_array(state[0]), _raw_array(state[1]))  # (mean, var) of the Adam family
        return tuple([raw_state(s) for s in state])
    if isinstance(state, tuple):
        return tuple(raw_state(s) for s in state)
    if isinstance(state, list):
        return [raw_state(s) for s in state]
    return state


# Every optimizer state in one set of buffers (see ``ndarray.slabs``).
STATE_SLABS = Slabs(stagger=2048)


def zeros_like(weight, dtype=None, stype="default"):
    """An NDArray of zeros on ``weight``'s context, in ``dtype`` (default: the weight's).
    ``stype`` ``'row_sparse'`` (MXNet's state of a row_sparse weight for the optimizers that have
    a row_sparse kernel): a RowSparseNDArray storing no row; the update that first uses it stores
    every row (see ``raw_state``)."""
    dtype = weight.dtype if dtype is None else dtype
    if stype == "row_sparse":
        return _sparse_zeros("row_sparse", weight.shape, ctx=weight.context, dtype=dtype)
    return STATE_SLABS.zeros(weight.shape, dtype, weight.context)


def in_float32(rule, w, *args, **kwargs):
    """``rule(w, *args, **kwargs)``, on a float32 copy of a float16 ``w`` rounded into it once.
    For the rules whose states are float32 beside a float16 weight without multi_precision
    (Ftrl, RMSProp): MXNet 1.9.1 fails in their update operators there; here the rule computes
    in float32, which is multi_precision's first step (docs/compat.md)."""
    if w.dtype != numpy.float16:
        return rule(w, *args, **kwargs)
    w32 = w.astype(numpy.float32)
    rule(w32, *args, **kwargs)
    w[...] = w32


class _Float64Param(numpy.float64):
    """A float64 operator parameter as MXNet holds it: its parameter structs are float32
    fields, widened for a float64 weight (lr=0.01 computes as 0.009999999776482582). Calling
    it gives a plain ``numpy.float64`` (CuPy refuses a subclass of it as an operand); the class
    itself serves as a ``dtype=``."""

    def __new__(cls, value):
        return numpy.float64(numpy.float32(value))


def param_type(dtype):
    """What an update rule converts its scalars with, for weights of ``dtype``: the dtype's
    scalar type, through float32 for float64 (MXNet's C++ rules); it serves as ``dtype=`` too."""
    return _Float64Param if dtype == numpy.float64 else dtype.type


def scaled_grad(g, rescale, clip, w=None, wd=0.0, dtype=None, params=None):
    """A new array ``clip(rescale*g + wd*w)`` (``clip`` None: no clipping), never ``g`` itself.

    Scalars take the weight's precision (MXNet's kernels cast their float parameters to it),
    converted by ``params`` where given (``param_type``: a C++ rule's)."""
    xp = array_module_of(g)
    t = (dtype or (w.dtype if w is not None else g.dtype)).type
    p = params or t
    out = xp.multiply(g, p(rescale), dtype=t)
    if wd:
        out += w * p(wd)
    if clip is not None:
        xp.clip(out, p(-clip), p(clip), out=out)
    return out


def _number(x):
    return float(x) if isinstance(x, (numpy.floating, numpy.integer)) else x


def _jsonable(x):
    if isinstance(x, tuple):
        return [_jsonable(v) for v in x]
    if isinstance(x, list):
        return [_jsonable(v) for v in x]
    return _number(x)
