"""``Trainer.mode``: decided once by MXNet's rules, read by the runner (issue 14 item 3)."""
import numpy
import pytest

import trainer_cli
from trainer_cli import gluon
from trainer_cli.config import ConfigError
from trainer_cli.config.load import load_config
from trainer_cli.gluon.trainer import LOCAL, REDUCE, STORE
from trainer_cli.run.build import build

from run_helpers import write_config


def _trainer(contexts, **kw):
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize(ctx=contexts)
    return gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, **kw)


@pytest.mark.parametrize("kw, mode", [
    ({}, STORE),                                            # MXNet's default: update on the store
    ({"update_on_kvstore": False}, REDUCE),
    ({"default_update_on_kvstore": False}, REDUCE),
    ({"default_update_on_kvstore": False, "update_on_kvstore": True}, STORE),
    ({"kvstore": None}, LOCAL),
    ({"kvstore": "local", "update_on_kvstore": False}, REDUCE),
])
def test_mode_on_two_devices(kw, mode):
    trainer = _trainer([trainer_cli.cpu(0), trainer_cli.cpu(1)], **kw)
    assert trainer.mode == mode
    assert (trainer.kvstore is None) == (mode == LOCAL)
    if mode == STORE:
        with pytest.raises(RuntimeError, match="update_on_kvstore"):
            trainer.allreduce_grads()


def test_one_device_drops_an_in_process_store(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    trainer = _trainer([trainer_cli.cpu(0)], kvstore="device", update_on_kvstore=True)
    assert trainer.mode == LOCAL and trainer.kvstore is None


def test_env_variable_is_the_default_default(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    assert _trainer([trainer_cli.cpu(0), trainer_cli.cpu(1)]).mode == REDUCE


def test_mode_is_decided_once_and_matches_a_step():
    trainer = _trainer([trainer_cli.cpu(0), trainer_cli.cpu(1)], update_on_kvstore=False)
    kv = trainer.kvstore
    with trainer_cli.autograd.record():
        losses = [(p.data(ctx) * 1).sum() for p in trainer._params for ctx in p.list_ctx()]
    for loss in losses:
        loss.backward()
    trainer.step(4)
    assert trainer.kvstore is kv and trainer.mode == REDUCE


_RUN = """\
model: {name: mlp, args: {hidden: [4], classes: 3}}
data:
  train: {type: synthetic, task: classification, num_samples: 32, num_features: 6,
          num_classes: 3, seed: 5}
  batch_size: 8
loss: softmax_cross_entropy
optimizer: {name: sgd, params: {learning_rate: 0.1}}
epochs: 1
"""


@pytest.mark.parametrize("extra, mode", [
    ("context: [cpu:0]\n", LOCAL),
    ("context: [cpu:0, cpu:1]\n", REDUCE),                  # the runner prefers to reduce
    ("context: [cpu:0, cpu:1]\nkvstore: {type: device, update_on_kvstore: true}\n", STORE),
    ("context: [cpu:0, cpu:1]\nkvstore: none\n", LOCAL),
])
def test_runner_reads_the_trainers_mode(tmp_path, extra, mode):
    config = load_config(write_config(tmp_path, _RUN + extra))
    parts = build(config)
    assert parts.trainer.mode == mode
    assert parts.kvstore is parts.trainer.kvstore


def test_runner_refuses_global_norm_clipping_on_the_store(tmp_path):
    text = _RUN + ("context: [cpu:0, cpu:1]\nkvstore: {type: device, update_on_kvstore: true}\n"
                   "grad_clip: 1.0\n")
    path = write_config(tmp_path, text)
    with pytest.raises(ConfigError, match="global-norm clipping needs the reduced gradients"):
        build(load_config(path), path)


@pytest.mark.parametrize("optimizer,kw", [("sgd", {"momentum": 0.9}), ("adam", {}),
                                          ("sgd", {"momentum": 0.0})])
def test_set_data_on_a_multi_precision_weight_is_not_undone_by_the_next_update(optimizer, kw):
    """MXNet keeps the optimizer's float32 master copy when a float16 weight is set, so its next
    update writes the old values back; here the master takes the new values: a zero-gradient
    step after set_data leaves exactly them (SGD keeps the master last in its state, Adam first)."""
    from trainer_cli import autograd, nd
    p = gluon.Parameter("w", shape=(3,), dtype="float16")
    p.initialize(init="ones")
    trainer = gluon.Trainer([p], optimizer, dict(learning_rate=0.5, multi_precision=True, **kw))

    def step(scale):
        with autograd.record():
            y = (p.data() * scale).sum()
        y.backward()
        trainer.step(1)
    step(2)
    assert p.data().asnumpy().tolist() != [1, 1, 1]
    p.set_data(nd.array([5, 6, 7], dtype="float16"))
    # A zero gradient: Adam's moments and SGD's momentum still move the weight unless both are
    # zero, so compare against the master copy itself.
    state = trainer._updaters[0].states[0]
    master = trainer._optimizer._mp_unpack(state)[0]
    assert master.dtype == numpy.float32 and master.asnumpy().tolist() == [5, 6, 7]
    if optimizer == "sgd" and not kw["momentum"]:
        step(0)
        assert p.data().asnumpy().tolist() == [5, 6, 7]
