"""``gluon.contrib.nn.SyncBatchNorm`` / ``nd.contrib.SyncBatchNorm`` on one device against the
real MXNet 1.9.1 (``tests/data/mxnet_syncbn``): outputs, the input's and parameters' gradients
and the moving statistics after the backward pass, training and predicting, on 2- to 5-D data,
with gamma fixed, beta fixed and the global statistics; its exported node; and the refusal of
several devices."""
import json
import os
import warnings

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import autograd, gluon, nd
from trainer_cli.gluon.contrib.nn import SyncBatchNorm

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_syncbn")
RECORDED = np.load(os.path.join(HERE, "sync_bn.npz"))
with open(os.path.join(HERE, "sync_bn.json")) as _f:
    META = json.load(_f)


def _layer(**kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SyncBatchNorm(**kwargs)


@pytest.mark.parametrize("name", sorted(META["cases"]))
@pytest.mark.parametrize("hybridize", [False, True])
def test_one_device_gives_mxnets_numbers(name, hybridize):
    case = META["cases"][name]
    r = {k.split("/", 1)[1]: RECORDED[k] for k in RECORDED.files if k.startswith(name + "/")}
    bn = _layer(**case["kwargs"])
    bn.initialize()
    if hybridize:
        bn.hybridize()
    x = nd.array(r["x"])
    bn(x)
    for p, key in ((bn.gamma, "gamma"), (bn.beta, "beta"), (bn.running_mean, "running_mean"),
                   (bn.running_var, "running_var")):
        p.set_data(nd.array(r[key]))
    x.attach_grad()
    with autograd.record(train_mode=case["train"]):
        y = bn(x)
        loss = (y * nd.array(r["head"])).sum()
    loss.backward()
    close = dict(rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(y.asnumpy(), r["y"], **close)
    np.testing.assert_allclose(x.grad.asnumpy(), r["dx"], **close)
    np.testing.assert_allclose(bn.running_mean.data().asnumpy(), r["after_mean"], **close)
    np.testing.assert_allclose(bn.running_var.data().asnumpy(), r["after_var"], **close)
    np.testing.assert_array_equal(bn.gamma.data().asnumpy(), r["gamma_after"])
    for p, key in ((bn.gamma, "g:gamma"), (bn.beta, "g:beta")):
        assert (p.grad_req != "null") == (key in r)
        if key in r:
            np.testing.assert_allclose(p.grad().asnumpy(), r[key], **close)


def test_the_batch_variance_is_mxnets_and_not_batchnorms():
    # E[x^2] - E[x]^2 of data far from zero loses digits that BatchNorm's centred variance
    # keeps: the recorded outputs are SyncBatchNorm's, not BatchNorm's.
    r = {k.split("/", 1)[1]: RECORDED[k] for k in RECORDED.files if k.startswith("nchw_train/")}
    bn = gluon.nn.BatchNorm(in_channels=3)
    bn.initialize()
    bn.gamma.set_data(nd.array(r["gamma"]))
    bn.beta.set_data(nd.array(r["beta"]))
    with autograd.record():
        plain = bn(nd.array(r["x"])).asnumpy()
    np.testing.assert_allclose(plain, r["y"], rtol=1e-4, atol=1e-4)
    assert not np.array_equal(plain, r["y"])


def test_the_export_holds_mxnets_node(tmp_path):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Conv2D(4, 3, in_channels=2), _layer(num_devices=1))
    net.initialize()
    net.hybridize()
    net(nd.ones((1, 2, 5, 5)))
    net.export(str(tmp_path / "net"))
    with open(tmp_path / "net-symbol.json") as f:
        nodes = [n for n in json.load(f)["nodes"] if n["op"] != "null"]
    want = META["exported_nodes"][1]
    got = nodes[1]
    assert got["op"] == want["op"] == "_contrib_SyncBatchNorm"
    assert {k: v for k, v in got["attrs"].items() if k != "key"} == \
        {k: v for k, v in want["attrs"].items() if k != "key"}
    assert got["attrs"]["key"] == net[1].prefix
    assert got["inputs"] == want["inputs"]
    # ... and the exported graph runs again, the same numbers.
    loaded = gluon.SymbolBlock.imports(str(tmp_path / "net-symbol.json"), ["data"],
                                       str(tmp_path / "net-0000.params"))
    x = nd.array(np.random.RandomState(1).uniform(size=(2, 2, 5, 5)).astype(np.float32))
    np.testing.assert_array_equal(loaded(x).asnumpy(), net(x).asnumpy())


def test_several_devices_are_refused_naming_num_devices():
    bn = _layer(num_devices=4, in_channels=3)
    bn.initialize()
    with autograd.record():
        with pytest.raises(NotImplementedError, match="num_devices=1"):
            bn(nd.ones((2, 3, 4, 4)))


def test_the_default_device_count_warns_as_mxnet():
    with pytest.warns(UserWarning, match="num_devices"):
        SyncBatchNorm()
    assert mx.context.num_gpus() > 0 or _layer()._kwargs["ndev"] == 1
