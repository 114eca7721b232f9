"""Optimizers with row_sparse gradients and weights, against real MXNet 1.9.1
(tests/data/golden/sparse/rsp_*.json) and against our own dense rules.

MXNet's rules (semantics §10; the sparse README's table): SGD, Adam and LARS are lazy by default
(only the rows present in the gradient change, states and weight decay included); AdaGrad and
GroupAdaGrad are row-wise and refuse weight decay; NAG is lazy without momentum; every other
optimizer densifies the gradient (exactly the dense update with zero rows).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest

from trainer_cli import cpu, nd
from trainer_cli import optimizer as opt
from trainer_cli.ndarray import sparse
from trainer_cli.optimizer import kernels

GOLDEN = Path(__file__).resolve().parent / "data" / "golden" / "sparse"
ATOL, RTOL = 1e-6, 1e-5


def load(name):
    return json.loads((GOLDEN / name).read_text())


def rsp(grad, shape, dtype=numpy.float32):
    data = numpy.asarray(grad["data"], dtype=dtype).reshape((len(grad["indices"]),) + shape[1:])
    return sparse.row_sparse_array((data, numpy.asarray(grad["indices"], dtype=numpy.int64)),
                                   shape=shape, ctx=cpu(0))


def close(got, expected, what):
    got = numpy.asarray(got, dtype=numpy.float64)
    expected = numpy.asarray(expected, dtype=numpy.float64)
    assert got.shape == expected.shape, what
    bad = numpy.abs(got - expected) > ATOL + RTOL * numpy.abs(expected)
    assert not bad.any(), "%s: got %s expected %s" % (what, got[bad][:5], expected[bad][:5])


def state_arrays(state):
    """A state in the golden files' layout: None, one array, or the parts of a tuple."""
    if state is None:
        return None
    if isinstance(state, tuple):
        return {"parts": [s.asnumpy() for s in state]}
    return state.asnumpy()


def replay(name):
    case = load(name)
    spec, result = case["spec"], case["result"]
    optimizer = opt.create(spec["optimizer"], **spec["optimizer_params"])
    updater = opt.get_updater(optimizer)
    weights = [nd.array(numpy.asarray(w, dtype=numpy.float32)) for w in spec["weights"]]
    error = result.get("error")
    for step, grads in enumerate(spec["grads"]):
        for i, grad in enumerate(grads):
            before = weights[i].asnumpy().copy()
            g = rsp(grad, weights[i].shape)
            if error and (step, i) == (error["at_step"], error["at_param"]):
                return case, updater, weights, g
            updater(i, g, weights[i])
            close(weights[i].asnumpy(), result["weights"][step][i], "%s step %d param %d"
                  % (name, step, i))
            untouched = result["untouched"][step][i]
            after = weights[i].asnumpy()
            assert after[untouched].tobytes() == before[untouched].tobytes(), \
                "%s step %d param %d: rows %s must keep their bits" % (name, step, i, untouched)
    for i, expected in enumerate(result["states"]):
        got = state_arrays(updater.states[i])
        if expected is None:
            assert got is None
        elif isinstance(expected, dict):
            assert len(got["parts"]) == len(expected["parts"])
            for k, (g, e) in enumerate(zip(got["parts"], expected["parts"])):
                close(g, e, "%s state %d part %d" % (name, i, k))
        else:
            close(got, expected, "%s state %d" % (name, i))
    return case, updater, weights, None


@pytest.mark.parametrize("name", ["rsp_sgd_lazy_01.json", "rsp_adam_std_01.json",
                                  "rsp_ftrl_01.json", "rsp_adagrad_wd_01.json"])
def test_golden_rsp_updater(name):
    case, updater, weights, pending = replay(name)
    error = case["result"].get("error")
    assert (pending is None) == (error is None)
    if error is not None:   # MXNetError is a RuntimeError; MXNet raised at this very call
        i = error["at_param"]
        before = weights[i].asnumpy().copy()
        with pytest.raises(RuntimeError, match="wd"):
            updater(i, pending, weights[i])
        assert weights[i].asnumpy().tobytes() == before.tobytes()


