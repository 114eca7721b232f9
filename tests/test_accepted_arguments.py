"""Arguments MXNet documents do what MXNet does with them, or are refused: none is accepted and
ignored. ``multinomial(get_prob=True)`` returns the log-likelihoods, ``save_optimizer_states``
honours ``dump_optimizer``, ``set_verbosity`` logs; the sweeps below call each function of the
optimizer and ``nd.random`` surface with each of its arguments changed, one at a time, and ask
that the result changes (or that the call is refused)."""
from __future__ import annotations

import inspect
import logging

import numpy as np
import pytest

import trainer_cli
from trainer_cli import autograd, gluon, kvstore, nd, optimizer
from trainer_cli.gluon import nn
from trainer_cli.optimizer.state_file import describe_states


# --------------------------------------------------------------------------------------------
# nd.random.multinomial(get_prob=True)

def test_multinomial_get_prob_returns_samples_and_their_log_likelihoods():
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], dtype=np.float32)
    data = nd.array(probs)
    got = nd.random.multinomial(data, get_prob=True)
    assert isinstance(got, list) and len(got) == 2          # MXNet: [samples, log_likelihoods]
    samples, logp = got
    assert samples.shape == logp.shape == (2,)
    assert samples.dtype == np.int32 and logp.dtype == np.float32
    s = samples.asnumpy()
    np.testing.assert_allclose(logp.asnumpy(), np.log(probs[[0, 1], s]), rtol=1e-6)
    samples, logp = nd.random.multinomial(nd.array(probs, dtype="float64"), shape=(4, 3),
                                          get_prob=True, dtype="float32")
    assert samples.shape == logp.shape == (2, 4, 3)
    assert samples.dtype == np.float32 and logp.dtype == np.float64
    s = samples.asnumpy().astype(int)
    np.testing.assert_allclose(logp.asnumpy(), np.log(probs[np.arange(2)[:, None, None], s]),
                               rtol=1e-6)
    assert not isinstance(nd.random.multinomial(data), list)        # without: samples alone


def test_multinomial_log_likelihood_takes_a_reward_back_to_the_probabilities():
    """MXNet's use of the second output: a reward as its head gradient reaches each probability
    as reward / p, summed over the draws of that category."""
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]], dtype=np.float32)
    data = nd.array(probs)
    data.attach_grad()
    reward = np.arange(1, 11, dtype=np.float32).reshape(2, 5)
    with autograd.record():
        samples, logp = nd.random.multinomial(data, shape=5, get_prob=True)
    logp.backward(nd.array(reward))
    s = samples.asnumpy()
    want = np.zeros_like(probs)
    for row in range(2):
        for k in range(5):
            want[row, s[row, k]] += reward[row, k] / probs[row, s[row, k]]
    np.testing.assert_allclose(data.grad.asnumpy(), want, rtol=1e-6)


# --------------------------------------------------------------------------------------------
# save_optimizer_states(dump_optimizer=...)

def _store_with_states():
    store = kvstore.create("local")
    store.set_optimizer(optimizer.create("sgd", learning_rate=0.5, momentum=0.9))
    store.init(0, nd.ones((3,)))
    store.push(0, nd.array([1.0, 2.0, 3.0]))
    return store


@pytest.mark.parametrize("dump", [False, True])
def test_save_optimizer_states_dumps_the_optimizer_only_when_asked(tmp_path, dump):
    store = _store_with_states()
    path = tmp_path / "states"
    store.save_optimizer_states(str(path), dump_optimizer=dump)
    assert (describe_states(path.read_bytes())["optimizer"] is not None) is dump
    # Loading keeps the store's optimizer unless the file holds one (MXNet's Updater.set_states).
    store.set_optimizer(optimizer.create("sgd", learning_rate=0.125, momentum=0.9))
    store.load_optimizer_states(str(path))
    assert store._updater.optimizer.learning_rate == (0.5 if dump else 0.125)
    mom = store._updater.states[0].asnumpy()
    np.testing.assert_allclose(mom, [-0.5, -1.0, -1.5])     # the saved momentum either way


# --------------------------------------------------------------------------------------------
# Initializer.set_verbosity

def test_set_verbosity_logs_each_initialized_array(caplog):
    net = nn.Dense(2, in_units=3, prefix="verbose_")
    with caplog.at_level(logging.INFO):
        net.initialize(trainer_cli.init.One(), verbose=True)
    lines = [r.getMessage() for r in caplog.records]
    assert "Initialized verbose_weight as One(): 1.0" in lines, lines
    assert any(line.startswith("Initialized verbose_bias as zeros: 0.0") for line in lines), lines
    caplog.clear()
    init = trainer_cli.init.One().set_verbosity(True, print_func=lambda x: "sum=%g" % x.sum().asscalar())
    net = nn.Dense(2, in_units=3, prefix="custom_")
    with caplog.at_level(logging.INFO):
        net.initialize(init)
    assert "Initialized custom_weight as One(): sum=6" in [r.getMessage() for r in caplog.records]
    caplog.clear()
    with caplog.at_level(logging.INFO):
        nn.Dense(2, in_units=3).initialize(trainer_cli.init.One())
    assert not [r for r in caplog.records if r.getMessage().startswith("Initialized")]
