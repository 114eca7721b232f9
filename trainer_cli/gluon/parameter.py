"""Gluon ``Parameter`` and ``ParameterDict``.

A Parameter holds one data copy (and one gradient buffer) per context. Each data copy is an autograd
variable whose fresh-gradient mark (``ndarray.interop.is_fresh``) is set by ``backward`` and
cleared by the Trainer after a local update, which is how a stale gradient is detected.
"""
from __future__ import annotations

import contextlib
import re
import warnings
import weakref
from collections import OrderedDict

import numpy

from .. import autograd
from .. import initializer as _init
from ..base import MXNetError
from ..context import Context, cpu, current_context
from ..ndarray import NDArray
from ..ndarray import creation as _creation
from ..ndarray import sparse as _sparse
from ..ndarray.interop import (attach_grad_buffer as _attach_grad_buffer, grad_buffer as _grad_buffer,
                               raw as _raw)
from ..ndarray.slabs import Slabs
from . import cached_plan as _plans

# Every parameter's data in one set of buffers and every gradient in another (see ``slabs``).
_DATA_SLABS, _GRAD_SLABS = Slabs(stagger=0), Slabs(stagger=1024)

__all__ = ["Parameter", "Constant", "ParameterDict", "DeferredInitializationError", "ParameterError",
           "shape_is_known"]

_GRAD_REQS = ("write", "add", "null")


# Callables ``check(parameter, nbytes)`` that see each parameter's data before it is allocated
# (see ``allocation_check``); empty outside a runner's build, so that Gluon code is unchanged.
_ALLOCATION_CHECKS: list = []


def _nbytes(shape, dtype) -> int:
    count = 1
    for dim in shape:
        count *= int(dim)
    return count * numpy.dtype(dtype).itemsize


@contextlib.contextmanager
def allocation_check(check):
    """Within the block, ``check(parameter, nbytes)`` runs before any parameter's data is
    allocated (``nbytes``: its values on all its contexts) and may raise to refuse it."""
    _ALLOCATION_CHECKS.append(check)
    try:
        yield
    finally:
        _ALLOCATION_CHECKS.remove(check)


class DeferredInitializationError(MXNetError):
    """A parameter was used before its shape was known (resolved at the first forward)."""


class ParameterError(MXNetError, AssertionError, ValueError):
    """A bad argument where MXNet fails an ``assert``.

    Code written for MXNet catches AssertionError there; ValueError is what the failure is;
    MXNetError is what code that catches MXNet's errors in general names.
    """


def shape_is_known(shape) -> bool:
    return shape is not None and all(int(n) > 0 for n in shape)


def _as_ctx_list(ctx):
    if ctx is None:
        return [current_context()]
    if isinstance(ctx, (Context, str)):
        return [Context(ctx) if isinstance(ctx, str) else ctx]
    return list(ctx)


