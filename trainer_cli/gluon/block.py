"""``Block``, ``HybridBlock`` and the sequential containers, with MXNet 1.x naming.

A block's prefix comes from a global per-class counter (``dense0_``, ``dense1_``) or, inside a
parent's ``name_scope()``, from the parent's prefix plus a per-scope counter
(``sequential0_dense0_``). Parameter names are that prefix plus the local name.
"""
from __future__ import annotations

import contextlib
import re
import threading
import warnings
from collections import OrderedDict

import numpy

from .. import initializer as _init
from .. import ndarray as _nd
from .. import symbol as _sym
from ..symbol import Symbol
from ..symbol import naming as _naming
from ..context import current_context
from ..ndarray import NDArray
from ..ndarray.interop import raw as _raw
from . import cached_plan as _plans
from .utils import HookHandle
from .parameter import (DeferredInitializationError, Parameter, ParameterDict, ParameterError,
                        _assign_loaded)

__all__ = ["Block", "HybridBlock", "Sequential", "HybridSequential", "reset_name_counters"]


class _NameCounter:
    """Global ``hint -> next index`` counter used for blocks created outside any name scope."""

    def __init__(self):
        self._counts = {}
        self._lock = threading.Lock()

    def next(self, hint):
        with self._lock:
            count = self._counts.get(hint, 0)
            self._counts[hint] = count + 1
        return "%s%d" % (hint, count)


_names = _NameCounter()


def reset_name_counters():
    """Start automatic block names from ``0`` again (useful in tests and notebooks)."""
    _names._counts.clear()


@contextlib.contextmanager
def name_counters_kept():
    """Blocks made inside take automatic names as usual; afterwards the counters are as they
    were before (a throwaway copy of a network leaves the names of later blocks alone)."""
    with _names._lock:
        saved = dict(_names._counts)
    try:
        yield
    finally:
        with _names._lock:
            _names._counts.clear()
            _names._counts.update(saved)


class _BlockScope:
    _current = threading.local()

    def __init__(self, block):
        self._block = block
        self._counter = {}
        self._old = None

    @staticmethod
    def create(prefix, params, hint):
        current = getattr(_BlockScope._current, "value", None)
        if current is None:
            if prefix is None:
                prefix = _names.next(hint) + "_"
            params = ParameterDict(prefix) if params is None else ParameterDict(params.prefix, params)
            return prefix, params
        if prefix is None:
            count = current._counter.get(hint, 0)
            prefix = "%s%d_" % (hint, count)
            current._counter[hint] = count + 1
        if params is None:
            parent = current._block.params
            params = ParameterDict(parent.prefix + prefix, parent._shared)
        else:
            params = ParameterDict(params.prefix, params)
        return current._block.prefix + prefix, params

    def __enter__(self):
        if self._block._empty_prefix:
            return self
        self._old = getattr(_BlockScope._current, "value", None)
        _BlockScope._current.value = self
        return self

    def __exit__(self, *exc):
        if not self._block._empty_prefix:
            _BlockScope._current.value = self._old
        return False


def _indent(text, spaces):
    return text.replace("\n", "\n" + " " * spaces)


