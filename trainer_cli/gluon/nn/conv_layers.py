"""Convolution and pooling layers: Conv1D/2D/3D, their transposes, Max/Avg/GlobalMax/GlobalAvg
pooling in 1-3 D, and ReflectionPad2D.

Names, defaults, parameter shapes and reprs follow MXNet 1.9's ``gluon.nn.conv_layers``: every
convolution is prefixed ``conv`` and every pooling layer ``pool``; the weight is
``(channels, in_channels // groups, *kernel_size)`` (transposed: ``(in_channels,
channels // groups, *kernel_size)``) with ``in_channels`` inferred at the first call when given as
0. Channels-last layouts (``NWC``, ``NHWC``, ``NDHWC``) keep MXNet's weight layouts for them
(``(channels, *kernel_size, in_channels // groups)``; transposed ``(in_channels, *kernel_size,
channels // groups)``) and run the channels-first operators between transposes.
"""
from __future__ import annotations

import numbers

from ...ndarray import nn as _nn
from ...ndarray import NDArray
from ...symbol import Symbol
from ..block import HybridBlock
from .basic_layers import Activation

__all__ = ["Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
           "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D",
           "AvgPool2D", "AvgPool3D", "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D",
           "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D", "ReflectionPad2D"]

_LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _expand(value, n):
    return (value,) * n if isinstance(value, numbers.Integral) else tuple(value)


def _channels_last(layout, n):
    """Whether ``layout`` is the channels-last one of ``n`` spatial axes (else channels first)."""
    if layout not in _LAYOUTS[n]:
        raise ValueError("layout must be %r or %r for %d spatial axes, got %r"
                         % (_LAYOUTS[n] + (n, layout)))
    return layout == _LAYOUTS[n][1]


def _to_first(F, x):
    return F.transpose(x, (0, x.ndim - 1) + tuple(range(1, x.ndim - 1)))


def _to_last(F, x):
    return F.transpose(x, (0,) + tuple(range(2, x.ndim)) + (1,))


class _Conv(HybridBlock):
    """N-D convolution over ``nd.Convolution``, optionally followed by an activation."""

    _plan_step = "op"

    _op_name = "Convolution"

    def __init__(self, channels, kernel_size, strides, padding, dilation, groups, layout,
                 in_channels=0, activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", adj=None, **kwargs):
        super().__init__(**kwargs)
        n = len(kernel_size)
        self._last = _channels_last(layout, n)
        with self.name_scope():
            self._channels = channels
            self._in_channels = in_channels
            self._kwargs = {
                "kernel": tuple(kernel_size), "stride": _expand(strides, n),
                "dilate": _expand(dilation, n), "pad": _expand(padding, n), "num_filter": channels,
                "num_group": groups, "no_bias": not use_bias, "layout": layout}
            if adj is not None:
                self._kwargs["adj"] = _expand(adj, n)
            # The operators run channels first; channels-last data is transposed around them.
            self._op_kwargs = dict(self._kwargs, layout=_LAYOUTS[n][0])
            self.weight = self.params.get(
                "weight", shape=self._weight_shape(in_channels), init=weight_initializer,
                allow_deferred_init=True)
            if use_bias:
                self.bias = self.params.get("bias", shape=(channels,), init=bias_initializer,
                                            allow_deferred_init=True)
            else:
                self.bias = None
            self.act = Activation(activation, prefix=activation + "_") if activation is not None else None

    def _alias(self):
        return "conv"

    def _relu_op(self, x, weight, bias=None):
        kw = self._op_kwargs
        return _nn._convolution(x, weight, bias, kw["kernel"], kw["stride"], kw["dilate"],
                                kw["pad"], kw["num_filter"], kw["num_group"], kw["layout"], True)

    def _takes_relu(self):
        # As activation='relu' does: a plain channels-first convolution without an activation
        # of its own.
        return type(self) in (Conv1D, Conv2D, Conv3D) and self.act is None and not self._last

    def _weight_shape(self, in_channels):
        """(out, in // groups, *kernel), or channels last (out, *kernel, in // groups)."""
        kernel, groups = self._kwargs["kernel"], self._kwargs["num_group"]
        if self._last:
            return (self._channels,) + kernel + (in_channels // groups,)
        return (self._channels, in_channels // groups) + kernel

    def infer_shape(self, x, *args):
        self.weight.shape = self._weight_shape(x.shape[-1] if self._last else x.shape[1])

    def hybrid_forward(self, F, x, weight, bias=None):
        act = self.act
        if type(act) is Activation and act._act_type == "relu" and type(x) is NDArray \
                and self._op_name == "Convolution" and not self._last \
                and not act._forward_hooks and not act._forward_pre_hooks:
            # The usual hidden layer: one op and one recorded node, the ReLU fused into the
            # convolution's output pass (and its mask into the gradient's).
            return self._relu_op(x, weight, bias)
        op = getattr(F, self._op_name)
        if isinstance(x, Symbol):
            # MXNet's operators take channels-last layouts themselves: the graph says so.
            args = (x, weight) if bias is None else (x, weight, bias)
            out = op(*args, name="fwd", **self._kwargs)
            return self.act(out) if self.act is not None else out
        if self._last:
            x, weight = _to_first(F, x), _to_first(F, weight)
        if bias is None:
            out = op(x, weight, **self._op_kwargs)
        else:
            out = op(x, weight, bias, **self._op_kwargs)
        if self._last:
            out = _to_last(F, out)
        return self.act(out) if self.act is not None else out

    def __repr__(self):
        return conv_repr(self, self._kwargs, self.weight, self.bias)


def conv_repr(block, kw, weight, bias):
    """MXNet's repr of a convolution layer: ``Conv2D(3 -> 8, kernel_size=(3, 3), stride=...)``
    from its operator arguments ``kw``, its weight and bias (None without)."""
    n = len(kw["kernel"])
    s = "{name}({mapping}, kernel_size={kernel}, stride={stride}"
    if kw["pad"] != (0,) * n:
        s += ", padding={pad}"
    if kw["dilate"] != (1,) * n:
        s += ", dilation={dilate}"
    if kw["num_group"] != 1:
        s += ", groups={num_group}"
    if bias is None:
        s += ", bias=False"
    if block.act is not None:
        s += ", {}".format(block.act)
    s += ")"
    shape = weight.shape
    return s.format(name=type(block).__name__,
                    mapping="{0} -> {1}".format(shape[1] if shape[1] else None, shape[0]), **kw)


class Conv1D(_Conv):
    def __init__(self, channels, kernel_size, strides=1, padding=0, dilation=1, groups=1,
                 layout="NCW", activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _expand(kernel_size, 1), strides, padding, dilation, groups,
                         layout, in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, **kwargs)


class Conv2D(_Conv):
    """2-D convolution: ``(N, C, H, W) -> (N, channels, H', W')``."""

    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0), dilation=(1, 1),
                 groups=1, layout="NCHW", activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _expand(kernel_size, 2), strides, padding, dilation, groups,
                         layout, in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, **kwargs)


class Conv3D(_Conv):
    def __init__(self, channels, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0),
                 dilation=(1, 1, 1), groups=1, layout="NCDHW", activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _expand(kernel_size, 3), strides, padding, dilation, groups,
                         layout, in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, **kwargs)


