"""``init.Bilinear`` and ``init.Load``: MXNet 1.9.1's kernels and loaded values
(tests/data/mxnet_init, recorded from the real MXNet by make_init_records.py), and Load under
Gluon (which MXNet refuses)."""
import logging
import os

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import gluon, nd

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_init")
RECORDED = dict(np.load(os.path.join(HERE, "init.npz")))


@pytest.mark.parametrize("key", sorted(k for k in RECORDED if k.startswith("bilinear/")))
def test_bilinear_kernels_are_mxnets_bits(key):
    _, shape, dtype = key.split("/")
    w = nd.zeros(tuple(int(s) for s in shape.split("x")), dtype=dtype)
    mx.init.Bilinear()._init_weight("upsample_weight", w)
    assert w.dtype == RECORDED[key].dtype
    np.testing.assert_array_equal(w.asnumpy(), RECORDED[key])


def test_a_bilinear_transposed_convolution_upsamples_as_mxnets():
    net = gluon.nn.Conv2DTranspose(3, 4, strides=2, padding=1, in_channels=3, use_bias=False,
                                   weight_initializer=mx.init.Bilinear())
    net.initialize()
    np.testing.assert_array_equal(net.weight.data().asnumpy(), RECORDED["conv_transpose_weight"])
    out = net(nd.array(RECORDED["upsampled_input"])).asnumpy()
    np.testing.assert_allclose(out, RECORDED["upsampled"], rtol=1e-6, atol=1e-7)
    # a constant image stays constant inside (the kernel's taps sum to 1 per output pixel)
    flat = gluon.nn.Conv2DTranspose(1, 4, strides=2, padding=1, in_channels=1, use_bias=False,
                                    weight_initializer=mx.init.Bilinear())
    flat.initialize()
    inner = flat(nd.ones((1, 1, 6, 6))).asnumpy()[0, 0, 1:-1, 1:-1]
    np.testing.assert_allclose(inner, 1.0, rtol=1e-6)
    assert mx.init.create("bilinear").dumps() == '["bilinear", {}]'


def test_load_called_directly_gives_mxnets_values():
    load = mx.init.Load(os.path.join(HERE, "load.params"), default_init=mx.init.Constant(0.25))
    for name, shape in (("fc_weight", (3, 2)), ("bn_moving_var", (2,)), ("plain_bias", (3,)),
                        ("other_weight", (2, 2))):
        arr = nd.zeros(shape)
        load(mx.init.InitDesc(name), arr)
        np.testing.assert_array_equal(arr.asnumpy(), RECORDED["load/" + name])


def test_load_initializes_gluon_parameters_from_a_saved_file(tmp_path, caplog):
    source = gluon.nn.Dense(3, in_units=2, prefix="d_")
    source.initialize(mx.init.Uniform(1.0))
    nd.save(str(tmp_path / "w.params"), {"arg:d_weight": source.weight.data()})
    net = gluon.nn.Dense(3, in_units=2, prefix="d_")
    with caplog.at_level(logging.INFO):
        net.initialize(mx.init.Load(str(tmp_path / "w.params"), default_init="zeros",
                                    verbose=True))
    np.testing.assert_array_equal(net.weight.data().asnumpy(), source.weight.data().asnumpy())
    assert not net.bias.data().asnumpy().any()
    assert "Initialized d_weight by loading" in caplog.text
    assert "Initialized d_bias by default" in caplog.text
    wrong = gluon.nn.Dense(4, in_units=2, prefix="d_")
    with pytest.raises(ValueError, match=r"d_weight cannot be initialized.*target \(4, 2\) vs "
                                         r"loaded \(3, 2\)"):
        wrong.initialize(mx.init.Load({"d_weight": source.weight.data()}))
    alone = gluon.nn.Dense(3, in_units=2, prefix="d_")
    with pytest.raises(ValueError, match="Cannot Initialize d_bias. Not found"):
        alone.initialize(mx.init.Load({"d_weight": source.weight.data()}))
    nd.save(str(tmp_path / "list.params"), [source.weight.data()])
    with pytest.raises(TypeError, match="a list of unnamed arrays"):
        mx.init.Load(str(tmp_path / "list.params"))
