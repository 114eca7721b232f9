"""Convolutional recurrent cells (Shi et al., 2015): the RNN, LSTM and GRU cells with their
input-to-hidden and hidden-to-hidden products as convolutions over (N, C, *spatial) arrays (or
channels last), in 1, 2 or 3 spatial dimensions. The hidden-to-hidden convolution is padded to
keep the state's size (its kernel must be odd); the state's size is the input-to-hidden
convolution's output size, worked out from ``input_shape`` (one sample's shape, in
``conv_layout``) when the cell is made. Parameters are MXNet's (``i2h_weight`` (gates * hidden_channels, in_channels, *kernel),
or (gates * hidden_channels, *kernel, in_channels) for a channels-last ``conv_layout``,
``h2h_weight``, ``i2h_bias``, ``h2h_bias``; gates i, f, c, o for the LSTM, r, z, o for the GRU),
and each step is the same operations as MXNet's cells, so the values are theirs."""
from __future__ import annotations

import numbers

from ...rnn.rnn_cell import HybridRecurrentCell

__all__ = ["Conv1DRNNCell", "Conv2DRNNCell", "Conv3DRNNCell", "Conv1DLSTMCell",
           "Conv2DLSTMCell", "Conv3DLSTMCell", "Conv1DGRUCell", "Conv2DGRUCell", "Conv3DGRUCell"]


def _per_axis(value, dims, what):
    if isinstance(value, numbers.Integral):
        return (int(value),) * dims
    value = tuple(value)
    if len(value) != dims:
        raise ValueError("For %dD convolution, the convolution settings can only be either int "
                         "or list/tuple of length %d; %s is %r" % (dims, dims, what, value))
    return value


