"""``VariationalDropoutCell`` (Gal and Ghahramani, 2016: one dropout mask per sequence for the
inputs, states and outputs), ``LSTMPCell`` (an LSTM whose output is projected to a smaller
size, Sak et al., 2014) and ``dynamic_unroll``, as MXNet 1.9.1's ``gluon.contrib.rnn`` has
them."""
from __future__ import annotations

from .... import ndarray as _nd
from ....ndarray import NDArray
from ...rnn.rnn_cell import (BidirectionalCell, HybridRecurrentCell, ModifierCell,
                             SequentialRNNCell, _format_sequence, _get_begin_state,
                             _mask_sequence_variable_length)

__all__ = ["VariationalDropoutCell", "LSTMPCell"]


class VariationalDropoutCell(ModifierCell):
    """``base_cell`` with dropout on its inputs, its first state and its outputs, each mask
    drawn once per sequence (at the first step after ``reset``, which ``unroll`` calls) and used
    at every step. In prediction mode the masks are ones."""

    _per_graph_attrs = ("_counter", "_init_counter", "drop_inputs_mask", "drop_states_mask",
                        "drop_outputs_mask")

    def __init__(self, base_cell, drop_inputs=0., drop_states=0., drop_outputs=0.):
        if drop_states and isinstance(base_cell, BidirectionalCell):
            raise ValueError("BidirectionalCell doesn't support variational state dropout. "
                             "Please add VariationalDropoutCell to the cells underneath instead.")
        if drop_states and isinstance(base_cell, SequentialRNNCell) \
                and getattr(base_cell, "_bidirectional", False):
            raise ValueError("Bidirectional SequentialRNNCell doesn't support variational state "
                             "dropout. Please add VariationalDropoutCell to the cells underneath "
                             "instead.")
        super().__init__(base_cell)
        self.drop_inputs, self.drop_states, self.drop_outputs = (drop_inputs, drop_states,
                                                                 drop_outputs)
        self.drop_inputs_mask = self.drop_states_mask = self.drop_outputs_mask = None

    def _alias(self):
        return "vardrop"

    def reset(self):
        super().reset()
        self.drop_inputs_mask = self.drop_states_mask = self.drop_outputs_mask = None

    def __repr__(self):
        return "%s(p_out = %s, p_state = %s)" % (type(self).__name__, self.drop_outputs,
                                                 self.drop_states)

    def hybrid_forward(self, F, inputs, states):
        if self.drop_states and self.drop_states_mask is None:
            self.drop_states_mask = F.Dropout(F.ones_like(states[0]), p=self.drop_states)
        if self.drop_inputs and self.drop_inputs_mask is None:
            self.drop_inputs_mask = F.Dropout(F.ones_like(inputs), p=self.drop_inputs)
        if self.drop_states:
            states = [states[0] * self.drop_states_mask] + list(states[1:])
        if self.drop_inputs:
            inputs = inputs * self.drop_inputs_mask
        output, states = self.base_cell(inputs, states)
        if self.drop_outputs:
            if self.drop_outputs_mask is None:
                self.drop_outputs_mask = F.Dropout(F.ones_like(output), p=self.drop_outputs)
            output = output * self.drop_outputs_mask
        return output, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """Without state dropout the base cell unrolls over the whole sequence (a fused
        layer's speed where it has one), the input and output masks shared along time."""
        if self.drop_states:
            return super().unroll(length, inputs, begin_state, layout, merge_outputs,
                                  valid_length=valid_length)
        self.reset()
        inputs, axis, F, batch_size = _format_sequence(length, inputs, layout, True)
        states = _get_begin_state(self, F, begin_state, inputs, batch_size)
        if self.drop_inputs:
            inputs = F.Dropout(inputs, p=self.drop_inputs, axes=(axis,))
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs, states, layout,
                                                    merge_outputs=True,
                                                    valid_length=valid_length)
        finally:
            self.base_cell._modified = True
        if self.drop_outputs:
            outputs = F.Dropout(outputs, p=self.drop_outputs, axes=(axis,))
        if merge_outputs is None:
            merge_outputs = isinstance(outputs, NDArray)
        outputs, _, _, _ = _format_sequence(length, outputs, layout, merge_outputs)
        if valid_length is not None:
            outputs = _mask_sequence_variable_length(F, outputs, length, valid_length, axis,
                                                     merge_outputs)
        return outputs, states