class Block:
    """Base class of every layer and model: owns parameters and child blocks."""

    # Attributes a block changes as a graph is built through it (a recurrent cell's step
    # counter): recording a graph for export leaves them as they were.
    _per_graph_attrs = ()

    def __init__(self, prefix=None, params=None):
        sa = object.__setattr__
        sa(self, "_empty_prefix", prefix == "")
        prefix, params = _BlockScope.create(prefix, params, self._alias())
        sa(self, "_prefix", prefix)
        sa(self, "_params", params)
        sa(self, "_name", prefix[:-1] if prefix.endswith("_") else prefix)
        sa(self, "_scope", _BlockScope(self))
        sa(self, "_children", OrderedDict())
        sa(self, "_reg_params", {})
        sa(self, "_forward_hooks", OrderedDict())
        sa(self, "_forward_pre_hooks", OrderedDict())
        sa(self, "_active", False)

    def _alias(self):
        return type(self).__name__.lower()

    def __repr__(self):
        # MXNet's: the blocks held as attributes, in the order they were set ("Name(\n\n)" for
        # none).
        lines = ["  (%s): %s" % (key, _indent(repr(block), 2))
                 for key, block in self.__dict__.items() if isinstance(block, Block)]
        return "%s(\n%s\n)" % (type(self).__name__, "\n".join(lines))

    def __setattr__(self, name, value):
        existing = self.__dict__.get(name)
        if isinstance(existing, (Parameter, Block)) and not isinstance(value, type(existing)):
            raise TypeError("Changing attribute type for %s from %s to %s is not allowed."
                            % (name, type(existing), type(value)))
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            _plans.bump_epoch()
            if self._reg_params.get(name, value) is not value:
                raise ParameterError(
                    "Overriding Parameter attribute %s is not allowed. If you want to share "
                    "parameters between blocks, please set 'params' at Block construction instead."
                    % name)
            self._reg_params[name] = value
        object.__setattr__(self, name, value)

    # ----------------------------------------------------------------- naming and parameters
    @property
    def prefix(self):
        return self._prefix

    @property
    def name(self):
        return self._name

    @property
    def params(self) -> ParameterDict:
        return self._params

    def name_scope(self):
        return self._scope

    def _check_container_with_block(self):
        """Warn, as MXNet does, about Blocks kept in a plain list, tuple or dict attribute: they are
        not children, so their parameters are neither collected, initialized nor trained."""
        children = set(map(id, self._children.values()))

        def holds_unregistered(data):
            if isinstance(data, (list, tuple)):
                return any(holds_unregistered(item) for item in data)
            if isinstance(data, dict):
                return any(holds_unregistered(item) for item in data.values())
            return isinstance(data, Block) and id(data) not in children

        for key, value in self.__dict__.items():
            if isinstance(value, (list, tuple, dict)) and not (key.startswith("__")
                                                                or key == "_children"):
                if holds_unregistered(value):
                    warnings.warn('"{name}" is an unregistered container with Blocks. Note that '
                                  'Blocks inside the list, tuple or dict will not be registered '
                                  'automatically. Make sure to register them using '
                                  'register_child() or switching to '
                                  'nn.Sequential/nn.HybridSequential instead. '
                                  .format(name=type(self).__name__ + "." + key), stacklevel=3)

    def collect_params(self, select=None) -> ParameterDict:
        """This block's and its descendants' parameters; ``select`` is matched with ``re.match``."""
        self._check_container_with_block()
        out = ParameterDict(self._params.prefix)
        own = list(self._params.items())
        own += [(p.name, p) for p in self._reg_params.values() if p.name not in self._params]
        if select:
            pattern = re.compile(select)
            own = [(name, p) for name, p in own if pattern.match(name)]
        out.update(OrderedDict(own))
        for child in self._children.values():
            out.update(child.collect_params(select=select))
        return out

    def _collect_params_with_prefix(self, prefix=""):
        if prefix:
            prefix += "."
        out = {prefix + key: p for key, p in self._reg_params.items()}
        for name, child in self._children.items():
            out.update(child._collect_params_with_prefix(prefix + name))
        return out

    def register_child(self, block, name=None):
        if name is None:
            name = str(len(self._children))
        self._children[name] = block
        _plans.bump_epoch()

    def register_forward_pre_hook(self, hook):
        handle = _HookHandle()
        handle.attach(self._forward_pre_hooks, hook)
        return handle

    def register_forward_hook(self, hook):
        handle = _HookHandle()
        handle.attach(self._forward_hooks, hook)
        return handle

    def apply(self, fn):
        for child in self._children.values():
            child.apply(fn)
        fn(self)
        return self

    def initialize(self, init=_init.Uniform(), ctx=None, verbose=False, force_reinit=False):
        self.collect_params().initialize(init, ctx, verbose, force_reinit)

    def hybridize(self, active=True, **kwargs):
        """Hybridize the HybridBlocks inside (see ``HybridBlock.hybridize``); a plain Block's
        own ``forward`` runs as written."""
        object.__setattr__(self, "_active", active)
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    def cast(self, dtype):
        for child in self._children.values():
            child.cast(dtype)
        seen = set()
        for param in list(self._params.values()) + list(self._reg_params.values()):
            if id(param) not in seen:
                seen.add(id(param))
                param.cast(dtype)

    def zero_grad(self):
        self.collect_params().zero_grad()

    def reset_ctx(self, ctx):
        self.collect_params().reset_ctx(ctx)

    # ----------------------------------------------------------------- saving and loading
    def save_parameters(self, filename, deduplicate=False, format="npz"):  # noqa: A002
        """Save parameters under their structural names (``0.weight``): an ``.npz`` file, or with
        ``format='mxnet'`` MXNet's binary format, which real MXNet's ``load_parameters`` reads.

        With ``deduplicate``, a parameter shared by several blocks is stored once, under the last
        of its names (as MXNet does); ``load_parameters`` accepts any one of them.
        """
        from .param_file import save_arrays
        save_arrays(filename, self.parameter_arrays(deduplicate, copy=False), format)

    def parameter_arrays(self, deduplicate=False, copy=True) -> dict:
        """``{structural name: host array}`` of every parameter: what ``save_parameters`` writes.
        Copies, which can be written while training goes on; with ``copy=False`` the live host
        arrays where there are such, for a write that ends before they change."""
        params = self._collect_params_with_prefix()
        if deduplicate:
            last_name = {id(param): key for key, param in params.items()}
            params = {key: param for key, param in params.items() if last_name[id(param)] == key}
        return {key: _host(param._reduce(), copy) for key, param in params.items()}

    def load_parameters(self, filename, ctx=None, allow_missing=False, ignore_extra=False,
                        cast_dtype=False, dtype_source="current"):
        """Load a file written by ``save_parameters`` (structural names), here or by real MXNet
        (its binary ``.params`` format is read without MXNet).

        A file whose names contain no ``.`` is MXNet's older layout, names relative to this block's
        prefix (``ParameterDict.save(strip_prefix=block.prefix)``); a file of full names
        (``dense0_weight``, from ``collect_params().save``) is accepted as well.
        """
        from .param_file import load_arrays
        loaded = load_arrays(filename)
        params = self._collect_params_with_prefix()
        if not loaded and not params:
            return
        if not any(key in params for key in loaded) and not any("." in key for key in loaded):
            full = dict(self.collect_params().items())
            restored = {self.prefix + key: value for key, value in loaded.items()}
            if not any(name in full for name in restored) and any(name in full for name in loaded):
                restored = loaded
            params, loaded = full, restored
        _assign_loaded(params, loaded, "file '%s'" % filename, ctx, allow_missing, ignore_extra,
                       cast_dtype, dtype_source)

    save_params = save_parameters
    load_params = load_parameters

    # ----------------------------------------------------------------- calling
    def __call__(self, *args):
        if self._forward_pre_hooks:
            for hook in list(self._forward_pre_hooks.values()):
                hook(self, args)
        try:
            out = self.forward(*args)
        except Exception as exc:
            _name_failed_block(exc, self, args)
            raise
        if self._forward_hooks:
            for hook in list(self._forward_hooks.values()):
                hook(self, args, out)
        return out

    def forward(self, *args):
        raise NotImplementedError("%s must implement forward" % type(self).__name__)

    def summary(self, *inputs):
        """Print MXNet's per-layer table (output shape and parameter count of every block that
        ran) from one forward pass over ``inputs``; the block must be initialized."""
        from .summary import print_summary
        print_summary(self, inputs)