class _ConvTranspose(_Conv):
    """Transposed convolution over ``nd.Deconvolution``: weight ``(in_channels,
    channels // groups, *kernel_size)`` (channels last: ``(in_channels, *kernel_size,
    channels // groups)``); ``output_padding`` adds positions at the end of each output axis."""

    _op_name = "Deconvolution"

    def _weight_shape(self, in_channels):
        kernel, groups = self._kwargs["kernel"], self._kwargs["num_group"]
        if self._last:
            return (in_channels,) + kernel + (self._channels // groups,)
        return (in_channels, self._channels // groups) + kernel

    @property
    def outpad(self):
        return self._kwargs["adj"]


class Conv1DTranspose(_ConvTranspose):
    def __init__(self, channels, kernel_size, strides=1, padding=0, output_padding=0, dilation=1,
                 groups=1, layout="NCW", activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _expand(kernel_size, 1), strides, padding, dilation, groups,
                         layout, in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, adj=output_padding, **kwargs)


class Conv2DTranspose(_ConvTranspose):
    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0),
                 output_padding=(0, 0), dilation=(1, 1), groups=1, layout="NCHW",
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _expand(kernel_size, 2), strides, padding, dilation, groups,
                         layout, in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, adj=output_padding, **kwargs)


class Conv3DTranspose(_ConvTranspose):
    def __init__(self, channels, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0),
                 output_padding=(0, 0, 0), dilation=(1, 1, 1), groups=1, layout="NCDHW",
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        super().__init__(channels, _expand(kernel_size, 3), strides, padding, dilation, groups,
                         layout, in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, adj=output_padding, **kwargs)