class Parameter:
    """A weight of a Block: data and gradient on every context it lives on."""

    def __init__(self, name="weight", grad_req="write", shape=None, dtype=numpy.float32,
                 lr_mult=1.0, wd_mult=1.0, init=None, allow_deferred_init=False,
                 differentiable=True, stype="default", grad_stype="default"):
        for what, value in (("stype", stype), ("grad_stype", grad_stype)):
            if value not in ("default", "row_sparse", "csr"):
                raise ParameterError("%s for Parameter '%s' must be one of 'default', 'row_sparse', "
                                     "or 'csr', but got '%s'" % (what, name, value))
            if value == "csr":
                # MXNet accepts it, but none of its optimizers or kvstores can use a csr weight or
                # gradient.
                raise ValueError("%s='csr' for Parameter '%s' is not supported: use 'row_sparse' "
                                 "(or 'default')" % (what, name))
        self._stype = stype
        self._grad_stype = grad_stype
        self.name = name
        self._shape = None if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape))
        self._dtype = numpy.dtype(dtype).type
        self._dtype_given = dtype       # what ``dtype`` answers: as given, as MXNet's does
        self.lr_mult = lr_mult
        self.wd_mult = wd_mult
        self.init = init
        self._allow_deferred_init = allow_deferred_init
        self._differentiable = differentiable
        self._grad_req = None
        self._data = None
        self.grad_req = grad_req if differentiable else "null"
        self._ctx_list = None
        self._ctx_index = None
        self._deferred_init = ()
        self._trainer = None

    def __repr__(self):
        # The dtype as given, as MXNet prints it: <class 'numpy.float32'> by default, float16
        # after cast('float16').
        return "Parameter %s (shape=%s, dtype=%s)" % (self.name, self.shape, self.dtype)

    # ----------------------------------------------------------------- attributes
    @property
    def shape(self):
        return self._shape

    @shape.setter
    def shape(self, new_shape):
        new_shape = (new_shape,) if isinstance(new_shape, int) else tuple(new_shape)
        if self._shape is not None:
            compatible = len(self._shape) == len(new_shape) and all(
                old <= 0 or old == new for old, new in zip(self._shape, new_shape))
            if not compatible:
                raise ParameterError("Expected shape %s is incompatible with given shape %s for "
                                     "Parameter %s." % (self._shape, new_shape, self.name))
        self._shape = new_shape

    @property
    def dtype(self):
        """The dtype as given (``'float32'`` from a layer, ``numpy.float32`` by default, the
        argument of the last ``cast``), as MXNet keeps it: ``p.dtype == 'float16'`` holds after
        ``cast('float16')``."""
        return self._dtype_given

    @dtype.setter
    def dtype(self, dtype):
        """Setting the dtype casts the data and the gradient, as ``cast`` does (MXNet)."""
        self.cast(dtype)

    @property
    def grad_req(self):
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req):
        if req not in _GRAD_REQS:
            raise ParameterError("grad_req must be one of 'write', 'add', or 'null', but got '%s'"
                                 % (req,))
        if not self._differentiable:
            req = "null"
        if self._grad_req == req:
            return
        self._grad_req = req
        _plans.bump_epoch()     # a cached plan knows which parameters take gradients
        if self._data is not None:
            self._init_grad()

    @property
    def stype(self):
        return self._stype

    @property
    def grad_stype(self):
        return self._grad_stype

    def _set_trainer(self, trainer):
        # A sparse weight lives in its Trainer's kvstore: a second Trainer would hold another copy.
        current = self._trainer() if self._trainer is not None else None
        if self._stype != "default" and current is not None and trainer is not None \
                and current is not trainer:
            raise RuntimeError("Failed to set the trainer for Parameter '%s' because it was already "
                               "set. More than one trainers for a %s Parameter is not supported."
                               % (self.name, self._stype))
        if trainer is None:
            self._trainer = None
        elif self._stype != "default":
            # The weight's value lives in this Trainer's kvstore: the Parameter keeps it alive.
            self._trainer = lambda: trainer
        else:
            self._trainer = weakref.ref(trainer)

    # ----------------------------------------------------------------- initialization
    def initialize(self, init=None, ctx=None, default_init=_init.Uniform(), force_reinit=False):
        """Create the data on every context in ``ctx``, drawn by ``init`` (or the defaults)."""
        if self._data is not None and not force_reinit:
            warnings.warn("Parameter '%s' is already initialized, ignoring. Set force_reinit=True "
                          "to re-initialize." % self.name, stacklevel=2)
            return
        self._data = None
        ctx = _as_ctx_list(ctx)
        if init is None:
            init = default_init if self.init is None else self.init
        if not shape_is_known(self._shape):
            if self._allow_deferred_init:
                self._deferred_init = (init, ctx, default_init, None)
                return
            raise ValueError("Cannot initialize Parameter '%s' because it has invalid shape: %s."
                             % (self.name, self._shape))
        self._deferred_init = (init, ctx, default_init, None)
        self._finish_deferred_init()

    def _finish_deferred_init(self):
        if not self._deferred_init:
            return
        init, ctx, default_init, data = self._deferred_init
        self._deferred_init = ()
        if not shape_is_known(self._shape):
            raise DeferredInitializationError(
                "Cannot initialize Parameter '%s' because it has invalid shape: %s. Please specify "
                "in_units, in_channels, etc for `Block`s." % (self.name, self._shape))
        if _ALLOCATION_CHECKS:
            # Before the allocation: a runner refuses a shape its memory cannot hold, with an
            # estimate, rather than a MemoryError (or a machine swapping) halfway through.
            _ALLOCATION_CHECKS[-1](self, _nbytes(self._shape, self._dtype) * len(ctx))
        with autograd.pause():
            if data is None:
                data = _creation.zeros(self._shape, ctx=cpu(), dtype=self._dtype)
                _init.create(default_init)(_init.InitDesc(self.name, {"__init__": init}), data)
            self._init_impl(data, ctx)

    def _init_impl(self, data, ctx_list):
        _plans.bump_epoch()     # new arrays, maybe of a new shape: plans are made again
        self._ctx_list = list(ctx_list)
        self._ctx_index = {c: i for i, c in enumerate(self._ctx_list)}
        if self._stype == "row_sparse":
            # Every row stored (see ``sparse.all_rows``), one copy per context.
            self._data = [_sparse.all_rows(data, c) for c in self._ctx_list]
        else:
            self._data = [_DATA_SLABS.copy(data, c) for c in self._ctx_list]
        self._init_grad()

    def _init_grad(self):
        for arr in self._data:
            if self._grad_req == "null":
                _attach_grad_buffer(arr, None, "null")
            elif self._grad_stype == "row_sparse":
                _attach_grad_buffer(arr, _sparse.zeros("row_sparse", arr.shape, arr.context,
                                                       arr.dtype), self._grad_req)
            else:
                _attach_grad_buffer(arr, _GRAD_SLABS.zeros(arr.shape, arr.dtype, arr.context,
                                                           apart_from=arr), self._grad_req)

    def _load_init(self, data, ctx, cast_dtype=False, dtype_source="current"):
        """Initialize (or overwrite) from a loaded array, checking shape, dtype and contexts."""
        if dtype_source not in ("current", "saved"):
            raise ParameterError("dtype_source must be 'current' or 'saved', got %r" % (dtype_source,))
        if self._shape is not None:
            if len(self._shape) != len(data.shape) or \
                    not all(old <= 0 or old == new for old, new in zip(self._shape, data.shape)):
                raise ParameterError("Failed loading Parameter '%s' from saved params: shape "
                                     "incompatible expected %s vs saved %s"
                                     % (self.name, self._shape, data.shape))
        self._shape = tuple(data.shape)
        saved = numpy.dtype(data.dtype)
        if saved != numpy.dtype(self._dtype):
            if not cast_dtype:
                # Silently casting would lose precision or change the model's dtype unnoticed.
                raise ParameterError("Failed loading Parameter '%s' from saved params: dtype "
                                     "incompatible expected %s vs saved %s. Set cast_dtype=True to "
                                     "cast the dtype of saved params."
                                     % (self.name, numpy.dtype(self._dtype).name, saved.name))
            if dtype_source == "saved":
                self.dtype = saved.type  # casts data already initialized, as MXNet does
            else:
                data = data.astype(self._dtype)
        if not isinstance(data, NDArray):
            data = _creation.array(data, ctx=cpu(), dtype=data.dtype)
        if isinstance(ctx, (Context, str)):
            ctx = _as_ctx_list(ctx)
        if self._data is None:
            if self._deferred_init:
                deferred_ctx = self._deferred_init[1]
                if ctx is not None and set(ctx) != set(deferred_ctx):
                    raise ParameterError("Failed to load Parameter '%s' on %s because it was "
                                         "previously initialized on %s."
                                         % (self.name, ctx, deferred_ctx))
                ctx = deferred_ctx
            elif ctx is None:
                ctx = [cpu()]
            with autograd.pause():
                self._init_impl(data, list(ctx))
        else:
            if ctx is not None and set(ctx) != set(self._ctx_list):
                raise ParameterError("Failed to load Parameter '%s' on %s because it was "
                                     "previously initialized on %s."
                                     % (self.name, ctx, self._ctx_list))
            self.set_data(data)
        self._deferred_init = ()

    # ----------------------------------------------------------------- access
    def _check_and_get(self, arr_list, ctx):
        if arr_list is not None:
            if ctx is list:
                return arr_list
            if ctx is None:
                if len(arr_list) == 1:
                    return arr_list[0]
                ctx = current_context()
            idx = self._ctx_index.get(ctx)
            if idx is not None:
                return arr_list[idx]
            raise RuntimeError("Parameter '%s' was not initialized on context %s. It was only "
                               "initialized on %s." % (self.name, ctx, self._ctx_list))
        if self._deferred_init:
            raise DeferredInitializationError(
                "Parameter '%s' has not been initialized yet because initialization was deferred. "
                "Actual initialization happens during the first forward pass. Please pass one batch "
                "of data through the network before accessing Parameters." % self.name)
        raise RuntimeError(
            "Parameter '%s' has not been initialized. Note that you should initialize parameters "
            "and create Trainer with Block.collect_params() instead of Block.params because the "
            "later does not include Parameters of nested child Blocks" % self.name)

    def data(self, ctx=None) -> NDArray:
        if self._stype != "default":
            raise RuntimeError("Cannot return a copy of Parameter '%s' on ctx %s via data() because "
                               "its storage type is %s. Please use row_sparse_data() instead."
                               % (self.name, ctx, self._stype))
        arrays = self._data
        # One context, asked for by None or by the very Context object it was created with: the
        # answer ``_check_and_get`` gives, without hashing a Context.
        if arrays is not None and len(arrays) == 1 and (ctx is None or ctx is self._ctx_list[0]):
            return arrays[0]
        return self._check_and_get(arrays, ctx)

    def list_data(self):
        if self._stype != "default":
            raise RuntimeError("Cannot return copies of Parameter '%s' on all contexts via "
                               "list_data() because its storage type is %s. Please use "
                               "row_sparse_data() instead." % (self.name, self._stype))
        return self._check_and_get(self._data, list)

    def row_sparse_data(self, row_id) -> NDArray:
        """The row_sparse weight on ``row_id``'s context holding the rows ``row_id`` names
        (sorted, de-duplicated), pulled from the Trainer's kvstore into this Parameter's own
        copy there; the copies on other contexts are left as they were."""
        if self._stype != "row_sparse":
            raise RuntimeError("Cannot return a copy of Parameter %s via row_sparse_data() because "
                               "its storage type is %s. Please use data() instead."
                               % (self.name, self._stype))
        if not isinstance(row_id, NDArray):
            raise TypeError("row_id must have NDArray type, but %s is given" % type(row_id))
        return self._get_row_sparse(self._check_and_get(self._data, row_id.context), row_id)

    def list_row_sparse_data(self, row_id):
        """``row_sparse_data`` on every context, in creation order."""
        if self._stype != "row_sparse":
            raise RuntimeError("Cannot return copies of Parameter '%s' on all contexts via "
                               "list_row_sparse_data() because its storage type is %s. Please use "
                               "data() instead." % (self.name, self._stype))
        if not isinstance(row_id, NDArray):
            raise TypeError("row_id must have NDArray type, but %s is given" % type(row_id))
        return self._get_row_sparse(self._check_and_get(self._data, list), row_id)

    def _get_row_sparse(self, out, row_id):
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is None:
            raise RuntimeError("Cannot get row_sparse data for Parameter '%s' when no Trainer is "
                               "created with it." % self.name)
        trainer._row_sparse_pull(self, out, row_id)
        return out

    def grad(self, ctx=None) -> NDArray:
        if self._data is not None and self._grad_req == "null":
            raise RuntimeError("Cannot get gradient array for Parameter '%s' because grad_req='null'"
                               % self.name)
        arr = self._check_and_get(self._data, ctx)
        return _grad_buffer(arr)

    def list_grad(self):
        if self._data is not None and self._grad_req == "null":
            raise RuntimeError("Cannot get gradient array for Parameter '%s' because grad_req='null'"
                               % self.name)
        return [_grad_buffer(arr) for arr in self._check_and_get(self._data, list)]

    def list_ctx(self):
        if self._data is None:
            if self._deferred_init:
                return list(self._deferred_init[1])
            raise RuntimeError("Parameter '%s' has not been initialized" % self.name)
        return list(self._ctx_list)

    def set_data(self, data):
        """Set every copy to ``data``; with a Trainer updating on a kvstore, that store is rebuilt,
        and otherwise its optimizer's float32 master copies of float16 weights take the new
        values."""
        self.shape = data.shape
        if self._data is None:
            if not self._deferred_init:
                raise RuntimeError("Parameter '%s' has not been initialized" % self.name)
            init, ctx, default_init, _ = self._deferred_init
            src = data if isinstance(data, NDArray) else _creation.array(data, dtype=self._dtype)
            self._deferred_init = (init, ctx, default_init, src.copyto(cpu()))
            return
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is not None and getattr(trainer, "_kv_initialized", False) \
                and getattr(trainer, "_update_on_kvstore", False) \
                and self not in getattr(trainer, "_params_to_init", ()):
            trainer._reset_kvstore()
        if not isinstance(data, NDArray):
            data = _creation.array(data, ctx=cpu(), dtype=self._dtype)
        if self._stype == "row_sparse":
            for arr in self._data:
                _sparse.all_rows(data, arr.context, arr.dtype).copyto(arr)
            return
        # Written into the buffers directly: a parameter's value may be set inside record(), where
        # item assignment to a marked variable is refused.
        for arr in self._data:
            data.copyto(arr)
        if trainer is not None:
            trainer._values_replaced(self)

    def zero_grad(self):
        if self._data is None or self._grad_req == "null":
            return
        for arr in self._data:
            grad = _grad_buffer(arr)
            if grad.stype == "default":
                _raw(grad)[...] = 0
            else:
                _sparse.clear(grad)     # no stored rows, as MXNet's zeros_like

    def reset_ctx(self, ctx):
        """Move the data to other contexts, keeping its value."""
        ctx = _as_ctx_list(ctx)
        if self._data is not None:
            with autograd.pause():
                self._init_impl(self._reduce(), ctx)
        elif self._deferred_init:
            init, _, default_init, data = self._deferred_init
            self._deferred_init = (init, ctx, default_init, data)
        else:
            raise ValueError("Cannot reset context for Parameter '%s' because it has not been "
                             "initialized." % self.name)

    def _reduce(self) -> NDArray:
        """The average of the copies, on the CPU (what ``save`` writes); a single host copy is
        returned as it is, not copied.

        Copies that are all equal (every kvstore mode keeps them so) give that value exactly:
        summing three equal float32 copies and dividing by 3 can round. A row_sparse weight's
        value is its Trainer's (every row pulled from the kvstore), or before any Trainer the
        first copy (the copies are then all the initial value).
        """
        if self._stype != "default":
            return self._sparse_value()
        copies = self.list_data()
        if len(copies) == 1 and copies[0].context.device_type == "cpu":
            # The array itself: its callers copy what they keep, and a checkpoint of a large
            # model would otherwise copy every weight in the training thread.
            return copies[0]
        first = copies[0].copyto(cpu())
        hosts = [first.asnumpy()] + [arr.asnumpy() for arr in copies[1:]]
        if all(numpy.array_equal(hosts[0], h) for h in hosts[1:]):
            return first
        total = first
        for arr in copies[1:]:
            total = total + arr.copyto(cpu())
        return total / len(copies)

    def _sparse_value(self):
        """The whole row_sparse weight on the CPU (every row stored)."""
        trainer = self._trainer() if self._trainer is not None else None
        if trainer is None:
            return _sparse.all_rows(self._check_and_get(self._data, list)[0], cpu())
        out = _sparse.zeros("row_sparse", self._shape, cpu(), self._dtype)
        trainer._row_sparse_pull(self, out, _creation.arange(0, self._shape[0], ctx=cpu(),
                                                             dtype="int64"), full_idx=True)
        return _sparse.all_rows(out)

    def cast(self, dtype):
        _plans.bump_epoch()
        self._dtype = numpy.dtype(dtype).type
        self._dtype_given = dtype
        if self._data is None:
            return
        with autograd.pause():
            grads = None if self._grad_req == "null" else [_grad_buffer(arr) for arr in self._data]
            self._data = [arr.astype(dtype) for arr in self._data]
        if grads is None:
            self._init_grad()
            return
        # MXNet casts the gradient too instead of zeroing it.
        for arr, grad in zip(self._data, grads):
            cast = grad.astype(dtype) if grad.stype != "default" else NDArray(
                _raw(grad).astype(numpy.dtype(dtype)), grad.context)
            _attach_grad_buffer(arr, cast, self._grad_req)

    def var(self):
        """This parameter as a symbol variable (made once, as MXNet: its attributes keep the
        shape known at that time)."""
        if getattr(self, "_var", None) is None:
            from .. import symbol
            self._var = symbol.var(self.name, shape=self.shape, dtype=self._dtype,
                                   lr_mult=self.lr_mult, wd_mult=self.wd_mult,
                                   init=self._graph_init(), stype=self._stype)
        return self._var

    def _graph_init(self):
        """The initializer a graph's variable names (its ``__init__`` attribute)."""
        return self.init