class _HookHandle(HookHandle):
    """A block's hook handle: a hybridized block with hooks runs imperatively, so attaching or
    detaching one makes the cached plans look again."""

    def attach(self, hooks_dict, hook):
        super().attach(hooks_dict, hook)
        _plans.bump_epoch()

    def detach(self):
        super().detach()
        _plans.bump_epoch()


_tracing = threading.local()


class HybridBlock(Block):
    """A block written as ``hybrid_forward(F, x, *args, **params)`` with ``F`` the ``nd`` module,
    or the ``symbol`` module when called with Symbols (which records its graph for ``export``).

    Parameters whose shape depends on the input are resolved at the first call through
    ``infer_shape``, which such layers implement. The first call after ``hybridize()`` runs
    imperatively and records the block's graph, as MXNet builds its cached graph then, so that
    ``export`` writes what MXNet would; later calls run from a cached plan (``cached_plan``),
    which gives the same bits as the imperative path, or imperatively where the block is one a
    plan cannot hold.
    """

    # How a cached plan holds this class's layers (see ``cached_plan``); None: it cannot.
    _plan_step = None

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        object.__setattr__(self, "_cached_graph", None)
        object.__setattr__(self, "_plan", None)
        object.__setattr__(self, "_plan_epoch", -1)

    def hybridize(self, active=True, **kwargs):
        """Run later calls from a cached plan (``active=False``: imperatively again). MXNet's
        flags (``static_alloc``, ``static_shape``, ...) are accepted; the results do not depend
        on them. The graph ``export`` writes is recorded again at the next call."""
        object.__setattr__(self, "_cached_graph", None)
        object.__setattr__(self, "_plan", None)
        _plans.bump_epoch()
        super().hybridize(active, **kwargs)

    def __call__(self, x, *args):
        if isinstance(x, Symbol):
            # Recording a graph: hooks see only the eager calls, whose numbers they may count.
            return self.forward(x, *args)
        if self._active and not getattr(_tracing, "inside", False):
            if getattr(self, "_cached_graph", None) is None:
                # The outermost hybridized block records its graph once; the blocks it calls
                # are part of it. This call runs imperatively (deferred shapes are found here).
                self._record_graph((x,) + args)
                _tracing.inside = True
                try:
                    return _as_lists(super().__call__(x, *args))
                finally:
                    _tracing.inside = False
            if not args and type(x) is NDArray:
                plan = self._plan if self._plan_epoch == _plans.epoch.value else self._replan()
                if plan is not None:
                    # The blocks a step calls (a layer's activation) run plainly inside it.
                    _tracing.inside = True
                    try:
                        out = plan.run(x)
                        return out if type(out) is NDArray else _as_lists(out)
                    finally:
                        _tracing.inside = False
            return _as_lists(super().__call__(x, *args))
        return super().__call__(x, *args)

    def _takes_relu(self):
        """Whether an ``Activation('relu')`` after this layer in a sequence may run inside it
        (``_relu_op``): layers whose op has a ReLU-fused form say so."""
        return False

    def _forward_relu(self, x, params=None):
        """``relu(self(x))`` as the layer's one op, ``_relu_op(x, *arrays)`` on its own
        parameters' arrays in their order (``params``: a cached plan's); None while they wait
        for their shapes (the sequence then calls both layers)."""
        if params is None:
            try:
                params = [p.data(x.context) for p in self._reg_params.values()]
            except DeferredInitializationError:
                return None
        return self._relu_op(x, *params)

    def _replan(self):
        """The cached plan of this block for the current epoch, or None where it has none."""
        now = _plans.epoch.value
        try:
            plan = _plans.build(self)
        except _plans.Unplannable:
            plan = None
        object.__setattr__(self, "_plan", plan)
        object.__setattr__(self, "_plan_epoch", now)
        return plan

    def _record_graph(self, args):
        try:
            object.__setattr__(self, "_cached_graph", self._trace(args))
        except Exception as exc:  # noqa: BLE001 - the eager forward still runs; export reports it
            # Without its traceback, which would keep this call's arrays alive.
            object.__setattr__(self, "_cached_graph", exc.with_traceback(None))

    def _trace(self, args):
        """(input variables, output symbol) of this block called on Symbols standing for ``args``."""
        flat, nesting = _flatten_arrays(list(args))
        if not all(a is None or isinstance(a, NDArray) for a in flat):
            raise TypeError("export records blocks called with NDArrays (or nested lists of "
                            "them) only, got %s" % ", ".join(type(a).__name__ for a in flat))
        # MXNet's names: one input is ``data``, several (nested lists flattened) data0, data1...
        names = ["data"] if len(flat) == 1 else ["data%d" % i for i in range(len(flat))]
        inputs = [_sym.var(name) for name in names]
        kept = []
        self.apply(lambda b: kept.append((b, [(a, getattr(b, a)) for a in b._per_graph_attrs]))
                   if b._per_graph_attrs else None)
        try:
            with _naming.NameManager():
                out = self(*_regroup_arrays(inputs, nesting))
        finally:
            # The eager calls go on from where they were, as if nothing had been recorded.
            for block, values in kept:
                for attr, value in values:
                    object.__setattr__(block, attr, value)
        outs = _flatten_arrays(out)[0] if isinstance(out, (list, tuple)) else [out]
        if not all(isinstance(o, Symbol) for o in outs):
            raise TypeError("%s.hybrid_forward returned %s, not Symbols, when called with Symbols"
                            % (type(self).__name__, ", ".join(type(o).__name__ for o in outs)))
        return inputs, _sym.Group(outs)

    def export(self, path, epoch=0, remove_amp_cast=True):
        """Write ``path-symbol.json`` and ``path-%04d.params`` (epoch), which MXNet's
        ``gluon.SymbolBlock.imports`` (and this library's) loads. The graph is the one recorded
        at the first call after ``hybridize()``; without one (MXNet refuses) it is recorded now
        for one input, ``data``."""
        graph = getattr(self, "_cached_graph", None)
        if isinstance(graph, Exception):
            raise RuntimeError("%s cannot be exported: recording its graph failed: %s"
                               % (type(self).__name__, graph)) from graph
        if graph is None:
            # MXNet refuses here; the graph of a one-input block is recorded now instead.
            graph = self._trace((None,))
        inputs, out = graph
        from .param_file import save_arrays
        input_names = {sym.name for sym in inputs}
        params = dict(self.collect_params().items())
        arg_names = set(out.list_arguments())
        arrays = {}
        for name in out.list_inputs():
            if name in input_names:
                continue
            param = params.get(name)
            if param is None:
                raise RuntimeError("%s cannot be exported: its graph uses %r, which is not one of "
                                   "its parameters" % (type(self).__name__, name))
            kind = "arg" if name in arg_names else "aux"
            arrays["%s:%s" % (kind, name)] = param._reduce().asnumpy()
        out.save("%s-symbol.json" % path)
        save_arrays("%s-%04d.params" % (path, epoch), arrays, format="mxnet")

    def forward(self, x, *args):
        if isinstance(x, Symbol):
            return self._symbol_forward(x, *args)
        if not isinstance(x, NDArray) and not _holds_array((x,) + args):
            raise ValueError("In HybridBlock, there must be one NDArray or one Symbol in the "
                             "input. Please check the type of the args.\n")
        reg_params = self._reg_params
        if not reg_params:
            return self.hybrid_forward(_nd, x, *args)
        ctx = x.context if isinstance(x, NDArray) else current_context()
        try:
            params = {name: p.data(ctx) for name, p in reg_params.items()}
        except DeferredInitializationError:
            graph = None
            if not getattr(_tracing, "inside", False):
                # MXNet infers the shapes from this block's graph, recorded now: its variables
                # keep the shapes unknown then (0) and its auxiliary states count the recording,
                # in what export writes later. Recorded here too, for the same files; the
                # default ``infer_shape`` infers through this very graph.
                try:
                    graph = self._trace((x,) + args)
                except Exception:  # noqa: BLE001 - only the variables' attributes depend on it
                    pass
            for p in self.collect_params().values():
                p.var()
            object.__setattr__(self, "_shape_graph", graph)
            try:
                self.infer_shape(x, *args)
            finally:
                self.__dict__.pop("_shape_graph", None)
            for p in list(self._params.values()) + list(self._reg_params.values()):
                p._finish_deferred_init()
            params = {name: p.data(ctx) for name, p in self._reg_params.items()}
        return self.hybrid_forward(_nd, x, *args, **params)

    def _symbol_forward(self, x, *args):
        params = {name: p.var() for name, p in self._reg_params.items()}
        if self._empty_prefix:
            return self.hybrid_forward(_sym, x, *args, **params)
        with self.name_scope(), _naming.Prefix(self.prefix):
            return self.hybrid_forward(_sym, x, *args, **params)

    def infer_shape(self, *args):
        """Fill in the unknown shapes of this block's parameters (and its children's) from the
        inputs' shapes, as MXNet does: through this block's graph, recorded on ``args``, each
        operator's shape rule (``FullyConnected``'s weight is ``(num_hidden, in_units)``, a
        Python operator's prop gives its ``infer_shape``, ...), forward and backward. A shape
        that stays unknown raises ``DeferredInitializationError`` (a ``ValueError`` too, as
        MXNet's) naming the parameters. Layers with deferred shapes override it with their own,
        faster rule."""
        from . import _shape_inference
        graph = self.__dict__.get("_shape_graph")
        if graph is None:
            graph = _shape_inference.trace(self, args)
        _shape_inference.block_shapes(self, graph, args)

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError("%s must implement hybrid_forward" % type(self).__name__)



