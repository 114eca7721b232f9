"""The one dispatch point between the ``nd`` operators and array storage (MXNet's storage-type
inference and fallback, semantics §10).

Every exported ``nd`` function, every ``NDArray`` method and Python operator that a row_sparse or
csr array can reach is decided here, by one table (:data:`RULES`), per operator:

- **sparse kernel**: a kernel on the stored values runs (``dot(csr, w)``, ``rsp + rsp``, ...);
- **keeps sparse**: an elementwise operator with f(0) = 0 runs on the stored values only, and
  the result keeps the input's storage and stored positions (``square``, ``x * 2``, ...);
- **densifies** (every operator the table does not name): the sparse inputs are made dense
  (recorded, so that their gradient flows back) and the dense operator runs, as MXNet's storage
  fallback does; with ``MXNET_STORAGE_FALLBACK_LOG_VERBOSE=1`` MXNet's warning is logged;
- **refused**: MXNet 1.9.1 raises for this storage, and so does this.

Which operator does what, per storage, is the table in docs/compat.md, generated from
:func:`describe`. The dense path pays one type test per argument in the ``nd`` functions and
nothing in the methods: ``NDArray`` keeps its methods, and the sparse classes get their own.

Outside this module, a sparse array cannot reach a dense operator with its stored values:
``_data`` of a sparse array *is* its dense form (see ``sparse.BaseSparseNDArray``).
"""
from __future__ import annotations

import functools
import inspect
import numbers
import operator

import numpy

from . import fallback_log as _fallback
from . import more_ops as _more_ops
from . import ndarray as _core
from . import ops as _ops
from . import sparse as _sp
from .ndarray import NDArray, _recorded, _recording_for, _wrap
from .out_arg import write_out

__all__ = ["RULES", "Rule", "exported", "install_methods", "describe", "densified"]

_SPARSE_TYPES = frozenset((_sp.RowSparseNDArray, _sp.CSRNDArray))
_STYPES = ("row_sparse", "csr")


def _is_sparse(x) -> bool:
    return type(x) in _SPARSE_TYPES


def _identity_vjp(g, needs):
    return (g,)


def densified(x, op=None):
    """``x`` as a dense NDArray, recorded as a cast (its gradient flows back to ``x``). With
    ``op`` this is MXNet's storage fallback for that operator (logged when asked)."""
    if op is not None and _fallback.verbose:
        _fallback.note(x, op)
    data = x._dense_raw()
    if _recording_for(x):
        return _recorded(data, x._ctx, (x,), _identity_vjp)
    return _wrap(data, x._ctx)


def _dense_arg(a, op):
    if type(a) in _SPARSE_TYPES:
        return densified(a, op)
    if type(a) in (list, tuple):
        return type(a)(_dense_arg(b, op) for b in a)
    return a


def _with_node(result, dense_fn, x, *args, **kwargs):
    """Record ``result`` (computed on stored values) by the dense operator's own gradient:
    the dense operator runs again on the densified input, only while recording ``x``."""
    if _recording_for(x):
        result._node = dense_fn(densified(x), *args, **kwargs)._node
    return result


class Rule:
    """What an operator does with sparse inputs: ``kind`` (for the table), ``stypes`` (the
    storages ``kind`` applies to; the others densify) and ``impl(dense_fn, name, args,
    kwargs)`` (run when an argument is sparse)."""

    __slots__ = ("kind", "stypes", "impl", "note", "refused")

    def __init__(self, kind, impl, note="", stypes=_STYPES, refused=()):
        self.kind, self.impl, self.note, self.stypes = kind, impl, note, tuple(stypes)
        self.refused = tuple(refused)

    def per_stype(self):
        return [self.kind if st in self.stypes else "refused" if st in self.refused
                else "densifies" for st in _STYPES]


def _densify(fn, name, args, kwargs):
    return fn(*[_dense_arg(a, name) for a in args],
              **{k: _dense_arg(v, name) for k, v in kwargs.items()})


DENSIFY = Rule("densifies", _densify)


def _first_sparse_only(args, kwargs):
    return (args and _is_sparse(args[0])
            and not any(_is_sparse(a) for a in args[1:])
            and not any(_is_sparse(v) for v in kwargs.values()))


