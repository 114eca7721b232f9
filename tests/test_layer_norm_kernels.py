"""LayerNorm's loops over the last axis (``ndarray/_layer_norm_kernels``) give the NumPy path's
bits: output and the gradients of the input, gamma and beta, for rows short and long (NumPy's
pairwise summation splits rows above 128 values), constant rows (zero variance), rows with NaN,
infinities and signed zeros, float32 and float64, on one thread and in ranges on several, for
an input that is a leaf (its gradient written into its buffer) or computed, with any of the
three gradients wanted; other axes keep the NumPy path, and a backward pass the loop does not
take runs the NumPy body on the rows made again. InstanceNorm and GroupNorm run the same loops
on their rows (a sample's channel, a sample's group): the same bits as their NumPy bodies, and
their closed-form gradients those of the same normalization composed of nd ops. Skipped where
numba is not installed."""
import numpy as np
import pytest

from kernel_checks import count_calls, loops_off, loops_on, same_bits
from trainer_cli import autograd, nd
from trainer_cli.gluon import nn
from trainer_cli.ndarray import _layer_norm_kernels as K
from trainer_cli.ndarray import host_threads

pytest.importorskip("numba")


def _inputs(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape) + 1).astype(dtype)
    rows = x.reshape(-1, shape[-1])
    rows[0] = 2.5                                   # a constant row: variance 0
    if rows.shape[0] > 3:
        rows[1, 0] = np.nan
        rows[2, -1] = np.inf
        rows[3, :2] = [0.0, -0.0][:rows.shape[1]]
    gamma = rng.standard_normal(shape[-1]).astype(dtype)
    beta = rng.standard_normal(shape[-1]).astype(dtype)
    head = rng.standard_normal(shape).astype(dtype)
    return x, gamma, beta, head


def _run(x0, gamma0, beta0, head, axis=-1, eps=1e-5, leaf=True, grads=(True, True, True)):
    """Output and the wanted gradients (None for the others); with ``leaf=False`` the input
    reaches LayerNorm through an op, so that its gradient is not written into a buffer."""
    x, gamma, beta = nd.array(x0, dtype=x0.dtype), nd.array(gamma0, dtype=x0.dtype), \
        nd.array(beta0, dtype=x0.dtype)
    for a, wanted in zip((x, gamma, beta), grads):
        if wanted:
            a.attach_grad()
    with autograd.record():
        y = nd.LayerNorm(x if leaf else x * 1, gamma, beta, axis=axis, eps=eps)
    y.backward(nd.array(head, dtype=x0.dtype))
    return [y.asnumpy()] + [a.grad.asnumpy() if wanted else None
                            for a, wanted in zip((x, gamma, beta), grads)]


def _counted(monkeypatch):
    return count_calls(monkeypatch, K, "_forward", "_backward", "_column_sums")


def _same(got, want):
    """The same bits; a NaN's sign may differ where two NaNs meet in a sum (the rows holding NaN
    and infinities give NaN gradients, added down the rows)."""
    for a, b in zip(got, want):
        assert (a is None) == (b is None)
        if a is not None:
            same_bits(a, b, nan_sign=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(32, 35, 512), (64, 100), (9, 1000), (300, 5), (2, 3, 130),
                                   (5000, 1), (1, 4096), (700, 129)])
def test_the_loops_give_the_numpy_paths_bits(monkeypatch, dtype, shape):
    x, gamma, beta, head = _inputs(shape, dtype, 1)
    loops_on(monkeypatch, K)
    calls = _counted(monkeypatch)
    with np.errstate(all="ignore"):
        on = _run(x, gamma, beta, head)
        assert {"_forward", "_backward"} <= set(calls), calls
        loops_off(monkeypatch)
        off = _run(x, gamma, beta, head)
    _same(on, off)


@pytest.mark.parametrize("grads", [(True, False, False), (False, True, True), (False, True, False),
                                   (True, False, True)])
@pytest.mark.parametrize("leaf", [True, False])
def test_any_of_the_gradients_for_a_leaf_or_a_computed_input(monkeypatch, grads, leaf):
    x, gamma, beta, head = _inputs((40, 300), np.float32, 7)
    loops_on(monkeypatch, K)
    calls = _counted(monkeypatch)
    with np.errstate(all="ignore"):
        on = _run(x, gamma, beta, head, leaf=leaf, grads=grads)
        assert calls == ["_forward", "_backward"], calls
        loops_off(monkeypatch)
        off = _run(x, gamma, beta, head, leaf=leaf, grads=grads)
    _same(on, off)


def test_an_output_gradient_not_in_rows_takes_the_loop(monkeypatch):
    """A head gradient laid out column-major (as an op's gradient may come: a view of another
    layout) is made contiguous and takes the loop: the bits of the NumPy path given the same
    gradient in rows."""
    from trainer_cli.ndarray.ndarray import _wrap
    x0, gamma0, beta0, head = _inputs((30, 20, 64), np.float32, 10)

    def run(layout):
        x, gamma, beta = (nd.array(a) for a in (x0, gamma0, beta0))
        for a in (x, gamma, beta):
            a.attach_grad()
        with autograd.record():
            y = nd.LayerNorm(x, gamma, beta)
        y.backward(_wrap(np.asarray(head, order=layout), x.context))
        return [a.asnumpy() for a in (y, x.grad, gamma.grad, beta.grad)]

    loops_on(monkeypatch, K)
    calls = _counted(monkeypatch)
    with np.errstate(all="ignore"):
        on = run("F")
        assert calls == ["_forward", "_backward"], calls
        loops_off(monkeypatch)
        off = run("C")
    _same(on, off)


