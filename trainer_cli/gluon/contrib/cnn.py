"""``gluon.contrib.cnn``: MXNet 1.9.1's deformable convolution layers, ``DeformableConvolution``
(v1) and ``ModulatedDeformableConvolution`` (v2).

Each layer holds two convolutions, as MXNet's does: an ordinary one (``offset_weight``,
``offset_bias``, zero-initialized, so a fresh layer starts as a plain convolution) that computes
the sampling offsets from the input (v2: also the modulation mask, ``2 * sigmoid``), and the
deformable one (``deformable_conv_weight``, ``deformable_conv_bias``) over
``nd.contrib.DeformableConvolution`` / ``ModulatedDeformableConvolution``. Parameter names,
their order, shapes (``deformable_conv_weight`` is ``(channels, 0, kh, kw)`` until the first
call, even with ``in_channels``), initializers, prefixes (``deformable_conv0_``,
``modulated_deformable_conv0_``) and reprs are MXNet's.

Only the NCHW layout runs (MXNet's constructor accepts NHWC, its operators then refuse it).
A hybridized network holding these layers records MXNet's graph (``F.contrib``'s
``_contrib_DeformableConvolution`` / ``_contrib_ModulatedDeformableConvolution`` nodes), so
``export`` writes MXNet's files and ``gluon.SymbolBlock`` runs them.
"""
from __future__ import annotations

import numbers

from ..block import HybridBlock
from ..nn import Activation
from ..nn.conv_layers import conv_repr

__all__ = ["DeformableConvolution", "ModulatedDeformableConvolution"]


def _per_axis(value, count):
    return (value,) * count if isinstance(value, numbers.Integral) else tuple(value)


class _Deformable(HybridBlock):
    """What the two layers share: the offset convolution's and the deformable convolution's
    settings, parameter shapes and deferred shape inference."""

    _plan_step = "op"

    # Offset channels per kernel tap and deformable group (v1: dy, dx; v2: dy, dx, mask).
    _per_tap = 2

    def _settings(self, channels, kernel_size, strides, padding, dilation, groups,
                  num_deformable_group, layout, use_bias, in_channels, offset_use_bias, op_name,
                  adj):
        self._channels = channels
        self._in_channels = in_channels
        if layout not in ("NCHW", "NHWC"):
            raise ValueError("%s: only supports 'NCHW' and 'NHWC' layout for now, got %r"
                             % (type(self).__name__, layout))
        kernel_size = _per_axis(kernel_size, 2)
        strides = _per_axis(strides, len(kernel_size))
        padding = _per_axis(padding, len(kernel_size))
        dilation = _per_axis(dilation, len(kernel_size))
        self._op_name = op_name
        taps = kernel_size[0] * kernel_size[1]
        self._offset_channels = num_deformable_group * self._per_tap * taps
        self._kwargs_offset = {
            "kernel": kernel_size, "stride": strides, "dilate": dilation, "pad": padding,
            "num_filter": self._offset_channels, "num_group": groups,
            "no_bias": not offset_use_bias, "layout": layout}
        self._kwargs_deformable_conv = {
            "kernel": kernel_size, "stride": strides, "dilate": dilation, "pad": padding,
            "num_filter": channels, "num_group": groups,
            "num_deformable_group": num_deformable_group, "no_bias": not use_bias,
            "layout": layout}
        if adj:
            self._kwargs_offset["adj"] = adj
            self._kwargs_deformable_conv["adj"] = adj
        self._layout = layout

    def _conv_weight_shape(self, filters, in_channels):
        """A convolution weight's shape in the layout: (out, in / groups, kh, kw) or channels
        last (out, kh, kw, in / groups)."""
        kernel = tuple(self._kwargs_offset["kernel"])
        per_group = in_channels // self._kwargs_offset["num_group"]
        if self._layout == "NHWC":
            return (filters,) + kernel + (per_group,)
        return (filters, per_group) + kernel

    def _add_offset_params(self, offset_weight_initializer, offset_bias_initializer,
                           offset_use_bias):
        self.offset_weight = self.params.get(
            "offset_weight", shape=self._conv_weight_shape(self._offset_channels,
                                                           self._in_channels),
            init=offset_weight_initializer, allow_deferred_init=True)
        if offset_use_bias:
            self.offset_bias = self.params.get("offset_bias", shape=(self._offset_channels,),
                                               init=offset_bias_initializer,
                                               allow_deferred_init=True)
        else:
            self.offset_bias = None

    def _add_conv_params(self, weight_initializer, bias_initializer, use_bias):
        kernel = self._kwargs_deformable_conv["kernel"]
        # MXNet leaves the input channels unknown here whatever in_channels says.
        self.deformable_conv_weight = self.params.get(
            "deformable_conv_weight", shape=(self._channels, 0, kernel[0], kernel[1]),
            init=weight_initializer, allow_deferred_init=True)
        # MXNet gives this shape as a list, which it keeps until the input fixes it: its repr,
        # and the __shape__ the variable records at the first hybridized call ("[4, 0, 3, 3]"
        # in an exported -symbol.json), show the list.
        self.deformable_conv_weight._shape = list(self.deformable_conv_weight._shape)
        if use_bias:
            self.deformable_conv_bias = self.params.get(
                "deformable_conv_bias", shape=(self._channels,), init=bias_initializer,
                allow_deferred_init=True)
        else:
            self.deformable_conv_bias = None

    def _add_activation(self, activation):
        self.act = Activation(activation, prefix=activation + "_") if activation else None

    def infer_shape(self, x, *args):
        channels = x.shape[3] if self._layout == "NHWC" else x.shape[1]
        self.offset_weight.shape = self._conv_weight_shape(self._offset_channels, channels)
        self.deformable_conv_weight.shape = self._conv_weight_shape(self._channels, channels)

    def _offsets(self, F, x, offset_weight, offset_bias):
        if offset_bias is None:
            return F.Convolution(x, offset_weight, cudnn_off=True, **self._kwargs_offset)
        return F.Convolution(x, offset_weight, offset_bias, cudnn_off=True,
                             **self._kwargs_offset)


