"""``NDArray``: a NumPy or CuPy array on a context, with MXNet's arithmetic and autograd hooks.

Every op goes through ``_result``, which wraps the raw output and, only while recording and only
when an input needs a gradient, attaches a ``Node`` holding the vector-Jacobian function. Outside
``record()`` an op costs one raw array call plus one small object.
"""
from __future__ import annotations

import numbers
import operator

import numpy

from .. import autograd as _ag
from ..base import ShapeError
from ..context import Context, array_module_of, current_context
from . import integers as _integers
from .one_element import one_element as _one_element
from .numpy1_scalar import numpy1_scalar as _numpy1_scalar

__all__ = ["NDArray", "unbroadcast"]

_np_ndarray = numpy.ndarray
_state = _ag._state
_Node = _ag.Node
_new = object.__new__


class _StorageHooks:
    """What an NDArray needs from the modules built on it (``sparse.py``, ``ops.py``,
    ``more_ops.py``), filled in by the dispatch point (``storage.py``) when ``nd`` is imported,
    so that this module imports nothing after it."""

    cast_storage = sparse_zeros = receive_dense_grad = abs = modulo = None


_storage = _StorageHooks()


def _xp_of(data):
    return numpy if type(data) is _np_ndarray else array_module_of(data)


def _wrap(data, ctx):
    out = _new(NDArray)
    out._data = data
    out._ctx = ctx
    out._node = None
    out._grad = None
    out._grad_req = "null"
    out._fresh_grad = False
    return out


def _result(data, ctx, inputs, vjp):
    """Wrap ``data``; record ``vjp`` when recording and some input needs a gradient."""
    out = _new(NDArray)
    out._data = data
    out._ctx = ctx
    out._node = None
    out._grad = None
    out._grad_req = "null"
    out._fresh_grad = False
    if _state.recording:
        for x in inputs:
            if x._node is not None or x._grad is not None:
                out._node = _Node(inputs, vjp)
                break
    return out


def _recorded(data, ctx, inputs, vjp):
    """``_result`` for a caller that has already seen ``_recording_for(*inputs)`` hold."""
    out = _new(NDArray)
    out._data = data
    out._ctx = ctx
    out._node = _Node(inputs, vjp)
    out._grad = None
    out._grad_req = "null"
    out._fresh_grad = False
    return out


def _needs_grad(x) -> bool:
    return x._node is not None or x._grad is not None


def _check_not_in_graph(x):
    if _needs_grad(x):
        raise ValueError(
            "Assigning to NDArrays that are already in a computational graph will cause undefined "
            "behavior when evaluating gradients. Please call backward first to clear the graph or do "
            "this outside of a record section. Also note that you cannot use inplace operations like "
            "+=, *=, relu(x, out=x), y[idx]=x, etc inside a record section.")


def _recording_for(*inputs) -> bool:
    if not _state.recording:
        return False
    for x in inputs:
        if x._node is not None or x._grad is not None:
            return True
    return False


def unbroadcast(g, shape):
    """Sum ``g`` over the axes along which an operand of ``shape`` was broadcast."""
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape)


def _scatter_add(target, key, values):
    """``target[key] += values`` with repeated indices accumulating, on NumPy and CuPy."""
    if type(target) is _np_ndarray:
        numpy.add.at(target, key, values)
    else:
        from . import _rows_cuda
        if _rows_cuda.takes(target, key, values):       # no atomics: the same bits every run
            _rows_cuda.add_rows_at(target, key, values)
            return
        import cupy
        if hasattr(cupy.add, "at"):         # CuPy 13+; cupyx.scatter_add is deprecated there
            cupy.add.at(target, key, values)
        else:
            import cupyx
            cupyx.scatter_add(target, key, values)


def _scalar(x):
    """A Python number (so NumPy's promotion keeps the array's dtype, as MXNet does)."""
    return x.item() if isinstance(x, numpy.generic) else x


# Binary ops: forward on raw arrays, and gradients (g, a, b, out, need_a, need_b) -> (ga, gb).
def _g_add(g, a, b, out, na, nb):
    return g, g


def _g_sub(g, a, b, out, na, nb):
    return g, (-g if nb else None)