class Constant(Parameter):
    """A parameter that is not trained (grad_req 'null') holding a fixed value."""

    def __init__(self, name, value):
        if not isinstance(value, NDArray):
            value = _creation.array(value)
        self.value = value
        super().__init__(name, grad_req="null", shape=value.shape, dtype=value.dtype,
                         init=_init.Constant(value.asnumpy()))

    def __repr__(self):
        return "Constant %s (shape=%s, dtype=%s)" % (self.name, self.shape, self.dtype)

    def _graph_init(self):
        # MXNet registers an initializer of this name for each constant and names it in the
        # graph; the value itself travels in the parameter file.
        return "Constant_%s_%d" % (self.name, id(self))

    @property
    def grad_req(self):
        return "null"

    @grad_req.setter
    def grad_req(self, req):
        if req != "null":
            warnings.warn("Constant parameter '%s' does not support grad_req other than 'null'" % self.name)
        self._grad_req = "null"


class ParameterDict:
    """An ordered name -> Parameter mapping with a common prefix."""

    def __init__(self, prefix="", shared=None):
        self._prefix = prefix
        self._params = OrderedDict()
        self._shared = shared

    def __repr__(self):
        body = "\n".join(("  " + repr(p)).replace("\n", "\n  ") for p in self._params.values())
        return "%s(\n%s\n)" % (self._prefix + " " if self._prefix else "", body)

    def __getitem__(self, key):
        return self._params[key]

    def __iter__(self):
        return iter(self._params)

    def __len__(self):
        return len(self._params)

    def __contains__(self, key):
        return key in self._params

    def items(self):
        return self._params.items()

    def keys(self):
        return self._params.keys()

    def values(self):
        return self._params.values()

    @property
    def prefix(self):
        return self._prefix

    def _get_impl(self, name):
        if name in self._params:
            return self._params[name]
        if self._shared is not None and name in self._shared._params:
            self._params[name] = self._shared._params[name]
            return self._params[name]
        return None

    def get(self, name, **kwargs) -> Parameter:
        """The parameter ``prefix + name``, created with ``kwargs`` unless it exists already.

        An existing parameter must agree with ``kwargs``: unknown (0 or -1) dimensions of either
        shape are filled from the other, attributes it lacks are set, and any other difference is
        an error, as in MXNet.
        """
        name = self._prefix + name
        param = self._get_impl(name)
        if param is None:
            param = Parameter(name, **kwargs)
            self._params[name] = param
            return param
        for key, value in kwargs.items():
            if value is None:
                continue
            existing = getattr(param, key, None)
            if existing is None:
                setattr(param, key, value)
                continue
            if key == "shape":
                value = (value,) if isinstance(value, int) else tuple(value)
                merged = _merge_shapes(value, existing)
                if merged is not None:
                    param._shape = merged
                    continue
            elif key == "dtype" and numpy.dtype(value) == numpy.dtype(existing):
                continue
            if value != existing:
                raise ParameterError(
                    "Cannot retrieve Parameter '%s' because desired attribute does not match with "
                    "stored for attribute '%s': desired '%s' vs stored '%s'."
                    % (name, key, value, existing))
        return param

    def get_constant(self, name, value=None) -> Constant:
        name = self._prefix + name
        param = self._get_impl(name)
        if param is None:
            if value is None:
                raise KeyError("No constant named '%s'. Please specify value if you want to create "
                               "a new constant." % name)
            param = Constant(name, value)
            self._params[name] = param
        return param

    def update(self, other):
        """Add ``other``'s parameters; a different Parameter under an existing name is an error."""
        # Check everything first so that a conflict leaves this dict unchanged.
        for name, param in other.items():
            existing = self._params.get(name)
            if existing is not None and existing is not param:
                raise ParameterError("Cannot update self with other because they have different "
                                     "Parameters with the same name '%s'" % name)
        for name, param in other.items():
            self._params[name] = param

    def initialize(self, init=_init.Uniform(), ctx=None, verbose=False, force_reinit=False):
        if verbose:
            init = _init.create(init)
            init.set_verbosity(verbose=verbose)
        for param in self.values():
            param.initialize(None, ctx, init, force_reinit=force_reinit)

    def zero_grad(self):
        for param in self.values():
            param.zero_grad()

    def reset_ctx(self, ctx):
        for param in self.values():
            param.reset_ctx(ctx)

    def list_ctx(self):
        seen = []
        for param in self.values():
            for c in param.list_ctx():
                if c not in seen:
                    seen.append(c)
        return seen

    def setattr(self, name, value):
        for param in self.values():
            setattr(param, name, value)

    def select(self, pattern):
        """The parameters whose names match ``pattern`` at their start (``re.match``)."""
        regex = re.compile(pattern)
        out = ParameterDict(self._prefix)
        out._params.update((k, v) for k, v in self._params.items() if regex.match(k))
        return out

    def save(self, filename, strip_prefix="", format="npz"):  # noqa: A002 - MXNet-style keyword
        """Write every parameter (averaged over its copies) to an ``.npz`` file, or with
        ``format='mxnet'`` in MXNet's binary format."""
        from .param_file import save_arrays
        arrays = {}
        for param in self.values():
            if not param.name.startswith(strip_prefix):
                raise ValueError("Prefix '%s' is to be stripped before saving, but Parameter's name "
                                 "'%s' does not start with '%s'. This may be due to your Block "
                                 "sharing parameters from other Blocks or creating child blocks "
                                 "outside 'with name_scope()'."
                                 % (strip_prefix, param.name, strip_prefix))
            arrays[param.name[len(strip_prefix):]] = param._reduce().asnumpy()
        save_arrays(filename, arrays, format)

    def load(self, filename, ctx=None, allow_missing=False, ignore_extra=False, restore_prefix="",
             cast_dtype=False, dtype_source="current"):
        """Load a file written by ``save`` (or ``Block.save_parameters`` of a leaf block)."""
        from .param_file import load_arrays
        if restore_prefix:
            for name in self.keys():
                if not name.startswith(restore_prefix):
                    raise ParameterError("restore_prefix is '%s' but Parameters name '%s' does not "
                                         "start with '%s'" % (restore_prefix, name, restore_prefix))
        self.load_dict(load_arrays(filename), ctx, allow_missing, ignore_extra, restore_prefix,
                       filename, cast_dtype, dtype_source)

    def load_dict(self, param_dict, ctx=None, allow_missing=False, ignore_extra=False,
                  restore_prefix="", filename=None, cast_dtype=False, dtype_source="current"):
        """Load from a name -> array dict (names without ``restore_prefix``)."""
        loaded = {}
        for key, value in param_dict.items():
            # MXNet's symbolic checkpoints mark arguments and auxiliary states this way.
            if key.startswith(("arg:", "aux:")):
                key = key[4:]
            loaded[restore_prefix + key] = value
        source = "file '%s'" % filename if filename is not None else "the given dict"
        _assign_loaded({name: param for name, param in self._params.items()}, loaded, source, ctx,
                       allow_missing, ignore_extra, cast_dtype, dtype_source,
                       strip=len(restore_prefix))


