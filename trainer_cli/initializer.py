"""Initializers (``trainer_cli.init``): how a Parameter's first value is drawn.

Under Gluon the chosen initializer's ``_init_weight`` fills every parameter it is given, whatever
its name (MXNet passes it as the ``__init__`` attribute); the name-based dispatch of
``__call__`` applies to plain ``InitDesc`` names without an ``__init__`` attribute.
"""
from __future__ import annotations

import json
import logging
import math
import re

import numpy

from . import random as _random
from .ndarray.creation import load as _load
from .ndarray.interop import array_module as _array_module, raw as _raw

__all__ = ["InitDesc", "Initializer", "Uniform", "Normal", "Xavier", "MSRAPrelu", "Zero", "One",
           "Constant", "Orthogonal", "LSTMBias", "Bilinear", "Mixed", "Load", "create", "names",
           "lookup", "register", "registry"]

registry: dict = {}


def register(klass):
    registry[klass.__name__.lower()] = klass
    return klass


class InitDesc(str):
    """A parameter name carrying attributes, as MXNet passes it to an initializer."""

    def __new__(cls, name, attrs=None, global_init=None):
        obj = super().__new__(cls, name)
        obj.attrs = attrs or {}
        obj.global_init = global_init
        return obj


def _fill(arr, values):
    _raw(arr)[...] = _array_module(arr).asarray(values) if isinstance(values, numpy.ndarray) else values


def _same_arguments(mine, theirs):
    if mine.keys() != theirs.keys():
        return False
    for key, value in mine.items():
        other = theirs[key]
        if hasattr(value, "shape") or hasattr(other, "shape"):  # arrays (Constant's value)
            value = value.asnumpy() if hasattr(value, "asnumpy") else value
            other = other.asnumpy() if hasattr(other, "asnumpy") else other
            if not numpy.array_equal(numpy.asarray(value), numpy.asarray(other)):
                return False
        elif value != other:
            return False
    return True


class Initializer:
    """Base class: subclasses fill an NDArray in place in ``_init_weight``."""

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False

    def dumps(self):
        return json.dumps([type(self).__name__.lower(), self._kwargs])

    def __repr__(self):
        args = ", ".join("%s=%r" % kv for kv in self._kwargs.items())
        return "%s(%s)" % (type(self).__name__, args)

    def __eq__(self, other):
        # As MXNet: the same kind with the same arguments, so that a Block built on another's
        # parameters (``params=``) may declare the initializer those parameters already have.
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and _same_arguments(self._kwargs, other._kwargs)

    def __hash__(self):
        return hash(type(self))

    def set_verbosity(self, verbose=False, print_func=None):
        """With ``verbose``, each array this initializer fills is logged (``logging.info``, as
        MXNet: ``Initialized NAME as PATTERN: STAT``), STAT being ``print_func(array)``, by
        default ``norm(x) / sqrt(x.size)``."""
        self._verbose = verbose
        self._print_func = _norm_stat if print_func is None else print_func
        return self

    def _verbose_print(self, desc, init, arr):
        if self._verbose and getattr(self, "_print_func", None):
            logging.info("Initialized %s as %s: %s", desc, init, self._print_func(arr))

    def __call__(self, desc, arr):
        init = getattr(desc, "attrs", {}).get("__init__", "")
        if init:
            create(init)._init_weight(desc, arr)
            self._verbose_print(desc, init, arr)
            return
        name = str(desc)
        if name.endswith("weight"):
            self._init_weight(desc, arr)
            pattern = "weight"
        elif name.endswith("bias") or name.endswith("beta"):
            self._init_zero(desc, arr)
            pattern = "bias" if name.endswith("bias") else "beta"
        elif name.endswith("gamma"):
            self._init_one(desc, arr)
            pattern = "gamma"
        elif name.endswith(("running_mean", "moving_mean", "moving_inv_var", "moving_avg", "min")):
            self._init_zero(desc, arr)
            pattern = "zero"
        elif name.endswith(("running_var", "moving_var", "max")):
            self._init_one(desc, arr)
            pattern = "one"
        else:
            raise ValueError(
                "Unknown initialization pattern for %s. Default initialization is limited to "
                "names ending in weight, bias, gamma, beta, running_mean or running_var." % name)
        self._verbose_print(desc, pattern, arr)

    def _init_zero(self, _, arr):
        _raw(arr)[...] = 0

    def _init_one(self, _, arr):
        _raw(arr)[...] = 1

    def _init_weight(self, name, arr):
        raise NotImplementedError("%s must implement _init_weight" % type(self).__name__)


