"""LayerNorm's loops over the last axis (``ndarray/_layer_norm_kernels``) give the NumPy path's
bits: output and the gradients of the input, gamma and beta, for rows short and long (NumPy's
pairwise summation splits rows above 128 values), constant rows (zero variance), rows with NaN,
infinities and signed zeros, float32 and float64; other axes keep the NumPy path. InstanceNorm
and GroupNorm run the same loops on their rows (a sample's channel, a sample's group): the same
bits as their NumPy bodies, and their closed-form gradients those of the same normalization
composed of nd ops. Skipped where numba is not installed."""
import numpy as np
import pytest

from kernel_checks import count_calls, loops_off, loops_on, same_bits
from trainer_cli import autograd, nd
from trainer_cli.gluon import nn
from trainer_cli.ndarray import _layer_norm_kernels as K

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


def _run(x0, gamma0, beta0, head, axis=-1, eps=1e-5):
    x, gamma, beta = nd.array(x0, dtype=x0.dtype), nd.array(gamma0, dtype=x0.dtype), \
        nd.array(beta0, dtype=x0.dtype)
    for a in (x, gamma, beta):
        a.attach_grad()
    with autograd.record():
        y = nd.LayerNorm(x, gamma, beta, axis=axis, eps=eps)
    y.backward(nd.array(head, dtype=x0.dtype))
    return [a.asnumpy() for a in (y, x.grad, gamma.grad, beta.grad)]


def _counted(monkeypatch):
    return count_calls(monkeypatch, K, "_forward", "_input_grad")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(32, 35, 512), (64, 100), (9, 1000), (300, 5), (2, 3, 130),
                                   (5000, 1), (1, 4096), (700, 129)])
def test_the_loops_give_the_numpy_paths_bits(monkeypatch, dtype, shape):
    x, gamma, beta, head = _inputs(shape, dtype, 1)
    loops_on(monkeypatch, K)
    calls = _counted(monkeypatch)
    with np.errstate(all="ignore"):
        on = _run(x, gamma, beta, head)
        assert set(calls) == {"_forward", "_input_grad"}, calls
        loops_off(monkeypatch)
        off = _run(x, gamma, beta, head)
    for got, want in zip(on, off):
        same_bits(got, want)


def test_rows_are_split_among_threads_with_thesame_bits(monkeypatch):
    x, gamma, beta, head = _inputs((600, 512), np.float32, 2)
    monkeypatch.setattr(K, "SPLIT_SIZE", 1 << 30)
    whole = _run(x, gamma, beta, head)
    monkeypatch.setattr(K, "SPLIT_SIZE", 1000)
    split = _run(x, gamma, beta, head)
    for got, want in zip(split, whole):
        same_bits(got, want)


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
    assert set(calls) == {"_forward", "_input_grad"}, calls
    loops_off(monkeypatch)
    off = _run_norm(kind, *inputs)
    for got, want in zip(on, off):
        same_bits(got, want)


@pytest.mark.parametrize("kind", ["instance", "group"])
def test_the_closed_form_gradients_are_the_composed_ops(monkeypatch, kind):
    """float64: the rows' closed-form output and gradients against the same normalization
    composed of nd ops (their gradients from autograd), which other array libraries run."""
    from trainer_cli.ndarray import normalization
    inputs = _norm_inputs(kind, (4, 6, 5, 3), np.float64, 6)
    closed = _run_norm(kind, *inputs)
    monkeypatch.setattr(normalization, "_rows_normalized", lambda *a: None)
    composed = _run_norm(kind, *inputs)
    for got, want in zip(closed, composed):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