def _g_mul(g, a, b, out, na, nb):
    return (g * b if na else None), (g * a if nb else None)


def _g_div(g, a, b, out, na, nb):
    return (g / b if na else None), (-g * out / b if nb else None)


def _g_pow(g, a, b, out, na, nb):
    xp = _xp_of(g)
    ga = g * b * a ** (b - 1) if na else None
    gb = g * out * xp.log(a) if nb else None
    return ga, gb


def _g_max(g, a, b, out, na, nb):
    mask = a >= b
    return (g * mask if na else None), (g * ~mask if nb else None)


def _g_min(g, a, b, out, na, nb):
    mask = a <= b
    return (g * mask if na else None), (g * ~mask if nb else None)


def _rsub(a, b):
    return b - a


def _rdiv(a, b):
    return b / a


def _rpow(a, b):
    return b ** a


def _g_rsub(g, a, b, out, na, nb):
    return -g, None


def _g_rdiv(g, a, b, out, na, nb):
    return -g * out / a, None


def _g_rpow(g, a, b, out, na, nb):
    return g * out * _xp_of(g).log(b), None


def _maximum(a, b):
    return _xp_of(a).maximum(a, b)


def _minimum(a, b):
    return _xp_of(a).minimum(a, b)


def _check_broadcast(ashape, bshape, exc):
    """Raise MXNet's shape error when the shapes do not broadcast; return when they do (the
    ValueError ``exc`` was about something else, such as an integer to a negative power)."""
    try:
        numpy.broadcast_shapes(tuple(ashape), tuple(bshape))
    except ValueError:
        raise ShapeError("operands of shapes %s and %s do not broadcast together (%s)"
                         % (tuple(ashape), tuple(bshape), exc)) from None


def _int_binary(a, b, fwd):
    """``fwd`` on an integer array and a scalar or an array of its dtype, as MXNet computes it
    (``integers``); None where MXNet's integer rules do not apply (other dtypes: NumPy's)."""
    ad = a._data
    dtype = ad.dtype
    if isinstance(b, NDArray):
        bd = b._data
        if bd.dtype != dtype:
            return None
    elif isinstance(b, numbers.Number):
        bd = _integers.scalar(b, dtype)
    else:
        return None
    if fwd is operator.truediv:
        out = _integers.divide(ad, bd)
    elif fwd is _rdiv:
        out = _integers.divide(_xp_of(ad).asarray(bd, dtype=dtype), ad)
    elif fwd is operator.pow or fwd is _rpow:
        # a floating function in MXNet: computed in float32, converted back
        out = _integers.c_cast(fwd(ad.astype(numpy.float32), numpy.float32(bd) if
                                   numpy.ndim(bd) == 0 else bd.astype(numpy.float32)), dtype)
    else:
        out = fwd(ad, bd)
        if out.dtype != dtype:
            out = out.astype(dtype)
    return _wrap(out, a._ctx)


def _binary(a, b, fwd, grads):
    ad = a._data
    tb = type(b)
    if ad.dtype.kind in "iu":
        out = _int_binary(a, b, fwd)
        if out is not None:
            return out
    if tb is NDArray or (tb is not float and tb is not int and isinstance(b, NDArray)):
        bd = b._data
        try:
            out = fwd(ad, bd)
        except ValueError as exc:
            _check_broadcast(ad.shape, bd.shape, exc)
            raise
        if _state.recording and (a._node is not None or a._grad is not None
                                 or b._node is not None or b._grad is not None):
            ashape, bshape = ad.shape, bd.shape

            def vjp(g, needs):
                ga, gb = grads(g, ad, bd, out, needs[0], needs[1])
                return (None if ga is None else unbroadcast(ga, ashape),
                        None if gb is None else unbroadcast(gb, bshape))
            return _recorded(out, a._ctx, (a, b), vjp)
        return _wrap(out, a._ctx)
    if tb is float or tb is int:
        bd = b
    elif isinstance(b, numbers.Number):
        bd = _scalar(b)
    else:
        bd = _xp_of(ad).asarray(b, dtype=ad.dtype)
    try:
        out = fwd(ad, bd)
    except ValueError as exc:
        _check_broadcast(ad.shape, numpy.shape(bd), exc)
        raise
    if _state.recording and (a._node is not None or a._grad is not None):
        ashape = ad.shape

        def vjp1(g, needs):
            ga = grads(g, ad, bd, out, True, False)[0]
            return (unbroadcast(ga, ashape),)
        return _recorded(out, a._ctx, (a,), vjp1)
    return _wrap(out, a._ctx)


