"""A stand-in array module that, like CuPy, keeps its arrays off NumPy's hands.

``StrictArray`` wraps a NumPy array; NumPy's functions and ufuncs work on it through NumPy's
dispatch protocols (``__array_ufunc__``, ``__array_function__``), and its results are
``StrictArray`` again, 0-d ones included (CuPy's reductions return 0-d device arrays). What CuPy
refuses, it refuses with ``HostTransfer``: implicit conversion to NumPy (``__array__``, so
``numpy.asarray(x)``), mixing it with a NumPy array of one or more dimensions in one operation,
and implicit Python scalars (``float(x)``, ``bool(x)``, ``int(x)``, ``x.tolist()``). The
explicit transfers are allowed: ``x.get()`` (CuPy's), ``x.item()``, and the module's
``asnumpy``. An instance of a subclass of a NumPy scalar type is refused as an operand
(``NotCupyOperand``), as CuPy's operators refuse it. ``module`` is the array module of these arrays (what ``array_module_of`` returns
for them under ``standin_array_module``); its functions build ``StrictArray`` results.

A code path written once for ``xp`` that runs here without ``HostTransfer`` moves no data to
the host behind its caller's back.
"""
from __future__ import annotations

import sys
import types

import numpy


class HostTransfer(TypeError):
    """An implicit move of device data to the host (or a host array into device arithmetic)."""


class NotCupyOperand(TypeError):
    """An operand CuPy's operators refuse: a subclass of a NumPy scalar type (CuPy accepts the
    NumPy scalar types themselves, not classes derived from them)."""


def _unwrap(value, strict_host=True):
    if isinstance(value, StrictArray):
        return value._a
    if isinstance(value, numpy.generic) and type(value).__module__ != "numpy":
        raise NotCupyOperand("%s, a subclass of %s, as an operand"
                             % (type(value).__name__, type(value).__mro__[1].__name__))
    if isinstance(value, numpy.ndarray) and value.ndim > 0 and strict_host:
        raise HostTransfer("a NumPy array of shape %s mixed with device arrays" % (value.shape,))
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v, strict_host) for v in value)
    return value


def _wrap(value):
    if isinstance(value, (numpy.ndarray, numpy.generic)) and not isinstance(value, StrictArray):
        return StrictArray(numpy.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(v) for v in value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class StrictArray(numpy.lib.mixins.NDArrayOperatorsMixin):
    __slots__ = ("_a",)

    def __init__(self, array):
        object.__setattr__(self, "_a", array)

    # --------------------------------------------------------------- NumPy's dispatch
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_unwrap(o) for o in out)
        result = getattr(ufunc, method)(*_unwrap(inputs), **kwargs)
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func, types_, args, kwargs):
        out = kwargs.get("out")
        result = func(*_unwrap(args), **_unwrap_kwargs(kwargs))
        if out is not None:
            return out
        return _wrap(result)

    # --------------------------------------------------------------- what CuPy refuses
    def __array__(self, *args, **kwargs):
        raise HostTransfer("implicit conversion of a device array to NumPy")

    def __float__(self):
        raise HostTransfer("float() of a device array (use .item() or .get())")

    def __int__(self):
        raise HostTransfer("int() of a device array (use .item() or .get())")

    def __index__(self):
        raise HostTransfer("a device array used as an index (use .item() or .get())")

    def __bool__(self):
        raise HostTransfer("the truth value of a device array (a hidden transfer)")

    def __complex__(self):
        raise HostTransfer("complex() of a device array")

    def tolist(self):
        raise HostTransfer("tolist() of a device array (use .get())")

    def __iter__(self):
        raise HostTransfer("iterating over a device array element by element")

    # --------------------------------------------------------------- explicit transfers
    def get(self):
        return self._a.copy()

    def item(self):
        return self._a.item()

    # --------------------------------------------------------------- the rest of ndarray
    def __getitem__(self, key):
        return _wrap(self._a[_unwrap(key)])

    def __setitem__(self, key, value):
        self._a[_unwrap(key)] = _unwrap(value)

    def __len__(self):
        return len(self._a)

    def __repr__(self):
        return "StrictArray(shape=%s, dtype=%s)" % (self._a.shape, self._a.dtype)

    def __getattr__(self, name):
        if name.startswith("__"):       # __array_interface__, __array_struct__: NumPy's doors
            raise AttributeError(name)
        value = getattr(self._a, name)
        if name in ("dtype", "shape", "size", "ndim", "itemsize", "nbytes", "strides"):
            return value
        if name in ("T", "real", "imag", "flat"):
            return _wrap(value)
        if callable(value):
            def method(*args, **kwargs):
                return _wrap(value(*_unwrap(args), **_unwrap_kwargs(kwargs)))
            return method
        return value

    @property
    def base(self):
        return None if self._a.base is None else self

    @property
    def device(self):
        return "standin"