def _keep_values(fn, name, args, kwargs):
    """f(0) = 0 elementwise: ``fn`` on the stored values, same storage and positions."""
    if not _first_sparse_only(args, kwargs):
        return _densify(fn, name, args, kwargs)
    x, rest = args[0], args[1:]
    values = fn(_wrap(x._values, x._ctx), *rest, **kwargs)._data
    return _with_node(_sp.map_values(x, values), fn, x, *rest, **kwargs)


KEEP = Rule("keeps sparse", _keep_values, "f(0) = 0: runs on the stored values")


def _clip(fn, name, args, kwargs):
    if not _first_sparse_only(args, kwargs):
        return _densify(fn, name, args, kwargs)
    bound = dict(zip(("data", "a_min", "a_max"), args), **kwargs)
    if not bound["a_min"] <= 0 <= bound["a_max"]:
        raise ValueError("clip of a %s array needs a_min <= 0 <= a_max, got [%s, %s] (MXNet "
                         "refuses: the result would not be sparse)"
                         % (args[0].stype, bound["a_min"], bound["a_max"]))
    return _keep_values(fn, name, args, kwargs)


def _zeros_like(fn, name, args, kwargs):
    x = args[0] if args else kwargs["data"]
    dtype = kwargs.get("dtype", args[1] if len(args) > 1 else None)
    return _sp.zeros(x.stype, x.shape, x.context, dtype or x._values.dtype)


def _array(fn, name, args, kwargs):
    src = args[0] if args else kwargs["source_array"]
    if not _is_sparse(src):
        return fn(*args, **kwargs)
    ctx = kwargs.get("ctx", args[1] if len(args) > 1 else None)
    dtype = kwargs.get("dtype", args[2] if len(args) > 2 else None)
    return _sp.array(src, ctx=ctx, dtype=dtype)


def _same_sparse(a, b):
    return type(a) is type(b) and type(a) in _SPARSE_TYPES and a.shape == b.shape


def _is_dense(a):
    return isinstance(a, NDArray) and not a._sparse


def _record_binary(result, dense_fn, a, b):
    if _recording_for(*[x for x in (a, b) if isinstance(x, NDArray)]):
        result._node = dense_fn(_dense_arg(a, None), _dense_arg(b, None))._node
    return result


def _elemwise(fn_values, dense_fn, allow_dense):
    """rsp op rsp, csr op csr (same shape) over the union of stored positions; with
    ``allow_dense``, sparse op dense (either order, same shape) over the sparse one's."""
    def impl(fn, name, args, kwargs):
        if len(args) == 2 and not kwargs:
            a, b = args
            if _same_sparse(a, b):
                return _record_binary(_sp.union_op(a, b, fn_values), dense_fn, a, b)
            if allow_dense:
                for s, d, first in ((a, b, True), (b, a, False)):
                    if _is_sparse(s) and _is_dense(d) and tuple(d.shape) == s.shape \
                            and _zero_stays_zero(d._data, False):
                        at = _sp.dense_at_stored(s, d._data)
                        vals = fn_values(s._values, at) if first else fn_values(at, s._values)
                        out = _sp.map_values(s, vals.astype(s._values.dtype, copy=False))
                        return _record_binary(out, dense_fn, a, b)
        return _densify(fn, name, args, kwargs)
    return impl


def _zero_stays_zero(dense, dividing):
    """Whether 0 * y (or 0 / y) is 0 for every y of the backend array ``dense``: no inf or NaN
    (and, dividing, no 0). Otherwise the absent entries are not 0 and the result densifies, as
    the dense operator would give NaN there."""
    xp = _core._xp_of(dense)
    if dense.dtype.kind == "f" and not bool(xp.isfinite(dense).all()):
        return False
    return not (dividing and bool((dense == 0).any()))


def _broadcasts_to(shape, full):
    if len(shape) > len(full):
        return False
    shape = (1,) * (len(full) - len(shape)) + tuple(shape)
    return all(s in (1, f) for s, f in zip(shape, full))


