"""``nd.Custom``: runs an operator written in Python (``mx.operator.register``) imperatively,
with the calls and arguments MXNet 1.9.1's ``src/operator/custom/custom.cc`` makes.

Each call makes the registered ``CustomOpProp`` from the keyword arguments (as strings), asks it
for its arguments, outputs and auxiliary states, its backward dependencies, shapes and types,
creates the ``CustomOp`` (``create_operator(ctx, shapes, type codes)``) and runs its ``forward``
on new arrays sharing the inputs' memory, outputs allocated from ``infer_shape`` and
``infer_type``, with recording paused and ``is_train`` = ``autograd.is_training()``. Under
``autograd.record()`` the outputs get one tape node whose backward calls the op's ``backward``
once, with every output's gradient. The Python calls run in the caller's thread (MXNet runs
them on a worker thread and hands errors back through the engine): an exception in any of them
propagates at once as ``operator.CustomOpError`` naming the operator and the method.

Where MXNet leaves memory uninitialised, arrays here are zeros: an output ``forward`` does not
write, and the ``in_grad`` buffers ``backward`` gets (MXNet hands it the variable's gradient
buffer, old contents and all). The op's own array code decides where it runs (NumPy or CuPy,
or ``asnumpy()`` on the host, as MXNet's examples do).
"""
from __future__ import annotations

import numpy

from .. import autograd as _ag
from .. import operator as _operator
from ..base import MXNetError, ShapeError
from ..context import Context, current_context
from ..operator import CustomOpError
from .ndarray import NDArray, _recorded, _recording_for, _wrap

__all__ = ["Custom"]

# MXNet's type codes (create_operator's in_dtypes): mshadow's kFloat32 = 0, ...
_TYPE_CODES = {numpy.dtype(numpy.float32): 0, numpy.dtype(numpy.float64): 1,
               numpy.dtype(numpy.float16): 2, numpy.dtype(numpy.uint8): 3,
               numpy.dtype(numpy.int32): 4, numpy.dtype(numpy.int8): 5,
               numpy.dtype(numpy.int64): 6, numpy.dtype(numpy.bool_): 7}


class CustomArgumentError(MXNetError, ValueError):
    """A call of ``nd.Custom`` that cannot run (MXNet: an ``MXNetError`` from its checks)."""


class _NotDeclared:
    """What ``backward`` gets for an array its prop's ``declare_backward_dependency`` did not
    list (every ``out_grad`` when ``need_top_grad=False``). MXNet passes an empty array whose
    shape is unknown and fails on first use; this one says why."""

    __slots__ = ("_what",)
    shape = ()

    def __init__(self, what):
        self._what = what

    def _fail(self, *args, **kwargs):
        raise CustomOpError(
            "%s is not available in backward: the prop's declare_backward_dependency does not "
            "list it (need_top_grad=False leaves out every out_grad)" % self._what)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        self._fail()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __pow__ = __neg__ = __getitem__ = __array__ = _fail
    __float__ = __bool__ = __len__ = __iter__ = _fail

    def __repr__(self):
        return "<%s: not declared for backward>" % self._what


class _OutGrads:
    """The gradients of a multi-output op's outputs (None: none reached that output), as one
    tape value: the tape adds what reaches the same node, and adding these adds per output."""

    __slots__ = ("parts",)

    def __init__(self, parts):
        self.parts = parts

    def __add__(self, other):
        return _OutGrads([a if b is None else b if a is None else a + b
                          for a, b in zip(self.parts, other.parts)])


class _Scope:
    """Recording off, training as given, ``ctx`` current: the state MXNet's custom-op thread
    sets around a forward or backward call."""

    def __init__(self, ctx, training):
        # A fresh Context: ``with ctx`` keeps the previous one on the object, and the op may
        # call nd.Custom (entering the same context) again.
        self._ctx = Context(ctx.device_type, ctx.device_id)
        self._training = training

    def __enter__(self):
        self._prev = _ag.set_recording(False)
        self._prev_training = (_ag.set_training(self._training)
                               if self._training is not None else None)
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        if self._training is not None:
            _ag.set_training(self._prev_training)
        _ag.set_recording(self._prev)
        return False


