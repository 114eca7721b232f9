"""Dropout, BatchNorm, LayerNorm, InstanceNorm, GroupNorm and Embedding with MXNet 1.9's
parameters, names and defaults.

BatchNorm's ``running_mean``/``running_var`` are parameters with ``grad_req='null'``, updated in
place by the forward pass in training mode (``autograd.record()``), as MXNet's operator does.
"""
from __future__ import annotations

import numpy

from ... import ndarray as _nd
from ..block import HybridBlock

__all__ = ["Dropout", "BatchNorm", "LayerNorm", "InstanceNorm", "GroupNorm", "Embedding"]



def _scale_and_shift(block, size, center, scale, gamma_initializer, beta_initializer):
    """The ``gamma`` and ``beta`` Parameters of a normalization layer (frozen where turned off)."""
    gamma = block.params.get("gamma", grad_req="write" if scale else "null", shape=(size,),
                             init=gamma_initializer, allow_deferred_init=True)
    beta = block.params.get("beta", grad_req="write" if center else "null", shape=(size,),
                            init=beta_initializer, allow_deferred_init=True)
    return gamma, beta

class Dropout(HybridBlock):
    """Zero each element with probability ``rate`` in training mode and scale the rest by
    ``1/(1-rate)``; ``axes`` share one mask value along those axes. Identity in predict mode."""

    _plan_step = "op"

    def __init__(self, rate, axes=(), **kwargs):
        super().__init__(**kwargs)
        self._rate = rate
        self._axes = axes

    def hybrid_forward(self, F, x):
        if self._rate > 0:
            return F.Dropout(x, p=self._rate, axes=self._axes, name="fwd", cudnn_off=False)
        return F.identity(x)

    def __repr__(self):
        return "{name}(p = {rate}, axes={axes})".format(name=type(self).__name__, rate=self._rate,
                                                        axes=self._axes)


class BatchNorm(HybridBlock):
    """Batch normalization over ``axis`` (the channel axis, 1 for NCHW).

    ``scale=False`` fixes gamma at 1 (MXNet's ``fix_gamma``); ``center=False`` freezes beta at 0.
    """

    _plan_step = "op"

    def __init__(self, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, beta_initializer="zeros", gamma_initializer="ones",
                 running_mean_initializer="zeros", running_variance_initializer="ones",
                 in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"axis": axis, "eps": epsilon, "momentum": momentum,
                        "fix_gamma": not scale, "use_global_stats": use_global_stats}
        self._axis = axis
        if in_channels != 0:
            self.in_channels = in_channels
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null",
                                     shape=(in_channels,), init=gamma_initializer,
                                     allow_deferred_init=True, differentiable=scale)
        self.beta = self.params.get("beta", grad_req="write" if center else "null",
                                    shape=(in_channels,), init=beta_initializer,
                                    allow_deferred_init=True, differentiable=center)
        self.running_mean = self.params.get("running_mean", grad_req="null", shape=(in_channels,),
                                            init=running_mean_initializer,
                                            allow_deferred_init=True, differentiable=False)
        self.running_var = self.params.get("running_var", grad_req="null", shape=(in_channels,),
                                           init=running_variance_initializer,
                                           allow_deferred_init=True, differentiable=False)

    def _alias(self):
        return "batchnorm"

    def cast(self, dtype):
        # MXNet keeps BatchNorm in float32 under float16 (its statistics need the range).
        if numpy.dtype(dtype).name == "float16":
            dtype = "float32"
        super().cast(dtype)

    def infer_shape(self, x, *args):
        axis = self._axis + len(x.shape) if self._axis < 0 else self._axis
        if not 0 <= axis < len(x.shape):
            # MXNet's BatchNorm shape rule refuses it, and the deferred initialization reports
            # that as its ValueError (an IndexError here would escape `except ValueError` and
            # `except MXNetError`); its axis is a size_t there, so a negative one wraps.
            from .._shape_inference import ShapeInferenceError, _FAILED
            raise ShapeInferenceError(
                "%sMXNetError: Error in operator %sfwd: Check failed: channelAxis < "
                "dshape.ndim() (%d vs. %d) : Channel axis out of range: %d"
                % (_FAILED, self.prefix, axis % (1 << 64), len(x.shape), self._axis))
        channels = x.shape[axis]
        for p in (self.gamma, self.beta, self.running_mean, self.running_var):
            p.shape = (channels,)

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        return F.BatchNorm(x, gamma, beta, running_mean, running_var, name="fwd", **self._kwargs)

    def _takes_relu(self):
        # Not a subclass, which may compute otherwise.
        return type(self) is BatchNorm

    def _relu_op(self, x, gamma, beta, running_mean, running_var):
        # One pass over the data, one node when recorded.
        return _nd.contrib.BatchNormWithReLU(x, gamma, beta, running_mean, running_var,
                                             name="fwd", **self._kwargs)

    def __repr__(self):
        in_channels = self.gamma.shape[0]
        content = ", ".join("=".join([k, repr(v)]) for k, v in self._kwargs.items())
        return "{name}({content}, in_channels={c})".format(
            name=type(self).__name__, content=content, c=in_channels if in_channels else None)