def _csr_broadcast(fn_values, dense_fn, refuse_same_shape):
    """MXNet's broadcast_mul / broadcast_div of a csr by a dense array broadcast to its shape:
    csr, over the csr's stored entries (f(0, y) = 0)."""
    def impl(fn, name, args, kwargs):
        if len(args) == 2 and not kwargs:
            a, b = args
            if type(a) is _sp.CSRNDArray and _is_dense(b) and _broadcasts_to(b.shape, a.shape):
                if refuse_same_shape and tuple(b.shape) == a.shape:
                    raise ValueError("%s of a csr array by a dense array of the same shape is "
                                     "not supported (MXNet refuses it); densify first" % name)
                if not _zero_stays_zero(b._data, refuse_same_shape):
                    return _densify(fn, name, args, kwargs)
                vals = fn_values(a._values, _sp.dense_at_stored(a, b._data))
                out = _sp.map_values(a, vals.astype(a._values.dtype, copy=False))
                return _record_binary(out, dense_fn, a, b)
        return _densify(fn, name, args, kwargs)
    return impl


def _csr_slice(fn, name, args, kwargs):
    bound = dict(zip(("data", "begin", "end", "step"), args), **kwargs)
    x = bound.get("data")
    step = bound.get("step")
    if type(x) is _sp.CSRNDArray and len(bound) >= 3 and (step is None or all(
            s in (None, 1) for s in step)) and len(bound["begin"]) <= 2:
        out = _sp.csr_slice(x, tuple(bound["begin"]) + (None,), tuple(bound["end"]) + (None,))
        return _with_node(out, fn, x, *args[1:], **kwargs) if args else out
    return _densify(fn, name, args, kwargs)


def _csr_take(fn, name, args, kwargs):
    bound = dict(zip(("a", "indices", "axis", "mode"), args), **kwargs)
    x, idx = bound.get("a"), bound.get("indices")
    if type(x) is _sp.CSRNDArray and bound.get("axis", 0) == 0 and _is_dense(idx) \
            and idx.ndim == 1:
        xp = x._xp
        ids = xp.asarray(idx._data).astype(numpy.int64)
        n = x.shape[0]
        ids = xp.mod(ids, n) if bound.get("mode", "clip") == "wrap" else xp.clip(ids, 0, n - 1)
        return _with_node(_sp.csr_take_rows(x, ids), fn, x, *args[1:], **kwargs)
    return _densify(fn, name, args, kwargs)


def _add_n(fn, name, args, kwargs):
    if args and all(type(a) is _sp.RowSparseNDArray and a.shape == args[0].shape for a in args):
        total = args[0]
        for a in args[1:]:
            total = _sp.union_op(total, a, operator.add)
        if _recording_for(*args):
            total._node = fn(*[densified(a) for a in args])._node
        return total
    return _densify(fn, name, args, kwargs)


def _with_forward_stype(dot):
    """MXNet's ``dot(..., forward_stype=...)``: the result in that storage."""
    @functools.wraps(dot)
    def fn(lhs, rhs, transpose_a=False, transpose_b=False, forward_stype=None):
        out = dot(lhs, rhs, transpose_a=transpose_a, transpose_b=transpose_b)
        if forward_stype is not None and forward_stype != out.stype:
            cast = _sp.cast_storage(out.detach(), forward_stype)
            cast._node = out._node
            return cast
        return out
    return fn


def _dot(fn, name, args, kwargs):
    if kwargs.get("forward_stype") is not None:
        stype = kwargs.pop("forward_stype")
        return _with_forward_stype(lambda *a, **k: _dot(fn, name, a, k))(*args, forward_stype=stype,
                                                                          **kwargs)
    kwargs.pop("forward_stype", None)
    bound = dict(zip(("lhs", "rhs", "transpose_a", "transpose_b"), args), **kwargs)
    lhs, rhs = bound["lhs"], bound["rhs"]
    ta, tb = bound.get("transpose_a", False), bound.get("transpose_b", False)
    if type(lhs) is _sp.CSRNDArray and not tb and isinstance(rhs, NDArray) \
            and type(rhs) is not _sp.CSRNDArray and rhs.ndim == 2 and not _recording_for(lhs):
        if type(rhs) is _sp.RowSparseNDArray and ta:
            rhs = densified(rhs, name)          # MXNet: dot(csr.T, rsp) falls back too
        return _sp.csr_dot(lhs, rhs, transpose_a=ta)
    if _is_dense(lhs) and type(rhs) is _sp.CSRNDArray and not ta and not tb and lhs.ndim == 2:
        out = fn(lhs, densified(rhs, name))
        result = _sp.cast_storage(_wrap(out._data, out._ctx), "csr")
        result._node = out._node
        return result
    return _densify(fn, name, args, kwargs)