# ------------------------------------------------------------------------- helpers for our own
def _rand(shape, seed, dtype=numpy.float32):
    return numpy.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _grad_rows(n, seed, count):
    rng = numpy.random.default_rng(seed)
    return numpy.sort(rng.choice(n, size=count, replace=False)).astype(numpy.int64)


def _run(name, params, w0, steps, sparse_grads=True):
    """``steps`` updates of one weight ``w0`` through an Updater; each step's gradient is
    (rows, values); returns the weight and the state after."""
    optimizer = opt.create(name, **params)
    updater = opt.get_updater(optimizer)
    w = nd.array(w0, dtype=w0.dtype)
    for rows, values in steps:
        g = sparse.row_sparse_array((values, rows), shape=w0.shape, ctx=cpu(0))
        updater(0, g if sparse_grads else g.tostype("default"), w)
    return w.asnumpy(), updater.states.get(0)


def _steps(shape, count, seed, n_steps=3, empty_at=None, zero_row=False):
    out = []
    for k in range(n_steps):
        c = 0 if k == empty_at else count
        rows = _grad_rows(shape[0], seed + k, c)
        values = _rand((c,) + shape[1:], seed + 100 + k)
        if zero_row and c:
            values[0] = 0       # a present row of zeros is present (structural)
        out.append((rows, values))
    return out


def _bits(a):
    return numpy.asarray(a).tobytes()


LAZY = [
    ("sgd", {"momentum": 0.9, "wd": 0.01, "learning_rate": 0.1, "rescale_grad": 0.5}),
    ("sgd", {"momentum": 0.0, "wd": 0.01, "learning_rate": 0.1}),
    ("sgd", {"momentum": 0.9, "wd": 0.0, "learning_rate": 0.1, "clip_gradient": 0.3}),
    ("sgd", {"momentum": 0.0, "wd": 0.02, "learning_rate": 0.1, "clip_gradient": 0.3}),
    ("adam", {"wd": 0.01, "learning_rate": 0.01, "rescale_grad": 0.25}),
    ("adam", {"wd": 0.0, "learning_rate": 0.01, "clip_gradient": 0.2}),
]


@pytest.mark.parametrize("name,params", LAZY)
def test_lazy_update_touches_only_present_rows_and_they_follow_the_dense_rule(name, params):
    """Lazy: absent rows (weight and state) keep their bits; present rows move as MXNet's row
    kernel moves them: the dense rule on those rows (SGD without momentum: ``(1-lr*wd)*w -
    lr*clip(rescale*g)``)."""
    shape = (40, 3)
    w0 = _rand(shape, 1)
    steps = _steps(shape, 7, 10, zero_row=True, empty_at=1)
    got, state = _run(name, dict(params, lazy_update=True), w0, steps)
    touched = numpy.unique(numpy.concatenate([r for r, _ in steps]))
    absent = numpy.setdiff1d(numpy.arange(shape[0]), touched)
    assert _bits(got[absent]) == _bits(w0[absent])
    for part in (state if isinstance(state, tuple) else (state,)):
        if part is not None:
            assert not part.asnumpy()[absent].any()
    # Present rows: replay each step as the dense rule on the rows present.
    expected = w0.copy()
    ref = opt.create(name, **dict(params, lazy_update=True))
    ref_state = ref.create_state(0, nd.array(w0))
    for rows, values in steps:
        ref._update_count(0)
        lr, wd = ref._get_lr(0), ref._get_wd(0)
        if name == "adam":
            lr = ref._corrected_lr(0, lr)
        if not len(rows):
            continue
        sub_w = nd.array(expected[rows])
        if name == "sgd" and not params["momentum"]:
            t = numpy.float32
            step = values * t(t(lr) * t(params.get("rescale_grad", 1.0))) \
                if "clip_gradient" not in params else \
                numpy.clip(values * t(params.get("rescale_grad", 1.0)), t(-params["clip_gradient"]),
                           t(params["clip_gradient"])) * t(lr)
            keep = t(1) - t(lr) * t(wd)
            expected[rows] = (expected[rows] * keep if keep != 1 else expected[rows]) - step
            continue
        sub_state = tuple(nd.array(s.asnumpy()[rows]) for s in
                          (ref_state if isinstance(ref_state, tuple) else (ref_state,)))
        dense = opt.create(name, **params)
        dense._steps(opt.optimizer.PreparedStep.of([sub_w], [nd.array(values)],
                                                   [sub_state if len(sub_state) > 1
                                                    else sub_state[0]]),
                     [opt.optimizer.Plan(0, lr, wd, dense._momentum() if name == "sgd" else 0.0)])
        expected[rows] = sub_w.asnumpy()
        for full, sub in zip(ref_state if isinstance(ref_state, tuple) else (ref_state,),
                             sub_state):
            full_np = full.asnumpy()
            full_np[rows] = sub.asnumpy()
            full[:] = nd.array(full_np)
    assert _bits(got) == _bits(expected)


