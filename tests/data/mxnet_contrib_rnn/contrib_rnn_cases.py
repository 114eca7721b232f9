"""``gluon.contrib.rnn``'s cells as MXNet 1.9.1 computes them, written once against MXNet's API
(``record(mx)``): each convolutional cell (RNN, LSTM, GRU in 1-D, 2-D and 3-D, with padding,
dilation and other activations among them) and ``LSTMPCell`` unrolled over a short sequence
with fixed parameters, their outputs, last states and the gradients of the inputs and every
parameter; ``VariationalDropoutCell`` in prediction mode (its masks are ones).

    /work/mxvenv/bin/python tests/data/mxnet_contrib_rnn/make_records.py

records ``records.npz``; tests/test_contrib_rnn.py replays ``record`` with trainer_cli."""
import re

import numpy as np


def _cells(mx):
    rnn = mx.gluon.contrib.rnn
    return {
        "conv1d_rnn": (lambda: rnn.Conv1DRNNCell((2, 7), 3, 3, 3), (2, 7)),
        "conv2d_rnn_relu_pad": (lambda: rnn.Conv2DRNNCell((2, 5, 6), 3, 3, 3, i2h_pad=(1, 1),
                                                           activation="relu"), (2, 5, 6)),
        "conv3d_rnn": (lambda: rnn.Conv3DRNNCell((1, 3, 4, 4), 2, (1, 3, 3), 3), (1, 3, 4, 4)),
        "conv1d_lstm": (lambda: rnn.Conv1DLSTMCell((2, 7), 3, 3, 5), (2, 7)),
        "conv2d_lstm_dilate": (lambda: rnn.Conv2DLSTMCell((2, 6, 6), 2, 3, 3, i2h_dilate=(2, 1),
                                                          h2h_dilate=(2, 2)), (2, 6, 6)),
        "conv3d_lstm": (lambda: rnn.Conv3DLSTMCell((1, 3, 4, 4), 2, 3, 3, i2h_pad=1),
                        (1, 3, 4, 4)),
        "conv1d_gru_softsign": (lambda: rnn.Conv1DGRUCell((2, 7), 3, 3, 3,
                                                          activation="softsign"), (2, 7)),
        "conv2d_gru": (lambda: rnn.Conv2DGRUCell((2, 5, 6), 3, (3, 1), 3), (2, 5, 6)),
        "conv3d_gru": (lambda: rnn.Conv3DGRUCell((1, 3, 4, 4), 2, 3, (1, 3, 3), i2h_pad=(1, 0, 1)),
                       (1, 3, 4, 4)),
        "lstmp": (lambda: rnn.LSTMPCell(6, 3, input_size=4), (4,)),
        "vardrop_lstmp_predict": (lambda: rnn.VariationalDropoutCell(
            rnn.LSTMPCell(6, 3, input_size=4), drop_inputs=0.3, drop_states=0.4,
            drop_outputs=0.5), (4,)),
    }


def record(mx):
    nd, autograd = mx.nd, mx.autograd
    out = {}
    for name, (make, sample) in sorted(_cells(mx).items()):
        rng = np.random.RandomState(len(name))
        cell = make()
        cell.initialize()
        for key in sorted(cell.collect_params()):
            param = cell.collect_params()[key]
            param.set_data(nd.array(rng.randn(*param.shape) * 0.3))
        x = nd.array(rng.randn(2, 3, *sample))          # batch 2, 3 steps, NTC
        x.attach_grad()
        with autograd.record(train_mode=False):
            outputs, states = cell.unroll(3, x, layout="NTC", merge_outputs=True)
            total = (outputs * nd.array(rng.randn(*outputs.shape))).sum()
            for k, s in enumerate(states):
                total = total + (s * nd.array(rng.randn(*s.shape))).sum() * (k + 1)
        total.backward()
        out[name + "/outputs"] = outputs.asnumpy()
        for k, s in enumerate(states):
            out[name + "/state%d" % k] = s.asnumpy()
        out[name + "/grad_inputs"] = x.grad.asnumpy()
        for key in sorted(cell.collect_params()):
            suffix = re.match(r"^[a-z_]+\d+_(.*)$", key).group(1)      # lstmp3_i2h_weight
            out[name + "/grad_" + suffix] = cell.collect_params()[key].grad().asnumpy()
    return out


def record_dynamic_unroll(mx):
    """``gluon.contrib.rnn.rnn_cell.dynamic_unroll`` of an LSTM and a GRU cell with fixed
    parameters, in both layouts, with and without ``valid_length``: outputs, states and the
    gradients of the inputs, the begin states and the parameters."""
    nd, autograd, rnn = mx.nd, mx.autograd, mx.gluon.rnn
    unroll = mx.gluon.contrib.rnn.rnn_cell.dynamic_unroll
    out = {}
    cases = [("lstm_tnc", rnn.LSTMCell, "TNC", None), ("lstm_ntc_valid", rnn.LSTMCell, "NTC",
                                                        [2.0, 4.0, 1.0]),
             ("gru_tnc_valid", rnn.GRUCell, "TNC", [3.0, 0.0, 4.0]),
             ("gru_ntc", rnn.GRUCell, "NTC", None)]
    for name, make, layout, valid in cases:
        rng = np.random.RandomState(len(name))
        cell = make(5, input_size=3)
        cell.initialize()
        for key in sorted(cell.collect_params()):
            param = cell.collect_params()[key]
            param.set_data(nd.array(rng.randn(*param.shape) * 0.4))
        shape = (4, 3, 3) if layout == "TNC" else (3, 4, 3)
        x = nd.array(rng.randn(*shape))
        x.attach_grad()
        begin = [nd.array(rng.randn(3, 5)) for _ in cell.state_info(3)]
        for b in begin:
            b.attach_grad()
        lengths = None if valid is None else nd.array(valid)
        with autograd.record():
            outputs, states = unroll(cell, x, begin, layout=layout, valid_length=lengths)
            total = (outputs * nd.array(rng.randn(*outputs.shape))).sum()
            for k, s in enumerate(states):
                total = total + (s * nd.array(rng.randn(*s.shape))).sum() * (k + 2)
        total.backward()
        out[name + "/outputs"] = outputs.asnumpy()
        for k, s in enumerate(states):
            out[name + "/state%d" % k] = s.asnumpy()
            out[name + "/grad_begin%d" % k] = begin[k].grad.asnumpy()
        out[name + "/grad_inputs"] = x.grad.asnumpy()
        for key in sorted(cell.collect_params()):
            suffix = re.match(r"^[a-z_]+\d+_(.*)$", key).group(1)
            out[name + "/grad_" + suffix] = cell.collect_params()[key].grad().asnumpy()
    return out