def _refuse(reason):
    def impl(fn, name, args, kwargs):
        stypes = sorted({a.stype for a in list(args) + list(kwargs.values()) if _is_sparse(a)}
                        | {b.stype for a in args if type(a) in (list, tuple) for b in a
                           if _is_sparse(b)})
        raise ValueError("%s does not take %s input: %s" % (name, " or ".join(stypes), reason))
    return impl


def _refuse_for(stypes, reason):
    """Refused for a sparse argument of ``stypes`` (in any position); densifies otherwise."""
    refuse = _refuse(reason)

    def impl(fn, name, args, kwargs):
        for a in list(args) + list(kwargs.values()):
            if _is_sparse(a) and a.stype in stypes:
                return refuse(fn, name, args, kwargs)
        return _densify(fn, name, args, kwargs)
    return impl


def _refused(reason):
    return Rule("refused", _refuse(reason), reason)


def _embedding(fn, name, args, kwargs):
    bound = dict(zip(("data", "weight"), args), **kwargs)
    if type(bound.get("weight")) is _sp.CSRNDArray:
        return _refuse("the weight must be dense or row_sparse (MXNet refuses a csr weight)")(
            fn, name, args, kwargs)
    data = bound.get("data")
    if _is_sparse(data):
        args = (densified(data, name),) + tuple(args[1:]) if args else args
        if "data" in kwargs:
            kwargs = dict(kwargs, data=densified(data, name))
    return fn(*args, **kwargs)   # a row_sparse weight has its own kernel (embedding_of_rows)


def _truediv(a, b):
    return a / b


_KEEP_NAMES = ("abs", "arcsin", "arcsinh", "arctan", "arctanh", "cbrt", "ceil", "degrees",
               "expm1", "fix", "floor", "log1p", "negative", "radians", "relu", "rint", "round",
               "sign", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc", "identity",
               "BlockGrad", "stop_gradient", "make_loss")

RULES = {name: KEEP for name in _KEEP_NAMES}
RULES.update({
    "clip": Rule("keeps sparse", _clip, "a_min <= 0 <= a_max; other bounds are refused"),
    "zeros_like": Rule("keeps sparse", _zeros_like, "nothing stored"),
    "array": Rule("keeps sparse", _array, "a copy"),
    "elemwise_add": Rule("sparse kernel", _elemwise(operator.add, _ops.add, False),
                         "same storage and shape: union of stored positions"),
    "elemwise_sub": Rule("sparse kernel", _elemwise(operator.sub, _ops.subtract, False),
                         "same storage and shape: union of stored positions"),
    "elemwise_mul": Rule("sparse kernel", _elemwise(operator.mul, _ops.multiply, True),
                         "with the same storage, or with a dense array of its shape"),
    "multiply": Rule("sparse kernel", _csr_broadcast(operator.mul, _ops.multiply, False),
                     "csr times a dense array broadcast to it", stypes=("csr",)),
    "broadcast_mul": Rule("sparse kernel", _csr_broadcast(operator.mul, _ops.multiply, False),
                          "csr times a dense array broadcast to it", stypes=("csr",)),
    "divide": Rule("sparse kernel", _csr_broadcast(_truediv, _ops.divide, True),
                   "csr by a dense row or column; by a dense array of its shape refused",
                   stypes=("csr",)),
    "broadcast_div": Rule("sparse kernel", _csr_broadcast(_truediv, _ops.divide, True),
                          "csr by a dense row or column; by a dense array of its shape refused",
                          stypes=("csr",)),
    "add_n": Rule("sparse kernel", _add_n, "all row_sparse of one shape: union of rows",
                  stypes=("row_sparse",)),
    "ElementWiseSum": Rule("sparse kernel", _add_n, "all row_sparse of one shape: union of rows",
                           stypes=("row_sparse",)),
    "dot": Rule("sparse kernel", _dot, "dot(csr, dense or row_sparse) is dense, with "
                "transpose_a row_sparse; dot(dense, csr) is csr", stypes=("csr",)),
    "Embedding": Rule("sparse kernel", _embedding, "row_sparse weight: its stored rows "
                      "(absent rows give zeros); a csr weight is refused",
                      stypes=("row_sparse",), refused=("csr",)),
    "slice": Rule("sparse kernel", _csr_slice, "csr: rows and columns, step 1",
                  stypes=("csr",)),
    "crop": Rule("sparse kernel", _csr_slice, "csr: rows and columns, step 1",
                 stypes=("csr",)),
    "take": Rule("sparse kernel", _csr_take, "csr rows (axis 0)", stypes=("csr",)),
    "BatchNorm": _refused("MXNet's BatchNorm has no sparse storage"),
    "concatenate": _refused("MXNet's concatenate writes into a dense array slice by slice; "
                            "densify first"),
    "fill_element_0index": _refused("MXNet refuses sparse storage here"),
})
RULES["true_divide"] = RULES["divide"]
_fallback.OPERATOR_NAMES.update(RULES)