STD = [
    ("sgd", {"momentum": 0.9, "wd": 0.01, "learning_rate": 0.1, "rescale_grad": 0.5}),
    ("adam", {"wd": 0.01, "learning_rate": 0.01, "clip_gradient": 0.2}),
    ("adam", {"wd": 0.0, "learning_rate": 0.01}),
]


@pytest.mark.parametrize("name,params", STD)
def test_standard_update_is_the_dense_update_with_zero_rows(name, params):
    shape = (30, 4)
    w0 = _rand(shape, 2)
    steps = _steps(shape, 5, 20, empty_at=2)
    got, state = _run(name, dict(params, lazy_update=False), w0, steps)
    want, want_state = _run(name, dict(params, lazy_update=False), w0, steps, sparse_grads=False)
    assert _bits(got) == _bits(want)


def test_standard_sgd_without_momentum_scales_every_row_first():
    """MXNet: every row times ``(1 - lr*wd)``, then the present rows' steps; an empty gradient
    still decays every row."""
    shape = (20, 2)
    w0 = _rand(shape, 3)
    lr, wd = 0.1, 0.05
    steps = _steps(shape, 4, 30, n_steps=2, empty_at=1)
    got, _ = _run("sgd", {"learning_rate": lr, "wd": wd, "lazy_update": False}, w0, steps)
    t = numpy.float32
    expected = w0.copy()
    keep = t(1) - t(lr) * t(wd)
    for rows, values in steps:
        expected *= keep
        expected[rows] -= values * (t(lr) * t(1.0))
    assert _bits(got) == _bits(expected)


def test_lazy_empty_gradient_advances_adams_count_and_changes_nothing():
    shape = (10, 2)
    w0 = _rand(shape, 4)
    optimizer = opt.create("adam", learning_rate=0.01)
    updater = opt.get_updater(optimizer)
    w = nd.array(w0)
    empty = sparse.zeros("row_sparse", shape)
    updater(0, empty, w)
    assert _bits(w.asnumpy()) == _bits(w0)
    assert optimizer._index_update_count[0] == 1
    rows = numpy.array([3], dtype=numpy.int64)
    values = _rand((1, 2), 5)
    updater(0, sparse.row_sparse_array((values, rows), shape=shape), w)
    assert optimizer._index_update_count[0] == 2
    # The second step's bias correction is t=2's.
    ref = opt.create("adam", learning_rate=0.01)
    ref._update_count(0)
    ref._update_count(0)
    lr = ref._corrected_lr(0, ref._get_lr(0))
    sub = nd.array(w0[rows])
    state = (nd.zeros((1, 2)), nd.zeros((1, 2)))
    ref._steps(opt.optimizer.PreparedStep.of([sub], [nd.array(values)], [state]),
               [opt.optimizer.Plan(0, lr, 0.0)])
    assert _bits(w.asnumpy()[rows]) == _bits(sub.asnumpy())