def _call(op_type, what, fn, *args, **kwargs):
    """``fn(*args, **kwargs)``, a method of the user's prop or op: what it raises comes back
    as ``CustomOpError`` naming the operator and the method, the original as its cause."""
    try:
        return fn(*args, **kwargs)
    except CustomOpError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised with the operator's name, chained
        raise CustomOpError("Custom operator %r: %s raised %s: %s"
                            % (op_type, what, type(exc).__name__, exc)) from exc


def _names(op_type, prop, method):
    names = _call(op_type, method, getattr(prop, method))
    names = list(names)
    if not all(isinstance(n, str) for n in names):
        raise CustomOpError("Custom operator %r: %s must return a list of strings, got %r"
                            % (op_type, method, names))
    return names


def _split(op_type, what, ret, counts):
    """(inputs, outputs, aux) from what infer_shape/infer_type returned, checked as MXNet does."""
    try:
        parts = list(ret)
    except TypeError:
        parts = None
    if parts is None or len(parts) not in (2, 3):
        raise CustomOpError("Custom operator %r: infer_%s must return 2 or 3 lists"
                            % (op_type, what))
    if len(parts) == 2:
        parts.append([])
    parts = [list(p) for p in parts]
    for part, count, kind in zip(parts, counts, ("input", "output", "aux state")):
        if len(part) != count:
            raise CustomOpError(
                "Custom operator %r: Infer%s Error: expecting %d entries in returned %s %ss, "
                "got %d." % (op_type, "Shape" if what == "shape" else "Type", count, kind,
                             what, len(part)))
    return parts


def _shape(op_type, value, where):
    try:
        shape = tuple(int(d) for d in value)
    except (TypeError, ValueError):
        raise CustomOpError("Custom operator %r: infer_shape gave %r for %s, not a shape"
                            % (op_type, value, where)) from None
    if any(d < 0 for d in shape):
        raise CustomOpError("Custom operator %r: infer_shape gave the negative shape %s for %s"
                            % (op_type, shape, where))
    return shape


def _dtype(op_type, value, where):
    try:
        return numpy.dtype(value)
    except TypeError:
        raise CustomOpError("Custom operator %r: infer_type gave %r for %s, not a dtype"
                            % (op_type, value, where)) from None


def _mx_shape(shape):
    return "[%s]" % ",".join(str(d) for d in shape)


class _Op:
    """One call's prop, lists and backward dependencies (MXNet's ``AttrParser``)."""

    def __init__(self, op_type, kwargs):
        prop_cls = _operator.find_prop(op_type)
        if prop_cls is None:
            raise CustomArgumentError("Custom: Cannot find custom operator %s" % op_type)
        self.op_type = op_type
        # MXNet hands every keyword argument to the prop as a string (str() of the value).
        attrs = {str(k): str(v) for k, v in kwargs.items()}
        self.prop = _call(op_type, "%s(**%r)" % (prop_cls.__name__, attrs), prop_cls, **attrs)
        self.arguments = _names(op_type, self.prop, "list_arguments")
        self.outputs = _names(op_type, self.prop, "list_outputs")
        self.auxs = _names(op_type, self.prop, "list_auxiliary_states")
        n_out, n_in = len(self.outputs), len(self.arguments)
        ids = list(range(2 * n_out + n_in))
        deps = _call(op_type, "declare_backward_dependency",
                     self.prop.declare_backward_dependency, ids[:n_out],
                     ids[n_out:n_out + n_in], ids[n_out + n_in:])
        self.deps = frozenset(int(d) for d in deps)