# What went through here: the table in docs/compat.md is made from these.
EXPORTED: set = set()
METHODS: set = set()


def exported(op_name, fn, record=True):
    """``fn`` as the ``nd`` namespace exports it: dispatched by storage, with ``out=``."""
    rule = RULES.get(op_name, DENSIFY)
    impl = rule.impl
    _fallback.OPERATOR_NAMES.add(op_name)
    if record:
        EXPORTED.add(op_name)
    if op_name == "dot":
        fn = _with_forward_stype(fn)
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        params = {}
    takes_out = "out" in params
    # MXNet's ``name=`` (a graph node's name: ``hybrid_forward(F, ...)`` code passes it) is
    # accepted by every exported function; eager calls ignore it unless ``fn`` takes it.
    takes_name = "name" in params
    sparse_types = _SPARSE_TYPES
    containers = (list, tuple)

    if takes_out:
        @functools.wraps(fn)
        def op(*args, name=None, **kwargs):
            if name is not None and takes_name:
                kwargs["name"] = name
            for a in args:
                if type(a) in sparse_types or (type(a) in containers and _any_sparse(a)):
                    break
            else:
                if not kwargs or not _any_sparse(kwargs.values()):
                    return fn(*args, **kwargs)
            out = kwargs.pop("out", None)
            result = impl(fn, op_name, args, kwargs)
            return result if out is None else _write(result, out, op_name)
        return op

    dense_type = NDArray

    @functools.wraps(fn)
    def op(*args, out=None, name=None, **kwargs):
        if name is not None and takes_name:
            kwargs["name"] = name
        for a in args:
            t = type(a)
            if t is dense_type:     # the dense path: one type test per argument
                continue
            if t in sparse_types or (t in containers and _any_sparse(a)):
                result = impl(fn, op_name, args, kwargs)
                break
        else:
            if kwargs and _any_sparse(kwargs.values()):
                result = impl(fn, op_name, args, kwargs)
            else:
                result = fn(*args, **kwargs)
        if out is None:
            return result
        return _write(result, out, op_name)
    return op


def _any_sparse(items):
    for a in items:
        if type(a) in _SPARSE_TYPES:
            return True
    return False


def _write(result, out, name):
    if isinstance(result, NDArray):
        return write_into(result, out)
    outs = out if isinstance(out, (list, tuple)) else [out]
    if len(outs) != len(result):
        raise ValueError("%s gives %d outputs, out= has %d" % (name, len(result), len(outs)))
    return [write_into(r, o) for r, o in zip(result, outs)]


