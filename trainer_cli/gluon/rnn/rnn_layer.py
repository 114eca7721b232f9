"""The fused recurrent layers ``RNN``, ``LSTM`` and ``GRU``, with MXNet 1.9.1's parameters.

Each layer holds one Parameter per matrix, named as MXNet names them (``l0_i2h_weight``,
``r1_h2h_bias``, ``l0_h2r_weight`` for an LSTM's projection), concatenates them into MXNet's
flat vector at each call and runs the fused ``nd.RNN`` operator. ``save_parameters`` writes them
under MXNet's structural names (``_unfused.0.i2h_weight``, ``_unfused.0.l_cell.i2h_weight`` when
bidirectional), so that ``.params`` files move between MXNet and here both ways.
"""
from __future__ import annotations

import re

from ... import ndarray as _nd
from ...ndarray import NDArray
from ...ndarray import ops as _ops
from ...ndarray.rnn import RNN as _fused_rnn
from ... import symbol as _sym
from ...symbol import Symbol
from ..block import HybridBlock
from . import _deferred_states as _deferred

__all__ = ["RNN", "LSTM", "GRU"]

_PARAM_NAME = re.compile(r"(l|r)(\d+)_(i2h|h2h|h2r)_(weight|bias)\Z")


class _RNNLayer(HybridBlock):
    """The machinery the three layers share; ``mode`` picks the cell."""

    # Recording the graph calls the layer with the states the eager call made for itself: the
    # eager call still returns what its own caller asked for.
    _per_graph_attrs = ("skip_states",)

    def __init__(self, hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                 i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                 h2h_bias_initializer, mode, projection_size, h2r_weight_initializer,
                 lstm_state_clip_min, lstm_state_clip_max, lstm_state_clip_nan, dtype,
                 use_sequence_length=False, **kwargs):
        super().__init__(**kwargs)
        if layout not in ("TNC", "NTC"):
            raise ValueError("Invalid layout %s; must be one of ['TNC' or 'NTC']" % layout)
        self._hidden_size = hidden_size
        self._projection_size = projection_size if projection_size else None
        self._num_layers = num_layers
        self._mode = mode
        self._layout = layout
        self._dropout = dropout
        self._dir = 2 if bidirectional else 1
        self._input_size = input_size
        self._i2h_weight_initializer = i2h_weight_initializer
        self._h2h_weight_initializer = h2h_weight_initializer
        self._i2h_bias_initializer = i2h_bias_initializer
        self._h2h_bias_initializer = h2h_bias_initializer
        self._h2r_weight_initializer = h2r_weight_initializer
        self._lstm_state_clip_min = lstm_state_clip_min
        self._lstm_state_clip_max = lstm_state_clip_max
        self._lstm_state_clip_nan = lstm_state_clip_nan
        self._dtype = dtype
        self._use_sequence_length = use_sequence_length
        self.skip_states = None
        self._gates = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}[mode]

        gates_hidden = self._gates * hidden_size
        width = input_size
        state = self._projection_size or hidden_size
        for i in range(num_layers):
            for d in ["l", "r"][:self._dir]:
                self._register_param("%s%d_i2h_weight" % (d, i), (gates_hidden, width),
                                     i2h_weight_initializer, dtype)
                self._register_param("%s%d_h2h_weight" % (d, i), (gates_hidden, state),
                                     h2h_weight_initializer, dtype)
                self._register_param("%s%d_i2h_bias" % (d, i), (gates_hidden,),
                                     i2h_bias_initializer, dtype)
                self._register_param("%s%d_h2h_bias" % (d, i), (gates_hidden,),
                                     h2h_bias_initializer, dtype)
                if self._projection_size:
                    self._register_param("%s%d_h2r_weight" % (d, i),
                                         (self._projection_size, hidden_size),
                                         h2r_weight_initializer, dtype)
            width = state * self._dir

    def _register_param(self, name, shape, init, dtype):
        param = self.params.get(name, shape=shape, init=init, allow_deferred_init=True,
                                dtype=dtype)
        setattr(self, name, param)
        return param

    def __repr__(self):
        text = "{name}({mapping}, {layout}"
        if self._num_layers != 1:
            text += ", num_layers={layers}"
        if self._dropout != 0:
            text += ", dropout={dropout}"
        if self._dir == 2:
            text += ", bidirectional"
        text += ")"
        shape = self.l0_i2h_weight.shape
        mapping = "{0} -> {1}".format(shape[1] if shape[1] else None, shape[0] // self._gates)
        return text.format(name=type(self).__name__, mapping=mapping, layout=self._layout,
                           layers=self._num_layers, dropout=self._dropout)

    def _collect_params_with_prefix(self, prefix=""):
        # MXNet saves a fused layer under the names of the cells it would unfuse into.
        if prefix:
            prefix += "."
        bidirectional = any(_PARAM_NAME.match(key).group(1) == "r" for key in self._reg_params)
        out = {}
        for key, param in self._reg_params.items():
            d, layer, kind, what = _PARAM_NAME.match(key).groups()
            if bidirectional:
                name = "_unfused.%s.%s_cell.%s_%s" % (layer, d, kind, what)
            else:
                name = "_unfused.%s.%s_%s" % (layer, kind, what)
            out[prefix + name] = param
        for name, child in self._children.items():
            out.update(child._collect_params_with_prefix(prefix + name))
        return out

    def state_info(self, batch_size=0):
        raise NotImplementedError

    def cast(self, dtype):
        super().cast(dtype)
        self._dtype = dtype

    def begin_state(self, batch_size=0, func=_nd.zeros, **kwargs):
        """Zeros (or ``func``'s values) for every begin state, for a batch of ``batch_size``."""
        states = []
        for i, info in enumerate(self.state_info(batch_size)):
            if info is not None:
                info.update(kwargs)
            else:
                info = kwargs
            info = dict(info, name="%sh0_%d" % (self.prefix, i))
            state = func(**info)
            states.append(_deferred.remember(state, func, info) if batch_size == 0 else state)
        return states

    def infer_shape(self, inputs, *args):
        width = inputs.shape[2]     # the feature axis is last in both layouts
        for d in ["l", "r"][:self._dir]:
            param = getattr(self, "%s0_i2h_weight" % d)
            param.shape = (param.shape[0], width)

    def __call__(self, inputs, states=None, sequence_length=None, **kwargs):
        self.skip_states = states is None
        if states is None:
            if isinstance(inputs, Symbol):
                # A graph being recorded: zeros whose batch size the graph's input fills in.
                states = self.begin_state(0, func=_sym.zeros)
            else:
                batch_size = inputs.shape[self._layout.find("N")]
                states = self.begin_state(batch_size, ctx=inputs.context, dtype=inputs.dtype)
        if isinstance(states, (NDArray, Symbol)):
            states = [states]
        if isinstance(inputs, NDArray):
            states = _deferred.resolve(self, states, inputs.shape[self._layout.find("N")])
        if self._use_sequence_length:
            return super().__call__(inputs, states, sequence_length)
        return super().__call__(inputs, states)

    def hybrid_forward(self, F, inputs, states, sequence_length=None, **kwargs):
        if isinstance(inputs, Symbol):
            out = self._symbol_kernel(F, inputs, states, sequence_length, **kwargs)
            return out[0] if self.skip_states else out
        batch_size = inputs.shape[self._layout.find("N")]
        for state, info in zip(states, self.state_info(batch_size)):
            if state.shape != info["shape"]:
                raise ValueError("Invalid recurrent state shape. Expecting %s, got %s."
                                 % (str(info["shape"]), str(state.shape)))
        out = self._forward_kernel(inputs, states, sequence_length, **kwargs)
        return out[0] if self.skip_states else out

    def _forward_kernel(self, inputs, states, sequence_length, **kwargs):
        if self._layout == "NTC":
            inputs = _ops.swapaxes(inputs, 0, 1)
        kinds = ["i2h", "h2h", "h2r"] if self._projection_size else ["i2h", "h2h"]
        names = ["%s%d_%s_%s" % (d, layer, kind, what)
                 for what in ["weight", "bias"]
                 for layer in range(self._num_layers)
                 for d in ["l", "r"][:self._dir]
                 for kind in kinds
                 if kind != "h2r" or what != "bias"]
        flat = _ops.concat(*[_ops.reshape(kwargs[name], (-1,)) for name in names], dim=0)
        cell_state = states[1] if self._mode == "lstm" else None
        rnn = _fused_rnn(inputs, flat, states[0], cell_state, sequence_length,
                         use_sequence_length=self._use_sequence_length,
                         state_size=self._hidden_size, projection_size=self._projection_size,
                         num_layers=self._num_layers, bidirectional=self._dir == 2,
                         p=self._dropout, state_outputs=True, mode=self._mode,
                         lstm_state_clip_min=self._lstm_state_clip_min,
                         lstm_state_clip_max=self._lstm_state_clip_max,
                         lstm_state_clip_nan=self._lstm_state_clip_nan)
        if self._mode == "lstm":
            outputs, states = rnn[0], [rnn[1], rnn[2]]
        else:
            outputs, states = rnn[0], [rnn[1]]
        if self._layout == "NTC":
            outputs = _ops.swapaxes(outputs, 0, 1)
        return outputs, states


    def _symbol_kernel(self, F, inputs, states, sequence_length, **kwargs):
        """The graph MXNet records for the fused layer (its ``_forward_kernel`` with symbols)."""
        if self._layout == "NTC":
            inputs = F.swapaxes(inputs, 0, 1)
        kinds = ["i2h", "h2h", "h2r"] if self._projection_size else ["i2h", "h2h"]
        params = [kwargs["%s%d_%s_%s" % (d, layer, kind, what)].reshape(-1)
                  for what in ["weight", "bias"]
                  for layer in range(self._num_layers)
                  for d in ["l", "r"][:self._dir]
                  for kind in kinds
                  if kind != "h2r" or what != "bias"]
        params = F._internal._rnn_param_concat(*params, dim=0)
        rnn_args = list(states) + ([sequence_length] if self._use_sequence_length else [])
        rnn = F.RNN(inputs, params, *rnn_args, use_sequence_length=self._use_sequence_length,
                    state_size=self._hidden_size, projection_size=self._projection_size,
                    num_layers=self._num_layers, bidirectional=self._dir == 2,
                    p=self._dropout, state_outputs=True, mode=self._mode,
                    lstm_state_clip_min=self._lstm_state_clip_min,
                    lstm_state_clip_max=self._lstm_state_clip_max,
                    lstm_state_clip_nan=self._lstm_state_clip_nan)
        outputs, states = (rnn[0], [rnn[1], rnn[2]]) if self._mode == "lstm" else (rnn[0], [rnn[1]])
        if self._layout == "NTC":
            outputs = F.swapaxes(outputs, 0, 1)
        return outputs, states


class RNN(_RNNLayer):
    """A multi-layer Elman RNN, ``h_t = act(W_ih x_t + b_ih + W_hh h_(t-1) + b_hh)``, with
    ``activation`` ``'relu'`` or ``'tanh'``. Called as ``layer(x)`` (zeros as begin state,
    returns the output) or ``layer(x, states)`` (returns ``(output, new_states)``)."""

    def __init__(self, hidden_size, num_layers=1, activation="relu", layout="TNC", dropout=0,
                 bidirectional=False, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 dtype="float32", **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "rnn_" + activation, None, None, None, None,
                         False, dtype, **kwargs)

    def state_info(self, batch_size=0):
        return [{"shape": (self._num_layers * self._dir, batch_size, self._hidden_size),
                 "__layout__": "LNC", "dtype": self._dtype}]


class LSTM(_RNNLayer):
    """A multi-layer LSTM (gates in MXNet's order i, f, c, o); with ``projection_size`` the
    hidden state is projected by ``h2r_weight`` (LSTMP). States are ``[h, c]``."""

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0, bidirectional=False,
                 input_size=0, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros",
                 projection_size=None, h2r_weight_initializer=None, state_clip_min=None,
                 state_clip_max=None, state_clip_nan=False, dtype="float32", **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "lstm", projection_size, h2r_weight_initializer,
                         state_clip_min, state_clip_max, state_clip_nan, dtype, **kwargs)

    def state_info(self, batch_size=0):
        lead = self._num_layers * self._dir
        return [{"shape": (lead, batch_size, self._projection_size or self._hidden_size),
                 "__layout__": "LNC", "dtype": self._dtype},
                {"shape": (lead, batch_size, self._hidden_size),
                 "__layout__": "LNC", "dtype": self._dtype}]


class GRU(_RNNLayer):
    """A multi-layer GRU as cuDNN and MXNet compute it (gates r, z, n; the reset gate applied
    after the recurrent product: ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``)."""

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0, bidirectional=False,
                 input_size=0, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", dtype="float32",
                 **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "gru", None, None, None, None, False, dtype,
                         **kwargs)

    def state_info(self, batch_size=0):
        return [{"shape": (self._num_layers * self._dir, batch_size, self._hidden_size),
                 "__layout__": "LNC", "dtype": self._dtype}]
