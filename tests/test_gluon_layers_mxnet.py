"""Transposed convolutions, channels-last convolution and pooling, InstanceNorm, GroupNorm and
ReflectionPad2D against the real MXNet 1.9.1 (forward values and gradients recorded by
data/mxnet_layers/make_layer_cases.py), gradients also by finite differences; Block.summary's
table; the unregistered-container warning; a HybridBlock called without an array."""
import contextlib
import io
import json
import os
import warnings

import numpy as np
import pytest

from trainer_cli import autograd, nd
from trainer_cli.gluon import Block, HybridBlock, nn
from trainer_cli.gluon.block import reset_name_counters

from gradcheck import check_grad

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_layers")
with open(os.path.join(HERE, "cases.json")) as _f:
    CASES = json.load(_f)["cases"]
with np.load(os.path.join(HERE, "layers.npz"), allow_pickle=False) as _z:
    DATA = {key: _z[key] for key in _z.files}


@pytest.fixture(autouse=True)
def _fresh_names():
    reset_name_counters()


def _layer(name, dtype="float32"):
    case = CASES[name]
    layer = getattr(nn, case["cls"])(**case["kwargs"])
    layer.initialize()
    x = nd.array(DATA[name + ":x"], dtype=dtype)
    with autograd.pause():
        layer(x)  # resolves deferred shapes
    params = layer._collect_params_with_prefix()
    for key, param in params.items():
        param.set_data(nd.array(DATA["%s:p:%s" % (name, key)], dtype=dtype))
    return layer, x, params