@pytest.mark.parametrize("column_split", [1000, 1 << 40])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_rows_are_split_among_threads_with_the_same_bits(monkeypatch, threads, column_split):
    """In ranges of rows (from COLUMN_SPLIT_SIZE elements on, where the backward pass makes
    gamma's and beta's gradients) the column sums are made after the loop, in ranges of columns;
    on one thread, or below that size, the loop makes them in one call."""
    x, gamma, beta, head = _inputs((600, 512), np.float32, 2)
    loops_on(monkeypatch, K)
    with np.errstate(all="ignore"):
        whole = _run(x, gamma, beta, head)
        monkeypatch.setattr(K, "SPLIT_SIZE", 1000)
        monkeypatch.setattr(K, "COLUMN_SPLIT_SIZE", column_split)
        monkeypatch.setattr(host_threads, "blas_threads", lambda: threads)
        calls = _counted(monkeypatch)
        split = _run(x, gamma, beta, head)
    parts = 1 if threads == 1 else 2 * threads
    backward_parts = parts if column_split == 1000 else 1
    assert calls == ["_forward"] * parts + ["_backward"] * backward_parts + ["_column_sums"] * (
        0 if backward_parts == 1 else 2 * threads), calls
    _same(split, whole)


def test_a_backward_pass_the_loop_does_not_take_runs_the_numpy_body(monkeypatch):
    """The forward by the loop, the backward by the NumPy body on the normalized rows made again
    from the kept mean and invstd (as for a head gradient of another layout)."""
    x, gamma, beta, head = _inputs((30, 200), np.float64, 8)
    loops_on(monkeypatch, K)
    with np.errstate(all="ignore"):
        want = _run(x, gamma, beta, head)
        monkeypatch.setattr(K, "backward", lambda *a: None)
        calls = _counted(monkeypatch)
        got = _run(x, gamma, beta, head)
    assert calls == ["_forward"]
    _same(got, want)


def test_other_axes_and_output_mean_var_keep_the_numpy_path(monkeypatch):
    calls = _counted(monkeypatch)
    x, gamma, beta, head = _inputs((6, 40, 50), np.float32, 3)
    with np.errstate(all="ignore"):
        _run(x, gamma[:40], beta[:40], head, axis=1)
        out = nd.LayerNorm(nd.array(x), nd.array(gamma), nd.array(beta), output_mean_var=True)
    assert len(out) == 3 and out[1].shape == (6, 40, 1)
    assert calls == []


def test_the_gluon_layer_normalizes_each_row(monkeypatch):
    layer = nn.LayerNorm(in_channels=300)
    layer.initialize()
    x = np.random.default_rng(4).standard_normal((50, 300)).astype(np.float32) * 4 + 3
    y = layer(nd.array(x)).asnumpy().astype(np.float64)
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-6)
    np.testing.assert_allclose(y.var(axis=-1), 1, rtol=1e-4)


def _run_norm(kind, x0, gamma0, beta0, head, groups=2):
    x, gamma, beta = (nd.array(a, dtype=x0.dtype) for a in (x0, gamma0, beta0))
    for a in (x, gamma, beta):
        a.attach_grad()
    with autograd.record():
        if kind == "instance":
            y = nd.InstanceNorm(x, gamma, beta, eps=1e-3)
        else:
            y = nd.GroupNorm(x, gamma, beta, num_groups=groups, eps=1e-5)
    y.backward(nd.array(head, dtype=x0.dtype))
    return [a.asnumpy() for a in (y, x.grad, gamma.grad, beta.grad)]


def _norm_inputs(kind, shape, dtype, seed, groups=2):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 3 + 1).astype(dtype)
    x[0, 0] = 1.5                                   # a constant instance / group
    k = shape[1] if kind == "instance" else groups
    return (x, rng.standard_normal(k).astype(dtype), rng.standard_normal(k).astype(dtype),
            rng.standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("kind", ["instance", "group"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(16, 32, 32, 32), (3, 4, 7), (2, 6, 300), (5, 8, 1, 1)])
def test_instance_and_group_norm_loops_give_their_numpy_bodies_bits(monkeypatch, kind, dtype,
                                                                    shape):
    inputs = _norm_inputs(kind, shape, dtype, 5)
    loops_on(monkeypatch, K)
    calls = _counted(monkeypatch)
    on = _run_norm(kind, *inputs)
    assert set(calls) == {"_forward", "_backward"}, calls
    loops_off(monkeypatch)
    off = _run_norm(kind, *inputs)
    _same(on, off)


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("threads", [1, 3])
def test_group_norm_long_rows_in_ranges(monkeypatch, threads, groups):
    """Rows of 16,384 and 32,768 values (beyond NumPy's 8,192-value buffer), in ranges of rows
    on several threads: with two groups each row's sums are its own, so the loop makes them in
    any range; with one group gamma is one value, which NumPy adds pairwise over the whole
    array, and so does the backward pass."""
    inputs = _norm_inputs("group", (4, 4, 64, 128), np.float32, 9, groups=groups)
    loops_on(monkeypatch, K)
    monkeypatch.setattr(K, "SPLIT_SIZE", 1000)
    monkeypatch.setattr(host_threads, "blas_threads", lambda: threads)
    calls = _counted(monkeypatch)
    on = _run_norm("group", *inputs, groups=groups)
    rows = 4 * groups
    assert calls.count("_backward") == (1 if threads == 1 else min(rows, 2 * threads)), calls
    assert "_column_sums" not in calls
    loops_off(monkeypatch)
    off = _run_norm("group", *inputs, groups=groups)
    _same(on, off)