def write_into(result, out):
    """``out=``: ``result`` written into ``out``, cast to ``out``'s storage (MXNet's fallback
    copies a dense result into a sparse output the same way)."""
    if isinstance(out, NDArray) and (out._sparse or result._sparse):
        if tuple(out.shape) != tuple(result.shape):
            raise ValueError("out has shape %s, but the result has shape %s"
                             % (tuple(out.shape), tuple(result.shape)))
        if result._node is not None and _recording_for(result):
            raise ValueError("cannot write a recorded result into a %s out= array inside "
                             "autograd.record(); use the returned array" % out.stype)
        result.copyto(out)
        return out
    return write_out(result, out)


# ----------------------------------------------------------------------------- operators


def _binary_dense(op_fn):
    label = "__%s__" % op_fn.__name__.strip("_")
    def run(a, b):
        return op_fn(_dense_arg(a, label), _dense_arg(b, label))
    return run


def _is_scalar(x):
    return isinstance(x, numbers.Number) and not isinstance(x, bool) or isinstance(x, numpy.number)


def _scalar_keep(self, values_fn, dense_fn, s):
    out = _sp.map_values(self, values_fn(self._values, s).astype(self._values.dtype, copy=False))
    if _recording_for(self):
        out._node = dense_fn(densified(self), s)._node
    return out


def _add(self, other):
    if _same_sparse(self, other):
        return _record_binary(_sp.union_op(self, other, operator.add), operator.add, self, other)
    return _binary_dense(operator.add)(self, other)


def _radd(self, other):
    return _binary_dense(operator.add)(other, self)


def _sub(self, other):
    if _same_sparse(self, other):
        return _record_binary(_sp.union_op(self, other, operator.sub), operator.sub, self, other)
    return _binary_dense(operator.sub)(self, other)


def _rsub(self, other):
    return _binary_dense(operator.sub)(other, self)


def _finite_scalar(x):
    return _is_scalar(x) and numpy.isfinite(x)


def _mul(self, other):
    if _finite_scalar(other):
        return _scalar_keep(self, operator.mul, operator.mul, other)
    if _same_sparse(self, other) or (_is_dense(other) and tuple(other.shape) == self.shape):
        return RULES["elemwise_mul"].impl(operator.mul, "elemwise_mul", (self, other), {})
    if type(self) is _sp.CSRNDArray and _is_dense(other):
        return RULES["broadcast_mul"].impl(operator.mul, "broadcast_mul", (self, other), {})
    return _binary_dense(operator.mul)(self, other)


def _rmul(self, other):
    if _finite_scalar(other):
        return _scalar_keep(self, operator.mul, operator.mul, other)
    return _binary_dense(operator.mul)(other, self)


def _truediv_op(self, other):
    if _finite_scalar(other) and other != 0:
        return _scalar_keep(self, operator.truediv, operator.truediv, other)
    if type(self) is _sp.CSRNDArray and _is_dense(other):
        return RULES["broadcast_div"].impl(operator.truediv, "broadcast_div", (self, other), {})
    return _binary_dense(operator.truediv)(self, other)


def _rtruediv(self, other):
    return _binary_dense(operator.truediv)(other, self)


def _neg(self):
    return _scalar_keep(self, operator.mul, operator.mul, -1)


def _abs(self):
    return self.abs()


def _compare(op_fn):
    """A comparison with a scalar keeps the storage where it is 0 at 0 (MXNet: ``x > 1`` is
    sparse, ``x < 1`` dense); anything else compares the dense arrays."""
    def method(self, other):
        if _is_scalar(other):
            zero = self._values.dtype.type(0)
            if not op_fn(zero, other):
                return _scalar_keep(self, lambda v, s: op_fn(v, s), lambda a, s: op_fn(a, s),
                                    other)
        label = "__%s__" % op_fn.__name__.strip("_")
        return op_fn(densified(self, label), _dense_arg(other, label))
    return method