def _unwrap_kwargs(kwargs):
    return {k: (tuple(_unwrap(o) for o in v) if k == "out" and isinstance(v, tuple)
                else _unwrap(v)) for k, v in kwargs.items()}


class _Device:
    """``cupy.cuda.Device``: the current device (always 0 here), usable as a context."""

    def __init__(self, device_id=0):
        self.id = device_id

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _module():
    """The array module of ``StrictArray``s: NumPy's names, results wrapped. Dtypes and other
    classes are NumPy's own; host arrays passed to its functions are an explicit transfer."""
    mod = types.ModuleType("standin_xp.module")

    def __getattr__(name):
        value = getattr(numpy, name)
        if isinstance(value, type) or not callable(value):
            return value

        def function(*args, **kwargs):
            out = kwargs.get("out")
            result = value(*_unwrap(args, strict_host=False),
                           **{k: _unwrap(v, strict_host=False) if k != "out" else _unwrap(v)
                              for k, v in kwargs.items()})
            return out if out is not None else _wrap(result)
        function.__name__ = name
        return function

    mod.__getattr__ = __getattr__
    mod.cuda = types.SimpleNamespace(Device=_Device)

    def as_strided(x, shape=None, strides=None):        # cupy.lib.stride_tricks.as_strided
        return _wrap(numpy.lib.stride_tricks.as_strided(_unwrap(x), shape=shape, strides=strides))
    mod.lib = types.SimpleNamespace(stride_tricks=types.SimpleNamespace(as_strided=as_strided))
    mod.asnumpy = lambda a: a.get() if isinstance(a, StrictArray) else numpy.asarray(a)
    mod.ndarray = StrictArray
    return mod


module = _module()


def to_device(a):
    return StrictArray(numpy.array(a, copy=True))


def standin_array_module(monkeypatch):
    """Make ``array_module_of`` (in ``trainer_cli.context`` and wherever it was imported by
    name) answer ``module`` for ``StrictArray``s."""
    from trainer_cli import context
    original = context.array_module_of

    def array_module_of(data):
        return module if isinstance(data, StrictArray) else original(data)
    for name, mod in list(sys.modules.items()):
        if name.startswith("trainer_cli") and getattr(mod, "array_module_of", None) is original:
            monkeypatch.setattr(mod, "array_module_of", array_module_of)


def run_on(fn, inputs, device):
    """``fn``'s outputs and the gradients of its inputs (NumPy arrays) of a seeded weighted sum
    of the outputs, run on NumPy arrays or (``device``) on the stand-in, returned as NumPy
    arrays: the same code on both, to compare."""
    import trainer_cli as mx
    from trainer_cli import autograd
    from trainer_cli.ndarray.interop import grad_buffer, raw, wrap
    move = to_device if device else numpy.copy
    arrays = [wrap(move(a), mx.cpu()) for a in inputs]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        ys = fn(*arrays)
        ys = ys if isinstance(ys, list) else [ys]
        total = None
        for k, y in enumerate(ys):
            w = wrap(move(numpy.random.RandomState(k).randn(*y.shape).astype(y.dtype)),
                     mx.cpu())
            term = (y * w).sum()
            total = term if total is None else total + term
    total.backward()
    got = [raw(y) for y in ys] + [raw(grad_buffer(a)) for a in arrays]
    return [g.get() if device else g for g in got]


def scatter_add(target, key, values):
    """``ndarray._scatter_add`` on the stand-in (its device branch is CuPy's own kernel)."""
    if isinstance(target, numpy.ndarray):
        numpy.add.at(target, key, values)
        return
    host = target.get()
    numpy.add.at(host, key.get(), values.get())
    target[...] = to_device(host)
