"""Gluon convolution, pooling, normalization, dropout, embedding and activation layers:
MXNet names and shapes, and gradients of inputs and parameters against finite differences."""
import numpy as np
import pytest

import trainer_cli
from trainer_cli import autograd, gluon, nd
from trainer_cli.gluon import nn
from trainer_cli.gluon.block import reset_name_counters
from gradcheck import check_grad


def rand(*shape, low=-1.0, high=1.0, seed=0):
    return np.random.RandomState(seed).uniform(low, high, size=shape)


def distinct(*shape, seed=0):
    rng = np.random.RandomState(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 - n * 0.05).reshape(shape)


def ready(block, ctx, x_shape, init=None):
    """Initialize on ``ctx`` in float64 and run once so that deferred shapes are known."""
    block.initialize(init or trainer_cli.init.Normal(0.5), ctx=ctx)
    block.cast("float64")
    with autograd.pause():
        block(nd.zeros(x_shape, ctx=ctx, dtype="float64"))
    return block


def params_of(block):
    return [p for p in block.collect_params().values() if p.grad_req != "null"]


# ----------------------------------------------------------------------------- names and shapes
def test_names_and_shapes():
    reset_name_counters()
    conv = nn.Conv2D(8, kernel_size=3, in_channels=4, groups=2)
    assert conv.weight.name == "conv0_weight" and conv.weight.shape == (8, 2, 3, 3)
    assert conv.bias.name == "conv0_bias" and conv.bias.shape == (8,)
    assert nn.Conv2D(2, (1, 3), use_bias=False).bias is None
    assert nn.MaxPool2D().name == "pool0" and nn.GlobalAvgPool2D().name == "pool1"
    bn = nn.BatchNorm()
    names = sorted(bn.collect_params().keys())
    assert names == ["batchnorm0_beta", "batchnorm0_gamma", "batchnorm0_running_mean",
                     "batchnorm0_running_var"]
    assert bn.running_mean.grad_req == "null" and bn.running_var.grad_req == "null"
    assert bn.gamma.grad_req == "write" and nn.BatchNorm(scale=False).gamma.grad_req == "null"
    emb = nn.Embedding(10, 4)
    assert emb.weight.name == "embedding0_weight" and emb.weight.shape == (10, 4)
    assert nn.Dropout(0.5).name == "dropout0"
    assert nn.LayerNorm().gamma.name == "layernorm0_gamma"
    assert nn.PReLU().alpha.name == "prelu0_alpha"
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(3, 3), nn.BatchNorm())
    assert sorted(net.collect_params().keys())[0] == "hybridsequential0_batchnorm0_beta"
    assert "hybridsequential0_conv0_weight" in net.collect_params().keys()


def test_deferred_in_channels(ctx):
    conv = nn.Conv2D(6, kernel_size=(3, 2), groups=3)
    conv.initialize(ctx=ctx)
    out = conv(nd.ones((2, 9, 5, 5), ctx=ctx))
    assert conv.weight.shape == (6, 3, 3, 2) and out.shape == (2, 6, 3, 4)
    bn = nn.BatchNorm(axis=-1)
    bn.initialize(ctx=ctx)
    bn(nd.ones((2, 7), ctx=ctx))
    assert bn.gamma.shape == (7,) and bn.running_var.data(ctx).asnumpy().tolist() == [1.0] * 7
    assert bn.running_mean.data(ctx).asnumpy().tolist() == [0.0] * 7


def test_output_shapes(ctx):
    x = nd.ones((2, 3, 9, 9), ctx=ctx)
    cases = [
        (nn.Conv2D(4, 3), (2, 4, 7, 7)), (nn.Conv2D(4, 3, strides=2, padding=1), (2, 4, 5, 5)),
        (nn.Conv2D(4, 3, dilation=2), (2, 4, 5, 5)), (nn.MaxPool2D(), (2, 3, 4, 4)),
        (nn.MaxPool2D(3, 2, ceil_mode=True), (2, 3, 4, 4)), (nn.AvgPool2D(3, 1, 1), (2, 3, 9, 9)),
        (nn.GlobalAvgPool2D(), (2, 3, 1, 1)), (nn.GlobalMaxPool2D(), (2, 3, 1, 1)),
        (nn.BatchNorm(), (2, 3, 9, 9)), (nn.Dropout(0.5), (2, 3, 9, 9)),
    ]
    for block, shape in cases:
        block.initialize(ctx=ctx)
        assert block(x).shape == shape, block
    seq = nd.ones((2, 3, 10), ctx=ctx)
    for block, shape in [(nn.Conv1D(5, 3), (2, 5, 8)), (nn.MaxPool1D(), (2, 3, 5)),
                         (nn.AvgPool1D(2, 1), (2, 3, 9)), (nn.GlobalAvgPool1D(), (2, 3, 1))]:
        block.initialize(ctx=ctx)
        assert block(seq).shape == shape, block
    vol = nd.ones((1, 2, 4, 4, 4), ctx=ctx)
    for block, shape in [(nn.Conv3D(3, 2), (1, 3, 3, 3, 3)), (nn.MaxPool3D(), (1, 2, 2, 2, 2)),
                         (nn.GlobalMaxPool3D(), (1, 2, 1, 1, 1))]:
        block.initialize(ctx=ctx)
        assert block(vol).shape == shape, block


