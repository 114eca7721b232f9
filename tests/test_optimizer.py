"""Optimizer base class, registry, defaults, multipliers, counts, clip, multi-precision, Updater."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from trainer_cli import cpu, lr_scheduler, nd, optimizer
from trainer_cli.optimizer import Optimizer, get_updater

MXNET_NAMES = ["adadelta", "adagrad", "adam", "adamax", "ccsgd", "dcasgd", "ftml", "ftrl",
               "groupadagrad", "lamb", "lars", "lbsgd", "nadam", "nag", "rmsprop", "sgd", "sgld",
               "signum", "test"]
ALL_NAMES = sorted(MXNET_NAMES + ["adamw"])

# Settings that give every optimizer a non-trivial state.
CONFIGS = {
    "sgd": dict(momentum=0.9, wd=1e-3), "ccsgd": dict(momentum=0.5), "nag": dict(momentum=0.9, wd=1e-3),
    "signum": dict(momentum=0.9, wd_lh=1e-3, wd=1e-3), "sgld": dict(wd=1e-3),
    "dcasgd": dict(momentum=0.9, wd=1e-3), "lars": dict(momentum=0.9, wd=1e-3),
    "lbsgd": dict(momentum=0.9, batch_scale=2, updates_per_epoch=2, warmup_epochs=2),
    "adam": dict(wd=1e-3), "adamw": dict(wd=1e-2), "adagrad": dict(wd=1e-3), "groupadagrad": dict(),
    "rmsprop": dict(centered=True), "adadelta": dict(wd=1e-3), "ftrl": dict(wd=1e-3),
    "adamax": dict(wd=1e-3), "nadam": dict(wd=1e-3), "ftml": dict(wd=1e-3),
    "lamb": dict(wd=1e-3), "test": dict(),
}
SHAPES = [(3, 4), (5, 2)]


def _data(steps=4, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    # float16-representable values, so float16 and float32 runs see the same numbers
    w = [rng.standard_normal(s).astype(np.float16).astype(dtype) for s in SHAPES]
    g = [[(2 * rng.standard_normal(s)).astype(np.float16).astype(dtype) for s in SHAPES]
         for _ in range(steps)]
    return w, g


def _run(name, weights, grads, dtype="float32", **kw):
    opt = optimizer.create(name, rescale_grad=0.5, **{**CONFIGS[name], **kw})
    upd = get_updater(opt)
    ws = [nd.array(w, dtype=dtype) for w in weights]
    for gs in grads:
        for i, (g, w) in enumerate(zip(gs, ws)):
            upd(i, nd.array(g, dtype=dtype), w)
    return opt, upd, [w.asnumpy() for w in ws]


# ---------------------------------------------------------------------- registry
def test_registry_names():
    assert sorted(Optimizer.opt_registry) == ALL_NAMES


@pytest.mark.parametrize("name", ["SGD", "sgd", "Adam", "ADAM", "ccSGD", "GroupAdaGrad", "AdamW"])
def test_create_is_case_insensitive(name):
    assert type(optimizer.create(name)).__name__.lower() == name.lower()


def test_create_unknown_lists_valid_names():
    with pytest.raises(ValueError, match="Cannot find optimizer nope.*adam.*sgd"):
        optimizer.create("nope")


def test_register_duplicate_warns_and_overrides():
    saved = dict(Optimizer.opt_registry)
    try:
        class SGD(Optimizer):      # noqa: N801
            pass
        with pytest.warns(UserWarning, match="overriding"):
            optimizer.register(SGD)
        assert Optimizer.opt_registry["sgd"] is SGD
    finally:
        Optimizer.opt_registry.clear()
        Optimizer.opt_registry.update(saved)


def test_contrib_group_adagrad():
    from trainer_cli.optimizer import contrib
    assert contrib.GroupAdaGrad is Optimizer.opt_registry["groupadagrad"]


# ---------------------------------------------------------------------- defaults
DEFAULTS = {
    "sgd": dict(learning_rate=0.01, momentum=0.0, lazy_update=True),
    "signum": dict(learning_rate=0.01, momentum=0.9, wd_lh=0.0),
    "ftml": dict(learning_rate=0.01, beta1=0.6, beta2=0.999, epsilon=1e-8),
    "lars": dict(learning_rate=0.01, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True),
    "lbsgd": dict(learning_rate=0.01, momentum=0.0, warmup_strategy="linear", warmup_epochs=5,
                  batch_scale=1, updates_per_epoch=32, begin_epoch=0, num_epochs=60),
    "dcasgd": dict(learning_rate=0.01, momentum=0.0, lamda=0.04),
    "nag": dict(learning_rate=0.01, momentum=0.0),
    "sgld": dict(learning_rate=0.01),
    "adam": dict(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, lazy_update=True),
    "adagrad": dict(learning_rate=0.01, eps=1e-7),
    "rmsprop": dict(learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8, centered=False,
                    clip_weights=None),
    "adadelta": dict(learning_rate=0.01, rho=0.9, epsilon=1e-5),
    "ftrl": dict(learning_rate=0.1, lamda1=0.01, beta=1),
    "adamax": dict(learning_rate=0.002, beta1=0.9, beta2=0.999),
    "nadam": dict(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8, schedule_decay=0.004),
    "lamb": dict(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, lower_bound=None,
                 upper_bound=None, bias_correction=True),
    "groupadagrad": dict(learning_rate=0.01, eps=1e-5),
    "test": dict(learning_rate=0.01),
    "ccsgd": dict(learning_rate=0.01, momentum=0.0),
    "adamw": dict(learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6, correct_bias=True),
}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_defaults(name):
    opt = optimizer.create(name)
    hp = opt.hyperparams()
    for key, value in DEFAULTS[name].items():
        assert hp[key] == value, key
    assert opt.learning_rate == DEFAULTS[name]["learning_rate"]
    assert (opt.wd, opt.rescale_grad, opt.clip_gradient, opt.num_update) == (0.0, 1.0, None, 0)
    expected_aggregate = {"sgd": 4, "ccsgd": 4, "lars": 4, "lamb": 45}.get(name, 0)
    assert opt.aggregate_num == expected_aggregate


@pytest.mark.parametrize("name", ALL_NAMES)
def test_hyperparams_rebuild(name):
    kw = dict(CONFIGS[name], wd=0.5 if name != "groupadagrad" else 0.0, rescale_grad=0.25,
              clip_gradient=3.0, param_idx2name={0: "a_weight", 1: "b_bias"},
              lr_scheduler=lr_scheduler.FactorScheduler(step=3, factor=0.5), learning_rate=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimizer.create(name, **kw)
    hp = json.loads(json.dumps(opt.hyperparams()))
    hp["param_idx2name"] = dict(hp["param_idx2name"])
    again = optimizer.create(name, **hp)
    assert again.hyperparams() == opt.hyperparams()
    assert again.idx2name == {0: "a_weight", 1: "b_bias"}


def test_aggregation_env(monkeypatch):
    monkeypatch.setenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "7")
    assert optimizer.create("sgd").aggregate_num == 7
    assert optimizer.create("lars").aggregate_num == 7
    monkeypatch.setenv("MXNET_OPTIMIZER_AGGREGATION_SIZE", "100")
    assert optimizer.create("lamb").aggregate_num == 45


# ---------------------------------------------------------------------- lr, wd, multipliers
class _Param:
    def __init__(self, lr_mult=1.0, wd_mult=1.0):
        self.lr_mult, self.wd_mult = lr_mult, wd_mult


def test_lr_wd_multipliers_precedence():
    p = _Param(lr_mult=2.0, wd_mult=3.0)
    opt = optimizer.create("sgd", learning_rate=0.1, wd=0.01, param_dict={0: p},
                           param_idx2name={0: "x_weight", 1: "y_bias", 2: "z_gamma", 3: "w_weight"})
    opt.set_lr_mult({0: 100.0, 1: 5.0, "w_weight": 7.0})
    assert opt._get_lrs([0, 1, 3, 9]) == pytest.approx([0.2, 0.5, 0.7, 0.1])
    # names not ending in _weight/_gamma get no decay; a live Parameter wins over everything
    assert opt._get_wds([0, 1, 2, 3]) == pytest.approx([0.03, 0.0, 0.01, 0.01])
    p.lr_mult = 4.0     # changing the Parameter takes effect at once
    assert opt._get_lr(0) == pytest.approx(0.4)


def test_lars_keeps_decay_only_for_weights():
    opt = optimizer.create("lars", wd=0.1, param_idx2name={0: "x_weight", 1: "x_gamma"})
    assert opt._get_wds([0, 1]) == pytest.approx([0.1, 0.0])


def test_learning_rate_and_set_learning_rate():
    opt = optimizer.create("sgd", learning_rate=0.3)
    opt.set_learning_rate(0.2)
    assert opt.learning_rate == 0.2
    sched = lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0, warmup_steps=2,
                                         warmup_begin_lr=0.25)
    opt = optimizer.create("sgd", lr_scheduler=sched, begin_num_update=0)
    assert opt.lr is None and opt.learning_rate == 0.25      # sched(begin_num_update)
    with pytest.raises(UserWarning, match="LRScheduler of the optimizer has already been defined"):
        opt.set_learning_rate(0.1)
    with pytest.raises(DeprecationWarning):
        opt.set_lr_scale({})


def test_learning_rate_overrides_scheduler_base_lr_only():
    sched = lr_scheduler.PolyScheduler(max_update=10, base_lr=1.0, warmup_steps=2,
                                       warmup_begin_lr=0.0)
    with pytest.warns(UserWarning, match="overwritten"):
        optimizer.create("sgd", learning_rate=0.5, lr_scheduler=sched)
    assert sched.base_lr == 0.5
    assert sched.warmup_final_lr == 1.0 and sched.base_lr_orig == 1.0
    assert sched(1) == 0.5 and sched(2) == 1.0      # warmup ramps to the original, then decays


def test_default_learning_rate_of_adam_overrides_a_scheduler():
    # MXNet 1.9.1: Adam's signature default (0.001) is not None, so it wins over the scheduler.
    sched = lr_scheduler.FactorScheduler(step=5, base_lr=0.1)
    with pytest.warns(UserWarning):
        opt = optimizer.create("adam", lr_scheduler=sched)
    assert opt.learning_rate == 0.001
    sched = lr_scheduler.FactorScheduler(step=5, base_lr=0.1)
    assert optimizer.create("sgd", lr_scheduler=sched).learning_rate == 0.1
    sched = lr_scheduler.FactorScheduler(step=5, base_lr=0.1)
    ftrl = optimizer.create("ftrl", lr_scheduler=sched)     # Ftrl sets lr after the base class
    assert ftrl.lr == 0.1 and sched.base_lr == 0.1


def test_optimizer_accepts_scheduler_dict():
    opt = optimizer.create("sgd", lr_scheduler={"class": "factor", "params": {"step": 1,
                                                                              "factor": 0.5}})
    assert isinstance(opt.lr_scheduler, lr_scheduler.FactorScheduler)


# ---------------------------------------------------------------------- update counts
def test_update_counts_per_device():
    opt = optimizer.create("adam", learning_rate=0.1)
    updaters = [get_updater(opt), get_updater(opt)]
    ws = [nd.ones((2,), ctx=cpu(0)), nd.ones((2,), ctx=cpu(1))]
    for _ in range(2):
        for upd, w in zip(updaters, ws):
            upd(0, nd.ones((2,), ctx=w.context), w)
    assert opt._all_index_update_counts == {0: {0: 2}, 1: {0: 2}}
    assert opt.num_update == 2
    np.testing.assert_array_equal(ws[0].asnumpy(), ws[1].asnumpy())


def _recording_scheduler(calls, **params):
    """A FactorScheduler that appends each update count it is called with to ``calls``."""

    class Recording(lr_scheduler.FactorScheduler):
        def __call__(self, n):
            calls.append(n)
            return super().__call__(n)

    return Recording(**params)


def test_begin_num_update_and_first_scheduler_call():
    calls = []
    opt = optimizer.create("sgd", lr_scheduler=_recording_scheduler(calls, step=100, base_lr=0.1),
                           begin_num_update=5)
    get_updater(opt)(0, nd.ones((1,)), nd.ones((1,)))
    assert calls == [6] and opt._index_update_count == {0: 6} and opt.num_update == 6


def test_lbsgd_reads_lr_before_counting():
    calls = []
    opt = optimizer.create("lbsgd", lr_scheduler=_recording_scheduler(calls, step=100, base_lr=0.1))
    upd = get_updater(opt)
    for _ in range(2):
        upd(0, nd.ones((1,)), nd.ones((1,)))
    assert calls == [0, 1]


def test_lars_momentum_correction_follows_global_lr():
    sched = lr_scheduler.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    opt = optimizer.create("lars", momentum=0.9, lr_scheduler=sched)
    upd = get_updater(opt)
    w = nd.array([1.0, 2.0])
    upd([0], [nd.array([0.5, -0.5])], [w])
    assert (opt.last_lr, opt.cur_lr) == (1.0, 1.0) and opt._momentum() == pytest.approx(0.9)
    upd([0], [nd.array([0.5, -0.5])], [w])
    assert (opt.last_lr, opt.cur_lr) == (1.0, 0.5) and opt._momentum() == pytest.approx(0.45)


def test_lars_skips_bias_gamma_beta_by_name():
    opt = optimizer.create("lars", learning_rate=0.1, param_idx2name={0: "fc_bias", 1: "fc_weight"})
    w, g = nd.array([3.0, 4.0]), nd.array([1.0, 0.0])
    lrs, _ = opt._lrs_wds([0, 1], [w, w], [g, g])
    assert lrs[0] == 0.1
    assert lrs[1] == pytest.approx(0.1 * 0.001 * 5.0 / 1.0)


# ---------------------------------------------------------------------- clipping and inputs
@pytest.mark.parametrize("name", ALL_NAMES)
def test_clip_off_values_agree(name):
    weights, grads = _data()
    results = [_seeded_run(name, weights, grads, clip_gradient=clip) for clip in (None, 0, -1.0)]
    for other in results[1:]:
        for a, b in zip(results[0], other):
            np.testing.assert_array_equal(a, b)


def _seeded_run(name, weights, grads, **kw):
    from trainer_cli import random
    random.seed(3)
    return _run(name, weights, grads, **kw)[2]


@pytest.mark.parametrize("name", [n for n in ALL_NAMES if n not in ("test", "lars")])
def test_clip_bounds_the_rescaled_gradient(name):
    # rescale 0.5, clip 0.25: clipping the rescaled gradient equals pre-clipping g to 0.5 (exactly).
    # (LARS takes its layer lr from the unclipped gradient norm, so it is left out.)
    weights, grads = _data()
    kw = dict(CONFIGS[name], wd=0.0, **({"batch_scale": 1} if name == "lbsgd" else {}))
    kw.pop("wd_lh", None)
    clipped = _seeded_run(name, weights, grads, **{**kw, "clip_gradient": 0.25})
    pre = [[np.clip(g, -0.5, 0.5) for g in gs] for gs in grads]
    unclipped = _seeded_run(name, weights, pre, **kw)
    for a, b in zip(clipped, unclipped):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ALL_NAMES)
def test_gradient_is_never_modified(name):
    weights, grads = _data(steps=2)
    opt = optimizer.create(name, rescale_grad=0.5, clip_gradient=0.3, **CONFIGS[name])
    upd = get_updater(opt)
    ws = [nd.array(w) for w in weights]
    for gs in grads:
        nds = [nd.array(g) for g in gs]
        for i, (g, w) in enumerate(zip(nds, ws)):
            upd(i, g, w)
        for g, orig in zip(nds, gs):
            np.testing.assert_array_equal(g.asnumpy(), orig)


def test_weight_identity_is_kept():
    w = nd.array([1.0, 2.0])
    buf = w._data
    get_updater(optimizer.create("adam"))(0, nd.array([1.0, 1.0]), w)
    assert w._data is buf and not np.array_equal(buf, [1.0, 2.0])


# ---------------------------------------------------------------------- specific rules
def test_sgd_state_is_negative_velocity():
    opt = optimizer.create("sgd", learning_rate=0.1, momentum=0.9)
    upd = get_updater(opt)
    w = nd.array([1.0])
    upd(0, nd.array([1.0]), w)
    assert upd.states[0].asnumpy()[0] == pytest.approx(-0.1)
    assert w.asnumpy()[0] == pytest.approx(0.9)


def test_nadam_m_schedule_is_shared():
    opt = optimizer.create("nadam")
    upd = get_updater(opt)
    for i in range(3):
        upd(i, nd.ones((2,)), nd.ones((2,)))
    mu1 = 0.9 * (1 - 0.5 * 0.96 ** 0.004)
    assert opt.m_schedule == pytest.approx(mu1 ** 3)
    assert opt.m_schedule == pytest.approx(0.0912, abs=1e-3)


def test_signsgd_sign_of_rescaled_gradient_and_wd_lh():
    opt = optimizer.create("signum", momentum=0.0, learning_rate=0.1, wd=0.5, wd_lh=0.25,
                           rescale_grad=3.0, clip_gradient=0.001)
    w = nd.array([1.0, 1.0, 1.0])
    get_updater(opt)(0, nd.array([2.0, -2.0, 0.0]), w)
    expected = (1 - 0.1 * 0.5 - 0.1 * 0.25) * 1.0 - 0.1 * np.array([1.0, -1.0, 0.0])
    np.testing.assert_allclose(w.asnumpy(), expected, rtol=1e-6)


def test_dcasgd_with_momentum_runs():
    opt = optimizer.create("dcasgd", learning_rate=0.1, momentum=0.5, lamda=0.0)
    upd = get_updater(opt)
    w = nd.array([1.0, 2.0])
    for _ in range(2):
        upd(0, nd.array([1.0, -1.0]), w)
    # lamda 0: heavy-ball SGD, steps -0.1 then -0.1 + 0.5 * -0.1
    np.testing.assert_allclose(w.asnumpy(), [1.0 - 0.1 - 0.15, 2.0 + 0.1 + 0.15], rtol=1e-6)
    mom, prev = upd.states[0]
    np.testing.assert_allclose(mom.asnumpy(), [-0.15, 0.15], rtol=1e-6)
    np.testing.assert_allclose(prev.asnumpy(), [0.9, 2.1], rtol=1e-6)


def test_adamw_matches_formula_and_skips_bad_rescale():
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal(6).astype(np.float32)
    grads = [rng.standard_normal(6).astype(np.float32) for _ in range(3)]
    opt = optimizer.create("adamw", learning_rate=0.01, wd=0.1, rescale_grad=0.5, clip_gradient=0.4)
    upd = get_updater(opt)
    w = nd.array(w0)
    m = np.zeros(6)
    v = np.zeros(6)
    ref = w0.astype(np.float64)
    for t, g in enumerate(grads, 1):
        upd(0, nd.array(g), w)
        G = np.clip(0.5 * g.astype(np.float64), -0.4, 0.4)
        m = 0.9 * m + 0.1 * G
        v = 0.999 * v + 0.001 * G * G
        eta = 0.01 * math.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t)
        ref = ref - eta * (m / (np.sqrt(v) + 1e-6) + 0.1 * ref)
    np.testing.assert_allclose(w.asnumpy(), ref, rtol=1e-5)
    before = w.asnumpy()
    for bad in (0.0, float("inf"), float("nan")):
        opt.rescale_grad = bad
        upd(0, nd.array(grads[0]), w)
    np.testing.assert_array_equal(w.asnumpy(), before)


@pytest.mark.parametrize("dtype,betas", [("float32", (0.9, 0.999)), ("float64", (0.9, 0.999)),
                                         ("float16", (0.9, 0.999)), ("float64", (0.1, 0.3))])
@pytest.mark.parametrize("size", [4000, 40000], ids=["numpy_body", "kernel"])
@pytest.mark.filterwarnings("ignore:Accumulating with float16")
def test_adamw_step_is_the_contrib_operators_bits(size, dtype, betas):
    """The optimizer follows ``nd.contrib.adamw_update`` (MXNet 1.9.1's bits, recorded in
    tests/data/mxnet_adamw) called with ``lr=1, eta=`` the rate: the same weights and moments
    after each step, variance term ``(1-b2)*(G*G)`` and ``1-beta`` taken in float32 included
    (float16 weights, and float64 ones with betas whose ``1-beta`` float32 rounds), on the NumPy
    body (below the kernels' floor, and float16 always) and on the CPU kernel (above it)."""
    rng = np.random.default_rng(4)
    w0 = rng.standard_normal(size).astype(dtype)
    grads = [(rng.standard_normal(size) * 3).astype(dtype) for _ in range(4)]
    beta1, beta2 = betas
    opt = optimizer.create("adamw", learning_rate=0.01, wd=0.1, rescale_grad=0.5,
                           clip_gradient=0.8, correct_bias=False, beta1=beta1, beta2=beta2)
    upd = get_updater(opt)
    w = nd.array(w0, dtype=dtype)
    ref_w, ref_m, ref_v = (nd.array(w0, dtype=dtype), nd.zeros(size, dtype=dtype),
                           nd.zeros(size, dtype=dtype))
    for g in grads:
        upd(0, nd.array(g, dtype=dtype), w)
        nd.contrib.adamw_update(ref_w, nd.array(g, dtype=dtype), ref_m, ref_v, rescale_grad=0.5,
                                lr=1.0, eta=0.01, wd=0.1, epsilon=1e-6, clip_gradient=0.8,
                                beta1=beta1, beta2=beta2, out=ref_w)
        mean, var = upd.states[0]
        for got, want in ((w, ref_w), (mean, ref_m), (var, ref_v)):
            assert got.asnumpy().tobytes() == want.asnumpy().tobytes()


def test_group_adagrad_checks():
    upd = get_updater(optimizer.create("groupadagrad"))
    with pytest.raises(ValueError, match="2-D"):
        upd(0, nd.ones((3,)), nd.ones((3,)))
    upd = get_updater(optimizer.create("groupadagrad", wd=0.1))
    with pytest.raises(ValueError, match="Weight decay"):
        upd(0, nd.ones((3, 2)), nd.ones((3, 2)))
    upd = get_updater(optimizer.create("groupadagrad", learning_rate=0.5))
    w = nd.ones((2, 2))
    upd(0, nd.array([[1.0, 3.0], [0.0, 0.0]]), w)
    assert upd.states[0].shape == (2, 1)
    np.testing.assert_allclose(upd.states[0].asnumpy()[:, 0], [5.0, 0.0])
    np.testing.assert_allclose(w.asnumpy()[0], 1 - 0.5 * np.array([1.0, 3.0]) / math.sqrt(5 + 1e-5),
                               rtol=1e-6)


def test_test_optimizer():
    upd = get_updater(optimizer.create("test", rescale_grad=2.0))
    w = nd.array([1.0])
    upd(0, nd.array([0.5]), w)
    assert w.asnumpy()[0] == 2.0 and upd.states[0].asnumpy()[0] == 2.0
    assert upd.optimizer.num_update == 0


def test_rmsprop_clip_weights():
    upd = get_updater(optimizer.create("rmsprop", learning_rate=10.0, clip_weights=0.5))
    w = nd.array([0.0, 0.0])
    upd(0, nd.array([-1.0, 1.0]), w)
    np.testing.assert_array_equal(w.asnumpy(), [0.5, -0.5])


def test_lbsgd_accumulates_over_batch_scale():
    opt = optimizer.create("lbsgd", learning_rate=0.1, batch_scale=2, warmup_epochs=0)
    upd = get_updater(opt)
    w, g = nd.array([1.0]), nd.array([1.0])
    upd(0, g, w)
    assert w.asnumpy()[0] == 1.0          # first of two calls: nothing happens
    g[:] = 3.0                            # the caller reuses its gradient buffer
    upd(0, g, w)
    # mean of (1, 3) = 2, lr multiplied by batch_scale after warmup: 1 - 0.2 * 2
    assert w.asnumpy()[0] == pytest.approx(1.0 - 0.2 * 2.0)


# ---------------------------------------------------------------------- multi-precision
MP_LAYOUT_REVERSED = {"sgd", "ccsgd", "nag", "lars"}


@pytest.mark.parametrize("name", ALL_NAMES)
def test_multi_precision_float16(name):
    weights, grads = _data()
    ref = _seeded_run(name, weights, grads)
    from trainer_cli import random
    random.seed(3)
    opt, upd, w16 = _run(name, weights, grads, dtype="float16", multi_precision=True)
    for i, w in enumerate(w16):
        state = upd.states[i]
        assert isinstance(state, tuple) and len(state) == 2
        master, inner = (state[1], state[0]) if name in MP_LAYOUT_REVERSED else state
        assert master.dtype == np.float32
        np.testing.assert_array_equal(master.asnumpy(), ref[i])
        assert w.dtype == np.float16
        np.testing.assert_array_equal(w, ref[i].astype(np.float16))


def test_float16_without_multi_precision_warns():
    with pytest.warns(UserWarning, match="multi_precision"):
        get_updater(optimizer.create("adam"))(0, nd.ones((2,), dtype="float16"),
                                             nd.ones((2,), dtype="float16"))


# ---------------------------------------------------------------------- Updater
def test_updater_lists_equal_single_calls():
    weights, grads = _data()
    for name in ("sgd", "lars", "lamb", "adam"):
        a = _seeded_run(name, weights, grads)
        opt = optimizer.create(name, rescale_grad=0.5, **CONFIGS[name])
        upd = get_updater(opt)
        ws = [nd.array(w) for w in weights]
        for gs in grads:
            upd([0, 1], [nd.array(g) for g in gs], ws)
        for x, y in zip(a, ws):
            np.testing.assert_array_equal(x, y.asnumpy())


def test_updater_string_and_bytes_indices():
    upd = get_updater(optimizer.create("sgd", momentum=0.9))
    w = nd.ones((2,))
    upd(b"key", nd.ones((2,)), w)
    upd("key", nd.ones((2,)), w)
    assert list(upd.states) == ["key"]
    assert upd.optimizer._index_update_count == {"key": 2}


def test_updater_states_roundtrip_and_context_sync():
    weights, grads = _data()
    opt = optimizer.create("adam", rescale_grad=0.5)
    upd = get_updater(opt)
    ws = [nd.array(w, ctx=cpu(1)) for w in weights]
    for i, (g, w) in enumerate(zip(grads[0], ws)):
        upd(i, nd.array(g, ctx=cpu(1)), w)
    blob = upd.get_states()
    assert isinstance(blob, bytes)
    fresh = get_updater(optimizer.create("adam", rescale_grad=0.5))
    fresh.set_states(blob)
    assert fresh.optimizer is not opt and fresh.states_synced == {0: False, 1: False}
    assert fresh.states[0][0].context == cpu(0)
    fresh(0, nd.array(grads[1][0], ctx=cpu(1)), ws[0])
    assert fresh.states_synced[0] is True and fresh.states[0][0].context == cpu(1)

    with_opt = get_updater(optimizer.create("sgd"))
    with_opt.set_states(upd.get_states(dump_optimizer=True))
    assert type(with_opt.optimizer).__name__ == "Adam"
    assert with_opt.optimizer._all_index_update_counts == {0: {}, 1: {0: 1, 1: 1}}


# ---------------------------------------------------------------------- planned updates
@pytest.mark.parametrize("name", ["sgd", "lars", "adam", "nadam", "lamb", "ftml", "signum"])
def test_updater_planning_ahead_matches_one_update_call_at_a_time(name):
    """The Updater plans every chunk, then steps all tensors at once. A subclass with its own
    ``update`` (and ``_update_count``, which turns off the inlined bookkeeping of ``_plan``)
    takes the per-call path; both must agree bit for bit: weights, counts, ``num_update`` and
    the scheduler calls, here with uneven per-index counts and a scheduler that moves at every
    count (so chunk order shows in the learning rates)."""
    klass = type(optimizer.create(name))
    per_call = type("PerCall", (klass,), {
        "update": lambda self, *a: klass.update(self, *a),
        "_update_count": lambda self, index: klass._update_count(self, index)})
    rng = np.random.default_rng(3)
    shapes = [(3, 4), (5,), (2, 2), (6,), (1,), (4, 3), (7,)]
    weights = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    steps = [[0, 2, 4]] + [list(range(len(shapes)))] * 3 + [[6, 1, 5]]
    grads = [[rng.standard_normal(shapes[i]).astype(np.float32) for i in idxs] for idxs in steps]
    results = []
    for make in (klass, per_call):
        calls = []
        opt = make(learning_rate=0.1,
                   lr_scheduler=_recording_scheduler(calls, step=1, factor=0.9, base_lr=0.1),
                   wd=1e-3, **({"momentum": 0.9} if name in ("sgd", "lars", "signum") else {}))
        upd = get_updater(opt)
        ws = [nd.array(w) for w in weights]
        for idxs, gs in zip(steps, grads):
            upd(idxs, [nd.array(g) for g in gs], [ws[i] for i in idxs])
        results.append(([w.asnumpy() for w in ws], calls, opt.num_update,
                        dict(opt._index_update_count)))
    (w_a, calls_a, n_a, counts_a), (w_b, calls_b, n_b, counts_b) = results
    assert (calls_a, n_a, counts_a) == (calls_b, n_b, counts_b)
    for a, b in zip(w_a, w_b):
        np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


def test_updater_reuses_nothing_stale_between_calls():
    # The Updater keeps the previous call's arrays prepared; each change below must be seen.
    # Reference: mom = 0.5*mom - 0.5*g; w += mom (float32, exact in these binary fractions).
    opt = optimizer.create("sgd", learning_rate=0.5, momentum=0.5)
    upd = get_updater(opt)
    w, g = nd.ones((4,)), nd.ones((4,))

    def expect(array, value):
        np.testing.assert_array_equal(array.asnumpy(), np.full(4, value, np.float32))

    upd([0], [g], [w])                          # mom -0.5, w 0.5
    upd([0], [g], [w])                          # mom -0.75, w -0.25
    expect(w, -0.25)
    other = nd.ones((4,))                       # another weight array for the same index
    upd([0], [g], [other])                      # mom -0.875, other 0.125
    expect(other, 0.125)
    expect(w, -0.25)
    upd.states[0] = nd.zeros((4,))              # a state replaced by hand
    upd([0], [g], [other])                      # mom -0.5, other -0.375
    expect(other, -0.375)
    expect(upd.states[0], -0.5)
    saved = upd.get_states()
    upd([0], [g * 2], [other])                  # another gradient array: mom -1.25, other -1.625
    expect(other, -1.625)
    upd.set_states(saved)                       # mom back to -0.5
    upd([0], [g], [other])                      # mom -0.75, other -2.375
    expect(other, -2.375)


def test_sgld_draws_noise_in_the_weights_dtype():
    # MXNet draws normal(0, sqrt(lr)) with dtype=weight.dtype: float64 weights get float64 noise.
    import trainer_cli
    for dtype, exact in (("float64", False), ("float32", True)):
        trainer_cli.random.seed(3)
        sgld = optimizer.create("sgld", learning_rate=0.25)
        w = nd.zeros((64,), dtype=dtype)
        sgld.update(0, w, nd.zeros((64,), dtype=dtype), sgld.create_state(0, w))
        noise = w.asnumpy()
        assert noise.dtype == np.dtype(dtype)
        assert 0.3 < noise.std() < 0.7  # std sqrt(0.25)
        rounds_to_float32 = np.array_equal(noise.astype(np.float32).astype(noise.dtype), noise)
        assert rounds_to_float32 == exact


def test_sgd_rate_of_minus_zero_is_not_served_the_step_of_plus_zero():
    """-0.0 == 0.0 (and hashes alike), but a step of -0.0*g gives zeros other signs than 0.0*g
    (with momentum, ``mom*momentum - lr*g`` on a state of -0.0): a cache keyed on the rate's
    value alone would serve one sign's scalar to the other. Both rates run in one test, in both
    orders, each checked against NumPy's own arithmetic of the rule. (The rule on raw arrays: a
    small tensor under Optimizer.update takes the fused kernel once numba is loaded, whose rows
    of scalars go by bits, and the NumPy body before.)"""
    from trainer_cli.optimizer.sgd import sgd_rule
    w0 = np.array([0.0, -0.0, 0.0, -0.0], dtype=np.float32)
    g = np.array([1.0, 1.0, -1.0, -1.0], dtype=np.float32)
    mom0 = np.full(4, -0.0, dtype=np.float32)
    for rates in ((0.0, -0.0), (-0.0, 0.0)):
        for lr in rates:
            w, mom = w0.copy(), mom0.copy()
            sgd_rule(w, g, mom, lr=lr, wd=0.0, momentum=0.9, rescale=1.0, clip=None)
            # MXNet's multi_sgd_mom_update, whose decay term is there at wd=0 too (the signs
            # checked on MXNet 1.9.1: lr=0.0 makes w[1] +0.0, which the rule without it does not)
            expected = w0 + (mom0 * np.float32(0.9) - w0 * (np.float32(lr) * np.float32(0.0))
                             - g * np.float32(lr))
            np.testing.assert_array_equal(np.signbit(w), np.signbit(expected),
                                          err_msg="lr=%r after lr=%r" % (lr, rates[0]))


def test_sgd_decay_of_minus_zero_is_not_served_the_scalars_of_plus_zero():
    """The step's scalars (lr*rescale, lr*wd) are kept per (dtype, rates, their signs): a weight
    decay of -0.0 after one of 0.0 (and the reverse), with rates of either sign, with and
    without momentum, gives the signs of MXNet's multi_sgd_update, w + ((0 - lr*wd*w) -
    lr*rescale*g), and multi_sgd_mom_update (on a state of -0.0, where mom - lr*wd*w keeps
    -0.0 for a decay term of +0.0 only), computed here in NumPy."""
    from trainer_cli.optimizer.sgd import sgd_rule
    w0 = np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0], dtype=np.float32)
    g = np.array([0.0, 0.0, -0.0, -0.0, 0.0, -0.0], dtype=np.float32)
    mom0 = np.full(6, -0.0, dtype=np.float32)
    f = np.float32
    for momentum in (0.0, 0.9):
        for lr in (0.5, -0.5, 0.0, -0.0):
            for wds in ((0.0, -0.0), (-0.0, 0.0)):
                for wd in wds:
                    w, mom = w0.copy(), (mom0.copy() if momentum else None)
                    sgd_rule(w, g, mom, lr=lr, wd=wd, momentum=momentum, rescale=0.25, clip=None)
                    decay, step = w0 * (f(lr) * f(wd)), g * (f(lr) * f(0.25))
                    if momentum:
                        expected = w0 + (mom0 * f(momentum) - decay - step)
                    else:
                        expected = w0 + ((f(0) - decay) - step)
                    np.testing.assert_array_equal(
                        np.signbit(w), np.signbit(expected),
                        err_msg="momentum=%r lr=%r wd=%r after wd=%r" % (momentum, lr, wd, wds[0]))
                    np.testing.assert_array_equal(w, expected)