def _assign(target, key, value):
    """``target[key] = value``; one element from an array of one element of any shape too
    (``x[2] = y.sum()``: MXNet writes it, NumPy 2 refuses an array with axes for one slot)."""
    try:
        target[key] = value
    except ValueError:
        if getattr(value, "size", None) != 1 or numpy.ndim(target[key]) != 0:
            raise
        target[key] = value.reshape(())


def _compare(a, b, op):
    """MXNet comparisons return 0/1 in the input's dtype and carry a zero gradient."""
    ad = a._data
    if isinstance(b, NDArray):
        bd = b._data
    elif ad.dtype.kind in "iu" and isinstance(b, numbers.Number):
        bd = _integers.scalar(b, ad.dtype)  # MXNet: the scalar in the array's dtype first
    else:
        bd = _scalar(b)
    return _no_gradient(op(ad, bd).astype(ad.dtype, copy=False), a._ctx,
                        (a, b) if isinstance(b, NDArray) else (a,))


def _no_gradient(data, ctx, inputs):
    """Wrap ``data``, an output through which no gradient flows (a comparison, indices): while
    recording, a node with a zero gradient for each input, as MXNet records such operators, so
    that a variable reached only through it gets its gradient written as zeros (not left as
    it was) and a ``backward()`` from it is MXNet's zeros, not an error."""
    if not _state.recording:
        return _wrap(data, ctx)

    def vjp(g, needs):
        return tuple(_xp_of(x._data).zeros_like(x._data) if need else None
                     for x, need in zip(inputs, needs))
    return _result(data, ctx, inputs, vjp)


