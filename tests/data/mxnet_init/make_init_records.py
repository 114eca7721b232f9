"""Records MXNet 1.9.1's ``init.Bilinear`` kernels and ``init.Load`` called directly:

    /work/mxvenv/bin/python tests/data/mxnet_init/make_init_records.py

writes ``init.npz`` beside itself (tests/test_initializers_more.py)."""
import os

import numpy as np
import mxnet as mx

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = [(2, 2, 4, 4), (1, 1, 3, 5), (3, 1, 5, 5), (1, 2, 6, 3), (1, 1, 1, 1), (2, 3, 16, 16)]

out = {}
for shape in SHAPES:
    for dtype in ("float32", "float64", "float16"):
        w = mx.nd.zeros(shape, dtype=dtype)
        mx.init.Bilinear()._init_weight("upsample_weight", w)
        out["bilinear/%s/%s" % ("x".join(map(str, shape)), dtype)] = w.asnumpy()
# A transposed convolution initialised by it under Gluon.
net = mx.gluon.nn.Conv2DTranspose(3, 4, strides=2, padding=1, in_channels=3, use_bias=False,
                                  weight_initializer=mx.init.Bilinear())
net.initialize()
out["conv_transpose_weight"] = net.weight.data().asnumpy()
x = np.random.RandomState(0).rand(1, 3, 5, 5).astype(np.float32)
out["upsampled_input"] = x
out["upsampled"] = net(mx.nd.array(x)).asnumpy()
# Load called directly, as MXNet's Module code calls it.
params = {"arg:fc_weight": mx.nd.array(np.arange(6).reshape(3, 2)), "aux:bn_moving_var":
          mx.nd.array([2.0, 3.0]), "plain_bias": mx.nd.array([7.0, 8.0, 9.0])}
mx.nd.save(os.path.join(HERE, "load.params"), params)
load = mx.init.Load(os.path.join(HERE, "load.params"), default_init=mx.init.Constant(0.25))
for name, shape in (("fc_weight", (3, 2)), ("bn_moving_var", (2,)), ("plain_bias", (3,)),
                    ("other_weight", (2, 2))):
    arr = mx.nd.zeros(shape)
    load(mx.init.InitDesc(name), arr)
    out["load/" + name] = arr.asnumpy()
np.savez_compressed(os.path.join(HERE, "init.npz"), **out)