# ------------------------------------------------------------------------- the numba row loops
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("name,params", LAZY)
def test_row_kernels_are_bitwise_the_numpy_bodies(name, params, dtype, monkeypatch):
    """Enough rows for the numba loop to run; the NumPy body (numba off) gives the same bits."""
    if not kernels.enabled():
        pytest.skip("numba not installed")
    shape = (3000, 16)
    w0 = _rand(shape, 6, dtype)
    steps = [(rows, values.astype(dtype)) for rows, values in _steps(shape, 1200, 40)]
    monkeypatch.setattr(kernels, "MIN_SIZE", 1)
    real_run, ran = kernels.RowKernel.run, []
    monkeypatch.setattr(kernels.RowKernel, "run",
                        lambda *a: ran.append(real_run(*a)) or ran[-1])
    fused, fused_state = _run(name, dict(params, lazy_update=True), w0, steps)
    assert ran and all(ran), "the row kernel did not run"
    monkeypatch.setattr(kernels.RowKernel, "run", lambda *a: False)
    plain, plain_state = _run(name, dict(params, lazy_update=True), w0, steps)
    assert _bits(fused) == _bits(plain)
    for a, b in zip(fused_state if isinstance(fused_state, tuple) else (fused_state,),
                    plain_state if isinstance(plain_state, tuple) else (plain_state,)):
        assert (a is None and b is None) or _bits(a.asnumpy()) == _bits(b.asnumpy())


def test_row_kernel_runs_for_a_large_step():
    """The numba loop, not the NumPy body, takes a step of many rows (so the bitwise test above
    compares two different paths)."""
    if not kernels.enabled():
        pytest.skip("numba not installed")
    from trainer_cli.optimizer import sgd as sgd_mod
    w = numpy.zeros((5000, 8), numpy.float32)
    mom = numpy.zeros_like(w)
    rows = numpy.arange(0, 5000, 2, dtype=numpy.int64)
    values = numpy.ones((len(rows), 8), numpy.float32)
    scalars = sgd_mod._scalars(w.dtype, 0.1, 0.0, 0.9, 1.0, None)
    assert sgd_mod.SGD_MOM_ROWS_KERNEL.run(w, rows, values, (mom,), scalars)
    assert (w[rows] == numpy.float32(-0.1)).all() and not w[1::2].any()


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("name,params", [("sgd", {}), ("sgd", {"momentum": 0.9}), ("adam", {})])
@pytest.mark.parametrize("bad_row", [-1, 600])
def test_row_ids_outside_the_weight_are_refused_before_anything_changes(name, params, kernel,
                                                                       bad_row, monkeypatch):
    # The row loops index the table unchecked: they check every id first (the NumPy bodies
    # would wrap a negative id onto the last row).
    if kernel and not kernels.enabled():
        pytest.skip("numba not installed")
    monkeypatch.setattr(kernels, "MIN_SIZE", 1 if kernel else 1 << 40)
    w0 = _rand((600, 8), 3)
    w = nd.array(w0)
    optimizer = opt.create(name, learning_rate=0.1, **params)
    state = optimizer.create_state(0, w)
    rows = numpy.array([0, 5, bad_row, 7], dtype=numpy.int64)
    grad = opt.optimizer.SparseRows(rows, numpy.ones((4, 8), numpy.float32), (600, 8))
    real_run, ran = kernels.RowKernel.run, []

    def spy(*args):
        result = "raised"
        try:
            result = real_run(*args)
        finally:
            ran.append(result)
    monkeypatch.setattr(kernels.RowKernel, "run", spy)
    with pytest.raises(ValueError, match=r"row ids must lie in \[0, 600\)"):
        optimizer._steps(opt.optimizer.PreparedStep([w._data], [grad], [
            opt.optimizer.raw_state(state)]), [opt.optimizer.Plan(0, 0.1, 0.0, 0.9)])
    assert ran == (["raised"] if kernel else [False])
    assert _bits(w.asnumpy()) == _bits(w0)


