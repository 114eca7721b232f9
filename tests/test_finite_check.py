"""ndarray.finite.all_finite: one call over many arrays agrees with numpy.isfinite on each."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from trainer_cli import nd
from trainer_cli.ndarray.finite import all_finite

SHAPES = [(1,), (7,), (3, 5), (70000,), (300, 300)]   # small and large arrays
DTYPES = ["float16", "float32", "float64", "int32"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SHAPES), st.sampled_from(DTYPES),
                          st.sampled_from([None, np.nan, np.inf, -np.inf]),
                          st.booleans(), st.integers(0, 2 ** 32 - 1)), min_size=1, max_size=5))
def test_agrees_with_numpy(ctx, specs):
    arrays, expected = [], True
    for shape, dtype, bad, strided, seed in specs:
        rng = np.random.default_rng(seed)
        a = rng.standard_normal(shape).astype(dtype)
        if bad is not None and a.dtype.kind == "f":
            a.reshape(-1)[rng.integers(a.size)] = bad
        if strided and a.ndim == 2 and a.shape[1] > 1:
            a = a[:, ::2]
        expected = expected and bool(np.isfinite(a).all())
        arrays.append(nd.array(a, dtype=a.dtype, ctx=ctx))
    assert all_finite(arrays) is expected


def test_a_sum_that_overflows_is_still_finite(ctx):
    big = nd.array(np.full(10, 3e38, np.float32), ctx=ctx)
    assert all_finite([big, nd.array(np.ones(3), ctx=ctx)]) is True
    assert all_finite([big, nd.array(np.array([1.0, np.inf], np.float32), ctx=ctx)]) is False


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_overflowing_sums_of_finite_values_are_finite(dtype):
    big = np.full(1000, np.finfo(dtype).max, dtype=dtype)
    assert all_finite([nd.array(big, dtype=dtype), nd.array(big[:10], dtype=dtype)]) is True
    big[-1] = np.nan
    assert all_finite([nd.array(big, dtype=dtype)]) is False


def test_empty_and_no_arrays():
    assert all_finite([]) is True
    assert all_finite([nd.array(np.zeros((0, 3), np.float32))]) is True


# ------------------------------------------------------------ the Updater's check of its writes
def _trained(optimizer, sparse=False, ctx=None, **kwargs):
    from trainer_cli import autograd, gluon
    net = gluon.nn.Embedding(50, 4, sparse_grad=True) if sparse else gluon.nn.Dense(3, in_units=4)
    net.initialize(ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), optimizer, {"learning_rate": 0.1}, **kwargs)
    x = nd.array([[1, 2, 3, 4]]) if not sparse else nd.array([[1, 7]])
    for _ in range(2):
        with autograd.record():
            losses = [(net(x if c is None else x.as_in_context(c)) ** 2).sum()
                      for c in (ctx or [None])]
        autograd.backward(losses)
        trainer.step(1)
    return net, trainer


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_updater_tells_whether_the_arrays_it_wrote_are_finite(optimizer):
    from trainer_cli.run.finite import update_was_finite
    from trainer_cli.ndarray.interop import raw
    net, trainer = _trained(optimizer)
    updater = trainer._updaters[0]
    assert updater.updated_finite() is True and update_was_finite(trainer)
    weight = raw(net.weight.data())
    weight[0, 1] = np.nan                   # the same arrays the step wrote: seen
    assert updater.updated_finite() is False and not update_was_finite(trainer)
    weight[0, 1] = 0.0
    if optimizer == "adam":
        mean, var = updater.states[0]
        raw(var)[2] = np.inf
        assert updater.updated_finite() is False
        raw(var)[2] = 0.0
    assert updater.updated_finite() is True
    updater.set_states_dict(dict(updater.states))   # the states replaced: nothing known
    assert updater.updated_finite() is None and not update_was_finite(trainer)


def test_updater_checks_the_gradients_it_read_in_the_same_call():
    from trainer_cli.run.finite import update_was_finite
    from trainer_cli.ndarray.interop import raw
    net, trainer = _trained("sgd")
    updater = trainer._updaters[0]
    assert updater.updated_finite(with_grads=True) is True and update_was_finite(trainer, True)
    grad = raw(net.weight.grad())
    grad[1, 2] = np.inf
    assert updater.updated_finite(with_grads=True) is False
    assert not update_was_finite(trainer, with_grads=True)
    assert updater.updated_finite() is True          # the weights themselves are finite
    grad[1, 2] = 0.0
    assert updater.updated_finite(with_grads=True) is True
    # Other gradient arrays than the prepared step's: not known here (the caller looks itself).
    prepared = updater._last
    prepared.serves(prepared.optimizer, [g.copy() for g in prepared.given[0]],
                    list(prepared.given[1]), updater.states)
    assert prepared.grads_change and updater.updated_finite(with_grads=True) is None


def test_row_sparse_gradients_and_kvstore_updates_leave_the_answer_to_the_full_check():
    from trainer_cli.run.finite import update_was_finite
    _, trainer = _trained("sgd", sparse=True)
    assert trainer._updaters[0].updated_finite() is None and not update_was_finite(trainer)
    from trainer_cli import cpu
    from trainer_cli.gluon.trainer import STORE
    _, trainer = _trained("sgd", ctx=[cpu(0), cpu(1)], kvstore="local", update_on_kvstore=True)
    assert trainer.mode == STORE and not update_was_finite(trainer)


def test_finite_grads_regroup_when_a_gradient_array_changes():
    from trainer_cli.ndarray.interop import raw
    from trainer_cli.run.grads import FiniteGrads
    net, _ = _trained("sgd")
    params = list(net.collect_params().values())
    check = FiniteGrads()
    assert check(params) is True
    first = check._check._check
    assert check(params) is True and check._check._check is first      # same arrays: kept
    raw(params[0].grad())[0, 0] = np.inf
    assert check(params) is False
    raw(params[0].grad())[0, 0] = 0.0
    emb, _ = _trained("sgd", sparse=True)
    sparse = list(emb.collect_params().values())
    assert check(sparse) is True and check._check._check is not first  # other arrays: regrouped
    raw(sparse[0].grad())[0, 0] = np.nan                         # the values of the row_sparse grad
    assert check(sparse) is False


def test_a_kept_check_regroups_only_for_other_arrays():
    from trainer_cli.ndarray.finite import KeptCheck
    a, b = np.zeros(3, np.float32), np.ones((2, 2), np.float64)
    kept = KeptCheck()
    assert kept([a, b]) is True
    first = kept._check
    b[1, 1] = np.nan
    assert kept([a, b]) is False and kept._check is first     # the same arrays, looked at again
    c = np.zeros(3, np.float32)
    assert kept([c, a]) is True and kept._check is not first
    assert kept([c]) is True                                   # fewer arrays: regrouped
    assert KeptCheck()([]) is True                             # nothing to look at