def _norm_stat(arr) -> str:
    """MXNet's default verbose statistic: ``norm(x) / sqrt(x.size)``, as a string."""
    values = arr.asnumpy().astype(numpy.float64)
    return str(numpy.float32(numpy.linalg.norm(values.ravel()) / math.sqrt(max(1, values.size))))


def _uniform(arr, low, high):
    draw = _random.generator(None).random(arr.shape, dtype=numpy.float64)
    _fill(arr, (low + (high - low) * draw).astype(numpy.dtype(arr.dtype)))


def _normal(arr, loc, scale):
    draw = _random.generator(None).standard_normal(arr.shape, dtype=numpy.float64)
    _fill(arr, (loc + scale * draw).astype(numpy.dtype(arr.dtype)))


@register
class Zero(Initializer):
    def _init_weight(self, _, arr):
        _raw(arr)[...] = 0


@register
class One(Initializer):
    def _init_weight(self, _, arr):
        _raw(arr)[...] = 1


@register
class Constant(Initializer):
    def __init__(self, value=0):
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _, arr):
        value = self.value
        if hasattr(value, "asnumpy"):
            value = value.asnumpy()
        _fill(arr, numpy.asarray(value, dtype=numpy.dtype(arr.dtype)) if not numpy.isscalar(value) else value)

    def dumps(self):
        # An array value (NumPy or NDArray) is written as nested lists, as MXNet's is: a
        # hybridized block records its parameters' initializers as JSON.
        value = self._kwargs["value"]
        if isinstance(value, numpy.generic):
            value = value.item()
        elif not numpy.isscalar(value):
            value = (value.asnumpy() if hasattr(value, "asnumpy") else numpy.asarray(value)).tolist()
        return json.dumps([type(self).__name__.lower(), dict(self._kwargs, value=value)])