@pytest.mark.parametrize("clip", [None, 0.3])
@pytest.mark.parametrize("wd", [0.0, 0.01])
def test_ftrl_row_kernel_is_bitwise_the_rule_on_the_gathered_rows(clip, wd, monkeypatch):
    from trainer_cli.optimizer.ftrl import ftrl_rows_rule, ftrl_rule
    if not kernels.enabled():
        pytest.skip("numba not installed")
    monkeypatch.setattr(kernels, "MIN_SIZE", 1)
    rng = numpy.random.RandomState(5)
    shape, lamda1 = (400, 8), numpy.float32(0.1)
    w0 = rng.randn(*shape).astype(numpy.float32)
    z0 = rng.randn(*shape).astype(numpy.float32)
    n0 = numpy.abs(rng.randn(*shape)).astype(numpy.float32)
    rows = numpy.sort(rng.choice(shape[0], 150, replace=False)).astype(numpy.int64)
    values = rng.randn(len(rows), shape[1]).astype(numpy.float32)
    # Edges: a zero z and gradient (sign 0), |z| == lamda1 (the mask's boundary), -0.0, and
    # non-finite gradients.
    z0[rows[0]], n0[rows[0]], values[0] = 0.0, 0.0, 0.0
    z0[rows[1]], n0[rows[1]], values[1] = lamda1, 0.0, 0.0
    z0[rows[2], 0], values[2, 1:4] = -0.0, [numpy.nan, numpy.inf, -numpy.inf]
    grad = opt.optimizer.SparseRows(rows, values, shape)
    kw = dict(lr=0.2, wd=wd, lamda1=float(lamda1), beta=1.0, rescale=0.5, clip=clip)
    real_run, ran = kernels.RowKernel.run, []
    monkeypatch.setattr(kernels.RowKernel, "run", lambda *a: ran.append(real_run(*a)) or ran[-1])
    fused = [w0.copy(), z0.copy(), n0.copy()]
    ftrl_rows_rule(fused[0], grad, fused[1], fused[2], **kw)
    assert ran == [True], "the row kernel did not run"
    plain = [w0.copy(), z0.copy(), n0.copy()]
    with numpy.errstate(invalid="ignore"):           # the non-finite gradients, as intended
        opt.optimizer.on_rows(ftrl_rule, plain[0], grad, plain[1:], **kw)
    for a, b in zip(fused, plain):
        assert _bits(a) == _bits(b)
    absent = numpy.setdiff1d(numpy.arange(shape[0]), rows)
    assert _bits(fused[0][absent]) == _bits(w0[absent])


@pytest.mark.parametrize("clip", [None, 0.2])
@pytest.mark.parametrize("width", [1, 7, 8, 9, 64, 128, 129])
def test_groupadagrad_row_kernel_is_bitwise_the_rule_on_the_gathered_rows(width, clip,
                                                                        monkeypatch):
    # The row's mean of squares is NumPy's pairwise sum (one block up to 128 values; longer rows
    # take the NumPy path).
    from trainer_cli.optimizer import adagrad
    if not kernels.enabled():
        pytest.skip("numba not installed")
    monkeypatch.setattr(kernels, "MIN_SIZE", 1)
    real, calls = adagrad._GROUP_ADAGRAD_ROWS, []
    monkeypatch.setattr(adagrad, "_GROUP_ADAGRAD_ROWS", lambda *a: calls.append(1) or real(*a))
    rng = numpy.random.RandomState(width)
    shape = (300, width)
    w0 = rng.randn(*shape).astype(numpy.float32)
    h0 = numpy.abs(rng.randn(300, 1)).astype(numpy.float32)
    rows = numpy.sort(rng.choice(300, 100, replace=False)).astype(numpy.int64)
    values = (rng.randn(100, width) * 10).astype(numpy.float32)
    values[0], values[1, 0] = 0.0, -0.0
    grad = opt.optimizer.SparseRows(rows, values, shape)
    kw = dict(lr=0.1, eps=1e-5, rescale=0.5, clip=clip)
    fused = [w0.copy(), h0.copy()]
    adagrad.group_adagrad_rows_rule(fused[0], grad, fused[1], **kw)
    assert len(calls) == (width <= 128)
    plain = [w0.copy(), h0.copy()]
    opt.optimizer.on_rows(adagrad.group_adagrad_rule, plain[0], grad, plain[1:], **kw)
    for a, b in zip(fused, plain):
        assert _bits(a) == _bits(b)


