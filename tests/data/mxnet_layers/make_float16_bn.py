"""BatchNorm on float16 data from the real MXNet 1.9.1 (its parameters stay float32 under
``cast('float16')``): outputs, the input's and parameters' gradients and the running statistics,
training and predicting (backward in the forward's mode).

    /tmp/mxvenv/bin/python tests/data/mxnet_layers/make_float16_bn.py

Writes ``float16_bn.npz`` beside itself: ``x``, ``head`` and per mode (``train``, ``predict``)
``MODE/y``, ``MODE/dx``, ``MODE/g:gamma``, ``MODE/g:beta``, ``MODE/running_mean``,
``MODE/running_var``; ``gamma`` and ``beta`` the parameters' values.
"""
import os

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    rng = np.random.RandomState(4)
    x = (1.5 * rng.randn(6, 3, 5, 2) + 0.7).astype(np.float16)
    head = rng.uniform(0.5, 1.5, size=x.shape).astype(np.float16)
    gamma = rng.uniform(0.5, 1.5, size=3).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, size=3).astype(np.float32)
    out = {"x": x, "head": head, "gamma": gamma, "beta": beta}
    for mode in ("train", "predict"):
        bn = gluon.nn.BatchNorm(in_channels=3)
        bn.initialize()
        bn.cast("float16")
        bn.gamma.set_data(mx.nd.array(gamma))
        bn.beta.set_data(mx.nd.array(beta))
        xs = mx.nd.array(x, dtype="float16")
        xs.attach_grad()
        with autograd.record(train_mode=mode == "train"):
            y = bn(xs)
            loss = (y * mx.nd.array(head, dtype="float16")).sum()
        # predicting, backward(train_mode=False): MXNet's default (True) differentiates the
        # training formula instead of what the forward computed (docs/compat.md)
        loss.backward(train_mode=mode == "train")
        out[mode + "/y"] = y.asnumpy()
        out[mode + "/dx"] = xs.grad.asnumpy()
        out[mode + "/g:gamma"] = bn.gamma.grad().asnumpy()
        out[mode + "/g:beta"] = bn.beta.grad().asnumpy()
        out[mode + "/running_mean"] = bn.running_mean.data().asnumpy()
        out[mode + "/running_var"] = bn.running_var.data().asnumpy()
    np.savez(os.path.join(HERE, "float16_bn.npz"), **out)


if __name__ == "__main__":
    assert mx.__version__ == "1.9.1", mx.__version__
    main()
