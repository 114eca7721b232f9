"""``kvstore.KVStoreBase.register``: a custom store by name, with MXNet's ``is_capable`` rule (a
store that cannot run the optimizer only reduces gradients and the Trainer updates locally)."""
import warnings

import numpy as np
import pytest

from trainer_cli import autograd, cpu, gluon, kvstore, nd
from trainer_cli.gluon.block import reset_name_counters


@kvstore.KVStoreBase.register
class SummingStore(kvstore.KVStoreBase):
    """Sums a list of arrays and writes the sum to every output, like MXNet's TestStore."""

    calls = 0

    @property
    def type(self):
        return "summingstore"

    def is_capable(self, capability):
        return capability.lower() != kvstore.KVStoreBase.OPTIMIZER

    def broadcast(self, key, value, out, priority=0):
        for o in out if isinstance(out, list) else [out]:
            value.copyto(o)

    def pushpull(self, key, value, out=None, priority=0):
        SummingStore.calls += 1
        total = value[0].copyto(cpu())
        for v in value[1:]:
            total = total + v.copyto(cpu())
        for o in (value if out is None else out):
            total.copyto(o)


def _train(kv, update_on_kvstore=None, steps=3):
    reset_name_counters()
    ctxs = [cpu(0), cpu(1)]
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize(ctx=ctxs)
    for p in net.collect_params().values():
        p.set_data(nd.array(np.linspace(-1, 1, int(np.prod(p.shape))).reshape(p.shape)))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9},
                            kvstore=kv, update_on_kvstore=update_on_kvstore)
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    for _ in range(steps):
        with autograd.record():
            losses = [net(xs).square().sum() for xs in
                      gluon.utils.split_and_load(x, ctxs)]
        for loss in losses:
            loss.backward()
        trainer.step(4)
    return trainer, net.weight.data(cpu(0)).asnumpy()


def test_a_registered_store_is_created_by_name():
    assert isinstance(kvstore.create("SummingStore"), SummingStore)
    assert kvstore.KVStoreBase.kv_registry["summingstore"] is SummingStore


def test_a_store_that_cannot_run_the_optimizer_makes_the_trainer_update_locally():
    SummingStore.calls = 0
    trainer, weights = _train("summingstore")
    assert trainer._update_on_kvstore is False and SummingStore.calls > 0
    _, expected = _train("device", update_on_kvstore=False)
    np.testing.assert_array_equal(weights, expected)
    with pytest.raises(ValueError, match="update_on_kvstore=False"):
        _train("summingstore", update_on_kvstore=True, steps=1)


def test_registering_a_name_again_warns():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @kvstore.KVStoreBase.register
        class SummingStore(kvstore.KVStoreBase):  # noqa: F811 - the point of the test
            pass
        kvstore.KVStoreBase.register(globals()["SummingStore"])  # put the real one back
    assert any("is overriding existing kvstore" in str(w.message) for w in caught)
