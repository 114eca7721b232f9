"""gluon.rnn against MXNet 1.9.1 (tests/data/mxnet_rnn, cases in tests/rnn_cases.py): outputs,
final states and the gradients of inputs, begin states and every parameter; parameter files
both ways; finite differences where MXNet has no CPU backward (the LSTM's projection)."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

from trainer_cli import autograd, gluon, initializer, nd
from trainer_cli import random as tc_random
from trainer_cli.gluon import rnn
from trainer_cli.gluon.param_file import load_arrays

from gradcheck import check_grad
from rnn_cases import CELL_CASES, LAYER_CASES, language_model_flow

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_rnn")
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture(scope="module")
def golden():
    with np.load(os.path.join(DATA, "rnn.npz"), allow_pickle=False) as f:
        return dict(f.items())


@pytest.fixture(scope="module")
def manifest():
    with open(os.path.join(DATA, "cases.json")) as f:
        return json.load(f)


def _close(got, expected, what):
    got = got.asnumpy() if hasattr(got, "asnumpy") else np.asarray(got)
    assert got.shape == expected.shape, "%s: shape %s, expected %s" % (what, got.shape,
                                                                       expected.shape)
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=ATOL, err_msg=what)


def _set_params(net, golden, name):
    params = net._collect_params_with_prefix()
    stored = sorted(k.split(":p:", 1)[1] for k in golden if k.startswith(name + ":p:"))
    assert sorted(params) == stored, "parameter names differ from MXNet's"
    for key, param in params.items():
        param.set_data(nd.array(golden["%s:p:%s" % (name, key)]))


def _states(golden, name, prefix):
    out, i = [], 0
    while "%s:%s:%d" % (name, prefix, i) in golden:
        out.append(golden["%s:%s:%d" % (name, prefix, i)])
        i += 1
    return out


def _check_run(net, name, golden, call, x, begin, forward_only):
    if forward_only:
        y, out_states = call()
        _close(y, golden[name + ":y"], name + " output")
        for i, (a, e) in enumerate(zip(out_states, _states(golden, name, "o"))):
            _close(a, e, "%s state %d" % (name, i))
        return
    x.attach_grad()
    for s in begin:
        s.attach_grad()
    with autograd.record():
        y, out_states = call()
        if isinstance(y, list):
            loss = sum((a * nd.array(h)).sum()
                       for a, h in zip(y, _states(golden, name, "hy")))
        else:
            loss = (y * nd.array(golden[name + ":hy"])).sum()
        for a, h in zip(out_states, _states(golden, name, "ho")):
            loss = loss + (a * nd.array(h)).sum()
    loss.backward()
    if isinstance(y, list):
        expected = _states(golden, name, "y")
        assert len(y) == len(expected)
        for i, (a, e) in enumerate(zip(y, expected)):
            _close(a, e, "%s output %d" % (name, i))
    else:
        _close(y, golden[name + ":y"], name + " output")
    expected_states = _states(golden, name, "o")
    assert len(out_states) == len(expected_states)
    for i, (a, e) in enumerate(zip(out_states, expected_states)):
        _close(a, e, "%s state %d" % (name, i))
    _close(x.grad, golden[name + ":dx"], name + " input gradient")
    for i, s in enumerate(begin):
        _close(s.grad, golden["%s:ds:%d" % (name, i)], "%s begin state %d gradient" % (name, i))
    for key, param in net._collect_params_with_prefix().items():
        _close(param.grad(), golden["%s:g:%s" % (name, key)], "%s gradient of %s" % (name, key))


def _layer(name, golden):
    cls, kwargs, shape, with_states = LAYER_CASES[name]
    layer = getattr(rnn, cls)(**kwargs)
    layer.initialize()
    x = nd.array(golden[name + ":x"])
    layer(x)            # deferred shapes become known
    _set_params(layer, golden, name)
    return layer, x


@pytest.mark.parametrize("name", sorted(LAYER_CASES))
def test_layer_matches_mxnet(name, golden, manifest):
    layer, x = _layer(name, golden)
    with_states = LAYER_CASES[name][3]
    begin = [nd.array(s) for s in _states(golden, name, "s")]
    assert len(begin) == (len(layer.state_info()) if with_states else 0)

    def call():
        if with_states:
            return layer(x, begin)
        return layer(x), []
    _check_run(layer, name, golden, call, x, begin, name in manifest["forward_only"])


@pytest.mark.parametrize("name", sorted(CELL_CASES))
def test_cell_unroll_matches_mxnet(name, golden):
    build, length, shape, layout, merge, valid, with_states = CELL_CASES[name]
    cell = build(rnn)
    cell.initialize()
    x = nd.array(golden[name + ":x"])
    valid_nd = nd.array(golden[name + ":valid"]) if valid is not None else None
    cell.unroll(length, x, layout=layout, merge_outputs=merge, valid_length=valid_nd)
    _set_params(cell, golden, name)
    begin = [nd.array(s) for s in _states(golden, name, "s")]

    def call():
        return cell.unroll(length, x, begin_state=begin if with_states else None,
                           layout=layout, merge_outputs=merge, valid_length=valid_nd)
    _check_run(cell, name, golden, call, x, begin, False)


def test_projection_gradients_by_finite_differences():
    # MXNet 1.9.1 has no CPU backward for the projection (its forward is checked above): a
    # small two-layer bidirectional LSTMP against finite differences instead.
    layer = rnn.LSTM(2, projection_size=1, num_layers=2, bidirectional=True, input_size=1)
    layer.initialize(init="uniform")
    layer.cast("float64")
    rng = np.random.RandomState(4)
    x, h, c = (rng.uniform(-1, 1, size=s) for s in [(2, 2, 1), (4, 2, 1), (4, 2, 2)])
    check_grad(lambda x, h, c: _flat(layer(x, [h, c])), x, h, c,
               params=list(layer.collect_params().values()), rtol=1e-5, atol=1e-7)


def _flat(out):
    y, states = out
    return [y] + list(states)


def test_dropout_between_layers_is_reproducible_and_differentiable():
    layer = rnn.GRU(2, num_layers=2, dropout=0.4, input_size=2)
    layer.initialize()
    layer.cast("float64")
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, size=(3, 2, 2))
    h = rng.uniform(-1, 1, size=(2, 2, 2))

    def fn(x, h):
        tc_random.seed(5)       # the same masks in every pass of the finite differences
        return _flat(layer(x, h))
    check_grad(fn, x, h, params=list(layer.collect_params().values()), rtol=1e-5, atol=1e-7)
    with autograd.train_mode():
        tc_random.seed(5)
        train = layer(nd.array(x, dtype="float64")).asnumpy()
    infer = layer(nd.array(x, dtype="float64")).asnumpy()
    no_dropout = rnn.GRU(2, num_layers=2, input_size=2)
    no_dropout.initialize()
    no_dropout.cast("float64")
    for key, param in layer._collect_params_with_prefix().items():
        no_dropout._collect_params_with_prefix()[key].set_data(param.data())
    np.testing.assert_array_equal(infer, no_dropout(nd.array(x, dtype="float64")).asnumpy())
    assert not np.allclose(train, infer)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_fused_op_gradients_by_finite_differences(mode):
    from trainer_cli.ndarray.rnn import param_size
    rng = np.random.RandomState(1)
    steps, batch, width, hidden, layers = 3, 2, 3, 2, 1
    size = param_size(mode, width, hidden, layers, bidirectional=True)
    args = [rng.normal(size=(steps, batch, width)), rng.normal(size=(size,)) * 0.5,
            rng.normal(size=(2 * layers, batch, hidden))]
    if mode == "lstm":
        args.append(rng.normal(size=(2 * layers, batch, hidden)))

    def fn(x, w, h, c=None):
        return nd.RNN(x, w, h, c, state_size=hidden, num_layers=layers, bidirectional=True,
                      mode=mode, state_outputs=True)
    check_grad(fn, *args, rtol=1e-5, atol=1e-7)


def test_reads_parameter_files_written_by_mxnet(golden):
    for name in ("lstm_2layer_bi", "gru"):
        cls, kwargs, shape, with_states = LAYER_CASES[name]
        layer = getattr(rnn, cls)(**kwargs)
        layer.load_parameters(os.path.join(DATA, name + ".params"))
        begin = [nd.array(s) for s in _states(golden, name, "s")]
        y, states = layer(nd.array(golden[name + ":x"]), begin)
        _close(y, golden[name + ":y"], name + " output after loading MXNet's file")


def test_writes_parameter_files_mxnet_reads(tmp_path, golden):
    # The same names, shapes and values as the file MXNet wrote for the same layer.
    name = "lstm_2layer_bi"
    layer, _x = _layer(name, golden)
    path = str(tmp_path / "ours.params")
    layer.save_parameters(path, format="mxnet")
    ours = load_arrays(path)
    theirs = load_arrays(os.path.join(DATA, name + ".params"))
    assert sorted(ours) == sorted(theirs)
    assert "_unfused.1.r_cell.h2h_weight" in ours
    for key in theirs:
        np.testing.assert_array_equal(np.asarray(ours[key]),
                                      np.asarray(theirs[key]))


def test_names_states_and_errors():
    layer = rnn.LSTM(4, num_layers=2, bidirectional=True, input_size=3, prefix="enc_")
    names = list(layer.collect_params().keys())
    assert names[:5] == ["enc_l0_i2h_weight", "enc_l0_h2h_weight", "enc_l0_i2h_bias",
                         "enc_l0_h2h_bias", "enc_r0_i2h_weight"]
    assert layer.l1_i2h_weight.shape == (16, 8)
    layer.initialize()
    states = layer.begin_state(batch_size=5)
    assert [s.shape for s in states] == [(4, 5, 4), (4, 5, 4)]
    x = nd.ones((2, 5, 3))
    out = layer(x)
    assert out.shape == (2, 5, 8)
    y, new_states = layer(x, states)
    assert [s.shape for s in new_states] == [(4, 5, 4), (4, 5, 4)]
    with pytest.raises(ValueError, match="Invalid recurrent state shape"):
        layer(x, [nd.zeros((4, 3, 4)), nd.zeros((4, 3, 4))])
    assert repr(layer) == "LSTM(3 -> 4, TNC, num_layers=2, bidirectional)"
    net = gluon.nn.Sequential()
    net.add(rnn.GRU(3, input_size=2))
    assert sorted(net._collect_params_with_prefix()) == [
        "0._unfused.0.h2h_bias", "0._unfused.0.h2h_weight", "0._unfused.0.i2h_bias",
        "0._unfused.0.i2h_weight"]
    clipped = rnn.LSTM(2, state_clip_min=-1, state_clip_max=1, input_size=2)
    clipped.initialize()
    with pytest.raises(NotImplementedError, match="compat"):
        clipped(nd.ones((2, 1, 2)))


def test_cells_state_info_reset_and_modifiers():
    cell = rnn.SequentialRNNCell()
    cell.add(rnn.LSTMCell(3, input_size=2))
    cell.add(rnn.GRUCell(2, input_size=3))
    assert [i["shape"] for i in cell.state_info(4)] == [(4, 3), (4, 3), (4, 2)]
    cell.initialize()
    states = cell.begin_state(batch_size=4)
    out, new = cell(nd.ones((4, 2)), states)
    assert out.shape == (4, 2) and len(new) == 3
    assert cell._counter == 0
    cell.reset()
    assert cell._counter == -1
    base = rnn.RNNCell(2, input_size=2)
    zone = rnn.ZoneoutCell(base, zoneout_outputs=0.5)
    with pytest.raises(RuntimeError, match="modifier"):
        base.begin_state(batch_size=1)
    assert [s.shape for s in zone.begin_state(batch_size=3)] == [(3, 2)]
    with pytest.raises(NotImplementedError, match="unroll"):
        rnn.BidirectionalCell(rnn.RNNCell(2), rnn.RNNCell(2))(nd.ones((1, 2)), [])


def test_bidirectional_cell_ntc_valid_length_unmerged_request(golden):
    # merge_outputs=None with valid_length: the merged outputs, the same as merge_outputs=True.
    name = "bidirectional_valid_length"
    build, length, shape, layout, merge, valid, with_states = CELL_CASES[name]
    cell = build(rnn)
    cell.initialize()
    x = nd.array(golden[name + ":x"])
    valid_nd = nd.array(golden[name + ":valid"])
    cell.unroll(length, x, layout=layout, merge_outputs=True, valid_length=valid_nd)
    _set_params(cell, golden, name)
    begin = [nd.array(s) for s in _states(golden, name, "s")]
    y, _states_out = cell.unroll(length, x, begin_state=begin, layout="NTC",
                                 merge_outputs=None, valid_length=valid_nd)
    _close(y, golden[name + ":y"], "merged outputs")


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_relu"])
def test_fused_op_makes_no_hidden_host_transfer(monkeypatch, mode):
    """The op is array-module code: on the CuPy stand-in it moves nothing to the host and gives
    the bits it gives on NumPy (forward and every gradient)."""
    from standin_xp import standin_array_module, to_device
    from trainer_cli import cpu
    from trainer_cli.ndarray.interop import grad_buffer, raw, wrap
    from trainer_cli.ndarray.rnn import param_size
    standin_array_module(monkeypatch)
    rng = np.random.RandomState(2)
    size = param_size(mode, 3, 2, 2, bidirectional=True, projection_size=None)
    arrays = [rng.normal(size=(3, 2, 3)), rng.normal(size=(size,)) * 0.5,
              rng.normal(size=(4, 2, 2))] + ([rng.normal(size=(4, 2, 2))] if mode == "lstm"
                                             else [])
    arrays = [a.astype(np.float32) for a in arrays]
    runs = []
    for move in (np.copy, to_device):
        nds = [wrap(move(a), cpu()) for a in arrays]
        for a in nds:
            a.attach_grad()
        with autograd.record():
            outs = nd.RNN(*nds, state_size=2, num_layers=2, bidirectional=True, mode=mode,
                          state_outputs=True)
            flat = nd.concat(*[o.reshape((-1,)) for o in outs], dim=0)
        flat.backward()
        got = [raw(flat)] + [raw(grad_buffer(a)) for a in nds]
        runs.append([g.get() if move is to_device else g for g in got])
    for a, b in zip(*runs):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_language_model_training_matches_mxnet(golden):
    """The same program (imports aside) as under MXNet: LSTM language model, state carried
    across batches, clipping, SGD with momentum; losses and final weights agree."""
    import trainer_cli
    init = {k.split(":", 2)[2]: v for k, v in golden.items() if k.startswith("lm:init:")}
    losses, final = language_model_flow(trainer_cli, golden["lm:tokens"], init)
    np.testing.assert_allclose(losses, golden["lm:losses"], rtol=RTOL, atol=ATOL)
    assert sorted(final) == sorted(init)
    for key, value in final.items():
        _close(value, golden["lm:final:" + key], "final " + key)


def test_lstm_bias_initializer_and_mxnet_names():
    from trainer_cli import init
    layer = rnn.LSTM(3, input_size=2, i2h_bias_initializer="lstmbias")
    layer.initialize()
    np.testing.assert_array_equal(layer.l0_i2h_bias.data().asnumpy(),
                                  [0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    cell = rnn.LSTMCell(2, input_size=2, i2h_bias_initializer=init.LSTMBias(forget_bias=2.0))
    cell.initialize()
    np.testing.assert_array_equal(cell.i2h_bias.data().asnumpy(), [0, 0, 2, 2, 0, 0, 0, 0])
    # Every public name of MXNet 1.9.1's gluon.rnn.
    for name in ["RecurrentCell", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell",
                 "SequentialRNNCell", "HybridSequentialRNNCell", "DropoutCell", "ModifierCell",
                 "ZoneoutCell", "ResidualCell", "BidirectionalCell", "RNN", "LSTM", "GRU"]:
        assert hasattr(gluon.rnn, name), name


class _BeginStateInside(gluon.HybridBlock):
    """MXNet's idiom: begin states of batch size 0 made inside hybrid_forward."""

    def __init__(self, kind, func_name="zeros"):
        super().__init__()
        self.kind, self.func_name = kind, func_name
        with self.name_scope():
            self.rnn = (gluon.rnn.LSTMCell(5, input_size=4) if kind == "cell"
                        else gluon.rnn.GRU(5, num_layers=2, input_size=4))

    def hybrid_forward(self, F, x, batch_size=0):
        states = self.rnn.begin_state(batch_size=batch_size, func=getattr(F, self.func_name))
        if self.kind == "cell":
            return self.rnn.unroll(3, x, states, layout="NTC", merge_outputs=True)[0]
        return self.rnn(x, states)[0]