class _Pooling(HybridBlock):
    """Pooling over ``nd.Pooling``; ``strides=None`` means the pool size, as in MXNet."""

    _plan_step = "op"

    def __init__(self, pool_size, strides, padding, ceil_mode, global_pool, pool_type, layout,
                 count_include_pad=None, **kwargs):
        super().__init__(**kwargs)
        n = len(pool_size)
        self._last = _channels_last(layout, n)
        if strides is None:
            strides = pool_size
        self._kwargs = {
            "kernel": tuple(pool_size), "stride": _expand(strides, n), "pad": _expand(padding, n),
            "global_pool": global_pool, "pool_type": pool_type, "layout": layout,
            "pooling_convention": "full" if ceil_mode else "valid"}
        if count_include_pad is not None:
            self._kwargs["count_include_pad"] = count_include_pad

    def _alias(self):
        return "pool"

    def hybrid_forward(self, F, x):
        if isinstance(x, Symbol):
            return F.Pooling(x, name="fwd", **self._kwargs)
        if self._last:
            kwargs = dict(self._kwargs, layout=_LAYOUTS[len(self._kwargs["kernel"])][0])
            return _to_last(F, F.Pooling(_to_first(F, x), **kwargs))
        return F.Pooling(x, **self._kwargs)

    def __repr__(self):
        s = "{name}(size={kernel}, stride={stride}, padding={pad}, ceil_mode={ceil_mode}"
        s += ", global_pool={global_pool}, pool_type={pool_type}, layout={layout})"
        return s.format(name=type(self).__name__,
                        ceil_mode=self._kwargs["pooling_convention"] == "full", **self._kwargs)


def _max_pool(n, default_layout):
    class MaxPool(_Pooling):
        def __init__(self, pool_size=(2,) * n, strides=None, padding=0, layout=default_layout,
                     ceil_mode=False, **kwargs):
            super().__init__(_expand(pool_size, n), strides, padding, ceil_mode, False, "max",
                             layout, **kwargs)
    return MaxPool


def _avg_pool(n, default_layout):
    class AvgPool(_Pooling):
        def __init__(self, pool_size=(2,) * n, strides=None, padding=0, layout=default_layout,
                     ceil_mode=False, count_include_pad=True, **kwargs):
            super().__init__(_expand(pool_size, n), strides, padding, ceil_mode, False, "avg",
                             layout, count_include_pad, **kwargs)
    return AvgPool


def _global_pool(n, default_layout, pool_type):
    class GlobalPool(_Pooling):
        def __init__(self, layout=default_layout, **kwargs):
            super().__init__((1,) * n, None, 0, True, True, pool_type, layout, **kwargs)
    return GlobalPool


def _named(cls, name, doc):
    cls.__name__ = cls.__qualname__ = name
    cls.__doc__ = doc
    return cls


MaxPool1D = _named(_max_pool(1, "NCW"), "MaxPool1D", "Max pooling over (N, C, W).")
MaxPool2D = _named(_max_pool(2, "NCHW"), "MaxPool2D", "Max pooling over (N, C, H, W).")
MaxPool3D = _named(_max_pool(3, "NCDHW"), "MaxPool3D", "Max pooling over (N, C, D, H, W).")
AvgPool1D = _named(_avg_pool(1, "NCW"), "AvgPool1D", "Average pooling over (N, C, W).")
AvgPool2D = _named(_avg_pool(2, "NCHW"), "AvgPool2D", "Average pooling over (N, C, H, W).")
AvgPool3D = _named(_avg_pool(3, "NCDHW"), "AvgPool3D", "Average pooling over (N, C, D, H, W).")
GlobalMaxPool1D = _named(_global_pool(1, "NCW", "max"), "GlobalMaxPool1D", "Max over W: (N, C, 1).")
GlobalMaxPool2D = _named(_global_pool(2, "NCHW", "max"), "GlobalMaxPool2D",
                         "Max over H, W: (N, C, 1, 1).")
GlobalMaxPool3D = _named(_global_pool(3, "NCDHW", "max"), "GlobalMaxPool3D",
                         "Max over D, H, W: (N, C, 1, 1, 1).")
GlobalAvgPool1D = _named(_global_pool(1, "NCW", "avg"), "GlobalAvgPool1D", "Mean over W: (N, C, 1).")
GlobalAvgPool2D = _named(_global_pool(2, "NCHW", "avg"), "GlobalAvgPool2D",
                         "Mean over H, W: (N, C, 1, 1).")
GlobalAvgPool3D = _named(_global_pool(3, "NCDHW", "avg"), "GlobalAvgPool3D",
                         "Mean over D, H, W: (N, C, 1, 1, 1).")


class ReflectionPad2D(HybridBlock):
    """Pad the two spatial axes of ``(N, C, H, W)`` by reflection: ``padding`` an int, or MXNet's
    8-tuple ``pad_width``."""

    _plan_step = "op"

    def __init__(self, padding=0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(padding, numbers.Integral):
            padding = (0, 0, 0, 0, padding, padding, padding, padding)
        if len(padding) != 8:
            raise ValueError("ReflectionPad2D padding must be an int or 8 values, got %r"
                             % (padding,))
        self._padding = tuple(padding)

    def hybrid_forward(self, F, x):
        return F.pad(x, mode="reflect", pad_width=self._padding)
