"""Deferred parameter shapes inferred through the recorded graph, as MXNet's Gluon does:
user HybridBlocks declaring parameters with 0 dimensions (each operator that takes
parameters, a Python custom operator's ``infer_shape``), ``gluon.SymbolBlock`` over symbols
made with ``mx.sym`` (which create their parameter variables as MXNet's do), and the errors
where a shape cannot be inferred. Recorded from MXNet 1.9.1 by
tests/data/mxnet_deferred/make_deferred_records.py (the same ``deferred_cases.record``)."""
import json
import os
import sys

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import gluon, nd
from trainer_cli.gluon.parameter import DeferredInitializationError
from trainer_cli.symbol import naming

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_deferred")
sys.path.insert(0, HERE)
import deferred_cases  # noqa: E402

with np.load(os.path.join(HERE, "deferred.npz"), allow_pickle=False) as _z:
    RECORDED = {key: _z[key] for key in _z.files}


@pytest.fixture(scope="module")
def ours():
    with naming.NameManager():      # MXNet's records start from a fresh process's counters
        return deferred_cases.record(mx)


def _kind(key):
    return key.split(":")[1][:3]


def test_every_recorded_case_is_here(ours):
    assert sorted(ours) == sorted(RECORDED)


@pytest.mark.parametrize("key", sorted(k for k in RECORDED if _kind(k) in ("sha", "arg",
                                                                            "jso", "err")))
def test_shapes_argument_lists_graphs_and_messages_are_mxnets(ours, key):
    got, want = np.asarray(ours[key]), RECORDED[key]
    if want.dtype.kind == "U":
        assert str(got) == str(want)
    else:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


# Outputs once every parameter has MXNet's values: NumPy's GEMMs and MXNet's (oneDNN) sum in
# other orders, so float32 agrees to rounding.
@pytest.mark.parametrize("key", sorted(k for k in RECORDED if _kind(k) == "out"))
def test_outputs_with_the_same_parameters_are_mxnets(ours, key):
    want = RECORDED[key]
    got = replay.same_layout(ours[key], want)
    tol = 1e-12 if want.dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max()))


# ------------------------------------------------------------------ independent of the records
class _Net(gluon.HybridBlock):
    def __init__(self, fn, **params):
        super().__init__(prefix="net_")
        self._fn = fn
        with self.name_scope():
            for name, shape in params.items():
                setattr(self, name, self.params.get(name, shape=shape, allow_deferred_init=True))

    def hybrid_forward(self, F, x, *args, **params):
        return self._fn(F, x, *args, **params)


def test_the_briefs_block_gets_its_weight_at_the_first_call_and_computes_a_dense_layer():
    net = _Net(lambda F, x, weight, bias: F.FullyConnected(x, weight, bias, num_hidden=3),
               weight=(3, 0), bias=(3,))
    net.initialize()
    x = nd.array(np.arange(10, dtype="float32").reshape(2, 5))
    out = net(x)
    assert net.weight.shape == (3, 5) and net.bias.shape == (3,)
    w, b = net.weight.data().asnumpy(), net.bias.data().asnumpy()
    np.testing.assert_allclose(out.asnumpy(), x.asnumpy() @ w.T + b, rtol=1e-6)


def test_a_shape_that_stays_unknown_is_a_value_error_and_a_deferred_initialization_error():
    net = _Net(lambda F, x, gamma: F.broadcast_mul(x, gamma.reshape((1, -1))), gamma=(0,))
    net.initialize()
    with pytest.raises(ValueError, match=r"cannot be inferred.*\n\tnet_gamma: \(0,\)") as info:
        net(nd.ones((2, 3)))
    assert isinstance(info.value, DeferredInitializationError)


def test_a_parameter_the_graph_does_not_use_is_named():
    # MXNet fails with a KeyError's text ('net_unused'); the message here says what it is.
    net = _Net(lambda F, x, weight, unused: F.FullyConnected(x, weight, num_hidden=2,
                                                             no_bias=True),
               weight=(2, 0), unused=(0,))
    net.initialize()
    with pytest.raises(ValueError, match=r"Cannot decide shape.*\n\tnet_unused: \(0,\)"):
        net(nd.ones((2, 3)))


def test_a_declared_shape_that_contradicts_the_inferred_one_is_refused():
    net = _Net(lambda F, x, weight: F.FullyConnected(x, weight, num_hidden=2, no_bias=True),
               weight=(2, 4))
    with pytest.raises(ValueError, match="Shape inconsistent, Provided = \\[2,4\\], inferred "
                                         "shape=\\(2,3\\)"):
        net.infer_shape(nd.ones((2, 3)))