def _as_lists(out):
    """A hybridized block's outputs as MXNet's cached graph hands them back: several as a list
    (nested ones too), one as itself."""
    if type(out) is tuple or type(out) is list:
        return [_as_lists(o) for o in out]
    return out


def _flatten_arrays(args):
    """The leaves of ``args`` (lists and tuples nested to any depth) in order, and the nesting
    to rebuild it from them (an int for a leaf, a list of nestings for a list)."""
    if not isinstance(args, (list, tuple)):
        return [args], 0
    flat, nesting = [], []
    for item in args:
        leaves, shape = _flatten_arrays(item)
        flat.extend(leaves)
        nesting.append(shape)
    return flat, nesting


def _regroup_arrays(flat, nesting):
    """``flat`` put back into ``nesting`` (what ``_flatten_arrays`` gave)."""
    leaves = iter(flat)

    def build(shape):
        return next(leaves) if shape == 0 else [build(part) for part in shape]
    return build(nesting)


def _block_call_text(block, args) -> str:
    """``'dense0' (Dense; input (16, 6); weight (8, 7), bias (8,))``: a block, the shapes it was
    called with and its own parameters' shapes."""
    parts = ["input " + ", ".join(str(tuple(a.shape)) for a in args if hasattr(a, "shape"))]
    own = ["%s %s" % (key, tuple(p.shape) if p.shape is not None else "(unknown)")
           for key, p in block._reg_params.items()]
    if own:
        parts.append(", ".join(own))
    return "%r (%s; %s)" % (block.name, type(block).__name__, "; ".join(parts))


