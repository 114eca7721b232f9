"""``mx.operator``: operators written in Python, as MXNet 1.9.1's ``mxnet.operator``.

A ``CustomOpProp`` subclass registered with ``@register("name")`` declares an operator's
arguments, outputs, auxiliary states, shapes and types and creates its ``CustomOp``, whose
``forward`` and ``backward`` write into the arrays they are given (``self.assign``).
``nd.Custom(*inputs, op_type="name", **kwargs)`` runs it (``ndarray/custom.py``), under
``autograd.record()`` too, and ``F.Custom`` in a hybridized block records MXNet's ``Custom``
node (``symbol/custom.py``).

What MXNet's C++ does around the Python calls is done by ``ndarray/custom.py``: this module
holds the classes a program subclasses and the registry. It imports neither ``ndarray`` nor
``gluon`` (``ndarray/custom.py`` imports it). MXNet's deprecated ``PythonOp``, ``NumpyOp`` and
``NDArrayOp`` (symbol-only, ctypes) are not provided: using one says so.
"""
from __future__ import annotations

import threading
import warnings

from .base import MXNetError, missing_attribute

__all__ = ["CustomOp", "CustomOpProp", "register", "get_all_registered_operators",
           "CustomOpError"]

# Names of MXNet 1.9.1's mxnet.operator that are deliberately absent.
_ABSENT = {
    "PythonOp": "deprecated symbolic Python operator base (use CustomOp / CustomOpProp)",
    "NumpyOp": "deprecated symbolic NumPy operator (use CustomOp / CustomOpProp)",
    "NDArrayOp": "deprecated symbolic NDArray operator (use CustomOp / CustomOpProp)",
    "get_operator_arguments": "C++ operator argument introspection",
    "OperatorArguments": "C++ operator argument introspection",
}


class CustomOpError(MXNetError):
    """A method of a custom operator (its prop's ``infer_shape``, ``create_operator``, ...,
    the op's ``forward`` or ``backward``) raised, or broke the protocol (replaced an array it
    was to write into). The original exception, if any, is the ``__cause__``."""


class CustomOp:
    """Base class of operators implemented in Python: ``forward`` and ``backward`` write their
    results into ``out_data`` / ``in_grad`` as ``req`` says (``self.assign`` does that)."""

    def __init__(self):
        pass

    def forward(self, is_train, req, in_data, out_data, aux):
        """Compute ``out_data`` from ``in_data`` (and ``aux``, which it may update in place).

        ``is_train`` is 1 under ``autograd.record()``/``train_mode()`` (``autograd.is_training()``),
        else 0, an int as MXNet passes it; ``req[i]`` says how to write ``out_data[i]``."""
        pass

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        """Write the gradient of each input into ``in_grad`` as ``req`` says ('write', or
        'null' for an input that needs no gradient)."""
        pass

    def assign(self, dst, req, src):
        """Write ``src`` into ``dst`` as ``req`` says: 'null' nothing, 'write'/'inplace' copy,
        'add' add to what ``dst`` holds."""
        if req == "null":
            return
        if req in ("write", "inplace"):
            dst[:] = src
        elif req == "add":
            dst[:] += src


