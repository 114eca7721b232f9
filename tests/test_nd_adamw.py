"""``nd.contrib.adamw_update`` / ``mp_adamw_update``: MXNet 1.9.1's bits for three steps of
each, float32 and float16, clipping, lr other than 1, a skipped step
(tests/data/mxnet_adamw, recorded from the real MXNet by ``adamw_cases.record``); and an
optimizer written over them, as GluonNLP's BERTAdam is, trains through the Trainer."""

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, gluon, nd

RECORDED, adamw_cases = replay.recording("mxnet_adamw", "adamw.npz", "adamw_cases")
OURS = adamw_cases.record(mx)


def test_every_recorded_value_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_each_value_is_mxnets_bits(key):
    replay.same_bits(OURS[key], RECORDED[key])


def test_the_step_is_adamws_formula_and_a_bad_scale_skips_it():
    w, g = nd.array([[0.5, -1.0]]), nd.array([[2.0, 4.0]])
    mean, var = nd.zeros((1, 2)), nd.zeros((1, 2))
    new = nd.contrib.adamw_update(w, g, mean, var, nd.array([0.5]), lr=1.0, eta=0.1, wd=0.2,
                                  epsilon=1e-8)
    gs = np.array([1.0, 2.0])
    m, v = 0.1 * gs, 0.001 * gs ** 2
    want = np.array([0.5, -1.0]) - 0.1 * (m / (np.sqrt(v) + 1e-8) + 0.2 * np.array([0.5, -1.0]))
    np.testing.assert_allclose(new.asnumpy()[0], want, rtol=5e-5)     # 1 - beta2 in float32
    assert w.asnumpy().tolist() == [[0.5, -1.0]]             # a new array without out=
    assert g.asnumpy().tolist() == [[1.0, 2.0]]              # scaled in place, as MXNet
    for bad in (np.inf, np.nan, 0.0):
        before = mean.asnumpy().copy()
        same = nd.contrib.adamw_update(w, g, mean, var, nd.array([bad]), lr=1.0, eta=0.1)
        assert same.asnumpy().tolist() == w.asnumpy().tolist()
        np.testing.assert_array_equal(mean.asnumpy(), before)


def test_an_optimizer_written_over_the_operator_trains(monkeypatch):
    monkeypatch.setattr(mx.optimizer.Optimizer, "opt_registry",
                        dict(mx.optimizer.Optimizer.opt_registry))

    @mx.optimizer.register
    class BERTAdamLike(mx.optimizer.Optimizer):
        def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                     **kwargs):
            super().__init__(learning_rate=learning_rate, **kwargs)
            self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

        def create_state(self, index, weight):
            return (nd.zeros(weight.shape, weight.context, dtype=weight.dtype),
                    nd.zeros(weight.shape, weight.context, dtype=weight.dtype))

        def update(self, index, weight, grad, state):
            self._update_count(index)
            lr, wd = self._get_lr(index), self._get_wd(index)
            mean, var = state
            nd.contrib.adamw_update(weight, grad, mean, var,
                                    nd.full((1,), self.rescale_grad, weight.context),
                                    out=weight, lr=1, wd=wd, eta=lr, beta1=self.beta1,
                                    beta2=self.beta2, epsilon=self.epsilon)

    net = gluon.nn.Dense(2, in_units=3)
    net.initialize(mx.init.Constant(0.5))
    trainer = gluon.Trainer(net.collect_params(), "bertadamlike", {"learning_rate": 0.1})
    x = nd.array([[1.0, 2.0, 3.0]])
    with autograd.record():
        loss = (net(x) ** 2).sum()
    loss.backward()
    trainer.step(1)
    # without bias correction a first step moves each weight by eta * 0.1 / sqrt(0.001)
    # (every gradient here is positive), as BERTAdam's first step does
    np.testing.assert_allclose(net.weight.data().asnumpy(),
                               np.full((2, 3), 0.5 - 0.1 * 0.1 / np.sqrt(0.001)), rtol=1e-4)