class BatchNormReLU(BatchNorm):
    """``BatchNorm`` followed by ``relu`` (MXNet 1.9's fused layer, ``contrib.BatchNormWithReLU``):
    the same parameters, arguments and statistics."""

    _plan_step = "op"

    def _alias(self):
        return "batchnormrelu"

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        # One fused node, as MXNet records it (its export holds _contrib_BatchNormWithReLU).
        return F.contrib.BatchNormWithReLU(x, gamma, beta, running_mean, running_var,
                                           name="fwd", **self._kwargs)


class LayerNorm(HybridBlock):
    """Layer normalization over ``axis`` (the last by default) with learned gamma and beta."""

    _plan_step = "op"

    def __init__(self, axis=-1, epsilon=1e-5, center=True, scale=True, beta_initializer="zeros",
                 gamma_initializer="ones", in_channels=0, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._kwargs = {"eps": epsilon, "axis": axis, "center": center, "scale": scale}
        self._axis = axis
        self._epsilon = epsilon
        self._center = center
        self._scale = scale
        self.gamma, self.beta = _scale_and_shift(self, in_channels, center, scale, gamma_initializer,
                                                 beta_initializer)

    def _alias(self):
        return "layernorm"

    def infer_shape(self, x, *args):
        channels = x.shape[self._axis]
        self.gamma.shape = (channels,)
        self.beta.shape = (channels,)

    def hybrid_forward(self, F, data, gamma, beta):
        return F.LayerNorm(data, gamma=gamma, beta=beta, axis=self._axis, eps=self._epsilon)

    def __repr__(self):
        in_channels = self.gamma.shape[0]
        content = ", ".join("=".join([k, repr(v)]) for k, v in self._kwargs.items())
        return "{name}({content}, in_channels={c})".format(name=type(self).__name__, content=content,
                                                           c=in_channels)


class Embedding(HybridBlock):
    """Map integer indices (given as floats) to rows of a ``(input_dim, output_dim)`` weight.

    With ``sparse_grad=True`` the weight's gradient is row_sparse (``grad_stype='row_sparse'``):
    the sorted distinct looked-up rows only, so a step on a large table costs what the batch
    touches; the Trainer then reduces and updates it as MXNet does (lazily, by default).
    """

    def __init__(self, input_dim, output_dim, dtype="float32", weight_initializer=None,
                 sparse_grad=False, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype,
                        "sparse_grad": sparse_grad}
        self.weight = self.params.get("weight", shape=(input_dim, output_dim), init=weight_initializer,
                                      dtype=dtype, allow_deferred_init=True,
                                      grad_stype="row_sparse" if sparse_grad else "default")

    def hybrid_forward(self, F, x, weight):
        return F.Embedding(x, weight, name="fwd", **self._kwargs)

    def __repr__(self):
        return "{block_name}({input_dim} -> {output_dim}, {dtype})".format(
            block_name=type(self).__name__, **self._kwargs)


class InstanceNorm(HybridBlock):
    """Normalize each sample's channel over its other axes; ``axis`` is the channel axis.

    As in MXNet, ``scale=False`` (the default) and ``center=False`` only stop ``gamma``/``beta``
    from training; their values still apply.
    """

    _plan_step = "op"

    def __init__(self, axis=1, epsilon=1e-5, center=True, scale=False, beta_initializer="zeros",
                 gamma_initializer="ones", in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"eps": epsilon, "axis": axis, "center": center, "scale": scale}
        self._axis = axis
        self._epsilon = epsilon
        self.gamma, self.beta = _scale_and_shift(self, in_channels, center, scale, gamma_initializer,
                                                 beta_initializer)

    def infer_shape(self, x, *args):
        channels = x.shape[self._axis]
        self.gamma.shape = self.beta.shape = (channels,)

    def hybrid_forward(self, F, x, gamma, beta):
        if self._axis == 1:
            return F.InstanceNorm(x, gamma, beta, name="fwd", eps=self._epsilon)
        x = F.swapaxes(x, 1, self._axis)
        return F.swapaxes(F.InstanceNorm(x, gamma, beta, name="fwd", eps=self._epsilon), 1,
                          self._axis)

    def __repr__(self):
        content = ", ".join("=".join([k, repr(v)]) for k, v in self._kwargs.items())
        return "{name}({content}, in_channels={c})".format(
            name=type(self).__name__, content=content, c=self.gamma.shape[0])


class GroupNorm(HybridBlock):
    """Normalize ``(N, C, ...)`` in ``num_groups`` groups of channels; as MXNet 1.9.1's,
    ``gamma`` and ``beta`` have one value per group (shape ``(num_groups,)``)."""

    _plan_step = "op"

    def __init__(self, num_groups=1, epsilon=1e-5, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._kwargs = {"eps": epsilon, "num_groups": num_groups, "center": center,
                        "scale": scale}
        self._num_groups = num_groups
        self._epsilon = epsilon
        self.gamma, self.beta = _scale_and_shift(self, num_groups, center, scale, gamma_initializer,
                                                 beta_initializer)

    def hybrid_forward(self, F, data, gamma, beta):
        return F.GroupNorm(data, gamma=gamma, beta=beta, num_groups=self._num_groups,
                           eps=self._epsilon)

    def __repr__(self):
        content = ", ".join("=".join([k, repr(v)]) for k, v in self._kwargs.items())
        return "{name}({content})".format(name=type(self).__name__, content=content)
