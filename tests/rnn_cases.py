"""The recurrent cases checked against MXNet 1.9.1, shared by the generator
(tests/data/mxnet_rnn/make_rnn_cases.py, run with MXNet) and tests/test_gluon_rnn.py (run
here): each builder takes a ``gluon.rnn`` module, MXNet's or ours, and builds the same network.
"""

# name: (class, keyword arguments, input shape in the layer's layout, begin states given)
LAYER_CASES = {
    "lstm": ("LSTM", dict(hidden_size=5, input_size=3), (4, 3, 3), True),
    "lstm_2layer_bi": ("LSTM", dict(hidden_size=4, num_layers=2, bidirectional=True,
                                    input_size=3), (5, 2, 3), True),
    "lstm_ntc_deferred": ("LSTM", dict(hidden_size=4, layout="NTC"), (2, 5, 3), False),
    "lstm_projection": ("LSTM", dict(hidden_size=5, projection_size=3, num_layers=2,
                                     input_size=4), (4, 2, 4), True),
    "lstm_projection_bi": ("LSTM", dict(hidden_size=4, projection_size=2, bidirectional=True,
                                        input_size=3), (3, 2, 3), True),
    "gru": ("GRU", dict(hidden_size=5, input_size=3), (4, 3, 3), True),
    "gru_2layer_bi": ("GRU", dict(hidden_size=4, num_layers=2, bidirectional=True,
                                  input_size=3), (5, 2, 3), True),
    "gru_ntc": ("GRU", dict(hidden_size=3, layout="NTC", input_size=2), (3, 4, 2), False),
    "rnn_relu_2layer": ("RNN", dict(hidden_size=4, num_layers=2, activation="relu",
                                    input_size=3), (4, 3, 3), True),
    "rnn_tanh_bi_ntc": ("RNN", dict(hidden_size=3, activation="tanh", bidirectional=True,
                                    layout="NTC", input_size=2), (2, 4, 2), True),
}


def _lstm_cell(rnn):
    return rnn.LSTMCell(4, input_size=3)


def _gru_cell(rnn):
    return rnn.GRUCell(4)


def _rnn_relu_cell(rnn):
    return rnn.RNNCell(3, activation="relu", input_size=3)


def _stack(rnn):
    net = rnn.SequentialRNNCell()
    with net.name_scope():
        net.add(rnn.LSTMCell(4, input_size=3))
        net.add(rnn.ResidualCell(rnn.GRUCell(4, input_size=4)))
        net.add(rnn.RNNCell(2, input_size=4))
    return net


def _bidirectional(rnn):
    return rnn.BidirectionalCell(rnn.LSTMCell(3, input_size=3, prefix="l_"),
                                 rnn.GRUCell(2, input_size=3, prefix="r_"))


def _hybrid_stack(rnn):
    net = rnn.HybridSequentialRNNCell()
    with net.name_scope():
        net.add(rnn.GRUCell(3, input_size=3))
        net.add(rnn.DropoutCell(0.0))
        net.add(rnn.ZoneoutCell(rnn.LSTMCell(3, input_size=3), zoneout_outputs=0.0,
                                zoneout_states=0.0))
    return net


# name: (builder, length, input shape in layout, layout, merge_outputs, valid_length or None,
#        begin states given)
CELL_CASES = {
    "lstm_cell_ntc_merged": (_lstm_cell, 4, (2, 4, 3), "NTC", True, None, True),
    "lstm_cell_valid_length": (_lstm_cell, 5, (3, 5, 3), "NTC", True, [2, 5, 3], False),
    "gru_cell_tnc_list_deferred": (_gru_cell, 3, (3, 2, 3), "TNC", False, None, True),
    "rnn_relu_cell": (_rnn_relu_cell, 4, (4, 2, 3), "TNC", None, None, False),
    "stack_valid_length": (_stack, 4, (3, 4, 3), "NTC", True, [4, 1, 3], True),
    "bidirectional_valid_length": (_bidirectional, 4, (3, 4, 3), "NTC", True, [3, 4, 2], True),
    "bidirectional_tnc_list": (_bidirectional, 3, (3, 2, 3), "TNC", False, None, False),
    "hybrid_stack_zero_rates": (_hybrid_stack, 3, (2, 3, 3), "NTC", True, None, True),
}


def language_model_flow(mx, tokens, init, vocab=7):
    """A character-level language model as "Dive into Deep Learning" trains one: one-hot
    inputs, a 2-layer LSTM, a Dense decoder, the state carried (detached) across batches,
    gradients clipped by global norm, SGD with momentum. ``mx`` is ``mxnet`` or
    ``trainer_cli``; ``tokens`` (batches, T+1, N) ints, ``init`` {save name: array}. Returns
    the per-batch losses and the final parameters by save name."""
    gluon, nd, autograd = mx.gluon, mx.nd, mx.autograd

    class RNNModel(gluon.Block):
        def __init__(self, **kwargs):
            super(RNNModel, self).__init__(**kwargs)
            with self.name_scope():
                self.rnn = gluon.rnn.LSTM(6, num_layers=2, input_size=vocab)
                self.dense = gluon.nn.Dense(vocab, in_units=6)

        def forward(self, inputs, state):
            X = nd.one_hot(inputs.T, vocab)
            Y, state = self.rnn(X, state)
            return self.dense(Y.reshape((-1, Y.shape[-1]))), state

    net = RNNModel()
    net.initialize()
    for key, param in net._collect_params_with_prefix().items():
        param.set_data(nd.array(init[key]))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5,
                                                          "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    state = net.rnn.begin_state(batch_size=tokens.shape[2])
    losses = []
    for batch in tokens:
        X = nd.array(batch[:-1].T)
        Y = nd.array(batch[1:])         # (T, N): the targets in the output's row order
        state = [s.detach() for s in state]
        with autograd.record():
            out, state = net(X, state)
            loss = loss_fn(out, Y.reshape((-1,))).mean()
        loss.backward()
        grads = [p.grad() for p in net.collect_params().values()]
        gluon.utils.clip_global_norm(grads, 1.0)
        trainer.step(1)
        losses.append(loss.asscalar())
    final = {key: p.data().asnumpy() for key, p in net._collect_params_with_prefix().items()}
    return losses, final