@register
class Uniform(Initializer):
    """Uniform on [-scale, scale]; MXNet's default initializer with scale 0.07."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        _uniform(arr, -self.scale, self.scale)


@register
class Normal(Initializer):
    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        _normal(arr, 0.0, self.sigma)


@register
class Xavier(Initializer):
    """Glorot: scale sqrt(magnitude / factor) from fan-in and fan-out."""

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        if rnd_type not in ("uniform", "gaussian"):
            raise ValueError("rnd_type must be 'uniform' or 'gaussian', got %r" % (rnd_type,))
        if factor_type not in ("avg", "in", "out"):
            raise ValueError("factor_type must be 'avg', 'in' or 'out', got %r" % (factor_type,))
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _init_weight(self, name, arr):
        shape = arr.shape
        if len(shape) < 2:
            raise ValueError("Xavier initializer cannot be applied to vector %s. It requires at "
                             "least 2D." % name)
        hw_scale = float(numpy.prod(shape[2:])) if len(shape) > 2 else 1.0
        fan_in, fan_out = shape[1] * hw_scale, shape[0] * hw_scale
        factor = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}[self.factor_type]
        scale = math.sqrt(self.magnitude / factor)
        if self.rnd_type == "uniform":
            _uniform(arr, -scale, scale)
        else:
            _normal(arr, 0.0, scale)


@register
class MSRAPrelu(Xavier):
    """He initialization for PReLU/ReLU networks."""

    def __init__(self, factor_type="avg", slope=0.25):
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


@register
class Orthogonal(Initializer):
    def __init__(self, scale=1.414, rand_type="uniform"):
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, _, arr):
        nout = arr.shape[0]
        nin = int(numpy.prod(arr.shape[1:]))
        gen = _random.generator(None)
        tmp = gen.uniform(-1.0, 1.0, (nout, nin)) if self.rand_type == "uniform" \
            else gen.standard_normal((nout, nin))
        u, _, v = numpy.linalg.svd(tmp, full_matrices=False)
        q = u if u.shape == tmp.shape else v
        _fill(arr, (self.scale * q.reshape(arr.shape)).astype(numpy.dtype(arr.dtype)))


@register
class LSTMBias(Initializer):
    """An LSTM's biases: zeros except the forget gate's (the second of the four), set to
    ``forget_bias`` (for ``i2h_bias_initializer`` of the LSTM layer or cell)."""

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, _, arr):
        hidden = arr.shape[0] // 4
        values = numpy.zeros(arr.shape, dtype=numpy.dtype(arr.dtype))
        values[hidden:2 * hidden] = self.forget_bias
        _fill(arr, values)


@register
class Bilinear(Initializer):
    """Bilinear upsampling kernels for a transposed convolution's (..., k, k) weight: each
    (h, w) plane holds ``(1 - |x/f - c|) * (1 - |y/f - c|)`` with ``f = ceil(width / 2)`` and
    ``c = (2f - 1 - f % 2) / 2f`` (MXNet's formula, which takes ``f`` from the width for both
    axes, computed in float64 and stored in the weight's dtype)."""

    def _init_weight(self, name, arr):
        shape = arr.shape
        if len(shape) != 4:
            raise ValueError("Bilinear initializes 4-D upsampling weights (channels, channels, "
                             "height, width); %s has shape %s" % (name, tuple(shape)))
        f = math.ceil(shape[3] / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        x = numpy.arange(shape[3], dtype=numpy.float64)
        y = numpy.arange(shape[2], dtype=numpy.float64)
        plane = numpy.outer(1 - numpy.abs(y / f - c), 1 - numpy.abs(x / f - c))
        _fill(arr, numpy.broadcast_to(plane.astype(numpy.float32), shape)
              .astype(numpy.dtype(arr.dtype)))


class Load(Initializer):
    """Each parameter from ``param`` (a file ``nd.save`` wrote, MXNet's format, or a dict of
    name -> NDArray; ``arg:``/``aux:`` prefixes dropped) where it holds the parameter's name,
    else by ``default_init``; ``verbose`` logs which. Unlike MXNet 1.9.1's (which Gluon refuses
    as "not of string type"), it also initializes Gluon parameters. Not a config name."""

    def __init__(self, param, default_init=None, verbose=False):
        source = param
        if isinstance(param, str):
            param = _load(param)
        if not isinstance(param, dict):
            raise TypeError("Load: param must be a file of named arrays or a dict of them, got "
                            "%s" % (type(param).__name__ if not isinstance(source, str)
                                    else "%s (a list of unnamed arrays)" % source))
        super().__init__(verbose=verbose)
        self.param = {name[4:] if name.startswith(("arg:", "aux:")) else name: value
                      for name, value in param.items()}
        self.default_init = None if default_init is None else create(default_init)
        self.verbose = verbose

    def __call__(self, desc, arr):
        name = str(desc)
        value = self.param.get(name)
        if value is not None:
            if tuple(value.shape) != tuple(arr.shape):
                raise ValueError("Parameter %s cannot be initialized from loading. Shape "
                                 "mismatch, target %s vs loaded %s"
                                 % (name, tuple(arr.shape), tuple(value.shape)))
            _fill(arr, value.asnumpy().astype(numpy.dtype(arr.dtype)))
            source = "loading"
        elif self.default_init is None:
            raise ValueError("Cannot Initialize %s. Not found in loaded param and no default "
                             "Initializer is provided." % name)
        else:
            self.default_init(desc, arr)
            source = "default"
        if self.verbose:
            logging.info("Initialized %s by %s", name, source)


class Mixed(Initializer):
    """MXNet's: each parameter by the first of ``initializers`` whose pattern (a regular
    expression, matched at the start of the name) fits it. MXNet 1.9.1's Gluon refuses it in
    ``initialize`` (it is not an Initializer there); here it works. Not a config name."""

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise ValueError("Mixed: %d patterns for %d initializers"
                             % (len(patterns), len(initializers)))
        initializers = [create(init) for init in initializers]
        super().__init__(patterns=list(patterns), initializers=initializers)
        self.map = [(re.compile(p), init) for p, init in zip(patterns, initializers)]

    def __call__(self, desc, arr):
        attrs = dict(getattr(desc, "attrs", {}))
        own = attrs.pop("__init__", None)
        if own is not None and own is not self:
            super().__call__(desc, arr)         # the parameter's own initializer decides
            return
        desc = InitDesc(str(desc), attrs, getattr(desc, "global_init", None))
        for pattern, init in self.map:
            if pattern.match(desc):
                init(desc, arr)
                return
        raise ValueError('Parameter name %s did not match any pattern. Consider adding a ".*" '
                         "pattern at the end with a default initializer." % desc)


# MXNet's string aliases for initializers.
_ALIASES = {"zeros": Zero, "ones": One, "zero": Zero, "one": One}


def names() -> list:
    """The initializer names ``create`` takes (registered classes and MXNet's aliases), sorted."""
    return sorted(set(registry) | set(_ALIASES))


def lookup(name):
    """The initializer class of ``name`` (any case), or None."""
    key = str(name).lower()
    return _ALIASES.get(key) or registry.get(key)


def create(init, **kwargs):
    """An initializer from an instance, a name ('xavier', 'zeros', ...) or MXNet's JSON dump."""
    if isinstance(init, Initializer):
        return init
    if isinstance(init, type) and issubclass(init, Initializer):
        return init(**kwargs)
    if isinstance(init, str):
        if init.startswith("["):
            name, params = json.loads(init)
            return create(name, **params)
        klass = lookup(init)
        if klass is None:
            raise ValueError("unknown initializer %r; expected one of %s" % (init, names()))
        return klass(**kwargs)
    raise TypeError("cannot make an initializer from %r" % (init,))
