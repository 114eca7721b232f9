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


# --------------------------------------------------------------------------------------------
# The sweeps: each argument changed alone must change the result (or be refused)

# The value each argument is changed to, and (where it shows only together with another
# setting) the settings it is changed under; the result is compared with the same settings
# without the change.
_CHANGED = {
    "rescale_grad": (0.3, {"clip_gradient": 1.0}), "wd": (0.1, {}), "clip_gradient": (0.5, {}),
    "learning_rate": ("half", {}), "begin_num_update": (7, {"scheduled": True}),
    "lr_scheduler": ("scheduled", {}),
    # MXNet: with names given, wd applies only to *_weight and *_gamma (set_wd_mult).
    "param_idx2name": ({0: "layer_bias"}, {"wd": 0.1}),
    "momentum": (0.5, {}), "beta1": (0.5, {}), "beta2": (0.5, {}), "epsilon": (0.5, {}),
    "eps": (0.5, {}), "rho": (0.5, {}), "gamma1": (0.5, {}), "gamma2": (0.5, {"centered": True}),
    "centered": (True, {}), "clip_weights": (0.05, {}), "correct_bias": (False, {}),
    "bias_correction": (False, {}), "lower_bound": (50.0, {}), "upper_bound": (1e-3, {}),
    "eta": (0.5, {}), "momentum_correction": (False, {"momentum": 0.9, "scheduled": True}),
    "lamda1": (0.5, {}), "beta": (5.0, {}), "lamda": (5.0, {"momentum": 0.9}),
    "wd_lh": (0.1, {}), "schedule_decay": (0.5, {}),
    # LBSGD steps every batch_scale calls, its rate scaled by the warm-up's multiplier then.
    "batch_scale": (4, {}), "warmup_strategy": ("power2", {"batch_scale": 2}),
    "warmup_epochs": (2, {"batch_scale": 2}), "updates_per_epoch": (1, {"batch_scale": 2}),
    "begin_epoch": (3, {"batch_scale": 2}), "num_epochs": (2, {"batch_scale": 2}),
}
# Arguments MXNet 1.9.1 itself accepts and never reads (so do we: MXNet's numbers).
_MXNET_IGNORES = {
    ("adadelta", "learning_rate"): "MXNet's AdaDelta has no learning rate",
    ("adadelta", "lr_scheduler"): "MXNet's AdaDelta has no learning rate",
    ("adadelta", "begin_num_update"): "only a scheduler would read the count",
    ("lbsgd", "num_epochs"): "MXNet's LBSGD stores num_epochs and never reads it",
}
# Arguments whose effect needs another kind of input than the dense float32 steps here, and
# the tests that hold them to MXNet.
_OTHER_REGIMES = {
    "multi_precision": "float16 weights: test_golden_regimes (float16_multi_precision)",
    "lazy_update": "row_sparse gradients: test_optim_sparse, test_sparse_golden_flows",
    "param_dict": "gluon.Trainer's Parameters: test_golden_regimes (trainer_multipliers)",
    "sym": "a Symbol's variables' multipliers: refused when given (test_sym_is_refused...)",
}


def _optimizer_arguments(cls):
    names = []
    for klass in cls.__mro__:
        if klass is object or "__init__" not in vars(klass):
            continue
        for p in inspect.signature(klass.__init__).parameters.values():
            if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) \
                    and p.name not in names:
                names.append(p.name)
    return names


def _run_optimizer(name, kwargs):
    from trainer_cli import lr_scheduler
    kwargs = dict(kwargs)
    if kwargs.pop("scheduled", False):
        base = optimizer.create(name).learning_rate
        kwargs["lr_scheduler"] = lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=base)
    if kwargs.get("learning_rate") == "half":
        kwargs["learning_rate"] = optimizer.create(name).learning_rate * 0.5
    rng = np.random.RandomState(0)
    w = nd.array(rng.randn(4, 3).astype(np.float32))
    opt = optimizer.create(name, **kwargs)
    updater = optimizer.get_updater(opt)
    for _ in range(3):
        updater(0, nd.array((3 * rng.randn(4, 3)).astype(np.float32)), w)
    return w.asnumpy()


_SWEPT = sorted(n for n in optimizer.Optimizer.opt_registry if n != "test")


@pytest.mark.parametrize("name", _SWEPT)
def test_every_optimizer_argument_changes_the_steps(name):
    cls = optimizer.Optimizer.opt_registry[name]
    ignored = []
    for arg in _optimizer_arguments(cls):
        if arg in _OTHER_REGIMES or (name, arg) in _MXNET_IGNORES:
            continue
        assert arg in _CHANGED, "%s(%s=...): no value to sweep it with (add it to _CHANGED)" \
            % (name, arg)
        value, context = _CHANGED[arg]
        if arg == "lr_scheduler":
            changed = dict(context, scheduled=True)
        elif arg == "learning_rate":
            changed = dict(context, learning_rate="half")
        else:
            changed = dict(context, **{arg: value})
        try:
            baseline = _run_optimizer(name, context)
        except ValueError:      # the context itself is refused (GroupAdaGrad's weight decay)
            continue
        try:
            got = _run_optimizer(name, changed)
        except (TypeError, ValueError, RuntimeError):
            continue        # refused: not ignored
        if np.array_equal(got, baseline):
            ignored.append(arg)
    assert not ignored, "%s: changing %s alone changes nothing" % (name, ignored)