def Custom(*data, op_type=None, name=None, out=None, **kwargs):  # noqa: N802 - MXNet's name
    """Apply the custom operator registered as ``op_type`` (``mx.operator.register``).

    ``data``: its arguments then its auxiliary states, in the order of the prop's
    ``list_arguments`` and ``list_auxiliary_states``; the other keyword arguments reach the
    prop's constructor as strings. Returns the output, or a list when the op has several.
    ``name`` (a graph node's name) is ignored; ``out`` receives the outputs (an array or a list).
    Auxiliary states are updated in place by the op; they get no gradient.
    """
    if op_type is None:
        raise CustomArgumentError("Custom: Required argument `op_type` is missing.")
    op_type = str(op_type)
    spec = _Op(op_type, kwargs)
    prop = spec.prop
    n_in, n_out, n_aux = len(spec.arguments), len(spec.outputs), len(spec.auxs)
    if len(data) != n_in + n_aux:
        raise CustomArgumentError(
            "Custom operator %r takes %d inputs (arguments %s, then auxiliary states %s), got %d "
            "(MXNet: Operator Custom expects %d inputs, but got %d instead)"
            % (op_type, n_in + n_aux, spec.arguments, spec.auxs, len(data), n_in + n_aux,
               len(data)))
    for i, x in enumerate(data):
        if not isinstance(x, NDArray):
            raise TypeError("Custom operator %r: input %d (%s) must be an NDArray, got %s"
                            % (op_type, i, (spec.arguments + spec.auxs)[i], type(x).__name__))
    args, auxs = list(data[:n_in]), list(data[n_in:])
    ctx = data[0]._ctx if data else current_context()
    for i, x in enumerate(data):
        if x._ctx != ctx:
            raise CustomArgumentError("Custom operator %r: input %d is on %s, input 0 on %s; all "
                                      "inputs must be on one device" % (op_type, i, x._ctx, ctx))
    names = spec.arguments + spec.auxs

    # Shapes (MXNet's InferShape: the prop sees the arguments' shapes).
    ret = _call(op_type, "infer_shape", prop.infer_shape, [list(x.shape) for x in args])
    ishapes, oshapes, ashapes = _split(op_type, "shape", ret, (n_in, n_out, n_aux))
    for i, (x, s) in enumerate(zip(data, ishapes + ashapes)):
        s = _shape(op_type, s, "input %r" % names[i])
        if s != x.shape:
            raise ShapeError("Custom operator %r: input %r has shape %s but infer_shape gives %s "
                             "(MXNet: Shape inconsistent, Provided = %s, inferred shape=%s)"
                             % (op_type, names[i], x.shape, s, _mx_shape(x.shape), _mx_shape(s)))
    oshapes = [_shape(op_type, s, "output %r" % spec.outputs[i]) for i, s in enumerate(oshapes)]

    # Types (the prop sees NumPy scalar types, numpy.float32, as MXNet's infer_type does).
    ret = _call(op_type, "infer_type", prop.infer_type, [x._data.dtype.type for x in args])
    itypes, otypes, atypes = _split(op_type, "type", ret, (n_in, n_out, n_aux))
    for i, (x, t) in enumerate(zip(data, itypes + atypes)):
        t = _dtype(op_type, t, "input %r" % names[i])
        if t != x._data.dtype:
            raise CustomArgumentError("Custom operator %r: input %r has dtype %s but infer_type "
                                      "gives %s (MXNet: Type inconsistent, Provided = %s, "
                                      "inferred type = %s)" % (op_type, names[i], x._data.dtype,
                                                               t, x._data.dtype, t))
    otypes = [_dtype(op_type, t, "output %r" % spec.outputs[i]) for i, t in enumerate(otypes)]

    stypes = [x.stype for x in data]
    if any(s != "default" for s in stypes):
        ret = _call(op_type, "infer_storage_type", prop.infer_storage_type, stypes[:n_in])
        if any(s != "default" for s in list(ret)[1]):
            raise NotImplementedError("Custom operator %r: sparse outputs (infer_storage_type "
                                      "gives %s) are not supported here" % (op_type, list(ret)[1]))

    op = _call(op_type, "create_operator", prop.create_operator,
               Context(ctx.device_type, ctx.device_id), [list(x.shape) for x in data],
               [_TYPE_CODES.get(x._data.dtype, -1) for x in data])
    if op is None or not callable(getattr(op, "forward", None)):
        raise CustomOpError("Custom operator %r: create_operator returned %r, not a CustomOp"
                            % (op_type, op))

    with ctx.device_scope():
        raw_outs = [ctx.xp.zeros(s, dtype=t) for s, t in zip(oshapes, otypes)]
    out_nds = [_wrap(r, ctx) for r in raw_outs]
    out_list = list(out_nds)
    training = _ag.is_training()
    with _Scope(ctx, training):
        _call(op_type, "forward", op.forward, is_train=int(training), req=["write"] * n_out,
              in_data=[_view(x) for x in args], out_data=out_list,
              aux=[_view(a) for a in auxs])
    _check_kept(op_type, "forward", "out_data", out_list, out_nds)
    raw_outs = [o._data for o in out_nds]

    if _recording_for(*args):
        raw_args = [x._data for x in args]
        backward = _backward_fn(spec, op, ctx, raw_args, raw_outs, auxs)
        results = _record(raw_outs, ctx, tuple(args), backward, op_type)
    else:
        results = [_wrap(r, ctx) for r in raw_outs]
    if out is not None:
        targets = [out] if isinstance(out, NDArray) else list(out)
        if len(targets) != n_out:
            raise CustomArgumentError("Custom operator %r: out has %d arrays for %d outputs"
                                      % (op_type, len(targets), n_out))
        for target, value in zip(targets, results):
            target[:] = value
        return out
    return results[0] if n_out == 1 else results