def _merge_shapes(desired, stored):
    """The shape both describe, filling unknown (0 or -1) dimensions; None if they conflict."""
    if len(desired) != len(stored):
        return None
    merged = []
    for want, have in zip(desired, stored):
        if want == have or want <= 0:
            merged.append(have)
        elif have <= 0:
            merged.append(want)
        else:
            return None
    return tuple(merged)


def _brief(names, limit=7):
    names = ["'%s'" % n for n in names]
    if len(names) > limit:
        names = names[:limit // 2] + ["..."] + names[-(limit // 2):]
    return ", ".join(names) or "(none)"


def _assign_loaded(params, loaded, source, ctx, allow_missing, ignore_extra, cast_dtype,
                   dtype_source, strip=0):
    """Load ``loaded`` (name -> array) into ``params`` (name -> Parameter) after checking names.

    A Parameter reachable under several names (shared between blocks) counts as present when any
    of its names was loaded, as a deduplicated save stores it once.
    """
    if not allow_missing:
        aliases = {}
        for name, param in params.items():
            aliases.setdefault(id(param), []).append(name)
        for name, param in params.items():
            if not any(alias in loaded for alias in aliases[id(param)]):
                raise ParameterError(
                    "Parameter '%s' is missing in %s, which contains parameters: %s. Set "
                    "allow_missing=True to ignore missing parameters."
                    % (name[strip:], source, _brief(k[strip:] for k in loaded)))
    if not ignore_extra:
        for name in loaded:
            if name not in params:
                raise ParameterError(
                    "Parameter '%s' loaded from %s is not present in this block, which contains "
                    "parameters %s. Set ignore_extra=True to ignore."
                    % (name[strip:], source, _brief(k[strip:] for k in params)))
    for name, value in loaded.items():
        if name in params:
            params[name]._load_init(value, ctx, cast_dtype, dtype_source)