class NDArray:
    """An n-dimensional array on a device, recorded by ``autograd`` inside ``record()``."""

    __slots__ = ("_data", "_ctx", "_node", "_grad", "_grad_req", "_fresh_grad", "__weakref__")
    # Make NumPy defer to our reflected operators instead of treating us as an array-like.
    __array_ufunc__ = None
    __array_priority__ = 1000.0
    # Whether this is a row_sparse/csr array (``sparse.BaseSparseNDArray`` says True).
    _sparse = False

    def __init__(self, data, ctx: Context | None = None):
        self._data = data
        self._ctx = ctx if ctx is not None else current_context()
        self._node = None
        self._grad = None
        self._grad_req = "null"
        self._fresh_grad = False

    # ----------------------------------------------------------------- properties
    @property
    def writable(self):
        """Whether the array may be written (MXNet's attribute; a read-only NumPy buffer is
        not)."""
        flags = getattr(self._data, "flags", None)
        return bool(getattr(flags, "writeable", True))

    @property
    def _xp(self):
        return _xp_of(self._data)

    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype.type

    @property
    def size(self):
        return int(self._data.size)

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context

    @property
    def stype(self):
        return "default"

    def tostype(self, stype):
        """This array in storage ``stype``: ``'default'`` (itself), ``'row_sparse'`` or ``'csr'``."""
        return _storage.cast_storage(self, stype)

    @property
    def grad(self):
        return self._grad

    @property
    def T(self):
        return self.transpose()

    @property
    def handle(self):
        return id(self)

    # ----------------------------------------------------------------- conversion
    def asnumpy(self) -> numpy.ndarray:
        """A NumPy copy; of one element, one that ``float()`` accepts as NumPy 1.x did
        (``one_element``: MXNet code does ``float(loss.mean().asnumpy())``)."""
        data = self._data
        host = data.copy() if type(data) is _np_ndarray else data.get()
        if host.size == 1:
            return _one_element(host)
        return host

    def asscalar(self):
        if self._data.size != 1:
            raise ValueError("The current array is not a scalar")
        if self._data.ndim != 1:
            # MXNet 1.9.1 returns ``asnumpy()[()]`` here: the one-element array itself, of the
            # array's shape ((1, 1) prints as [[x]]); float() and int() take it (one_element.py).
            return self.asnumpy()[()]
        # A float32/float16 scalar that meets Python numbers as NumPy 1.x did (numpy1_scalar.py)
        return _numpy1_scalar(self.asnumpy()[0])

    def item(self):
        return self.asscalar().item()

    def __array__(self, dtype=None, copy=None):
        arr = self.asnumpy()
        return arr if dtype is None else arr.astype(dtype, copy=False)

    def tolist(self):
        return self.asnumpy().tolist()

    def __float__(self):
        return float(self.asscalar())

    def __int__(self):
        return int(self.asscalar())

    def __index__(self):
        return int(self.asscalar())

    def __bool__(self):
        size = self._data.size
        if size == 0:
            return False
        if size == 1:
            return bool(self._data.reshape(-1)[0])
        raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")

    def __len__(self):
        return self._data.shape[0]

    def __iter__(self):
        for i in range(self._data.shape[0]):
            yield self[i]

    def __hash__(self):
        return id(self)

    def __repr__(self):
        shape = "x".join(str(n) for n in self._data.shape)
        return "\n%s\n<%s %s @%s>" % (str(self.asnumpy()), type(self).__name__, shape, self._ctx)

    __str__ = __repr__

    # ----------------------------------------------------------------- copies and devices
    def astype(self, dtype, copy=True):
        dtype = numpy.dtype(dtype)
        if not copy and dtype == self._data.dtype:
            return self
        data = self._data.astype(dtype)
        if _recording_for(self):
            src = self._data.dtype
            return _result(data, self._ctx, (self,), lambda g, needs: (g.astype(src),))
        return _wrap(data, self._ctx)

    def cast(self, dtype):
        return self.astype(dtype)

    def copy(self):
        data = self._data.copy()
        if _recording_for(self):
            return _result(data, self._ctx, (self,), lambda g, needs: (g,))
        return _wrap(data, self._ctx)

    def copyto(self, other):
        """Copy into an NDArray (returned) or onto a Context (a new array there)."""
        if isinstance(other, NDArray):
            if other is self:
                return other
            if other._sparse:       # into row_sparse / csr storage: cast, as MXNet's fallback
                return _storage.cast_storage(self, other.stype).copyto(other)
            if other.shape != self.shape:
                raise ShapeError("copyto: an array of shape %s into one of shape %s"
                                 % (self.shape, other.shape))
            other._data[...] = _transfer(self._data, other._ctx)
            return other
        if isinstance(other, Context):
            data = _transfer(self._data, other, copy=True)
            if _recording_for(self):
                src_ctx = self._ctx
                return _result(data, other, (self,), lambda g, needs: (_transfer(g, src_ctx),))
            return _wrap(data, other)
        raise TypeError("copyto does not support type %s" % type(other))

    def as_in_context(self, context):
        if self._ctx == context:
            return self
        return self.copyto(context)

    as_in_ctx = as_in_context

    def detach(self):
        return _wrap(self._data, self._ctx)

    def wait_to_read(self):
        if type(self._data) is not _np_ndarray:
            self._xp.cuda.get_current_stream().synchronize()

    # ----------------------------------------------------------------- autograd
    def attach_grad(self, grad_req="write", stype=None):
        """Mark this array as a variable: ``backward`` writes or adds its gradient into ``.grad``."""
        if grad_req not in ("write", "add", "null"):
            raise ValueError("grad_req must be 'write', 'add' or 'null', got %r" % (grad_req,))
        if stype is None and self._sparse:
            stype = self.stype      # MXNet: the gradient of a sparse array has its storage
        if stype is not None and stype != "default":
            dtype = self._values.dtype if self._sparse else self._data.dtype
            self._mark(_storage.sparse_zeros(stype, self.shape, self._ctx, dtype), grad_req)
            return
        self._mark(_wrap(self._xp.zeros_like(self._data), self._ctx), grad_req)

    def _mark(self, grad_buffer, grad_req):
        self._node = None
        if grad_req == "null":
            self._grad = None
            self._grad_req = "null"
            return
        self._grad = grad_buffer
        self._grad_req = grad_req
        self._fresh_grad = False

    def _receive_grad(self, g):
        if type(g) is not _np_ndarray and hasattr(g, "receive_into"):  # a sparse gradient
            g.receive_into(self)
            return
        if self._grad._sparse:          # a dense gradient for a row_sparse or csr buffer
            _storage.receive_dense_grad(self, g)
            return
        buf = self._grad._data
        if self._grad_req == "add":
            buf += g
        else:
            buf[...] = g
        self._fresh_grad = True

    def backward(self, out_grad=None, retain_graph=False, train_mode=True):
        _ag.backward([self], None if out_grad is None else [out_grad], retain_graph, train_mode)

    # ----------------------------------------------------------------- indexing
    def __getitem__(self, key):
        key = _raw_key(key, self._data)
        data = self._data[key]
        if data.ndim == 0:
            data = data.reshape(1)
        elif not data.flags.c_contiguous or (type(data) is _np_ndarray
                                             and not data.flags.writeable):
            # MXNet's indexing shares memory only where the part is one contiguous block of
            # the array (``x[2]``, ``x[1:3]``); ``x[:, 1]`` or ``x[::2]`` is a new array.
            data = data.copy()
        if _recording_for(self):
            shape, dtype = self._data.shape, self._data.dtype
            advanced = _is_advanced(key)

            def vjp(g, needs):
                xp = _xp_of(g)
                z = xp.zeros(shape, dtype=dtype)
                sub = z[key]
                g = g.reshape(sub.shape) if sub.ndim != g.ndim else g
                if advanced:
                    _scatter_add(z, key, g)
                else:
                    z[key] = g
                return (z,)
            return _result(data, self._ctx, (self,), vjp)
        return _wrap(data, self._ctx)

    def __setitem__(self, key, value):
        key = _raw_key(key, self._data)
        if _state.recording and (_needs_grad(self) or (isinstance(value, NDArray) and _needs_grad(value))):
            return self._record_setitem(key, value)
        if isinstance(value, NDArray):
            value = _transfer(value._data, self._ctx)
        elif isinstance(value, numbers.Number):
            if self._data.dtype.kind in "iu":
                value = _integers.scalar(value, self._data.dtype)     # MXNet's cast: 300 -> 44
        else:
            value = self._xp.asarray(value)
        target = self._data
        if isinstance(key, slice) and key == slice(None) and getattr(value, "shape", None) == target.shape:
            target[...] = value
        else:
            _assign(target, key, value)

    def _record_setitem(self, key, value):
        # Writing into a buffer that a recorded op captured would silently corrupt its gradient,
        # so MXNet refuses; a constant array assigned from a recorded value becomes a new node.
        _check_not_in_graph(self)
        data = self._data.copy()
        vd = _transfer(value._data, self._ctx)
        _assign(data, key, vd)
        vshape = vd.shape

        def vjp(g, needs):
            sub = g[key]
            gv = unbroadcast(sub, vshape) if sub.ndim >= len(vshape) else sub.reshape(vshape)
            return None, gv
        const = _wrap(self._data, self._ctx)
        result = _result(data, self._ctx, (const, value), vjp)
        self._data, self._node = result._data, result._node

    # ----------------------------------------------------------------- arithmetic
    def __add__(self, other):
        return _binary(self, other, operator.add, _g_add)

    __radd__ = __add__

    def __sub__(self, other):
        return _binary(self, other, operator.sub, _g_sub)

    def __rsub__(self, other):
        return _binary(self, other, _rsub, _g_rsub)

    def __mul__(self, other):
        return _binary(self, other, operator.mul, _g_mul)

    __rmul__ = __mul__

    def __truediv__(self, other):
        return _binary(self, other, operator.truediv, _g_div)

    def __rtruediv__(self, other):
        return _binary(self, other, _rdiv, _g_rdiv)

    __div__ = __truediv__
    __rdiv__ = __rtruediv__

    def __pow__(self, other):
        return _binary(self, other, operator.pow, _g_pow)

    def __rpow__(self, other):
        return _binary(self, other, _rpow, _g_rpow)

    def __mod__(self, other):
        return _storage.modulo(self, other)     # recorded, with MXNet's gradients

    def __rmod__(self, other):
        return _storage.modulo(other, self)

    def __neg__(self):
        if _recording_for(self):
            return _result(-self._data, self._ctx, (self,), lambda g, needs: (-g,))
        return _wrap(-self._data, self._ctx)

    def __pos__(self):
        return self

    def __abs__(self):
        return _storage.abs(self)

    def _inplace(self, other, op, fallback):
        """In place outside a graph (keeps the buffer, as a weight update needs); else rebinds."""
        if _recording_for(self) or (isinstance(other, NDArray) and _recording_for(other)):
            # MXNet refuses in-place writes to recorded arrays and variables; a constant updated
            # by a recorded value becomes a new node whose input is the old constant buffer.
            _check_not_in_graph(self)
            result = fallback(_wrap(self._data, self._ctx), other)
            self._data, self._node = result._data, result._node
            return self
        if self._data.dtype.kind in "iu":
            result = fallback(_wrap(self._data, self._ctx), other)    # MXNet's integer rules
            self._data[...] = result._data
            return self
        op(self._data, other._data if isinstance(other, NDArray) else _scalar(other),
           out=self._data, casting="unsafe")
        return self

    def __iadd__(self, other):
        return self._inplace(other, numpy.add if type(self._data) is _np_ndarray else self._xp.add,
                             NDArray.__add__)

    def __isub__(self, other):
        return self._inplace(other, numpy.subtract if type(self._data) is _np_ndarray else self._xp.subtract,
                             NDArray.__sub__)

    def __imul__(self, other):
        return self._inplace(other, numpy.multiply if type(self._data) is _np_ndarray else self._xp.multiply,
                             NDArray.__mul__)

    def __itruediv__(self, other):
        return self._inplace(other, numpy.true_divide if type(self._data) is _np_ndarray else self._xp.true_divide,
                             NDArray.__truediv__)

    __idiv__ = __itruediv__

    # ----------------------------------------------------------------- comparisons
    def __eq__(self, other):
        return _compare(self, other, operator.eq)

    def __ne__(self, other):
        return _compare(self, other, operator.ne)

    def __lt__(self, other):
        return _compare(self, other, operator.lt)

    def __le__(self, other):
        return _compare(self, other, operator.le)

    def __gt__(self, other):
        return _compare(self, other, operator.gt)

    def __ge__(self, other):
        return _compare(self, other, operator.ge)