@pytest.mark.parametrize("bad_row", [-1, 600])
def test_row_wise_rules_refuse_row_ids_outside_the_weight(bad_row):
    # on_rows (GroupAdaGrad, Ftrl on a row_sparse weight, AdaGrad's NumPy path) gathers with
    # fancy indexing, which would wrap -1 onto the last row.
    w0 = _rand((600, 8), 4)
    w, history = w0.copy(), numpy.zeros((600, 1), numpy.float32)
    grad = opt.optimizer.SparseRows(numpy.array([3, bad_row], numpy.int64),
                                    numpy.ones((2, 8), numpy.float32), (600, 8))
    from trainer_cli.optimizer.adagrad import group_adagrad_rule
    with pytest.raises(ValueError, match=r"row ids must lie in \[0, 600\)"):
        opt.optimizer.on_rows(group_adagrad_rule, w, grad, [history], lr=0.1, eps=1e-5,
                              rescale=1.0, clip=None)
    assert _bits(w) == _bits(w0) and not history.any()


def test_gradient_not_fitting_the_weight_is_refused():
    w = nd.array(numpy.zeros((4, 2), numpy.float32))
    updater = opt.get_updater(opt.create("sgd", momentum=0.9))
    bad_shape = sparse.row_sparse_array((numpy.ones((1, 3), numpy.float32), [1]), shape=(4, 3))
    with pytest.raises(ValueError, match="shape"):
        updater(0, bad_shape, w)


# ------------------------------------------------------------------------- row_sparse weights
@pytest.mark.parametrize("name,params,parts", [
    ("sgd", {"momentum": 0.9, "wd": 0.01, "learning_rate": 0.1}, 1),
    ("adam", {"wd": 0.01, "learning_rate": 0.01}, 2),
])
def test_row_sparse_weight_gets_row_sparse_states_and_the_dense_weights_numbers(name, params,
                                                                                 parts):
    """A row_sparse weight holding every row (as a kvstore holds one): ``create_state`` gives
    MXNet's row_sparse states, storing nothing until the first update stores every row; the
    weight's values move exactly as a dense weight's, its indices stay 0..n-1."""
    shape = (12, 3)
    w0 = _rand(shape, 7)
    steps = _steps(shape, 4, 50)
    optimizer = opt.create(name, **params)
    updater = opt.get_updater(optimizer)
    w = sparse.all_rows(nd.array(w0))
    state = optimizer.create_state(0, w)
    states = state if isinstance(state, tuple) else (state,)
    assert len(states) == parts
    assert all(s.stype == "row_sparse" and s.indices.shape[0] == 0 for s in states)
    for rows, values in steps:
        updater(0, sparse.row_sparse_array((values, rows), shape=shape), w)
    dense, dense_state = _run(name, params, w0, steps)
    assert w.stype == "row_sparse"
    assert w.indices.asnumpy().tolist() == list(range(shape[0]))
    assert _bits(w.asnumpy()) == _bits(dense)
    got_states = updater.states[0] if isinstance(updater.states[0], tuple) else (updater.states[0],)
    want_states = dense_state if isinstance(dense_state, tuple) else (dense_state,)
    for g, d in zip(got_states, want_states):
        assert g.stype == "row_sparse" and g.indices.asnumpy().tolist() == list(range(shape[0]))
        assert _bits(g.asnumpy()) == _bits(d.asnumpy())


def test_row_sparse_weight_not_lazy_gets_dense_states():
    w = sparse.all_rows(nd.array(_rand((6, 2), 8)))
    for name, params in (("sgd", {"momentum": 0.9}), ("adam", {})):
        state = opt.create(name, lazy_update=False, **params).create_state(0, w)
        for s in state if isinstance(state, tuple) else (state,):
            assert s.stype == "default"


def test_row_sparse_weight_with_rows_missing_is_refused():
    w = sparse.row_sparse_array((numpy.ones((2, 2), numpy.float32), [0, 3]), shape=(5, 2))
    g = sparse.row_sparse_array((numpy.ones((1, 2), numpy.float32), [0]), shape=(5, 2))
    updater = opt.get_updater(opt.create("sgd", momentum=0.9))
    with pytest.raises(ValueError, match="all rows present"):
        updater(0, g, w)


