"""The update protocol (``Optimizer`` docstring): named plans, one rates function, paths chosen by
declared class attributes, and the Updater's prepared steps, on the Trainer's path and the
kvstore's (one key at a time)."""
import numpy
import pytest

from trainer_cli import lr_scheduler, nd, optimizer
from trainer_cli.config.schema import optim as optim_schema
from trainer_cli.optimizer import Optimizer, Updater, create
from trainer_cli.optimizer.optimizer import Plan

SHAPES = [(3, 4), (5,), (2, 2)]


def _data(steps=4):
    rng = numpy.random.default_rng(0)
    weights = [rng.standard_normal(s).astype(numpy.float32) for s in SHAPES]
    grads = [[rng.standard_normal(s).astype(numpy.float32) for s in SHAPES] for _ in range(steps)]
    return weights, grads


def _bits(arrays):
    return [a.asnumpy().view(numpy.uint32) for a in arrays]


@pytest.mark.parametrize("name,params", [("sgd", {"momentum": 0.9, "wd": 1e-3}),
                                         ("adam", {"wd": 1e-3}), ("rmsprop", {})])
def test_one_key_at_a_time_reuses_a_prepared_step_per_key(name, params):
    """A kvstore updating on the store calls the Updater key by key, with a new gradient sum
    at every push: each key keeps its prepared step, and the numbers are those of a fresh
    Updater taking every key at once."""
    weights, grads = _data()
    keyed = Updater(create(name, **params))
    ws_keyed = [nd.array(w) for w in weights]
    listed = Updater(create(name, **params))
    ws_listed = [nd.array(w) for w in weights]
    seen = None
    for step in grads:
        for k, g in enumerate(step):
            keyed(k, nd.array(g), ws_keyed[k])          # a new gradient NDArray every push
        listed(list(range(len(SHAPES))), [nd.array(g) for g in step], ws_listed)
        prepared = dict(keyed._prepared)
        assert sorted(prepared) == [(0,), (1,), (2,)]
        if seen is not None:                            # the same prepared steps, served again
            assert all(prepared[key] is seen[key] for key in seen)
        seen = prepared
    for a, b in zip(_bits(ws_keyed), _bits(ws_listed)):
        numpy.testing.assert_array_equal(a, b)


def test_state_loads_and_new_weights_drop_prepared_steps():
    weights, grads = _data()
    upd = Updater(create("sgd", momentum=0.9))
    ws = [nd.array(w) for w in weights]
    upd([0, 1, 2], [nd.array(g) for g in grads[0]], ws)
    first = upd._prepared[(0, 1, 2)]
    upd([0, 1, 2], [nd.array(g) for g in grads[1]], ws)
    assert upd._prepared[(0, 1, 2)] is first
    upd.set_states(upd.get_states())
    assert upd._prepared == {}
    upd([0, 1, 2], [nd.array(g) for g in grads[2]], ws)
    again = upd._prepared[(0, 1, 2)]
    assert again is not first
    ws[1] = nd.array(weights[1])
    upd([0, 1, 2], [nd.array(g) for g in grads[3]], ws)
    assert upd._prepared[(0, 1, 2)] is not again


def test_plans_are_named_and_carry_the_optimizers_folded_rates():
    weights, grads = _data(1)
    ws, gs = [nd.array(w) for w in weights], [nd.array(g) for g in grads[0]]
    sgd = create("sgd", learning_rate=0.5, momentum=0.9, wd=0.1)
    sgd.set_lr_mult({1: 2.0})
    plans = sgd._plan([0, 1], ws[:2], gs[:2])
    assert plans == [Plan(0, 0.5, 0.1, 0.9), Plan(1, 1.0, 0.1, 0.9)]
    adam = create("adam", learning_rate=0.1)
    (plan,) = adam._plan([0], ws[:1], gs[:1])
    assert plan.index == 0 and plan.lr == pytest.approx(0.1 * (1 - 0.999) ** 0.5 / (1 - 0.9))


def test_paths_follow_declared_class_attributes():
    assert Optimizer.plans_ahead and create("sgd").plans_ahead and create("adam").plans_ahead
    assert not create("lbsgd").plans_ahead and not create("test").plans_ahead

    class OwnUpdate(Optimizer):         # written MXNet's way: its update() must be called
        calls = 0

        def update(self, index, weight, grad, state):
            OwnUpdate.calls += 1

    class Declared(OwnUpdate):
        plans_ahead = True

        def _step(self, index, w, g, state, lr, wd):
            w -= lr * g

    assert OwnUpdate.plans_ahead is False and Declared.plans_ahead is True
    upd = Updater(OwnUpdate())
    upd(0, nd.ones((2,)), nd.ones((2,)))
    assert OwnUpdate.calls == 1
    w = nd.ones((2,))
    Updater(Declared(learning_rate=0.5))(0, nd.ones((2,)), w)
    assert OwnUpdate.calls == 1 and w.asnumpy().tolist() == [0.5, 0.5]


def test_the_default_learning_rate_lives_in_one_place():
    assert lr_scheduler.DEFAULT_LEARNING_RATE == 0.01
    assert optimizer.create("sgd").learning_rate == lr_scheduler.DEFAULT_LEARNING_RATE
    assert lr_scheduler.FactorScheduler(step=1).base_lr == lr_scheduler.DEFAULT_LEARNING_RATE
    assert optim_schema._DEFAULT_BASE_LR == lr_scheduler.DEFAULT_LEARNING_RATE


def test_rates_are_counted_then_read_per_index_or_together():
    """``_rates`` with ``count_each`` reads the scheduler after each index's count (single
    calls' order); without it, once for the whole chunk after counting it."""
    sched = lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    each = create("adam", learning_rate=1.0, lr_scheduler=sched)
    lrs, _ = each._rates(["a", "b"], count_each=True)
    assert each._index_update_count == {"a": 1, "b": 1} and lrs == [1.0, 1.0]
    lrs, _ = each._rates(["a"], count_each=True)
    assert lrs == [0.5]
    together = create("sgd", learning_rate=1.0,
                      lr_scheduler=lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0))
    together._update_count(["a", "b"])
    together._update_count(["a"])
    assert together._rates(["a", "b"])[0] == [0.5, 0.5]