def _name_failed_block(exc, block, args):
    """The innermost block names itself on the error (outer blocks leave it), so that a runner
    can say which layer failed on what shapes; the error itself is unchanged."""
    if getattr(exc, "failed_block", None) is None:
        with contextlib.suppress(Exception):
            exc.failed_block = _block_call_text(block, args)


def _holds_array(args):
    for arg in args:
        if isinstance(arg, NDArray) or (isinstance(arg, (list, tuple)) and _holds_array(arg)):
            return True
    return False


def _sequential_forward(self, x, *args):
    if self._steps_epoch != _plans.epoch.value:
        object.__setattr__(self, "_steps", _relu_fused_steps(self))
        object.__setattr__(self, "_steps_epoch", _plans.epoch.value)
    for block, relu in self._steps:
        if relu is not None and not args and type(x) is NDArray:
            # A BatchNorm, a convolution or a Dense and the ReLU after it as one op (one pass
            # less each way), with the numbers and gradients of the two.
            try:
                out = block._forward_relu(x)
            except Exception as exc:
                _name_failed_block(exc, block, (x,))
                raise
            if out is not None:
                x = out
                continue
        for each in (block,) if relu is None else (block, relu):
            x = each(x, *args)
            args = ()
            if isinstance(x, (tuple, list)):
                args = tuple(x[1:])
                x = x[0]
    if args:
        x = (x,) + tuple(args)
    return x


