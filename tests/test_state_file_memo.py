"""A Trainer's states file made from its remembered layout is the file a fresh walk makes."""
from __future__ import annotations

import json

import numpy as np
import pytest

from trainer_cli import autograd, gluon, nd
from trainer_cli.optimizer import state_file


def _net_and_trainer(optimizer="adam", **params):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(5, in_units=4, activation="relu"), gluon.nn.Dense(3, in_units=5))
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), optimizer, dict({"learning_rate": 0.01},
                                                                  **params))
    return net, trainer


def _step(net, trainer, seed=0):
    x = nd.array(np.random.default_rng(seed).standard_normal((2, 4)).astype(np.float32))
    with autograd.record():
        loss = (net(x) ** 2).sum()
    loss.backward()
    trainer.step(2)


def _fresh(trainer, copy=True):
    """What a walk without the memo makes of the trainer's states now."""
    names = {i: p.name for i, p in enumerate(trainer._params)}
    states = {pos: u.states for pos, u in enumerate(trainer._updaters)}
    return state_file.states_arrays(states, trainer._optimizer, names, copy)


def _same(a, b):
    assert list(a) == list(b)
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert a[key].tobytes() == b[key].tobytes(), key


def _header(arrays):
    return bytes(arrays["__header__"]).decode("utf-8")


@pytest.mark.parametrize("optimizer, params", [("adam", {}), ("sgd", {"momentum": 0.9}),
                                               ("rmsprop", {"centered": True})])
def test_the_remembered_layout_makes_the_walks_file(optimizer, params):
    net, trainer = _net_and_trainer(optimizer, **params)
    for step in range(4):
        _step(net, trainer, step)
        for copy in (True, False):
            _same(trainer.states_arrays(copy), _fresh(trainer, copy))
    # Built in pieces, the header is still exactly json.dumps of the whole header.
    text = _header(trainer.states_arrays())
    assert text == json.dumps(json.loads(text))
    assert trainer._states_memo.leaves(
        {pos: u.states for pos, u in enumerate(trainer._updaters)}) is not None


def test_live_arrays_are_handed_out_and_copies_are_copies():
    net, trainer = _net_and_trainer()
    _step(net, trainer)
    trainer.states_arrays(copy=False)
    live = trainer.states_arrays(copy=False)
    copied = trainer.states_arrays(copy=True)
    mean = trainer._updaters[0].states[0][0]
    assert any(np.shares_memory(a, mean._data) for a in live.values())
    assert not any(np.shares_memory(a, mean._data) for a in copied.values())


def test_what_changes_outside_the_states_is_read_each_time():
    net, trainer = _net_and_trainer()
    _step(net, trainer)
    before = json.loads(_header(trainer.states_arrays()))
    trainer.set_learning_rate(0.5)
    _step(net, trainer, 1)
    after = json.loads(_header(trainer.states_arrays()))
    assert before["optimizer"]["hyperparams"]["learning_rate"] == 0.01
    assert after["optimizer"]["hyperparams"]["learning_rate"] == 0.5
    assert after["optimizer"]["num_update"] == before["optimizer"]["num_update"] + 1


def test_loaded_or_replaced_states_are_walked_again(tmp_path):
    net, trainer = _net_and_trainer()
    _step(net, trainer)
    trainer.states_arrays()
    path = str(tmp_path / "t.states")
    trainer.save_states(path)
    _step(net, trainer, 1)
    trainer.load_states(path)        # new state objects
    _step(net, trainer, 2)
    _same(trainer.states_arrays(), _fresh(trainer))
    # A state array given another host array of another shape: the header follows it.
    state = trainer._updaters[0].states[0]
    state[0]._data = np.zeros((7,), np.float32)
    got = trainer.states_arrays()
    _same(got, _fresh(trainer))
    assert [7] in [s["shape"] for d in json.loads(_header(got))["devices"]
                   for e in d["states"] for s in e["state"]["tuple"]]


def test_a_state_that_appears_later_is_in_the_file():
    net, trainer = _net_and_trainer()
    net[1].weight.grad_req = "null"
    _step(net, trainer)
    first = trainer.states_arrays()
    net[1].weight.grad_req = "write"
    _step(net, trainer, 1)
    second = trainer.states_arrays()
    _same(second, _fresh(trainer))
    assert len(second) > len(first)