# ----------------------------------------------------------------------------- gradients
CONV_LAYERS = [
    ("plain", lambda: nn.Conv2D(3, 3, in_channels=2), (2, 2, 5, 5)),
    ("stride_pad", lambda: nn.Conv2D(3, (3, 2), strides=(2, 1), padding=(1, 1)), (2, 2, 5, 6)),
    ("dilate", lambda: nn.Conv2D(2, 2, dilation=2, padding=1), (1, 2, 5, 5)),
    ("groups_relu", lambda: nn.Conv2D(4, 3, groups=2, padding=1, activation="tanh"), (2, 4, 4, 4)),
    ("no_bias", lambda: nn.Conv2D(3, 1, use_bias=False), (2, 3, 3, 3)),
    # Few column rows against many filters: the per-image GEMMs (nd.nn.PER_IMAGE_ROWS).
    ("per_image", lambda: nn.Conv2D(20, 3, padding=1, in_channels=1), (2, 1, 5, 5)),
    ("per_image_1d", lambda: nn.Conv1D(24, 3, strides=2, in_channels=2), (3, 2, 9)),
    ("conv1d", lambda: nn.Conv1D(3, 3, strides=2, padding=1), (2, 2, 7)),
    ("conv3d", lambda: nn.Conv3D(2, 2, padding=1), (1, 2, 3, 3, 2)),
]


@pytest.mark.parametrize("name,make,shape", CONV_LAYERS, ids=[c[0] for c in CONV_LAYERS])
def test_conv_layer_grad(ctx, name, make, shape):
    layer = ready(make(), ctx, shape)
    check_grad(lambda x: layer(x), rand(*shape), ctx=ctx, params=params_of(layer))


POOL_LAYERS = [
    ("max", lambda: nn.MaxPool2D(), (2, 2, 4, 6)),
    ("max_pad_ceil", lambda: nn.MaxPool2D(3, 2, 1, ceil_mode=True), (2, 2, 6, 5)),
    ("avg", lambda: nn.AvgPool2D(3, 2, 1), (2, 2, 5, 5)),
    ("avg_nopad", lambda: nn.AvgPool2D(3, 2, 1, count_include_pad=False, ceil_mode=True), (2, 2, 6, 6)),
    ("gavg", lambda: nn.GlobalAvgPool2D(), (2, 3, 3, 4)),
    ("gmax", lambda: nn.GlobalMaxPool2D(), (2, 3, 3, 4)),
    ("max1d", lambda: nn.MaxPool1D(3, 2), (2, 2, 7)),
    ("avg3d", lambda: nn.AvgPool3D(2), (1, 2, 4, 4, 2)),
]


@pytest.mark.parametrize("name,make,shape", POOL_LAYERS, ids=[c[0] for c in POOL_LAYERS])
def test_pool_layer_grad(ctx, name, make, shape):
    layer = ready(make(), ctx, shape)
    check_grad(lambda x: layer(x), distinct(*shape, seed=2), ctx=ctx)


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("kwargs,shape", [({}, (4, 3, 2, 2)), ({"axis": -1}, (5, 3)),
                                          ({"scale": False, "center": False}, (4, 2, 3)),
                                          ({"use_global_stats": True}, (3, 2, 2))])