def _hooked(block):
    return bool(block._forward_pre_hooks or block._forward_hooks)


def _relu_fused_steps(seq):
    """``seq``'s children as ``(block, relu)`` steps, where ``relu`` is the ReLU that follows a
    block able to apply it in its own pass (``_takes_relu``, ``_forward_relu``: BatchNorm, the
    convolutions, Dense) and neither has hooks (which must see each output); ``(block, None)``
    for the other children. A cached plan takes the same pairs; ``_forward_relu`` giving None
    (shapes not known yet), or an input other than one NDArray, runs both layers."""
    children = list(seq._children.values())
    steps, i = [], 0
    while i < len(children):
        block = children[i]
        relu = children[i + 1] if i + 1 < len(children) else None
        if relu is not None and getattr(block, "_takes_relu", _no)() \
                and getattr(relu, "_plain_relu", _no)() and not _hooked(block) \
                and not _hooked(relu):
            steps.append((block, relu))
            i += 2
        else:
            steps.append((block, None))
            i += 1
    return steps


def _no():
    return False


class _SequentialMixin:
    _steps = None           # _relu_fused_steps, made again when the plans' epoch moves
    _steps_epoch = -1

    def add(self, *blocks):
        for block in blocks:
            self.register_child(block)

    def __getitem__(self, key):
        layers = list(self._children.values())[key]
        if not isinstance(layers, list):
            return layers
        net = type(self)(prefix=self._prefix)
        with net.name_scope():
            net.add(*layers)
        return net

    def __len__(self):
        return len(self._children)

    def __repr__(self):
        lines = ["  (%s): %s" % (key, _indent(repr(block), 2))
                 for key, block in self._children.items()]
        return "%s(\n%s\n)" % (type(self).__name__, "\n".join(lines))

    forward = _sequential_forward


class Sequential(_SequentialMixin, Block):
    """Blocks applied one after another."""

    def __init__(self, prefix=None, params=None):
        Block.__init__(self, prefix=prefix, params=params)


class HybridSequential(_SequentialMixin, HybridBlock):
    """Hybrid blocks applied one after another."""

    _plan_step = "sequence"

    def __init__(self, prefix=None, params=None):
        HybridBlock.__init__(self, prefix=prefix, params=params)

    def forward(self, x, *args):
        if isinstance(x, Symbol) and not self._empty_prefix:
            # As MXNet's hybrid_forward: what the children make outside their own scopes (an
            # RNN layer's begin states) is named in this one.
            with self.name_scope(), _naming.Prefix(self.prefix):
                return _sequential_forward(self, x, *args)
        return _sequential_forward(self, x, *args)


def _host(array, copy):
    data = _raw(array)
    return data if not copy and type(data) is numpy.ndarray else array.asnumpy()