# ------------------------------------------------------------------------- row-wise AdaGrad, NAG
@pytest.mark.parametrize("name, params", [
    ("adagrad", {"learning_rate": 0.1, "rescale_grad": 0.5}),
    ("adagrad", {"learning_rate": 0.1, "clip_gradient": 0.2}),
    ("groupadagrad", {"learning_rate": 0.1}),
])
def test_row_wise_optimizers_update_only_present_rows_by_their_dense_rule(name, params):
    shape = (12, 3)
    w0 = _rand(shape, 1)
    steps = _steps(shape, 4, 7, n_steps=3, zero_row=True)
    got_w, got_state = _run(name, params, w0, steps)
    # Reference: the dense rule applied to exactly the present rows, step by step.
    w = w0.copy()
    state = None
    for rows, values in steps:
        sub_w = w[rows]
        opt_ = opt.create(name, **params)
        upd = opt.get_updater(opt_)
        sub = nd.array(sub_w)
        if state is not None:
            upd.states[0] = nd.array(state[rows])
            upd.states_synced[0] = True
        upd(0, nd.array(values), sub)
        w[rows] = sub.asnumpy()
        if upd.states.get(0) is not None:
            full = state if state is not None else numpy.zeros(
                (shape[0],) + tuple(upd.states[0].shape[1:]), numpy.float32)
            full[rows] = upd.states[0].asnumpy()
            state = full
    assert _bits(got_w) == _bits(w)
    if state is not None:
        assert _bits(got_state.asnumpy()) == _bits(state)


def test_nag_without_momentum_is_lazy_sgd():
    shape = (10, 3)
    w0 = _rand(shape, 4)
    steps = _steps(shape, 3, 11, n_steps=3)
    params = {"learning_rate": 0.1, "wd": 0.01, "rescale_grad": 0.5}
    nag_w, _ = _run("nag", params, w0, steps)
    sgd_w, _ = _run("sgd", params, w0, steps)
    assert _bits(nag_w) == _bits(sgd_w)
    absent = numpy.setdiff1d(numpy.arange(10), numpy.concatenate([r for r, _ in steps]))
    assert _bits(nag_w[absent]) == _bits(w0[absent])


def test_nag_with_momentum_densifies():
    shape = (6, 2)
    w0 = _rand(shape, 3)
    steps = _steps(shape, 2, 9, n_steps=2)
    params = {"learning_rate": 0.1, "momentum": 0.9}
    sparse_w, _ = _run("nag", params, w0, steps)
    dense_w, _ = _run("nag", params, w0, steps, sparse_grads=False)
    assert _bits(sparse_w) == _bits(dense_w)


def test_groupadagrad_refuses_weight_decay_with_row_sparse_gradients():
    w0 = _rand((4, 2), 5)
    with pytest.raises(ValueError, match="Weight decay"):
        _run("groupadagrad", {"wd": 0.1}, w0, _steps((4, 2), 2, 1, n_steps=1))


def test_lars_takes_row_sparse_gradients_lazily_with_the_norm_of_the_stored_rows():
    shape = (9, 2)
    w0 = _rand(shape, 6)
    steps = _steps(shape, 3, 21, n_steps=2)
    params = {"learning_rate": 0.1, "momentum": 0.9}
    got, _ = _run("lars", params, w0, steps)
    touched = numpy.unique(numpy.concatenate([r for r, _ in steps]))
    absent = numpy.setdiff1d(numpy.arange(shape[0]), touched)
    assert _bits(got[absent]) == _bits(w0[absent])
    # Standard (lazy_update=False) updates every row with the norm of the same values.
    dense, _ = _run("lars", dict(params, lazy_update=False), w0, steps)
    ref, _ = _run("lars", dict(params, lazy_update=False), w0, steps, sparse_grads=False)
    numpy.testing.assert_allclose(dense, ref, rtol=1e-6, atol=1e-7)