def test_batchnorm_layer_grad(ctx, train, kwargs, shape):
    bn = ready(nn.BatchNorm(**kwargs), ctx, shape, init=trainer_cli.init.Normal(0.5))
    bn.running_var.set_data(nd.array(rand(bn.running_var.shape[0], low=0.5, high=1.5)))
    bn.running_mean.set_data(nd.array(rand(bn.running_mean.shape[0], seed=3)))
    check_grad(lambda x: bn(x), rand(*shape, seed=1) * 2 + 0.5, ctx=ctx, params=params_of(bn),
               train_mode=train, rtol=1e-5)


def test_batchnorm_layer_running_stats(ctx):
    bn = nn.BatchNorm(momentum=0.8, in_channels=2)
    bn.initialize(ctx=ctx)
    x = rand(6, 2, 3, seed=4) * 3 + 1
    with autograd.record():
        y = bn(nd.array(x, ctx=ctx))
    # As MXNet's CPU operator: the moving statistics change in the backward pass.
    assert not bn.running_mean.data(ctx).asnumpy().any()
    y.backward()
    mean, var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    np.testing.assert_allclose(bn.running_mean.data(ctx).asnumpy(), 0.2 * mean, rtol=1e-5)
    np.testing.assert_allclose(bn.running_var.data(ctx).asnumpy(), 0.8 + 0.2 * var, rtol=1e-5)
    expect = (x - mean[None, :, None]) / np.sqrt(var[None, :, None] + 1e-5)
    np.testing.assert_allclose(y.asnumpy(), expect, rtol=1e-4, atol=1e-5)
    before = bn.running_mean.data(ctx).asnumpy()
    bn(nd.array(x, ctx=ctx))  # predict mode: the moving statistics are used and kept
    with autograd.record(train_mode=False):
        bn(nd.array(x, ctx=ctx))
    np.testing.assert_array_equal(bn.running_mean.data(ctx).asnumpy(), before)


def test_dropout_layer(ctx):
    drop = nn.Dropout(0.5)
    drop.initialize(ctx=ctx)
    x = nd.ones((50, 40), ctx=ctx)
    np.testing.assert_array_equal(drop(x).asnumpy(), x.asnumpy())
    with autograd.record():
        y = drop(x).asnumpy()
    assert set(np.unique(y)) <= {0.0, 2.0} and 0.4 < (y == 0).mean() < 0.6
    with autograd.record():
        np.testing.assert_array_equal(nn.Dropout(0.0)(x).asnumpy(), x.asnumpy())
    shared = nn.Dropout(0.5, axes=(1,))
    with autograd.record():
        z = shared(x).asnumpy()
    assert (z == z[:, :1]).all()

    def fn(a):
        trainer_cli.random.seed(11)
        return drop(a)
    check_grad(fn, rand(6, 5), ctx=ctx, train_mode=True)


def test_embedding_layer(ctx):
    emb = ready(nn.Embedding(6, 3), ctx, (2, 2))
    idx = nd.array([[0, 5, 5], [2, 0, 1]], ctx=ctx)
    grads = check_grad(lambda: emb(idx), ctx=ctx, params=params_of(emb))
    np.testing.assert_allclose(grads[0][3], 0)
    out = emb(idx)
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out.asnumpy()[0, 1], emb.weight.data(ctx).asnumpy()[5])


def test_layernorm_layer_grad(ctx):
    ln = ready(nn.LayerNorm(), ctx, (3, 4))
    check_grad(lambda x: ln(x), rand(3, 4) * 2, ctx=ctx, params=params_of(ln), rtol=1e-5)
    ln1 = ready(nn.LayerNorm(axis=1), ctx, (2, 3, 2))
    check_grad(lambda x: ln1(x), rand(2, 3, 2) * 2, ctx=ctx, params=params_of(ln1), rtol=1e-5)


ACTIVATIONS = [
    ("leaky", lambda: nn.LeakyReLU(0.1)), ("elu", lambda: nn.ELU(0.5)), ("selu", nn.SELU),
    ("gelu", nn.GELU), ("swish", lambda: nn.Swish(1.5)), ("prelu", lambda: nn.PReLU(in_channels=3)),
    ("prelu_shared", nn.PReLU),
]