_OPERATORS = {
    "__add__": (_add, "sparse kernel", "same storage and shape: union of stored positions; "
                "otherwise densifies"),
    "__radd__": (_radd, "densifies", ""),
    "__sub__": (_sub, "sparse kernel", "same storage and shape: union of stored positions; "
                "otherwise densifies"),
    "__rsub__": (_rsub, "densifies", ""),
    "__mul__": (_mul, "sparse kernel", "by a finite scalar, the same storage, or a finite "
                "dense array of its shape (csr: also broadcast); otherwise densifies"),
    "__rmul__": (_rmul, "keeps sparse", "by a finite scalar; otherwise densifies"),
    "__truediv__": (_truediv_op, "keeps sparse", "by a finite non-zero scalar (csr: also a "
                    "dense row or column without 0); otherwise densifies"),
    "__rtruediv__": (_rtruediv, "densifies", ""),
    "__neg__": (_neg, "keeps sparse", ""),
    "__abs__": (_abs, "keeps sparse", ""),
    "__gt__": (_compare(operator.gt), "keeps sparse", "with a scalar where 0 > s is false"),
    "__ge__": (_compare(operator.ge), "keeps sparse", "with a scalar where 0 >= s is false"),
    "__lt__": (_compare(operator.lt), "keeps sparse", "with a scalar where 0 < s is false"),
    "__le__": (_compare(operator.le), "keeps sparse", "with a scalar where 0 <= s is false"),
    "__eq__": (_compare(operator.eq), "keeps sparse", "with a non-zero scalar"),
    "__ne__": (_compare(operator.ne), "keeps sparse", "with zero"),
}
_OPERATORS["__div__"] = _OPERATORS["__truediv__"]
_OPERATORS["__rdiv__"] = _OPERATORS["__rtruediv__"]


def install_hooks():
    """Give ``ndarray.py`` the storage operations it calls (it imports nothing after it)."""
    hooks = _core._storage
    hooks.cast_storage = _sp.cast_storage
    hooks.sparse_zeros = _sp.zeros
    hooks.receive_dense_grad = _sp.receive_dense_grad
    hooks.abs = _ops.abs
    hooks.modulo = _more_ops.modulo


_INDEXING_METHODS = ("slice_axis", "split")


def install_methods(methods):
    """Give the sparse classes the methods of ``methods`` (name -> dense function) whose
    operator the table names, and those that index the array, dispatched here, and the Python
    operators; the other methods are NDArray's own, which read the dense form (``_data``).
    NDArray itself is not touched."""
    base = _sp.BaseSparseNDArray
    METHODS.update(methods)
    for name, fn in methods.items():
        # slice_axis and split index their input, which a sparse array refuses: they take the
        # dense fallback, as MXNet's operators do (its x.slice_axis() of a csr array is dense).
        if (name in RULES or name in _INDEXING_METHODS) and name != "dot":
            setattr(base, name, exported(name, fn, record=False))
    base.dot = exported("dot", _ops.dot, record=False)
    for name, (fn, _, _) in _OPERATORS.items():
        setattr(base, name, fn)
    base.__hash__ = NDArray.__hash__


# The ``nd`` operators MXNet's ``nd.sparse`` also holds (the same operators: the storage
# dispatch gives each its sparse kernel or MXNet's dense fallback).
_SPARSE_NAMESPACE = _KEEP_NAMES + (
    "clip", "zeros_like", "elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div",
    "add_n", "ElementWiseSum", "dot", "Embedding", "FullyConnected", "arccos", "arccosh", "cos",
    "cosh", "exp", "log", "log10", "log2", "rsqrt", "sigmoid", "gamma", "gammaln",
    "broadcast_add", "broadcast_plus", "broadcast_sub", "broadcast_minus", "broadcast_mul",
    "broadcast_div", "concat", "slice", "sum", "mean", "norm", "where")


def install_sparse_namespace(namespace):
    """``nd.sparse``'s operators: the dispatched ``nd`` ones (MXNet's ``sparse.add`` is ``+``)."""
    for name in _SPARSE_NAMESPACE:
        if name in namespace:
            setattr(_sp, name, namespace[name])
    _sp.add = _sp.plus = lambda lhs, rhs: _sparse_binary(lhs, rhs, "__add__", operator.add)
    _sp.subtract = lambda lhs, rhs: _sparse_binary(lhs, rhs, "__sub__", operator.sub)
    _sp.multiply = lambda lhs, rhs: _sparse_binary(lhs, rhs, "__mul__", operator.mul)
    _sp.divide = lambda lhs, rhs: _sparse_binary(lhs, rhs, "__truediv__", operator.truediv)
    _sp.gs_retain = _sp.retain
    added = [n for n in _SPARSE_NAMESPACE + ("add", "plus", "subtract", "multiply", "divide",
                                             "gs_retain")
             if hasattr(_sp, n) and n not in _sp.__all__]
    _sp.__all__ = list(_sp.__all__) + added