class _ConvCell(HybridRecurrentCell):
    """What the convolutional cells share: their parameters, shapes and two convolutions."""

    _gates: tuple = ()

    def __init__(self, input_shape, hidden_channels, i2h_kernel, h2h_kernel, i2h_pad,
                 i2h_dilate, h2h_dilate, i2h_weight_initializer, h2h_weight_initializer,
                 i2h_bias_initializer, h2h_bias_initializer, dims, conv_layout, activation,
                 prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        channels_first, channels_last = "NC" + "DHW"[3 - dims:], "N" + "DHW"[3 - dims:] + "C"
        if conv_layout not in (channels_first, channels_last):
            raise ValueError("%s: conv_layout must be %r or %r, got %r"
                             % (type(self).__name__, channels_first, channels_last, conv_layout))
        self._hidden_channels = hidden_channels
        self._input_shape = tuple(input_shape)
        self._conv_layout = conv_layout
        self._activation = activation
        self._i2h_kernel = _per_axis(i2h_kernel, dims, "i2h_kernel")
        self._i2h_pad = _per_axis(i2h_pad, dims, "i2h_pad")
        self._i2h_dilate = _per_axis(i2h_dilate, dims, "i2h_dilate")
        self._h2h_kernel = _per_axis(h2h_kernel, dims, "h2h_kernel")
        self._h2h_dilate = _per_axis(h2h_dilate, dims, "h2h_dilate")
        self._stride = (1,) * dims
        if any(k % 2 == 0 for k in self._h2h_kernel):
            raise ValueError("Only support odd number, get h2h_kernel= %s" % (h2h_kernel,))
        # The padding that keeps the state's size through the hidden-to-hidden convolution.
        self._h2h_pad = tuple(d * (k - 1) // 2 for d, k in zip(self._h2h_dilate,
                                                                self._h2h_kernel))
        last = conv_layout == channels_last
        self._channel_axis = dims + 1 if last else 1
        self._in_channels = self._input_shape[-1 if last else 0]
        sizes = self._input_shape[:-1] if last else self._input_shape[1:]
        spatial = tuple(size + 2 * p - d * (k - 1) if size else 0     # 0: not known yet
                        for size, p, d, k in zip(sizes, self._i2h_pad, self._i2h_dilate,
                                                 self._i2h_kernel))
        self._state_shape = spatial + (hidden_channels,) if last else (hidden_channels,) + spatial
        # Channels-last cells keep MXNet's weight layout (rows, *kernel, in) and run the
        # convolutions channels first, between transposes.
        self._to_first = (0, dims + 1) + tuple(range(1, dims + 1)) if last else None
        self._to_last = (0,) + tuple(range(2, dims + 2)) + (1,) if last else None
        rows = hidden_channels * len(self._gates)
        i2h_shape = ((rows,) + self._i2h_kernel + (self._in_channels,) if last
                     else (rows, self._in_channels) + self._i2h_kernel)
        h2h_shape = ((rows,) + self._h2h_kernel + (hidden_channels,) if last
                     else (rows, hidden_channels) + self._h2h_kernel)
        self.i2h_weight = self.params.get("i2h_weight", shape=i2h_shape,
                                          init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=h2h_shape,
                                          init=h2h_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(rows,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(rows,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def __repr__(self):
        shape = self.i2h_weight.shape
        in_channels = shape[1 if self._channel_axis == 1 else -1]
        mapping = "{0} -> {1}".format(in_channels if in_channels else None, shape[0])
        return "%s(%s, %s, %s)" % (type(self).__name__, mapping, self._activation,
                                   self._conv_layout)

    def _state(self, batch_size):
        return {"shape": (batch_size,) + self._state_shape, "__layout__": self._conv_layout}

    def _convolutions(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        prefix = "t%d_" % self._counter
        filters = self._hidden_channels * len(self._gates)
        state = states[0]
        if self._to_first is not None:
            inputs, state = (F.transpose(x, axes=self._to_first) for x in (inputs, state))
            i2h_weight, h2h_weight = (F.transpose(w, axes=self._to_first)
                                      for w in (i2h_weight, h2h_weight))
        i2h = F.Convolution(data=inputs, weight=i2h_weight, bias=i2h_bias, num_filter=filters,
                            kernel=self._i2h_kernel, stride=self._stride, pad=self._i2h_pad,
                            dilate=self._i2h_dilate, name=prefix + "i2h")
        h2h = F.Convolution(data=state, weight=h2h_weight, bias=h2h_bias, num_filter=filters,
                            kernel=self._h2h_kernel, stride=self._stride, pad=self._h2h_pad,
                            dilate=self._h2h_dilate, name=prefix + "h2h")
        if self._to_last is not None:
            i2h, h2h = (F.transpose(x, axes=self._to_last) for x in (i2h, h2h))
        return i2h, h2h


class _ConvRNN(_ConvCell):
    _gates = ("",)

    def state_info(self, batch_size=0):
        return [self._state(batch_size)]

    def _alias(self):
        return "conv_rnn"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._convolutions(F, inputs, states, i2h_weight, h2h_weight, i2h_bias,
                                      h2h_bias)
        output = self._get_activation(F, i2h + h2h, self._activation,
                                      name="t%d_out" % self._counter)
        return output, [output]


class _ConvLSTM(_ConvCell):
    _gates = ("_i", "_f", "_c", "_o")

    def state_info(self, batch_size=0):
        return [self._state(batch_size), self._state(batch_size)]

    def _alias(self):
        return "conv_lstm"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._convolutions(F, inputs, states, i2h_weight, h2h_weight, i2h_bias,
                                      h2h_bias)
        prefix = "t%d_" % self._counter
        gates = F.SliceChannel(i2h + h2h, num_outputs=4, axis=self._channel_axis,
                               name=prefix + "slice")
        in_gate = F.Activation(gates[0], act_type="sigmoid", name=prefix + "i")
        forget_gate = F.Activation(gates[1], act_type="sigmoid", name=prefix + "f")
        in_transform = self._get_activation(F, gates[2], self._activation, name=prefix + "c")
        out_gate = F.Activation(gates[3], act_type="sigmoid", name=prefix + "o")
        next_c = F.elemwise_add(forget_gate * states[1], in_gate * in_transform,
                                name=prefix + "state")
        next_h = F.elemwise_mul(out_gate, self._get_activation(F, next_c, self._activation),
                                name=prefix + "out")
        return next_h, [next_h, next_c]


class _ConvGRU(_ConvCell):
    _gates = ("_r", "_z", "_o")

    def state_info(self, batch_size=0):
        return [self._state(batch_size)]

    def _alias(self):
        return "conv_gru"

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        i2h, h2h = self._convolutions(F, inputs, states, i2h_weight, h2h_weight, i2h_bias,
                                      h2h_bias)
        prefix = "t%d_" % self._counter
        i2h_r, i2h_z, i2h = F.SliceChannel(i2h, num_outputs=3, axis=self._channel_axis,
                                           name=prefix + "i2h_slice")
        h2h_r, h2h_z, h2h = F.SliceChannel(h2h, num_outputs=3, axis=self._channel_axis,
                                           name=prefix + "h2h_slice")
        reset_gate = F.Activation(i2h_r + h2h_r, act_type="sigmoid", name=prefix + "r_act")
        update_gate = F.Activation(i2h_z + h2h_z, act_type="sigmoid", name=prefix + "z_act")
        candidate = self._get_activation(F, i2h + reset_gate * h2h, self._activation,
                                         name=prefix + "h_act")
        next_h = F.elemwise_add((1. - update_gate) * candidate, update_gate * states[0],
                                name=prefix + "out")
        return next_h, [next_h]


def _cell_class(name, base, dims, layout, what):
    def __init__(self, input_shape, hidden_channels, i2h_kernel, h2h_kernel,
                 i2h_pad=(0,) * dims, i2h_dilate=(1,) * dims, h2h_dilate=(1,) * dims,
                 i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 conv_layout=layout, activation="tanh", prefix=None, params=None):
        base.__init__(self, input_shape, hidden_channels, i2h_kernel, h2h_kernel, i2h_pad,
                      i2h_dilate, h2h_dilate, i2h_weight_initializer, h2h_weight_initializer,
                      i2h_bias_initializer, h2h_bias_initializer, dims, conv_layout,
                      activation, prefix=prefix, params=params)
    doc = ("%dD convolutional %s cell over %s arrays: ``input_shape`` is one sample's shape "
           "(channels first), ``hidden_channels`` the state's channels, ``i2h_kernel``/"
           "``h2h_kernel`` the two convolutions' kernels (``h2h_kernel`` odd), ``activation`` a "
           "name, a LeakyReLU block or a callable." % (dims, what, layout))
    return type(name, (base,), {"__init__": __init__, "__doc__": doc,
                                "__module__": __name__, "__qualname__": name})


Conv1DRNNCell = _cell_class("Conv1DRNNCell", _ConvRNN, 1, "NCW", "RNN")
Conv2DRNNCell = _cell_class("Conv2DRNNCell", _ConvRNN, 2, "NCHW", "RNN")
Conv3DRNNCell = _cell_class("Conv3DRNNCell", _ConvRNN, 3, "NCDHW", "RNN")
Conv1DLSTMCell = _cell_class("Conv1DLSTMCell", _ConvLSTM, 1, "NCW", "LSTM")
Conv2DLSTMCell = _cell_class("Conv2DLSTMCell", _ConvLSTM, 2, "NCHW", "LSTM")
Conv3DLSTMCell = _cell_class("Conv3DLSTMCell", _ConvLSTM, 3, "NCDHW", "LSTM")
Conv1DGRUCell = _cell_class("Conv1DGRUCell", _ConvGRU, 1, "NCW", "GRU")
Conv2DGRUCell = _cell_class("Conv2DGRUCell", _ConvGRU, 2, "NCHW", "GRU")
Conv3DGRUCell = _cell_class("Conv3DGRUCell", _ConvGRU, 3, "NCDHW", "GRU")