def _transfer(data, ctx: Context, copy=False):
    """``data`` as an array of ``ctx``'s device, copying across devices (and when asked)."""
    src_is_numpy = type(data) is _np_ndarray
    if not ctx.is_gpu:
        if src_is_numpy:
            return data.copy() if copy else data
        return data.get()
    xp = ctx.xp
    with ctx.device_scope():
        if not src_is_numpy and data.device.id == ctx.device_id and not copy:
            return data
        return xp.array(data, copy=True)


def _raw_key(key, data):
    """An index for the raw array ``data``: NDArray indices become integer arrays (MXNet indices are
    floats), and on a GPU, NumPy arrays and lists become device arrays."""
    if type(key) is int or type(key) is slice:
        return key
    if isinstance(key, tuple):
        return tuple(_raw_index(k, data) for k in key)
    return _raw_index(key, data)


def _raw_index(k, data):
    if isinstance(k, NDArray):
        k = k._data.astype(numpy.int64)
    if type(data) is _np_ndarray:
        return k if type(k) is _np_ndarray or not hasattr(k, "get") else k.get()
    if isinstance(k, (list, _np_ndarray)):
        return _xp_of(data).asarray(k)
    return k


def _is_advanced(key):
    keys = key if isinstance(key, tuple) else (key,)
    return any(not isinstance(k, (int, numpy.integer, slice, type(None), type(Ellipsis))) for k in keys)


def _maximum_op(a, b):
    return _binary(a, b, _maximum, _g_max)


def _minimum_op(a, b):
    return _binary(a, b, _minimum, _g_min)