class CustomOpProp:
    """Base class of an operator's properties: its inputs, outputs, shapes and types, the
    arrays its backward needs, and the ``CustomOp`` that computes it.

    ``need_top_grad``: whether ``backward`` reads ``out_grad`` (the default
    ``declare_backward_dependency`` lists it only then). The keyword arguments of ``nd.Custom``
    reach the subclass's constructor as strings, as MXNet passes them."""

    def __init__(self, need_top_grad=True):
        self.need_top_grad_ = need_top_grad

    def infer_shape(self, in_shape):
        """(input shapes, output shapes, aux shapes) from the input shapes (lists of ints); by
        default every output has the first input's shape and there are no aux states."""
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def infer_type(self, in_type):
        """(input types, output types, aux types) from the input types (NumPy scalar types such
        as ``numpy.float32``); by default everything has the first input's type."""
        return in_type, [in_type[0]] * len(self.list_outputs()), \
            [in_type[0]] * len(self.list_auxiliary_states())

    def infer_storage_type(self, in_stype):
        """(input, output, aux) storage types; the default accepts only 'default' storage."""
        for i, stype in enumerate(in_stype):
            assert stype == "default", (
                "Default infer_storage_type implementation doesnt allow non default stypes: "
                "found non default stype '%s' for in_stype[%d]. Please implement "
                "infer_storage_type and infer_storage_type_backward interface "
                "in your custom operator if you have non-default input/output stypes"
                % (stype, i))
        return in_stype, ["default"] * len(self.list_outputs()), \
            ["default"] * len(self.list_auxiliary_states())

    def infer_storage_type_backward(self, ograd_stype, in_stype, out_stype, igrad_stype,
                                    aux_stype):
        """The storage types of backward's arrays; the default makes all of them 'default'."""
        for i, stype in enumerate(ograd_stype):
            assert stype == "default", (
                "Default infer_storage_type_backward implementation doesnt allow non default "
                "stypes: found non default stype '%s' for ograd_stype[%d]. Please implement "
                "infer_storage_type and infer_storage_type_backward interface "
                "in your custom operator if you have non-default output gradient stypes"
                % (stype, i))
        lists = [ograd_stype, in_stype, out_stype, igrad_stype, aux_stype]
        for stypes in lists:
            stypes[:] = ["default"] * len(stypes)
        return tuple(lists)

    def list_outputs(self):
        return ["output"]

    def list_arguments(self):
        return ["data"]

    def list_auxiliary_states(self):
        return []

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        """The ids (among those given) of the arrays ``backward`` reads: by default the output
        gradients when ``need_top_grad``, the inputs and the outputs."""
        deps = []
        if self.need_top_grad_:
            deps.extend(out_grad)
        deps.extend(in_data)
        deps.extend(out_data)
        return deps

    def create_operator(self, ctx, in_shapes, in_dtypes):
        """The ``CustomOp`` for inputs of these shapes (lists of ints) and MXNet type codes
        (0 float32, 1 float64, 2 float16, 3 uint8, 4 int32, 5 int8, 6 int64), on ``ctx``."""
        return CustomOp()


class _Registry:
    """op_type -> the registered ``CustomOpProp`` subclass (MXNet keeps one per name)."""

    def __init__(self):
        self._props = {}
        self._lock = threading.Lock()

    def add(self, name, prop_cls):
        with self._lock:
            if name in self._props:
                # MXNet logs this as a warning and keeps the newer registration.
                warnings.warn("New registration is overriding existing custom operator %s" % name,
                              stacklevel=3)
            self._props[name] = prop_cls

    def find(self, name):
        return self._props.get(name)

    def names(self):
        return sorted(self._props)


_registry = _Registry()


def register(reg_name):
    """Register a subclass of ``CustomOpProp`` under ``reg_name`` (the ``op_type`` of
    ``nd.Custom``); used as a class decorator, it returns the class."""
    if not isinstance(reg_name, str) or not reg_name:
        raise TypeError("register: reg_name must be a non-empty string, got %r" % (reg_name,))

    def do_register(prop_cls):
        if not (isinstance(prop_cls, type) and issubclass(prop_cls, CustomOpProp)):
            raise TypeError("register(%r): expected a subclass of CustomOpProp, got %r"
                            % (reg_name, prop_cls))
        _registry.add(reg_name, prop_cls)
        return prop_cls
    return do_register


register("custom_op")(CustomOpProp)


def find_prop(op_type):
    """The ``CustomOpProp`` subclass registered as ``op_type``, or None."""
    return _registry.find(op_type)


def get_all_registered_operators():
    """The names of the operators available (MXNet lists its C++ operators; here: the ``nd``
    operators, ``nd.contrib``'s as ``_contrib_<name>``, and ``Custom``). Python custom
    operators are not among them, in MXNet either."""
    from . import ndarray as nd
    names = set(getattr(nd, "_OP_NAMES", ()))
    names.update("_contrib_" + name for name in getattr(nd.contrib, "__all__", ()))
    names.add("Custom")
    return sorted(names)


def __getattr__(name):
    raise missing_attribute(__name__, name, _ABSENT)
