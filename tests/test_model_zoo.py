"""gluon.model_zoo.vision against MXNet 1.9.1 (data from make_model_zoo_golden.py): every
architecture's parameter names and shapes, and one forward on the same weights for a dozen."""
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli.gluon.block import reset_name_counters
from trainer_cli.gluon.block import reset_name_counters
from trainer_cli.gluon.model_zoo import model_store, vision

from model_zoo_cases import ALL_MODELS, CLASSES, FORWARD, image, input_size, weight

DATA = Path(__file__).parent / "data"
GOLDEN = json.loads((DATA / "model_zoo_golden.json").read_text())
OUTPUTS = np.load(DATA / "model_zoo_golden.npz")


def test_get_model_knows_every_mxnet_name():
    assert sorted(vision.model_names()) == sorted(ALL_MODELS) == sorted(GOLDEN["params_at_input_size"])
    with pytest.raises(ValueError, match="resnet18_v1"):
        vision.get_model("resnet19_v1")


@pytest.mark.parametrize("name", ALL_MODELS)
def test_parameter_names_and_shapes_are_mxnets(name):
    reset_name_counters()
    net = vision.get_model(name, classes=CLASSES)
    # The first network of its class in a process is <class>0_, as in MXNet.
    assert net.prefix == type(net).__name__.lower() + "0_"
    golden = [[net.prefix + k, shape] for k, shape in GOLDEN["params_at_input_size"][name]]
    # Names exist before any shape is known: the whole list, in MXNet's order.
    assert list(net.collect_params().keys()) == [k for k, _ in golden]
    net.initialize()
    size = input_size(name)
    x = mx.nd.array(image(name, size))
    out = net(x)
    assert out.shape == (1, CLASSES)
    shapes = [[k, list(p.shape)] for k, p in net.collect_params().items()]
    assert shapes == golden
    if name in FORWARD:
        for key, param in net._collect_params_with_prefix().items():
            param.set_data(mx.nd.array(weight(key, param.shape)))
        # float32 sums in another order over up to a hundred layers: within 2e-6 of the
        # output's largest value (measured: at most 1e-6).
        golden_out = OUTPUTS[name]
        np.testing.assert_allclose(net(x).asnumpy(), golden_out, rtol=1e-5,
                                   atol=2e-6 * np.abs(golden_out).max())


def test_pretrained_loads_the_local_store_file(tmp_path):
    net = vision.mobilenet_v2_0_25(classes=CLASSES)
    net.initialize()
    net(mx.nd.zeros((1, 3, 32, 32)))
    params = tmp_path / "weights.params"
    net.save_parameters(str(params), format="mxnet")
    # The store accepts only the file MXNet publishes: pretend this one is it.
    digest = hashlib.sha1(params.read_bytes()).hexdigest()
    store = tmp_path / "models"
    store.mkdir()
    name = "mobilenetv2_0.25"
    original = model_store._SHA1[name]
    model_store._SHA1[name] = digest
    try:
        params.rename(store / ("%s-%s.params" % (name, digest[:8])))
        loaded = vision.get_model(name, classes=CLASSES, pretrained=True, root=str(store))
    finally:
        model_store._SHA1[name] = original
    x = mx.nd.array(image(name, 32))
    np.testing.assert_array_equal(loaded(x).asnumpy(), net(x).asnumpy())


def test_pretrained_without_the_file_names_it(tmp_path):
    with pytest.raises(FileNotFoundError) as info:
        vision.resnet18_v1(pretrained=True, root=str(tmp_path))
    message = str(info.value)
    assert str(tmp_path / "resnet18_v1-a0666292.params") in message
    assert "nothing is downloaded" in message


def test_pretrained_refuses_a_different_file(tmp_path):
    (tmp_path / "alexnet-44335d1f.params").write_bytes(b"not the published weights")
    with pytest.raises(FileNotFoundError, match="SHA-1 differs"):
        vision.alexnet(pretrained=True, root=str(tmp_path))


def test_default_root_is_mxnet_home(tmp_path, monkeypatch):
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "models" / "squeezenet1.1-33ba0f93")):
        vision.get_model("squeezenet1.1", pretrained=True)


def test_pretrained_refuses_what_is_not_a_published_file(tmp_path, monkeypatch):
    import signal

    path = tmp_path / "alexnet-44335d1f.params"
    old = signal.signal(signal.SIGALRM,
                        lambda *a: pytest.fail("still reading the store after 10 s"))
    signal.alarm(10)
    try:
        # A FIFO or a device in the store is refused, not read forever.
        os.mkfifo(path)
        with pytest.raises(FileNotFoundError, match="cannot read .*FIFO"):
            vision.alexnet(pretrained=True, root=str(tmp_path))
        path.unlink()
        os.symlink("/dev/zero", path)
        with pytest.raises(FileNotFoundError, match="cannot read .*character device"):
            vision.alexnet(pretrained=True, root=str(tmp_path))
        path.unlink()
        # A file larger than any published one is not hashed (a sparse one: no disk used).
        monkeypatch.setattr(model_store, "MAX_MODEL_FILE_BYTES", 1 << 20)
        with open(path, "wb") as f:
            f.truncate((1 << 20) + 1)
        with pytest.raises(FileNotFoundError, match="SHA-1 differs"):
            vision.alexnet(pretrained=True, root=str(tmp_path))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_pretrained_file_of_another_model_is_refused_by_its_names(tmp_path, monkeypatch):
    # The right SHA-1 for the name, but the weights of another network: a clear error.
    params = tmp_path / "weights.params"
    mx.nd.save(str(params), {"features.0.weight": mx.nd.ones((2, 3)), "dense0.bias": mx.nd.ones(4)})
    digest = hashlib.sha1(params.read_bytes()).hexdigest()
    monkeypatch.setitem(model_store._SHA1, "mobilenet0.25", digest)
    params.rename(tmp_path / ("mobilenet0.25-%s.params" % digest[:8]))
    with pytest.raises(ValueError, match="mobilenet0.25-%s.params" % digest[:8]):
        vision.get_model("mobilenet0.25", classes=4, pretrained=True, root=str(tmp_path))