@pytest.mark.parametrize("name", sorted(CASES))
def test_forward_and_gradients_match_mxnet(name):
    layer, x, params = _layer(name)
    x.attach_grad()
    head = nd.array(DATA[name + ":head"])
    with autograd.record():
        y = layer(x)
        loss = (y * head).sum()
    loss.backward()
    np.testing.assert_allclose(y.asnumpy(), DATA[name + ":y"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(x.grad.asnumpy(), DATA[name + ":dx"], rtol=1e-4, atol=1e-5)
    grads = {key: p for key, p in params.items() if p.grad_req != "null"}
    assert sorted(grads) == sorted(k.split(":", 2)[2] for k in DATA if k.startswith(name + ":g:"))
    for key, param in grads.items():
        np.testing.assert_allclose(param.grad().asnumpy(), DATA["%s:g:%s" % (name, key)],
                                   rtol=1e-4, atol=1e-5, err_msg=key)


@pytest.mark.parametrize("name", ["conv1d_transpose", "conv2d_transpose", "conv2d_transpose_nhwc",
                                  "conv3d_transpose", "conv2d_nhwc_groups", "maxpool1d_nwc",
                                  "avgpool2d_nhwc", "instance_norm", "instance_norm_last_axis",
                                  "group_norm", "reflection_pad2d_uneven"])
def test_gradients_by_finite_differences(name):
    layer, x, params = _layer(name, dtype="float64")
    layer.cast("float64")
    weights = [p for p in params.values() if p.grad_req != "null"]
    check_grad(lambda x: layer(x), x.asnumpy(), params=weights)


def test_a_dilated_transposed_convolution_by_finite_differences():
    # MXNet 1.9.1's CPU operator cannot run this one (MKLDNN refuses dilated deconvolution).
    layer = nn.Conv2DTranspose(4, (2, 3), strides=(1, 2), padding=(1, 1), output_padding=(0, 1),
                               dilation=(2, 2), groups=2, in_channels=2)
    layer.initialize()
    layer.cast("float64")
    x = np.random.RandomState(0).uniform(-1, 1, (2, 2, 3, 3))
    assert layer(nd.array(x, dtype="float64")).shape == (2, 4, 3, 8)
    check_grad(lambda x, w, b: nd.Deconvolution(x, w, b, kernel=(2, 3), stride=(1, 2),
                                                dilate=(2, 2), pad=(1, 1), adj=(0, 1),
                                                num_filter=4, num_group=2, no_bias=False),
               x, layer.weight.data().asnumpy(), layer.bias.data().asnumpy())


def test_deconvolution_is_the_adjoint_of_convolution():
    rng = np.random.RandomState(1)
    x = rng.uniform(-1, 1, (2, 4, 5, 6))
    w = rng.uniform(-1, 1, (4, 3, 3, 2))  # conv: 4 out, 3 in; deconv: 4 in, 3 out
    y = rng.uniform(-1, 1, (2, 3, 10, 13))
    kw = dict(kernel=(3, 2), stride=(2, 2), pad=(1, 0), dilate=(1, 2))
    conv = nd.Convolution(nd.array(y, dtype="float64"), nd.array(w, dtype="float64"),
                          num_filter=4, no_bias=True, **kw).asnumpy()
    deconv = nd.Deconvolution(nd.array(x, dtype="float64"), nd.array(w, dtype="float64"),
                              num_filter=3, adj=(1, 0), **kw).asnumpy()
    assert conv.shape == x.shape and deconv.shape == y.shape
    np.testing.assert_allclose((conv * x).sum(), (deconv * y).sum(), rtol=1e-12)


def test_channels_last_weights_have_mxnets_shapes_and_conv1d_nwc_matches_ncw():
    assert nn.Conv2D(5, (3, 2), in_channels=3, layout="NHWC").weight.shape == (5, 3, 2, 3)
    assert nn.Conv3D(4, (2, 3, 4), in_channels=3, layout="NDHWC").weight.shape == (4, 2, 3, 4, 3)
    assert nn.Conv2DTranspose(5, (3, 2), in_channels=3, layout="NHWC").weight.shape == (3, 3, 2, 5)
    assert nn.Conv2DTranspose(6, (3, 2), in_channels=4, groups=2).weight.shape == (4, 3, 3, 2)
    # MXNet 1.9.1 allows only NCW for Conv1D; NWC here is the same convolution transposed.
    first, last = nn.Conv1D(4, 3, strides=2, in_channels=3), nn.Conv1D(4, 3, strides=2,
                                                                     layout="NWC")
    first.initialize()
    last.initialize()
    x = nd.array(np.random.RandomState(2).uniform(-1, 1, (2, 3, 9)))
    last(nd.transpose(x, (0, 2, 1)))
    last.weight.set_data(nd.transpose(first.weight.data(), (0, 2, 1)))
    last.bias.set_data(first.bias.data())
    np.testing.assert_allclose(nd.transpose(last(nd.transpose(x, (0, 2, 1))), (0, 2, 1)).asnumpy(),
                               first(x).asnumpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="layout"):
        nn.Conv2D(2, 3, layout="NCW")
    with pytest.raises(ValueError, match="layout"):
        nn.MaxPool2D(layout="CHWN")


def test_layer_reprs_and_names_follow_mxnet():
    # As MXNet 1.9.1 prints them (its transposed convolutions never show output_padding).
    assert repr(nn.Conv2DTranspose(6, 3, strides=2, output_padding=1, in_channels=4)) == \
        "Conv2DTranspose(6 -> 4, kernel_size=(3, 3), stride=(2, 2))"
    assert repr(nn.GroupNorm(2)) == "GroupNorm(eps=1e-05, num_groups=2, center=True, scale=True)"
    assert repr(nn.InstanceNorm(in_channels=3)) == \
        "InstanceNorm(eps=1e-05, axis=1, center=True, scale=False, in_channels=3)"
    assert repr(nn.InstanceNorm()).endswith("in_channels=0)")
    assert nn.InstanceNorm().prefix == "instancenorm2_" and nn.GroupNorm().prefix == "groupnorm1_"
    assert nn.Conv1DTranspose(2, 3).prefix == "conv1_"
    assert nn.ReflectionPad2D(1).prefix == "reflectionpad2d0_"


def test_summary_prints_mxnets_table():
    net = nn.HybridSequential()
    with net.name_scope():
        net.add(nn.Conv2D(3, kernel_size=3, padding=1, in_channels=2))
        net.add(nn.BatchNorm(in_channels=3))
        net.add(nn.Activation("relu"))
        net.add(nn.MaxPool2D())
        net.add(nn.Dense(4, in_units=18))
        square = nn.Dense(4, in_units=4)
        net.add(square)
        net.add(nn.Dense(4, in_units=4, params=square.collect_params()))
    net.initialize()
    text = io.StringIO()
    with contextlib.redirect_stdout(text):
        net.summary(nd.ones((2, 2, 4, 6)))
    with open(os.path.join(HERE, "summary.txt")) as f:
        assert text.getvalue() == f.read()
    assert not any(net[i]._forward_hooks for i in range(len(net)))  # hooks removed afterwards
    net.hybridize()
    with pytest.raises(AssertionError, match="hybridized"):
        net.summary(nd.ones((2, 2, 4, 6)))


class _Listed(Block):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.layers = [nn.Dense(2, in_units=2)]
        self.by_name = {"head": nn.Dense(1, in_units=2)}
        self.registered = [nn.Dense(2, in_units=2)]
        self.register_child(self.registered[0])

    def forward(self, x):
        return self.by_name["head"](self.layers[0](x))


def test_blocks_in_a_plain_list_or_dict_warn_as_in_mxnet():
    block = _Listed()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        params = block.collect_params()
    texts = [str(w.message) for w in caught]
    assert len(texts) == 2
    assert texts[0].startswith('"_Listed.layers" is an unregistered container with Blocks.')
    assert texts[1].startswith('"_Listed.by_name" is an unregistered container with Blocks.')
    assert "register_child() or switching to nn.Sequential/nn.HybridSequential" in texts[0]
    assert len(params) == 2  # only the registered child's parameters
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.Dense(2).collect_params()  # nothing to warn about


def test_a_hybrid_block_without_an_array_input_is_a_value_error():
    dense = nn.Dense(2, in_units=2)
    dense.initialize()
    for args in [(1.0,), ([1.0, 2.0],), (None,), ("x", 2)]:
        with pytest.raises(ValueError, match="there must be one NDArray or one Symbol"):
            dense(*args)

    class TwoInputs(HybridBlock):
        def hybrid_forward(self, F, a, b):
            return b * 2

    np.testing.assert_array_equal(TwoInputs()(None, nd.ones(2)).asnumpy(), [2, 2])
    np.testing.assert_array_equal(TwoInputs()([1, nd.ones(1)], nd.ones(1)).asnumpy(), [2])


@pytest.mark.parametrize("mode", ["train", "predict"])
def test_batchnorm_on_float16_data_gives_float16_as_mxnet(mode):
    """cast('float16') keeps BatchNorm's parameters float32: the output and the input's gradient
    are float16 (within float16's rounding of MXNet's, whose CPU kernel rounds its mean's running
    sum to float16), the parameters' gradients and running statistics float32."""
    want = np.load(os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                                "mxnet_layers", "float16_bn.npz"))
    bn = nn.BatchNorm(in_channels=3)
    bn.initialize()
    bn.cast("float16")
    bn.gamma.set_data(nd.array(want["gamma"]))
    bn.beta.set_data(nd.array(want["beta"]))
    x = nd.array(want["x"], dtype="float16")
    x.attach_grad()
    with autograd.record(train_mode=mode == "train"):
        y = bn(x)
        loss = (y * nd.array(want["head"], dtype="float16")).sum()
    loss.backward()
    got = {"y": y, "dx": x.grad, "g:gamma": bn.gamma.grad(), "g:beta": bn.beta.grad(),
           "running_mean": bn.running_mean.data(), "running_var": bn.running_var.data()}
    for name, value in got.items():
        expected = want[mode + "/" + name]
        value = value.asnumpy()
        assert value.dtype == expected.dtype, (name, value.dtype, expected.dtype)
        tol = 4e-3 if value.dtype == np.float16 else 2e-3
        np.testing.assert_allclose(value.astype(np.float64), expected.astype(np.float64),
                                   rtol=tol, atol=tol * np.abs(expected).max(), err_msg=name)
