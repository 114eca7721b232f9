"""Block, HybridBlock, Sequential and the basic nn layers: naming, parameters, files, hooks."""
import os

import numpy as np
import pytest

import trainer_cli
from trainer_cli import autograd, gluon, nd
from trainer_cli import initializer as init
from trainer_cli.gluon import nn
from trainer_cli.gluon.block import reset_name_counters
from trainer_cli.gluon.param_file import ParamFileError

from gradcheck import check_grad


@pytest.fixture(autouse=True)
def _fresh_names():
    reset_name_counters()
    trainer_cli.random.seed(0)


def _mlp(hidden=4, out=2, in_units=0):
    net = nn.Sequential()
    with net.name_scope():
        net.add(nn.Dense(hidden, activation="relu", in_units=in_units))
        net.add(nn.Dense(out, in_units=hidden if in_units else 0))
    return net


def _x(n=3, d=5, seed=0, ctx=None, dtype="float32"):
    return nd.array(np.random.RandomState(seed).randn(n, d), ctx=ctx, dtype=dtype)


# ------------------------------------------------------------------------------ naming
def test_automatic_prefixes_from_a_global_counter():
    a, b = nn.Dense(1), nn.Dense(1)
    assert (a.prefix, b.prefix) == ("dense0_", "dense1_")
    assert a.name == "dense0" and a.weight.name == "dense0_weight" and a.bias.name == "dense0_bias"
    assert nn.Sequential().prefix == "sequential0_"
    assert nn.HybridSequential().prefix == "hybridsequential0_"
    assert nn.Activation("relu").prefix == "relu0_"
    assert nn.Dense(1, activation="tanh").act.prefix == "dense2_tanh_"
    assert nn.Dense(1, prefix="head_").weight.name == "head_weight"
    assert nn.Dense(1).prefix == "dense3_"  # an explicit prefix does not use the counter
    reset_name_counters()
    assert nn.Dense(1).prefix == "dense0_"


def test_prefixes_inside_name_scope():
    net = _mlp()
    assert [blk.prefix for blk in net._children.values()] == ["sequential0_dense0_",
                                                              "sequential0_dense1_"]
    assert nn.Dense(1).prefix == "dense0_", "children in a scope do not advance the global counter"
    outer = nn.Sequential()
    with outer.name_scope():
        inner = nn.Sequential()
        with inner.name_scope():
            inner.add(nn.Dense(1))
        outer.add(inner, nn.Dense(1))
    assert list(outer.collect_params().keys()) == [
        "sequential1_sequential0_dense0_weight", "sequential1_sequential0_dense0_bias",
        "sequential1_dense0_weight", "sequential1_dense0_bias"]


def test_custom_block_registers_children_and_parameters():
    class Model(gluon.Block):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.encoder = nn.Dense(3, in_units=2)
                self.scale = self.params.get("scale", shape=(1,), init=init.Constant(2.0))

        def forward(self, x):
            return self.encoder(x) * self.scale.data()

    model = Model()
    assert model.prefix == "model0_"
    assert list(model.collect_params().keys()) == ["model0_scale", "model0_dense0_weight",
                                                   "model0_dense0_bias"]
    model.initialize(init.One())  # the Dense bias keeps its own 'zeros', scale its Constant(2)
    np.testing.assert_array_equal(model(nd.ones((1, 2))).asnumpy(), [[4.0, 4.0, 4.0]])
    with pytest.raises(TypeError, match="encoder"):
        model.encoder = "not a block"
    with pytest.raises(AssertionError, match="Overriding"):
        model.scale = gluon.Parameter("other", shape=(1,))


def test_shared_parameters_between_blocks():
    first = nn.Dense(2, in_units=3)
    second = nn.Dense(2, in_units=3, params=first.collect_params())
    assert second.prefix == "dense1_"
    assert second.weight is first.weight and second.bias is first.bias
    first.initialize()
    x = _x(d=3)
    np.testing.assert_array_equal(first(x).asnumpy(), second(x).asnumpy())