@pytest.mark.parametrize("name,make", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_activation_layers_grad(ctx, name, make):
    x = rand(2, 3, 4)
    x = np.where(np.abs(x) < 0.05, 0.1, x)
    layer = ready(make(), ctx, x.shape, init=trainer_cli.init.Uniform(0.5))
    check_grad(lambda a: layer(a), x, ctx=ctx, params=params_of(layer))


def test_small_cnn_all_params(ctx):
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(3, 3, padding=1), nn.BatchNorm(), nn.Activation("tanh"),
                nn.AvgPool2D(2), nn.Conv2D(2, 2, groups=1), nn.GlobalMaxPool2D(), nn.Flatten(),
                nn.Dense(2))
    ready(net, ctx, (3, 2, 6, 6))
    x = rand(3, 2, 6, 6, seed=9)
    check_grad(lambda a: net(a), x, ctx=ctx, params=params_of(net), rtol=1e-5)
    net.hybridize()
    with autograd.pause():
        a = net(nd.array(x, ctx=ctx, dtype="float64")).asnumpy()
    net.hybridize(False)
    with autograd.pause():
        b = net(nd.array(x, ctx=ctx, dtype="float64")).asnumpy()
    np.testing.assert_array_equal(a, b)


def test_conv_training_step_float32(ctx):
    trainer_cli.random.seed(7)      # the initial weights and inputs: the same in any order
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3), nn.BatchNorm(), nn.MaxPool2D(), nn.Flatten(), nn.Dense(3))
    net.initialize(trainer_cli.init.Xavier(), ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x = nd.random.normal(shape=(8, 1, 6, 6), ctx=ctx)
    y = nd.array([0, 1, 2, 0, 1, 2, 0, 1], ctx=ctx)
    losses = []
    for _ in range(20):
        with autograd.record():
            loss = loss_fn(net(x), y)
        loss.backward()
        trainer.step(8)
        losses.append(loss.mean().asscalar())
    assert losses[-1] < losses[0] * 0.5
    assert all(p.data(ctx).dtype == np.float32 for p in net.collect_params().values())


def test_instance_norm_takes_float64():
    # MXNet 1.9.1's operator refuses every dtype but float32; here float64 is a float64 computation.
    layer = nn.InstanceNorm(in_channels=3)
    layer.initialize()
    layer.cast("float64")
    x = np.random.RandomState(3).uniform(-2, 2, size=(2, 3, 7))
    got = layer(nd.array(x, dtype="float64")).asnumpy()
    want = (x - x.mean(2, keepdims=True)) / np.sqrt(x.var(2, keepdims=True) + 1e-5)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-14)


def test_batchnorm_refuses_an_axis_out_of_range_as_mxnet():
    # MXNet 1.9.1: "Check failed: channelAxis < dshape.ndim() (3 vs. 3) : Channel axis out of
    # range: 3" for axis 3 or -4 of 3-D data; -1 is the last axis. The modulo would have
    # normalized over another axis without a word.
    x, g = nd.ones((2, 3, 4)), nd.ones((3,))
    for axis in (3, -4):
        with pytest.raises(trainer_cli.MXNetError, match="Channel axis out of range: %d" % axis):
            nd.BatchNorm(x, g, g, g, g, axis=axis)
    g4 = nd.ones((4,))
    assert nd.BatchNorm(x, g4, g4 * 0, g4 * 0, g4, axis=-1).shape == (2, 3, 4)


def test_pooling_reads_the_first_values_of_a_longer_stride_or_pad_as_mxnet():
    # Recorded from MXNet 1.9.1 (x = arange(84).reshape(2, 1, 6, 7), kernel 3x3): a pad or stride
    # longer than the kernel has its first values used (GluonCV's DropBlock pads with four
    # values); a shorter one is an error.
    x = nd.array(np.arange(2 * 6 * 7, dtype=np.float32).reshape(2, 1, 6, 7))
    for kwargs, shape, row in [
            (dict(pad=(1, 2, 1, 2)), (2, 1, 6, 9), [7, 8, 9, 10]),
            (dict(pad=(1, 2, 3)), (2, 1, 6, 9), [7, 8, 9, 10]),
            (dict(stride=(2, 1, 3)), (2, 1, 2, 5), [16, 17, 18, 19]),
            (dict(pad=(1, 1, 1, 1), pool_type="avg"), (2, 1, 6, 7),
             [1.7777778, 3.0, 3.6666667, 4.3333335])]:
        args = dict(kernel=(3, 3), pool_type="max")
        args.update(kwargs)
        y = nd.Pooling(x, **args)
        assert y.shape == shape
        np.testing.assert_allclose(y.asnumpy()[0, 0, 0, :4], row, rtol=1e-7)
    for kwargs in (dict(pad=(1,)), dict(stride=(2,))):
        with pytest.raises(ValueError):
            nd.Pooling(x, kernel=(3, 3), pool_type="max", **kwargs)