def _sparse_binary(lhs, rhs, method, op_fn):
    if _is_sparse(lhs):
        return getattr(lhs, method)(rhs)
    return op_fn(lhs, rhs)


# ----------------------------------------------------------------------------- the table

# Methods of the sparse classes themselves (not operators of the table), for the doc.
_OWN_METHODS = [
    ("x.reshape", "refused", "refused", "MXNet: only for NDArray"),
    ("x[key]", "refused", "sparse kernel", "``[:]`` only; csr: also row slices ``[a:b]``"),
    ("x[:] = value", "keeps sparse", "keeps sparse", "stored as the array's storage"),
    ("x.copy() x.copyto() x.astype() x.detach() x.as_in_context()", "keeps sparse",
     "keeps sparse", ""),
    ("x += y (and -=, *=, /=)", "keeps sparse", "keeps sparse", "``(x + y).copyto(x)``, as MXNet"),
    ("x.tostype()", "sparse kernel", "sparse kernel", "row_sparse <-> csr refused, as MXNet"),
    ("x.retain()", "sparse kernel", "-", "the requested ids verbatim, absent ones as zero rows"),
    ("x.attach_grad()", "keeps sparse", "keeps sparse", "the gradient has the array's storage"),
    ("out= a sparse array", "keeps sparse", "keeps sparse",
     "the result is cast to ``out``'s storage"),
]


def describe():
    """``[(operator, row_sparse behaviour, csr behaviour, note)]``: every exported ``nd``
    operator, every method and Python operator of a sparse array, from the table above."""
    rows, dense_names = [], []
    for name in sorted(EXPORTED, key=lambda n: (n.lower(), n)):
        rule = RULES.get(name, DENSIFY)
        if rule is DENSIFY:
            dense_names.append(name)
            continue
        per = rule.per_stype()
        rows.append(("nd." + name, per[0], per[1], rule.note))
    rows.append(("every other nd operator: " + ", ".join(dense_names), "densifies",
                 "densifies", "the dense operator on the dense form, recorded"))
    dense_methods = []
    for name in sorted(METHODS, key=lambda n: (n.lower(), n)):
        rule = RULES.get(name, DENSIFY)
        if rule is DENSIFY:
            dense_methods.append(name)
            continue
        per = rule.per_stype()
        rows.append(("x." + name + "()", per[0], per[1], rule.note))
    rows.append(("every other method: " + ", ".join("x.%s()" % n for n in dense_methods),
                 "densifies", "densifies", ""))
    for name, (_, kind, note) in sorted(_OPERATORS.items()):
        if name in ("__div__", "__rdiv__"):
            continue
        rows.append(("x." + name, kind, kind, note))
    rows.extend(_OWN_METHODS)
    return rows


BEGIN = "<!-- BEGIN GENERATED: sparse storage dispatch (trainer_cli.ndarray.storage) -->"
END = "<!-- END GENERATED: sparse storage dispatch -->"


def render():
    """The markdown table of :func:`describe`, between its marker comments."""
    lines = [BEGIN, "| Operator | row_sparse | csr | Note |", "|---|---|---|---|"]
    for name, rsp, csr, note in describe():
        lines.append("| %s | %s | %s | %s |" % (name.replace("|", "\\|"), rsp, csr, note))
    lines.append(END)
    return "\n".join(lines)


def update_doc(path):
    """Rewrite the generated section of ``path`` (docs/compat.md) in place; True if it changed."""
    from .._atomic import atomic_write

    with open(path, encoding="utf-8") as f:
        text = f.read()
    start, stop = text.index(BEGIN), text.index(END) + len(END)
    new = text[:start] + render() + text[stop:]
    if new == text:
        return False
    with atomic_write(path) as f:
        f.write(new.encode("utf-8"))
    return True