def test_ftrl_is_row_wise_on_a_row_sparse_weight_and_densifies_on_a_dense_one():
    """MXNet: FtrlUpdateRspRspRsp touches only the present rows of a row_sparse weight; a dense
    weight has no row_sparse kernel, so every row follows the dense rule (absent rows decay)."""
    shape = (10, 2)
    w0 = _rand(shape, 8)
    steps = _steps(shape, 3, 30, n_steps=3)
    params = {"learning_rate": 0.1, "lamda1": 0.01, "wd": 0.001}
    updater = opt.get_updater(opt.create("ftrl", **params))
    w = sparse.all_rows(nd.array(w0))
    for rows, values in steps:
        updater(0, sparse.row_sparse_array((values, rows), shape=shape), w)
    touched = numpy.unique(numpy.concatenate([r for r, _ in steps]))
    absent = numpy.setdiff1d(numpy.arange(shape[0]), touched)
    got = w.asnumpy()
    assert len(absent) and _bits(got[absent]) == _bits(w0[absent])
    # Present rows: the dense rule run on exactly those rows, step by step.
    ref, z, n = w0.copy(), numpy.zeros(shape, numpy.float32), numpy.zeros(shape, numpy.float32)
    from trainer_cli.optimizer.ftrl import ftrl_rule
    for rows, values in steps:
        wr, zr, nr = ref[rows], z[rows], n[rows]
        ftrl_rule(wr, values, zr, nr, lr=0.1, wd=0.001, lamda1=0.01, beta=1, rescale=1.0, clip=None)
        ref[rows], z[rows], n[rows] = wr, zr, nr
    assert _bits(got) == _bits(ref)
    dense_w, _ = _run("ftrl", params, w0, steps)
    assert not numpy.array_equal(dense_w[absent], w0[absent])   # densified: absent rows change


@pytest.mark.parametrize("params", [{"learning_rate": 0.1, "rescale_grad": 0.5},
                                    {"learning_rate": 0.05, "clip_gradient": 0.3, "eps": 1e-4}])
def test_adagrad_row_kernel_is_bitwise_the_rule_on_the_gathered_rows(params, monkeypatch):
    """AdaGrad's row_sparse step through its numba row loop equals the dense rule run on the
    gathered rows (the path without numba), history included, absent rows untouched."""
    if not kernels.enabled():
        pytest.skip("numba not installed")
    from trainer_cli.optimizer import adagrad
    shape = (3000, 16)
    w0 = _rand(shape, 9)
    steps = _steps(shape, 1200, 60, zero_row=True)
    monkeypatch.setattr(kernels, "MIN_SIZE", 1)
    real_run, ran = kernels.RowKernel.run, []
    monkeypatch.setattr(kernels.RowKernel, "run",
                        lambda self, *a: ran.append((self.name, real_run(self, *a))) or ran[-1][1])
    fused, fused_state = _run("adagrad", params, w0, steps)
    assert ran and all(ok for _, ok in ran) and {name for name, _ in ran} == {"adagrad"}
    assert adagrad.ADAGRAD_ROWS_KERNEL.name == "adagrad"
    monkeypatch.setattr(kernels.RowKernel, "run", lambda *a: False)
    plain, plain_state = _run("adagrad", params, w0, steps)
    assert _bits(fused) == _bits(plain)
    assert _bits(fused_state.asnumpy()) == _bits(plain_state.asnumpy())
    absent = numpy.setdiff1d(numpy.arange(shape[0]), numpy.concatenate([r for r, _ in steps]))
    assert _bits(fused[absent]) == _bits(w0[absent])


def test_row_kernel_scalars_kept_only_for_the_same_rates():
    # A training loop's lazy SGD steps reuse one row of scalars; a rate that differs, if only
    # in the sign of a zero, gets its own row (its bits differ).
    import numpy as _np
    from trainer_cli.optimizer.sgd import SGD_MOM_ROWS_KERNEL, _scalars, _zero_signs
    dtype = _np.dtype(_np.float32)

    def row(lr, wd):
        key = (dtype, lr, wd, 0.9, 1.0, None, _zero_signs(lr, wd, 0.9, 1.0, None))
        return SGD_MOM_ROWS_KERNEL.kept_row(key, dtype, lambda: _scalars(dtype, lr, wd, 0.9, 1.0, None))

    first = row(0.1, 0.0)
    assert row(0.1, 0.0) is first
    negative = row(0.1, -0.0)
    assert negative is not first
    assert _np.signbit(negative[1]) and not _np.signbit(first[1])
    assert row(0.2, 0.0)[0] == _np.float32(0.2)
    assert not first.flags.writeable