class LSTMPCell(HybridRecurrentCell):
    """An LSTM cell whose hidden output is projected to ``projection_size`` (``h2r_weight``,
    no bias) before it is output and fed back: states ``[r, c]`` of sizes ``projection_size``
    and ``hidden_size``; gates i, f, c, o in the weights' rows as in ``LSTMCell``."""

    def __init__(self, hidden_size, projection_size, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, h2r_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._hidden_size, self._input_size = hidden_size, input_size
        self._projection_size = projection_size
        rows = 4 * hidden_size
        self.i2h_weight = self.params.get("i2h_weight", shape=(rows, input_size),
                                          init=i2h_weight_initializer, allow_deferred_init=True)
        self.h2h_weight = self.params.get("h2h_weight", shape=(rows, projection_size),
                                          init=h2h_weight_initializer, allow_deferred_init=True)
        self.h2r_weight = self.params.get("h2r_weight", shape=(projection_size, hidden_size),
                                          init=h2r_weight_initializer, allow_deferred_init=True)
        self.i2h_bias = self.params.get("i2h_bias", shape=(rows,), init=i2h_bias_initializer,
                                        allow_deferred_init=True)
        self.h2h_bias = self.params.get("h2h_bias", shape=(rows,), init=h2h_bias_initializer,
                                        allow_deferred_init=True)

    def infer_shape(self, inputs, *args):
        self.i2h_weight.shape = (self.i2h_weight.shape[0], inputs.shape[-1])

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size, self._projection_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def _alias(self):
        return "lstmp"

    def __repr__(self):
        shape, projected = self.i2h_weight.shape, self.h2r_weight.shape
        return "%s(%s -> %s -> %s)" % (type(self).__name__, shape[1] if shape[1] else None,
                                       shape[0], projected[0])

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, h2r_weight, i2h_bias,
                       h2h_bias):
        prefix = "t%d_" % self._counter
        rows = 4 * self._hidden_size
        i2h = F.FullyConnected(data=inputs, weight=i2h_weight, bias=i2h_bias, num_hidden=rows,
                               name=prefix + "i2h")
        h2h = F.FullyConnected(data=states[0], weight=h2h_weight, bias=h2h_bias,
                               num_hidden=rows, name=prefix + "h2h")
        gates = F.SliceChannel(i2h + h2h, num_outputs=4, name=prefix + "slice")
        in_gate = F.Activation(gates[0], act_type="sigmoid", name=prefix + "i")
        forget_gate = F.Activation(gates[1], act_type="sigmoid", name=prefix + "f")
        in_transform = F.Activation(gates[2], act_type="tanh", name=prefix + "c")
        out_gate = F.Activation(gates[3], act_type="sigmoid", name=prefix + "o")
        next_c = F.elemwise_add(forget_gate * states[1], in_gate * in_transform,
                                name=prefix + "state")
        hidden = F.elemwise_mul(out_gate, F.Activation(next_c, act_type="tanh"),
                                name=prefix + "hidden")
        next_r = F.FullyConnected(data=hidden, weight=h2r_weight, num_hidden=self._projection_size,
                                  no_bias=True, name=prefix + "out")
        return next_r, [next_r, next_c]


def dynamic_unroll(cell, inputs, begin_state, drop_inputs=0, drop_outputs=0, layout="TNC",
                   valid_length=None):
    """``cell`` run over the time steps of ``inputs`` (one NDArray, (length, batch, ...) for
    ``'TNC'``, (batch, length, ...) for ``'NTC'``) from ``begin_state`` with
    ``nd.contrib.foreach``: ``(outputs, states)``, the outputs stacked along the layout's time
    axis. ``drop_inputs``/``drop_outputs``: dropout of the inputs and outputs with MXNet's
    ``axes=(time axis,)`` (applied, as MXNet applies them, to the time-major arrays).
    ``valid_length`` (batch,): each sequence's states stop changing after its length, the
    states returned are its last valid ones and its outputs past it are zero."""
    if not isinstance(inputs, NDArray):
        raise TypeError("dynamic_unroll takes one NDArray of inputs (trainer_cli has no "
                        "symbolic foreach), got %s" % type(inputs).__name__)
    inputs, axis, F, _ = _format_sequence(0, inputs, layout, True)
    axes = list(range(len(layout)))
    axes[0], axes[axis] = axes[axis], axes[0]
    if axis != 0:
        inputs = F.transpose(inputs, axes=axes)
    states = begin_state
    if drop_inputs:
        inputs = F.Dropout(inputs, p=drop_inputs, axes=(axis,))
    if valid_length is None:
        def loop_body(step_input, step_states):
            return cell(step_input, step_states)
    else:
        # The step count travels as one more state, as MXNet carries it through foreach.
        states = list(states if isinstance(states, (list, tuple)) else [states])
        states.append(F.zeros((1,), ctx=inputs.context))

        def loop_body(step_input, step_states):
            cell_states, step = step_states[:-1], step_states[-1]
            out, new_states = cell(step_input, cell_states)
            running = F.broadcast_greater(valid_length, step)
            new_states = [F.where(running, new, old) for new, old in zip(new_states, cell_states)]
            return out, new_states + [step + 1]
    outputs, states = _nd.contrib.foreach(loop_body, inputs, states)
    if drop_outputs:
        outputs = F.Dropout(outputs, p=drop_outputs, axes=(axis,))
    if axis != 0:
        outputs = F.transpose(outputs, axes=axes)
    if valid_length is None:
        return outputs, states
    outputs = F.SequenceMask(outputs, sequence_length=valid_length, use_sequence_length=True,
                             axis=axis)
    return outputs, states[:-1]