def test_inferring_through_the_graph_leaves_what_export_writes_alone(tmp_path):
    # A block inside a hybridized parent infers through a graph of its own, which MXNet does
    # not record: the versions of its moving statistics (which export writes) count only the
    # graphs MXNet records, here two (MXNet 1.9.1 gives [3, 0, 2], alone or nested).
    def bn(F, x, gamma, beta, mean, var):
        return F.BatchNorm(x, gamma, beta, mean, var)

    def export(nested):
        inner = _Net(bn, gamma=(0,), beta=(0,), mean=(0,), var=(0,))
        net = gluon.nn.HybridSequential(prefix="outer_")
        if nested:
            net.add(inner)
        block = net if nested else inner
        block.initialize(mx.init.One())
        for _ in range(2):
            block.hybridize()
            block(nd.ones((2, 3, 4)))
        block.export(str(tmp_path / ("n%d" % nested)))
        nodes = json.loads((tmp_path / ("n%d-symbol.json" % nested)).read_text())["nodes"]
        return [n["inputs"] for n in nodes if n["op"] == "BatchNorm"]
    assert export(False) == export(True) == [[[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 2],
                                              [4, 0, 2]]]


def test_the_inferred_shapes_reach_the_children_and_the_block_trains():
    class Outer(gluon.HybridBlock):
        def __init__(self):
            super().__init__(prefix="o_")
            with self.name_scope():
                self.dense = gluon.nn.Dense(4)
                self.scale = self.params.get("scale", shape=(0, 0), allow_deferred_init=True)

        def hybrid_forward(self, F, x, scale):
            return F.elemwise_mul(self.dense(x), scale)

    net = Outer()
    net.initialize(mx.init.One())
    x = nd.ones((3, 2))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    with mx.autograd.record():
        loss = net(x).sum()
    loss.backward()
    trainer.step(1)
    assert net.scale.shape == (3, 4) and net.dense.weight.shape == (4, 2)
    # d(sum)/d(scale) is the dense output: ones . ones + the bias (Dense's own init, zeros).
    np.testing.assert_allclose(net.scale.data().asnumpy(), np.full((3, 4), 1 - 0.1 * 2.0),
                               rtol=1e-6)


def test_symbol_block_over_a_fresh_symbol_initializes_at_the_first_call():
    x = mx.sym.var("x")
    s = mx.sym.FullyConnected(mx.sym.relu(x), num_hidden=3, name="fc")
    assert s.list_arguments() == ["x", "fc_weight", "fc_bias"]
    block = gluon.SymbolBlock(s, x)
    block.initialize(mx.init.One())
    out = block(nd.ones((2, 4)))
    assert block.params["fc_weight"].shape == (3, 4)
    np.testing.assert_array_equal(out.asnumpy(), np.full((2, 3), 5.0, dtype="float32"))
    with pytest.raises(ValueError, match="does not fit data shape"):
        block(nd.ones((2, 5)))      # the shapes are the first call's


def test_symbol_block_without_initialize_still_says_so():
    x = mx.sym.var("x")
    block = gluon.SymbolBlock(mx.sym.FullyConnected(x, num_hidden=3, name="fc"), x)
    with pytest.raises(RuntimeError, match="has not been initialized"):
        block(nd.ones((2, 4)))


def test_operators_take_their_inputs_by_their_attributes():
    x = mx.sym.var("x")
    assert mx.sym.FullyConnected(x, num_hidden=2, no_bias=1, name="f").list_arguments() == \
        ["x", "f_weight"]
    assert mx.sym.Deconvolution(x, kernel=(2, 2), num_filter=2, no_bias=False,
                                name="d").list_arguments() == ["x", "d_weight", "d_bias"]
    assert mx.sym.RNN(x, state_size=2, num_layers=1, mode="rnn_relu",
                      name="r").list_arguments() == ["x", "r_parameters", "r_state"]
    # Given variables keep their own initializer; BatchNorm gives one to those without.
    mean = mx.sym.var("mean", init=mx.init.Constant(3))
    s = mx.sym.BatchNorm(x, moving_mean=mean, name="bn")
    assert s.list_auxiliary_states() == ["mean", "bn_moving_var"]
    assert '"__init__": "[\\"constant\\", {\\"value\\": 3}]"' in s.tojson()