def _view(x):
    """A new array on ``x``'s memory, outside the graph (MXNet's callbacks get new handles)."""
    return x if x._sparse else _wrap(x._data, x._ctx)


def _check_kept(op_type, method, what, given, originals):
    for i, (now, before) in enumerate(zip(given, originals)):
        if now is not before:
            raise CustomOpError(
                "Custom operator %r: %s replaced %s[%d] instead of writing into it (MXNet "
                "ignores the new array); write with self.assign(%s[%d], req[%d], value)"
                % (op_type, method, what, i, what, i, i))
    if len(given) != len(originals):
        raise CustomOpError("Custom operator %r: %s changed the length of %s"
                            % (op_type, method, what))


def _zeros_like(raw, ctx):
    with ctx.device_scope():
        return ctx.xp.zeros(raw.shape, dtype=raw.dtype)


def _backward_fn(spec, op, ctx, raw_args, raw_outs, auxs):
    """``backward(out_grads, needs)`` -> one raw gradient (or None) per argument: the op's
    ``backward`` with the arrays and ``req`` MXNet's ``BackwardEx`` gives it."""
    op_type, deps = spec.op_type, spec.deps
    n_out, n_in = len(spec.outputs), len(spec.arguments)

    def backward(grads, needs):
        out_grad = []
        for i, g in enumerate(grads):
            if i not in deps:
                out_grad.append(_NotDeclared("Custom operator %r: out_grad[%d]" % (op_type, i)))
            else:
                out_grad.append(_wrap(_zeros_like(raw_outs[i], ctx) if g is None else g, ctx))
        in_data = [_wrap(r, ctx) if n_out + j in deps else
                   _NotDeclared("Custom operator %r: in_data[%d]" % (op_type, j))
                   for j, r in enumerate(raw_args)]
        out_data = [_wrap(r, ctx) if n_out + n_in + k in deps else
                    _NotDeclared("Custom operator %r: out_data[%d]" % (op_type, k))
                    for k, r in enumerate(raw_outs)]
        in_grad = [_wrap(_zeros_like(r, ctx), ctx) for r in raw_args]
        given = list(in_grad)
        req = ["write" if need else "null" for need in needs]
        # The auxiliary states as they are now (forward may have updated them), as MXNet reads
        # the same arrays when backward runs.
        aux = [_view(a) for a in auxs]
        with _Scope(ctx, None):
            _call(op_type, "backward", op.backward, req=req, out_grad=out_grad, in_data=in_data,
                  out_data=out_data, in_grad=given, aux=aux)
        _check_kept(op_type, "backward", "in_grad", given, in_grad)
        return tuple(g._data if need else None for g, need in zip(in_grad, needs))
    return backward


def _record(raw_outs, ctx, args, backward, op_type):
    """The outputs as recorded arrays whose backward runs ``backward`` once for all of them."""
    # What autograd.grad(create_graph=True) names when it meets the node (it cannot
    # differentiate a Python backward again).
    qualname = "nd.Custom(op_type=%r).<locals>.vjp" % op_type
    if len(raw_outs) == 1:
        def vjp(g, needs):
            return backward([g], needs)
        vjp.__qualname__ = qualname
        return [_recorded(raw_outs[0], ctx, args, vjp)]
    n = len(raw_outs)

    def hub_vjp(g, needs):
        return backward(g.parts, needs)
    hub_vjp.__qualname__ = qualname
    # One node (the hub) over the arguments; each output is a node over the hub handing it its
    # gradient in its slot, so that the tape sums them and the op's backward runs once.
    hub = _recorded(raw_outs[0], ctx, args, hub_vjp)

    def place(k):
        def vjp(g, needs):
            parts = [None] * n
            parts[k] = g
            return (_OutGrads(parts),)
        vjp.__qualname__ = qualname
        return vjp
    return [_recorded(r, ctx, (hub,), place(k)) for k, r in enumerate(raw_outs)]