def test_sym_is_refused_rather_than_ignored():
    with pytest.raises(TypeError, match="sym=.* is not supported"):
        optimizer.create("sgd", sym=object())


# The random draws: each argument changed alone changes what is drawn (same seed), or the call
# is refused. ``ctx`` is swept where a GPU exists (test_ndarray's ctx fixture covers it).
_DRAW_CHANGES = {"low": -5.0, "high": 10.0, "loc": 3.0, "scale": 5.0, "lam": 7.0, "alpha": 4.0,
                 "beta": 3.0, "k": 7, "p": 0.2, "mu": 5.0, "prob": 0.9, "shape": (3, 2),
                 "dtype": "float64"}
_DRAW_DEFAULTS = {"randint": {"low": 0, "high": 5}, "negative_binomial": {"p": 0.5}}


@pytest.mark.parametrize("fn_name", ["uniform", "normal", "randint", "exponential", "poisson",
                                     "gamma", "bernoulli", "negative_binomial",
                                     "generalized_negative_binomial"])
def test_every_random_argument_changes_the_draw(fn_name):
    fn = getattr(nd.random, fn_name)
    base = dict(_DRAW_DEFAULTS.get(fn_name, {}), shape=(4, 5))

    def draw(**kw):
        trainer_cli.random.seed(3)
        return fn(**dict(base, **kw))
    reference = draw()
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_KEYWORD:
            with pytest.raises(TypeError):
                draw(no_such_argument=1)
            continue
        if p.name == "ctx":
            continue
        if p.name == "out":
            out = nd.zeros((4, 5), dtype=reference.dtype)
            assert draw(out=out) is out
            np.testing.assert_array_equal(out.asnumpy(), reference.asnumpy())
            continue
        if p.name == "dtype" and fn_name == "randint":
            changed = draw(dtype="int64")
        else:
            changed = draw(**{p.name: _DRAW_CHANGES[p.name]})
        same = changed.shape == reference.shape and changed.dtype == reference.dtype and \
            np.array_equal(changed.asnumpy(), reference.asnumpy())
        assert not same, "nd.random.%s(%s=...) changes nothing" % (fn_name, p.name)


# The Trainer: each argument of its constructor and of step() changed alone changes the weights
# (or is refused). kvstore and update_on_kvstore choose a path, not a result: each path is held
# to MXNet's numbers by test_golden_regimes (trainer_multipliers) and test_golden_trainer.
_TRAINER_PATHS = {"kvstore", "update_on_kvstore", "default_update_on_kvstore"}


def _trainer_run(ctxs=1, stale=False, step_kw=None, **trainer_kw):
    contexts = [trainer_cli.cpu(i) for i in range(ctxs)]
    rng = np.random.RandomState(5)
    params = []
    for name in ("sweep_a", "sweep_b"):
        p = gluon.Parameter(name, shape=(3, 4))
        p.initialize(ctx=contexts)
        p.set_data(nd.array(rng.randn(3, 4).astype(np.float32)))
        params.append(p)
    kw = dict(dict(optimizer="sgd", optimizer_params={"learning_rate": 0.1}), **trainer_kw)
    trainer = gluon.Trainer(params, kw.pop("optimizer"), kw.pop("optimizer_params"), **kw)
    for step in range(2):
        for k, ctx in enumerate(contexts):
            coef = nd.array(rng.randn(3, 4).astype(np.float32), ctx=ctx)
            with autograd.record():
                loss = (params[0].data(ctx) * coef).sum()
                if not (stale and step == 1):
                    loss = loss + (params[1].data(ctx) * coef * 2).sum()
            loss.backward()
        trainer.step(**dict({"batch_size": 2}, **(step_kw or {})))
    return np.concatenate([p.data(contexts[0]).asnumpy().ravel() for p in params])


def test_every_trainer_argument_changes_the_weights():
    changes = {
        "optimizer": dict(optimizer="adam"),
        "optimizer_params": dict(optimizer_params={"learning_rate": 0.2}),
        "compression_params": dict(ctxs=2, kvstore="device",
                                   compression_params={"type": "2bit", "threshold": 0.5}),
    }
    baselines = {"compression_params": dict(ctxs=2, kvstore="device")}
    args = [p.name for p in inspect.signature(gluon.Trainer.__init__).parameters.values()
            if p.name not in ("self", "params") and p.name not in _TRAINER_PATHS]
    assert sorted(args) == sorted(changes), "a Trainer argument without a sweep value"
    for arg, kw in changes.items():
        base = _trainer_run(**baselines.get(arg, {}))
        assert not np.array_equal(_trainer_run(**kw), base), "Trainer(%s=...) changes nothing" % arg
    assert not np.array_equal(_trainer_run(step_kw={"batch_size": 4}), _trainer_run())
    # ignore_stale_grad: a Parameter whose gradient is stale raises, or is left alone.
    with pytest.raises(UserWarning, match="sweep_b"):
        _trainer_run(stale=True)
    kept = _trainer_run(stale=True, step_kw={"ignore_stale_grad": True})
    assert not np.array_equal(kept, _trainer_run())