@pytest.mark.parametrize("kind", ["cell", "layer"])
@pytest.mark.parametrize("func_name", ["zeros", "ones"])
def test_batch_size_0_begin_states_inside_a_hybridized_block(kind, func_name):
    # Hybridized, MXNet's graph infers the batch of such states from the inputs: the same numbers
    # as states made for the batch explicitly. Not hybridized, MXNet refuses them, and so do we.
    net = _BeginStateInside(kind, func_name)
    net.initialize(initializer.Uniform(0.5))
    x = nd.array(np.random.RandomState(0).rand(2, 3, 4) if kind == "cell"
                 else np.random.RandomState(0).rand(3, 2, 4))
    want = net(x, 2).asnumpy()
    with pytest.raises(Exception, match="shape"):
        net(x)
    net.hybridize()
    with autograd.record():
        got = net(x)
    got.backward()
    np.testing.assert_array_equal(got.asnumpy(), want)
    np.testing.assert_array_equal(net(x).asnumpy(), want)


@pytest.mark.parametrize("activation", ["relu", "tanh"])
def test_a_float64_rnn_is_a_float64_computation(activation):
    # MXNet 1.9.1's CPU relu RNN casts its states through float32 (docs/compat.md): here the
    # float64 layer equals the recurrence computed in NumPy's float64, for both activations.
    layer = rnn.RNN(5, activation=activation, input_size=3)
    layer.initialize()
    layer.cast("float64")
    rng = np.random.RandomState(2)
    params = {}
    for name, p in layer.collect_params().items():
        params[name.split("_", 1)[1]] = rng.uniform(-0.6, 0.6, size=p.shape)
        p.set_data(nd.array(params[name.split("_", 1)[1]], dtype="float64"))
    x = rng.uniform(-1, 1, size=(6, 2, 3))
    got = layer(nd.array(x, dtype="float64")).asnumpy()
    act = (lambda v: np.maximum(v, 0)) if activation == "relu" else np.tanh
    h, want = np.zeros((2, 5)), []
    for t in range(6):
        h = act(x[t] @ params["l0_i2h_weight"].T + params["l0_i2h_bias"]
                + h @ params["l0_h2h_weight"].T + params["l0_h2h_bias"])
        want.append(h)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-13, atol=1e-15)