class DeformableConvolution(_Deformable):
    """2-D deformable convolution v1 (Dai et al., 2017): a convolution whose sampling places
    are moved by offsets that an ordinary convolution of the same input computes (both are in
    this layer). ``(N, C, H, W) -> (N, channels, H', W')``; the arguments are MXNet's."""

    def __init__(self, channels, kernel_size=(1, 1), strides=(1, 1), padding=(0, 0),
                 dilation=(1, 1), groups=1, num_deformable_group=1, layout="NCHW",
                 use_bias=True, in_channels=0, activation=None, weight_initializer=None,
                 bias_initializer="zeros", offset_weight_initializer="zeros",
                 offset_bias_initializer="zeros", offset_use_bias=True,
                 op_name="DeformableConvolution", adj=None, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        with self.name_scope():
            self._settings(channels, kernel_size, strides, padding, dilation, groups,
                           num_deformable_group, layout, use_bias, in_channels,
                           offset_use_bias, op_name, adj)
            # MXNet's order: the offset convolution's parameters first.
            self._add_offset_params(offset_weight_initializer, offset_bias_initializer,
                                    offset_use_bias)
            self._add_conv_params(weight_initializer, bias_initializer, use_bias)
            self._add_activation(activation)

    def hybrid_forward(self, F, x, offset_weight, deformable_conv_weight, offset_bias=None,
                       deformable_conv_bias=None):
        offset = self._offsets(F, x, offset_weight, offset_bias)
        if deformable_conv_bias is None:
            act = F.contrib.DeformableConvolution(data=x, offset=offset,
                                                  weight=deformable_conv_weight, name="fwd",
                                                  **self._kwargs_deformable_conv)
        else:
            act = F.contrib.DeformableConvolution(data=x, offset=offset,
                                                  weight=deformable_conv_weight,
                                                  bias=deformable_conv_bias, name="fwd",
                                                  **self._kwargs_deformable_conv)
        if self.act:
            act = self.act(act)
        return act

    def _alias(self):
        return "deformable_conv"

    def __repr__(self):
        return conv_repr(self, self._kwargs_deformable_conv, self.deformable_conv_weight,
                         self.deformable_conv_bias)


class ModulatedDeformableConvolution(_Deformable):
    """2-D modulated deformable convolution v2 (Zhu et al., 2018): as
    ``DeformableConvolution``, the offset convolution also giving each sample a weight,
    ``2 * sigmoid`` of its last ``num_deformable_group * kh * kw`` channels. MXNet's layer has
    no repr of its own (a Block's is shown)."""

    _per_tap = 3

    def __init__(self, channels, kernel_size=(1, 1), strides=(1, 1), padding=(0, 0),
                 dilation=(1, 1), groups=1, num_deformable_group=1, layout="NCHW",
                 use_bias=True, in_channels=0, activation=None, weight_initializer=None,
                 bias_initializer="zeros", offset_weight_initializer="zeros",
                 offset_bias_initializer="zeros", offset_use_bias=True,
                 op_name="ModulatedDeformableConvolution", adj=None, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        with self.name_scope():
            self._settings(channels, kernel_size, strides, padding, dilation, groups,
                           num_deformable_group, layout, use_bias, in_channels,
                           offset_use_bias, op_name, adj)
            kernel = self._kwargs_offset["kernel"]
            self.offset_split_index = num_deformable_group * 2 * kernel[0] * kernel[1]
            # MXNet's order: the deformable convolution's parameters first.
            self._add_conv_params(weight_initializer, bias_initializer, use_bias)
            self._add_offset_params(offset_weight_initializer, offset_bias_initializer,
                                    offset_use_bias)
            self._add_activation(activation)

    def hybrid_forward(self, F, x, offset_weight, deformable_conv_weight, offset_bias=None,
                       deformable_conv_bias=None):
        offset = self._offsets(F, x, offset_weight, offset_bias)
        offset_t = F.slice_axis(offset, axis=1, begin=0, end=self.offset_split_index)
        mask = F.slice_axis(offset, axis=1, begin=self.offset_split_index, end=None)
        mask = F.sigmoid(mask) * 2
        if deformable_conv_bias is None:
            act = F.contrib.ModulatedDeformableConvolution(
                data=x, offset=offset_t, mask=mask, weight=deformable_conv_weight, name="fwd",
                **self._kwargs_deformable_conv)
        else:
            act = F.contrib.ModulatedDeformableConvolution(
                data=x, offset=offset_t, mask=mask, weight=deformable_conv_weight,
                bias=deformable_conv_bias, name="fwd", **self._kwargs_deformable_conv)
        if self.act:
            act = self.act(act)
        return act

    def _alias(self):
        return "modulated_deformable_conv"
