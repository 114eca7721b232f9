"""Initializers: ranges and scales (checked statistically on big tensors), name dispatch, strings."""
import json
import math

import numpy as np
import pytest

import trainer_cli
from trainer_cli import gluon, init, nd
from trainer_cli.gluon.block import reset_name_counters
from trainer_cli.initializer import InitDesc


@pytest.fixture(autouse=True)
def _fresh():
    reset_name_counters()
    trainer_cli.random.seed(0)


def _draw(initializer, shape, ctx=None, dtype="float32"):
    p = gluon.Parameter("w", shape=shape, init=initializer, dtype=dtype)
    p.initialize(ctx=ctx)
    return p.data().asnumpy()


def test_default_is_uniform_0_07(ctx):
    net = gluon.nn.Dense(200, in_units=300)
    net.initialize(ctx=ctx)
    w = net.weight.data().asnumpy()
    assert net.weight.data().context == ctx
    assert np.abs(w).max() <= 0.07 and np.abs(w).max() > 0.069
    assert abs(w.mean()) < 0.002
    assert w.std() == pytest.approx(0.07 / math.sqrt(3), rel=0.02)
    np.testing.assert_array_equal(net.bias.data().asnumpy(), np.zeros(200, np.float32))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_uniform_and_normal(dtype):
    u = _draw(init.Uniform(0.5), (400, 250), dtype=dtype)
    assert u.dtype == np.dtype(dtype)
    assert u.min() >= -0.5 and u.max() <= 0.5
    assert u.std() == pytest.approx(0.5 / math.sqrt(3), rel=0.02)
    n = _draw(init.Normal(0.2), (400, 250), dtype=dtype)
    assert abs(n.mean()) < 0.005 and n.std() == pytest.approx(0.2, rel=0.02)
    assert _draw(init.Normal(), (400, 250)).std() == pytest.approx(0.01, rel=0.02)


@pytest.mark.parametrize("factor_type", ["avg", "in", "out"])
def test_xavier_uniform_scale(factor_type):
    shape = (300, 500)
    fan = {"avg": (300 + 500) / 2, "in": 500, "out": 300}[factor_type]
    bound = math.sqrt(3.0 / fan)
    w = _draw(init.Xavier(factor_type=factor_type), shape)
    assert np.abs(w).max() <= bound * (1 + 1e-6) and np.abs(w).max() > 0.99 * bound
    assert w.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)


def test_xavier_gaussian_and_conv_shapes():
    w = _draw(init.Xavier(rnd_type="gaussian", magnitude=2), (300, 400))
    assert w.std() == pytest.approx(math.sqrt(2.0 / 350), rel=0.02)
    conv = _draw(init.Xavier(factor_type="in"), (64, 32, 3, 3))  # fan_in = 32 * 3 * 3
    bound = math.sqrt(3.0 / (32 * 9))
    assert np.abs(conv).max() <= bound * (1 + 1e-6)
    assert conv.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    with pytest.raises(ValueError, match="vector"):
        _draw(init.Xavier(), (10,))


@pytest.mark.parametrize("slope", [0.25, 0.0])
def test_msra_prelu_scale(slope):
    w = _draw(init.MSRAPrelu(slope=slope), (300, 500))
    magnitude = 2.0 / (1 + slope ** 2)
    assert abs(w.mean()) < 0.002
    assert w.std() == pytest.approx(math.sqrt(magnitude / 400), rel=0.02)
    w_in = _draw(init.MSRAPrelu(factor_type="in", slope=slope), (300, 500))
    assert w_in.std() == pytest.approx(math.sqrt(magnitude / 500), rel=0.02)


