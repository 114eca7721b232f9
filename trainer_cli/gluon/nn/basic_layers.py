"""Basic layers: Dense, Activation, Flatten, Identity and Lambda wrappers."""
from __future__ import annotations

import numpy

from ...ndarray import NDArray
from ...ndarray import ops as _ops
from ...symbol import Symbol
from ..block import Block, HybridBlock
from ..parameter import DeferredInitializationError

__all__ = ["Dense", "Activation", "Flatten", "Identity", "Lambda", "HybridLambda"]


class Activation(HybridBlock):
    """An elementwise activation: relu, sigmoid, tanh, softrelu or softsign."""

    _plan_step = "op"

    def __init__(self, activation, **kwargs):
        # Set first: the automatic prefix (relu0_) is taken from it during Block.__init__.
        self._act_type = activation
        super().__init__(**kwargs)

    def _alias(self):
        return self._act_type if isinstance(getattr(self, "_act_type", None), str) else "activation"

    def hybrid_forward(self, F, x):
        return F.Activation(x, act_type=self._act_type, name="fwd")

    def _plain_relu(self):
        """Whether this layer is ``relu`` as ``Activation`` computes it (a layer before it may
        apply it in its own pass: ``HybridSequential``)."""
        return type(self) is Activation and self._act_type == "relu"

    def __repr__(self):
        return "Activation(%s)" % self._act_type


class Dense(HybridBlock):
    """``activation(dot(x, weight.T) + bias)``; ``in_units=0`` infers the input size at first call."""

    _plan_step = "dense"

    def __init__(self, units, activation=None, use_bias=True, flatten=True, dtype="float32",
                 weight_initializer=None, bias_initializer="zeros", in_units=0, **kwargs):
        super().__init__(**kwargs)
        self._flatten = flatten
        self._units = units
        self._in_units = in_units
        with self.name_scope():
            self.weight = self.params.get("weight", shape=(units, in_units), init=weight_initializer,
                                          dtype=dtype, allow_deferred_init=True)
            if use_bias:
                self.bias = self.params.get("bias", shape=(units,), init=bias_initializer,
                                            dtype=dtype, allow_deferred_init=True)
            else:
                self.bias = None
            self.act = Activation(activation, prefix=activation + "_") if activation is not None else None

    def infer_shape(self, x, *args):
        in_units = int(numpy.prod(x.shape[1:])) if self._flatten else x.shape[-1]
        self.weight.shape = (self._units, in_units)

    def forward(self, x, *args):
        # HybridBlock.forward without the keyword dict, for the usual call: every layer pays
        # this at every step.
        if args or type(x) is not NDArray or type(self).hybrid_forward is not Dense.hybrid_forward:
            return super().forward(x, *args)
        try:
            weight = self.weight.data(x.context)
            bias = None if self.bias is None else self.bias.data(x.context)
        except DeferredInitializationError:
            return super().forward(x)
        return self._dense(x, weight, bias)

    def hybrid_forward(self, F, x, weight, bias=None):
        if isinstance(x, Symbol):
            out = F.FullyConnected(x, weight, bias, no_bias=bias is None, num_hidden=self._units,
                                   flatten=self._flatten, name="fwd")
            return self.act(out) if self.act is not None else out
        return self._dense(x, weight, bias)

    def _dense(self, x, weight, bias):
        act = self.act
        if act is None:
            return _ops._fully_connected(x, weight, bias, self._flatten, False)
        if type(act) is Activation and act._act_type == "relu" and not act._forward_hooks \
                and not act._forward_pre_hooks:
            # The usual hidden layer: one op and one recorded node instead of two.
            return self._relu_op(x, weight, bias)
        return act(_ops._fully_connected(x, weight, bias, self._flatten, False))

    def _takes_relu(self):
        # As activation='relu' does: a plain Dense without an activation of its own.
        return type(self) is Dense and self.act is None

    def _relu_op(self, x, weight, bias=None):
        return _ops._fully_connected(x, weight, bias, self._flatten, True)

    def __repr__(self):
        shape = self.weight.shape
        return "Dense(%s -> %s, %s)" % (shape[1] if shape and shape[1] else None, shape[0],
                                        self.act if self.act is not None else "linear")


class Flatten(HybridBlock):
    """Reshape to (batch, -1)."""

    _plan_step = "op"

    def hybrid_forward(self, F, x):
        return F.flatten(x)

    def __repr__(self):
        return "Flatten"


class Identity(HybridBlock):
    _plan_step = "op"

    def hybrid_forward(self, F, x):
        return x

    def __repr__(self):
        return "Identity"


class Lambda(Block):
    """Wrap a function (or the name of an ``nd`` function) as a Block."""

    def __init__(self, function, prefix=None):
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            from ... import ndarray as nd
            if not hasattr(nd, function):
                raise ValueError("Function name %s is not found in ndarray." % function)
            function = getattr(nd, function)
        elif not callable(function):
            raise ValueError("Unrecognized function in lambda: %r of type %s"
                             % (function, type(function)))
        self._func_impl = function

    def forward(self, *args):
        return self._func_impl(*args)

    def __repr__(self):
        return "Lambda(%s)" % getattr(self._func_impl, "__name__", "function")


class HybridLambda(HybridBlock):
    """Wrap ``function(F, x, *args)`` (or the name of an ``nd`` function) as a HybridBlock."""

    def __init__(self, function, prefix=None):
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            from ... import ndarray as nd
            if not hasattr(nd, function):
                raise ValueError("Function name %s is not found in ndarray." % function)
            name = function
            self._func = lambda F, *args: getattr(F, name)(*args)
            self._func_name = name
        elif not callable(function):
            raise ValueError("Unrecognized function in lambda: %r of type %s"
                             % (function, type(function)))
        else:
            self._func = function
            self._func_name = getattr(function, "__name__", "function")

    def hybrid_forward(self, F, x, *args):
        return self._func(F, x, *args)

    def __repr__(self):
        return "HybridLambda(%s)" % self._func_name
