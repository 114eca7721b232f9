"""SyncBatchNorm on one device from the real MXNet 1.9.1 (``gluon.contrib.nn.SyncBatchNorm``,
``nd.contrib.SyncBatchNorm``): outputs, gradients of the input and parameters, and the running
statistics after the backward pass, training and predicting; the exported graph's node.

    /tmp/mxvenv/bin/python tests/data/mxnet_syncbn/make_sync_bn.py

Writes ``sync_bn.npz`` beside itself (per case ``CASE/x``, ``CASE/head``, ``CASE/gamma``,
``CASE/beta``, ``CASE/running_mean``/``running_var`` before, and after ``CASE/y``, ``CASE/dx``,
``CASE/g:gamma``, ``CASE/g:beta`` (where the parameter takes a gradient), ``CASE/after_mean``, ``CASE/after_var``) and
``sync_bn.json`` (each case's arguments, the exported symbol's nodes).
"""
import json
import os
import tempfile
import warnings

import mxnet as mx
import numpy as np
from mxnet import autograd
from mxnet.gluon.contrib.nn import SyncBatchNorm

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (shape, block arguments, train_mode)
CASES = {
    "nchw_train": ((4, 3, 5, 6), {}, True),
    "nchw_fix_gamma": ((4, 3, 5, 6), {"scale": False}, True),
    "nchw_no_center": ((3, 2, 4, 4), {"center": False, "momentum": 0.7, "epsilon": 1e-3}, True),
    "nc_train": ((8, 5), {}, True),
    "ncw_train": ((3, 4, 7), {}, True),
    "ncdhw_train": ((2, 3, 2, 3, 4), {}, True),
    "nchw_predict": ((4, 3, 5, 6), {}, False),
    "nchw_global_stats": ((4, 3, 5, 6), {"use_global_stats": True}, True),
    "nchw_global_fix_gamma": ((4, 3, 5, 6), {"use_global_stats": True, "scale": False}, True),
}


def run_case(name, shape, kwargs, train, out):
    rng = np.random.RandomState(sum(map(ord, name)))
    c = shape[1]
    x = (1.3 * rng.randn(*shape) + 0.4).astype(np.float32)
    head = rng.uniform(-1, 1, size=shape).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, size=c).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, size=c).astype(np.float32)
    mean0 = rng.uniform(-0.3, 0.3, size=c).astype(np.float32)
    var0 = rng.uniform(0.5, 2.0, size=c).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bn = SyncBatchNorm(**kwargs)
    bn.initialize()
    xs = mx.nd.array(x)
    bn(xs)      # the deferred shapes
    for p, v in ((bn.gamma, gamma), (bn.beta, beta), (bn.running_mean, mean0),
                 (bn.running_var, var0)):
        p.set_data(mx.nd.array(v))
    xs.attach_grad()
    with autograd.record(train_mode=train):
        y = bn(xs)
        loss = (y * mx.nd.array(head)).sum()
    loss.backward(train_mode=train)
    for key, value in (("x", x), ("head", head), ("gamma", gamma), ("beta", beta),
                       ("running_mean", mean0), ("running_var", var0), ("y", y.asnumpy()),
                       ("dx", xs.grad.asnumpy()),
                       ("after_mean", bn.running_mean.data().asnumpy()),
                       ("after_var", bn.running_var.data().asnumpy()),
                       ("gamma_after", bn.gamma.data().asnumpy())):
        out[name + "/" + key] = value
    for p in (bn.gamma, bn.beta):     # no gradient where the block fixes the parameter
        if p.grad_req != "null":
            out[name + "/g:" + p.name.rsplit("_", 1)[1]] = p.grad().asnumpy()


def exported():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net = mx.gluon.nn.HybridSequential()
        net.add(mx.gluon.nn.Conv2D(4, 3, in_channels=2), SyncBatchNorm(num_devices=1))
    net.initialize()
    net.hybridize()
    net(mx.nd.ones((1, 2, 5, 5)))
    with tempfile.TemporaryDirectory() as folder:
        net.export(os.path.join(folder, "net"))
        with open(os.path.join(folder, "net-symbol.json")) as f:
            graph = json.load(f)
    return [n for n in graph["nodes"] if n["op"] != "null"]


def main():
    out = {}
    for name, (shape, kwargs, train) in CASES.items():
        run_case(name, shape, kwargs, train, out)
    np.savez(os.path.join(HERE, "sync_bn.npz"), **out)
    cases = {name: {"shape": shape, "kwargs": kwargs, "train": train}
             for name, (shape, kwargs, train) in CASES.items()}
    with open(os.path.join(HERE, "sync_bn.json"), "w") as f:
        json.dump({"mxnet": mx.__version__, "cases": cases, "exported_nodes": exported()}, f,
                  indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    assert mx.__version__ == "1.9.1", mx.__version__
    main()