def test_constant_zero_one(ctx):
    np.testing.assert_array_equal(_draw(init.Zero(), (2, 3), ctx), np.zeros((2, 3)))
    np.testing.assert_array_equal(_draw(init.One(), (2, 3), ctx), np.ones((2, 3)))
    np.testing.assert_array_equal(_draw(init.Constant(2.5), (2, 3), ctx), np.full((2, 3), 2.5))
    np.testing.assert_array_equal(_draw(init.Constant([1.0, 2.0, 3.0]), (2, 3), ctx),
                                  [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_array_equal(_draw(init.Constant(7), (2,), ctx, dtype="float64"), [7.0, 7.0])


def test_strings_name_initializers():
    assert isinstance(init.create("zeros"), init.Zero) and isinstance(init.create("ones"), init.One)
    assert isinstance(init.create("Xavier"), init.Xavier)
    np.testing.assert_array_equal(_draw("zeros", (3,)), np.zeros(3))
    np.testing.assert_array_equal(_draw("ones", (3,)), np.ones(3))
    restored = init.create(init.Xavier(factor_type="in", magnitude=2).dumps())
    assert isinstance(restored, init.Xavier)
    assert (restored.factor_type, restored.magnitude) == ("in", 2.0)
    assert json.loads(init.Uniform(0.1).dumps()) == ["uniform", {"scale": 0.1}]
    with pytest.raises(ValueError, match="unknown initializer"):
        init.create("nonsense")
    net = gluon.nn.Dense(3, in_units=2, weight_initializer="ones", bias_initializer="ones")
    net.initialize()
    np.testing.assert_array_equal(net.weight.data().asnumpy(), np.ones((3, 2)))
    np.testing.assert_array_equal(net.bias.data().asnumpy(), np.ones(3))
    other = gluon.nn.Dense(3, in_units=2)
    other.initialize("one")  # the global initializer given by name
    np.testing.assert_array_equal(other.weight.data().asnumpy(), np.ones((3, 2)))
    np.testing.assert_array_equal(other.bias.data().asnumpy(), np.zeros(3))


def test_dense_bias_stays_zero_under_a_global_initializer():
    net = gluon.nn.Sequential()
    with net.name_scope():
        net.add(gluon.nn.Dense(50, in_units=40), gluon.nn.Dense(30))
    net.initialize(init.Xavier())
    net(nd.ones((1, 40)))
    for layer in net._children.values():
        np.testing.assert_array_equal(layer.bias.data().asnumpy(), np.zeros(layer.bias.shape))
    w = net[0].weight.data().asnumpy()
    assert np.abs(w).max() <= math.sqrt(3.0 / 45) and w.std() > 0.1
    # A parameter's own init wins over the global one; the global one fills the rest.
    net2 = gluon.nn.Dense(4, in_units=4, weight_initializer=init.Constant(0.25))
    net2.initialize(init.One())
    np.testing.assert_array_equal(net2.weight.data().asnumpy(), np.full((4, 4), 0.25))


def test_name_based_dispatch_of_call():
    uniform = init.Uniform(0.5)
    arr = nd.full((200,), 9.0)
    uniform(InitDesc("fc_bias"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.zeros(200))
    uniform(InitDesc("bn_gamma"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.ones(200))
    uniform(InitDesc("bn_beta"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.zeros(200))
    uniform(InitDesc("fc_weight"), arr)
    assert np.abs(arr.asnumpy()).max() <= 0.5 and arr.asnumpy().std() > 0.2
    uniform(InitDesc("bn_running_var"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.ones(200))
    uniform(InitDesc("q_min"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.zeros(200))
    uniform(InitDesc("q_max"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.ones(200))
    with pytest.raises(ValueError, match="Unknown initialization pattern"):
        uniform(InitDesc("mystery"), arr)
    # An '__init__' attribute (what Parameter passes) wins over the name.
    uniform(InitDesc("fc_bias", {"__init__": "ones"}), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.ones(200))
    uniform(InitDesc("anything", {"__init__": init.Constant(3.0)}), arr)
    np.testing.assert_array_equal(arr.asnumpy(), np.full(200, 3.0))


def test_seed_makes_initialization_reproducible():
    trainer_cli.random.seed(5)
    first = _draw(init.Xavier(), (20, 30))
    trainer_cli.random.seed(5)
    np.testing.assert_array_equal(_draw(init.Xavier(), (20, 30)), first)
    assert not np.array_equal(_draw(init.Xavier(), (20, 30)), first)