# ------------------------------------------------------------------------------ parameters
def test_collect_params_is_recursive_and_initialize_reaches_children():
    net = _mlp(in_units=5)
    params = net.collect_params()
    assert params.prefix == "sequential0_"
    assert len(list(params.keys())) == 4
    net.initialize(init.One())
    for p in params.values():
        assert p.data().shape == p.shape
    net.collect_params().zero_grad()


def test_standalone_parameter_attribute_is_collected():
    class Scale(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.gain = gluon.Parameter("gain", shape=(1,), init=init.Constant(3.0))

        def hybrid_forward(self, F, x, gain):
            return F.broadcast_mul(x, gain)

    blk = Scale()
    assert "gain" in blk.collect_params()
    blk.initialize()
    np.testing.assert_array_equal(blk(nd.ones((2,))).asnumpy(), [3.0, 3.0])


def test_block_cast_and_zero_grad():
    net = _mlp(in_units=5)
    net.initialize()
    net.cast("float64")
    assert all(p.data().dtype == np.float64 for p in net.collect_params().values())
    out = net(_x(dtype="float64"))
    assert out.dtype == np.float64


def test_dense_gradients_match_finite_differences():
    net = nn.Dense(3, activation="tanh", in_units=4, dtype="float64")
    net.initialize(init.Normal(0.5))
    x = np.random.RandomState(1).randn(2, 4)
    check_grad(lambda x: net(x), x, params=list(net.collect_params().values()))


def test_dense_variants():
    x = _x(n=2, d=6)
    flat = nn.Dense(3)
    flat.initialize()
    assert flat(x.reshape((2, 2, 3))).shape == (2, 3)
    assert flat.weight.shape == (3, 6)
    keep = nn.Dense(4, flatten=False, use_bias=False)
    keep.initialize()
    assert keep(x.reshape((2, 2, 3))).shape == (2, 2, 4)
    assert keep.weight.shape == (4, 3) and keep.bias is None
    assert list(keep.collect_params().keys()) == ["dense1_weight"]
    ones = nn.Dense(2, in_units=6, weight_initializer="ones", bias_initializer=init.Constant(0.5))
    ones.initialize()
    np.testing.assert_allclose(ones(x).asnumpy(), np.repeat(x.asnumpy().sum(1, keepdims=True), 2, 1)
                               + 0.5, rtol=1e-6)
    assert repr(ones) == "Dense(6 -> 2, linear)"
    assert repr(nn.Dense(2, activation="relu")) == "Dense(None -> 2, Activation(relu))"


def test_activation_flatten_identity_lambda():
    x = nd.array([[-1.0, 0.5], [2.0, -3.0]])
    expected = {"relu": np.maximum(x.asnumpy(), 0), "tanh": np.tanh(x.asnumpy()),
                "sigmoid": 1 / (1 + np.exp(-x.asnumpy())),
                "softrelu": np.log1p(np.exp(x.asnumpy())),
                "softsign": x.asnumpy() / (1 + np.abs(x.asnumpy()))}
    for name, want in expected.items():
        np.testing.assert_allclose(nn.Activation(name)(x).asnumpy(), want, rtol=1e-6)
    assert nn.Flatten()(nd.ones((2, 3, 4))).shape == (2, 12)
    assert nn.Identity()(x) is x
    np.testing.assert_array_equal(nn.Lambda("relu")(x).asnumpy(), expected["relu"])
    np.testing.assert_array_equal(nn.Lambda(lambda v: v * 2)(x).asnumpy(), x.asnumpy() * 2)
    np.testing.assert_allclose(nn.HybridLambda("tanh")(x).asnumpy(), np.tanh(x.asnumpy()),
                               rtol=1e-6)
    np.testing.assert_array_equal(nn.HybridLambda(lambda F, v: F.abs(v))(x).asnumpy(),
                                  np.abs(x.asnumpy()))
    with pytest.raises(ValueError):
        nn.Lambda("no_such_function")
    with pytest.raises(ValueError):
        nn.HybridLambda(42)


# ------------------------------------------------------------------------------ save / load
def test_save_load_round_trip(tmp_path, ctx):
    net = _mlp()
    net.initialize(ctx=ctx)
    x = _x(ctx=ctx)
    expected = net(x).asnumpy()
    path = str(tmp_path / "net.params")
    net.save_parameters(path)

    with np.load(path, allow_pickle=False) as npz:
        assert sorted(npz.files) == ["0.bias", "0.weight", "1.bias", "1.weight"]
        np.testing.assert_array_equal(npz["0.weight"], net[0].weight.data().asnumpy())
    assert not [f for f in os.listdir(tmp_path) if f != "net.params"], "no temp file left behind"

    clone = _mlp()  # other prefixes (sequential1_...): structural names still match
    clone.load_parameters(path, ctx=ctx)
    assert clone.prefix != net.prefix
    np.testing.assert_array_equal(clone(x).asnumpy(), expected)
    assert clone[0].weight.list_ctx() == [ctx]


def test_load_reports_missing_and_extra_parameters(tmp_path):
    small = nn.Sequential()
    with small.name_scope():
        small.add(nn.Dense(4, in_units=5))
    small.initialize()
    small_path = str(tmp_path / "small.params")
    small.save_parameters(small_path)
    big = _mlp(in_units=5)
    big.initialize()
    big_path = str(tmp_path / "big.params")
    big.save_parameters(big_path)

    with pytest.raises(AssertionError) as info:
        _mlp(in_units=5).load_parameters(small_path)
    assert "small.params" in str(info.value) and "1.weight" in str(info.value)
    partial = _mlp(in_units=5)
    partial.initialize(init.Zero())
    partial.load_parameters(small_path, allow_missing=True)
    np.testing.assert_array_equal(partial[0].weight.data().asnumpy(),
                                  small[0].weight.data().asnumpy())
    np.testing.assert_array_equal(partial[1].weight.data().asnumpy(), np.zeros((2, 4)))

    target = nn.Sequential()
    with target.name_scope():
        target.add(nn.Dense(4, in_units=5))
    with pytest.raises(ValueError) as info:
        target.load_parameters(big_path)
    assert "big.params" in str(info.value) and "1." in str(info.value)
    target.load_parameters(big_path, ignore_extra=True)
    np.testing.assert_array_equal(target[0].bias.data().asnumpy(), big[0].bias.data().asnumpy())


def test_load_rejects_shape_mismatch(tmp_path):
    net = nn.Dense(3, in_units=2)
    net.initialize()
    path = str(tmp_path / "d.params")
    net.save_parameters(path)
    with pytest.raises(AssertionError, match="shape incompatible"):
        nn.Dense(4, in_units=2).load_parameters(path)


def _bad_file(tmp_path, kind):
    good = nn.Dense(3, in_units=200)
    good.initialize()
    path = tmp_path / ("%s.params" % kind)
    if kind == "missing":
        return str(path)
    if kind == "text":
        path.write_text("this is not a parameter file\n")
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind in ("truncated", "corrupted"):
        good.save_parameters(str(path))
        data = bytearray(path.read_bytes())
        if kind == "truncated":
            data = data[: len(data) // 2]
        else:
            data[len(data) // 2] ^= 0xFF  # inside the weight's bytes: caught by the zip CRC
        path.write_bytes(bytes(data))
    elif kind == "npy":
        with open(path, "wb") as f:
            np.save(f, np.zeros(3))
    elif kind == "pickle":
        with open(path, "wb") as f:
            np.savez(f, weight=np.array([{"a": 1}], dtype=object))
    elif kind == "nd_list":
        nd.save(str(path), [nd.zeros((2,))])
    return str(path)


@pytest.mark.parametrize("kind", ["missing", "text", "empty", "truncated", "corrupted", "npy",
                                  "pickle", "nd_list"])
def test_bad_parameter_files_are_clear_errors(tmp_path, kind):
    path = _bad_file(tmp_path, kind)
    net = nn.Dense(3, in_units=200)
    with pytest.raises(ParamFileError) as info:
        net.load_parameters(path)
    assert path in str(info.value)
    assert isinstance(info.value, ValueError)


def test_other_layouts_load(tmp_path):
    net = _mlp(in_units=5)
    net.initialize()
    x = _x()
    expected = net(x).asnumpy()

    stripped = str(tmp_path / "stripped.params")  # MXNet's older layout, relative to the prefix
    net.collect_params().save(stripped, strip_prefix=net.prefix)
    clone = _mlp(in_units=5)
    clone.load_parameters(stripped)
    np.testing.assert_array_equal(clone(x).asnumpy(), expected)

    full = str(tmp_path / "full.params")
    net.collect_params().save(full)
    same = nn.Sequential(prefix=net.prefix)
    with same.name_scope():
        same.add(nn.Dense(4, activation="relu"), nn.Dense(2))
    same.load_parameters(full)
    np.testing.assert_array_equal(same(x).asnumpy(), expected)

    nd_dict = str(tmp_path / "nd.params")
    nd.save(nd_dict, {k: p.data() for k, p in net._collect_params_with_prefix().items()})
    third = _mlp(in_units=5)
    third.load_parameters(nd_dict)
    np.testing.assert_array_equal(third(x).asnumpy(), expected)


def test_deduplicated_save_of_shared_parameters(tmp_path):
    net = nn.Sequential()
    with net.name_scope():
        first = nn.Dense(3, in_units=3)
        net.add(first, nn.Dense(3, in_units=3, params=first.collect_params()))
    net.initialize()
    path = str(tmp_path / "shared.params")
    net.save_parameters(path, deduplicate=True)
    assert sorted(np.load(path, allow_pickle=False).files) == ["1.bias", "1.weight"]
    clone = nn.Sequential()
    with clone.name_scope():
        first = nn.Dense(3, in_units=3)
        clone.add(first, nn.Dense(3, in_units=3, params=first.collect_params()))
    clone.load_parameters(path)
    np.testing.assert_array_equal(clone[0].weight.data().asnumpy(), net[0].weight.data().asnumpy())


def test_saved_names_that_collide_with_numpy_keywords(tmp_path):
    class Odd(gluon.Block):
        def __init__(self):
            super().__init__()
            self.file = self.params.get("file", shape=(2,), init=init.One())

    blk = Odd()
    blk.initialize()
    path = str(tmp_path / "odd.params")
    blk.save_parameters(path)
    fresh = Odd()
    fresh.load_parameters(path)
    np.testing.assert_array_equal(fresh.file.data().asnumpy(), [1.0, 1.0])


# ------------------------------------------------------------------------------ hybridize, containers
def test_hybridize_does_not_change_results():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Dense(4, activation="tanh"), nn.Dense(1))
    net.initialize()
    x = _x()
    with autograd.record():
        eager = net(x)
    eager.backward()
    eager_grad = net[0].weight.grad().asnumpy()
    net.hybridize(static_alloc=True, static_shape=True)
    for _ in range(2):
        with autograd.record():
            hybrid = net(x)
        hybrid.backward()
        np.testing.assert_array_equal(hybrid.asnumpy(), eager.asnumpy())
        np.testing.assert_array_equal(net[0].weight.grad().asnumpy(), eager_grad)


def test_sequential_indexing_slicing_and_len():
    net = nn.Sequential()
    with net.name_scope():
        net.add(nn.Dense(4, in_units=5), nn.Activation("relu"), nn.Dense(2, in_units=4))
    net.initialize()
    assert len(net) == 3
    assert isinstance(net[1], nn.Activation)
    assert net[-1] is list(net._children.values())[-1]
    tail = net[1:]
    assert isinstance(tail, nn.Sequential) and len(tail) == 2
    assert tail[1] is net[2] and tail.prefix == net.prefix
    x = _x()
    np.testing.assert_array_equal(tail(net[0](x)).asnumpy(), net(x).asnumpy())
    hybrid = nn.HybridSequential()
    hybrid.add(nn.Dense(1), nn.Dense(1))
    assert isinstance(hybrid[:1], nn.HybridSequential)


def test_sequential_passes_extra_outputs_along():
    class Pair(gluon.Block):
        def forward(self, x):
            return x * 2, x + 1

    class Add(gluon.Block):
        def forward(self, x, y):
            return x + y, y

    net = nn.Sequential()
    net.add(Pair(), Add())
    out = net(nd.ones((2,)))
    assert isinstance(out, tuple) and len(out) == 2  # the extra output comes back as a tuple
    np.testing.assert_array_equal(out[0].asnumpy(), [4.0, 4.0])
    np.testing.assert_array_equal(out[1].asnumpy(), [2.0, 2.0])


def test_forward_hooks():
    net = nn.Dense(2, in_units=3)
    net.initialize()
    calls = []
    pre = net.register_forward_pre_hook(lambda blk, args: calls.append(("pre", blk, len(args))))
    post = net.register_forward_hook(lambda blk, args, out: calls.append(("post", out.shape)))
    net(nd.ones((1, 3)))
    assert calls == [("pre", net, 1), ("post", (1, 2))]
    pre.detach()
    with post:
        net(nd.ones((4, 3)))
    net(nd.ones((1, 3)))
    assert calls[2:] == [("post", (4, 2))]


def test_repr():
    net = nn.Sequential()
    with net.name_scope():
        net.add(nn.Dense(4, activation="relu", in_units=3), nn.Dense(1))
    assert repr(net) == ("Sequential(\n"
                         "  (0): Dense(3 -> 4, Activation(relu))\n"
                         "  (1): Dense(None -> 1, linear)\n"
                         ")")
    outer = nn.Sequential()
    outer.add(net)
    assert repr(outer).splitlines()[1:3] == ["  (0): Sequential(", "    (0): Dense(3 -> 4, Activation(relu))"]
    assert repr(gluon.loss.L2Loss()) == "L2Loss(batch_axis=0, w=1.0)"


def test_hook_handles_are_mxnets():
    # Recorded from MXNet 1.9.1: the same function registered twice is one hook (keyed by
    # id(hook)), so one detach removes it; a handle works as a context manager; a HookHandle
    # attaches once, to an OrderedDict (a plain dict takes no weak reference in MXNet either).
    import collections
    import copy

    calls = []

    def hook(block, inputs, outputs):
        calls.append("post")

    def pre(block, inputs):
        calls.append("pre")
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    first = net.register_forward_hook(hook)
    net.register_forward_hook(hook)
    net.register_forward_pre_hook(pre)
    seen = []
    for step in range(4):
        if step == 1:
            first.detach()
        if step == 2:
            with net.register_forward_hook(hook):
                net(nd.ones((1, 3)))
        else:
            net(nd.ones((1, 3)))
        seen.append(calls[:])
        calls.clear()
    assert seen == [["pre", "post"], ["pre"], ["pre", "post"], ["pre"]]
    handle = gluon.utils.HookHandle()
    hooks = collections.OrderedDict()
    handle.attach(hooks, hook)
    assert list(hooks.values()) == [hook]
    with pytest.raises(AssertionError, match="attached twice"):
        handle.attach(hooks, pre)
    copy.copy(handle).detach()
    handle.detach()
    assert not hooks
    with pytest.raises(TypeError):
        gluon.utils.HookHandle().attach({}, hook)
