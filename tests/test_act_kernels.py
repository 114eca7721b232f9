"""LeakyReLU's ``leaky``, ``gelu`` and ``prelu`` loops (``ndarray/_act_kernels``) give their
NumPy bodies' bits, forward and backward, with NaN, infinities, signed zeros, subnormal and huge
values in the data; through ``nd.LeakyReLU`` and the Gluon layers the same numbers come out with the loops off
(``TRAINER_NO_NUMBA``-like) as on. Skipped where numba is not installed."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kernel_checks import count_calls, loops_off, loops_on, same_bits
from trainer_cli import autograd, nd
from trainer_cli.gluon import nn
from trainer_cli.ndarray import _act_kernels as K

pytest.importorskip("numba")

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-38, -1e-38, 3e38, -3e38, 0.5,
           -2.0, 13.3, -13.3, 30.0, -30.0]


@pytest.fixture
def kernels_on(monkeypatch):
    loops_on(monkeypatch, K)
    return monkeypatch


def _data(n, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(n) * 10.0 ** rng.integers(-4, 2, n)
    a[:len(SPECIAL)] = SPECIAL
    return a.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [17, 1000, 5000])
def test_gelu_loops_are_the_numpy_bodies(kernels_on, dtype, n):
    x, g = _data(n, dtype, 1), _data(n, dtype, 2)
    with np.errstate(all="ignore"):
        want_out, want_cdf = K.np_gelu(x)
        got_out, got_cdf = K.gelu(x)
        same_bits(got_out, want_out)
        same_bits(got_cdf, want_cdf)
        got = K.gelu_grad(g, x, got_cdf)
        if dtype is np.float64:
            assert got is None      # float64 keeps NumPy's exp
        else:
            same_bits(got, K.np_gelu_grad(g, x, want_cdf))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("slope", [0.01, 0.25, 1.7, -0.5])
def test_leaky_loops_are_the_numpy_bodies(kernels_on, dtype, slope):
    x, g = _data(3000, dtype, 3), _data(3000, dtype, 4)
    with np.errstate(all="ignore"):
        same_bits(K.leaky(x, slope), np.where(x > 0, x, x * slope).astype(dtype))
        same_bits(K.leaky_grad(g, x, slope), g * np.where(x > 0, 1, slope).astype(dtype))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1,
                max_size=64))
def test_gelu_on_any_float32_values(values):
    x = np.array(values, dtype=np.float32)
    g = np.linspace(-2, 2, x.size, dtype=np.float32)
    with pytest.MonkeyPatch.context() as patch, np.errstate(all="ignore"):
        loops_on(patch, K, min_size=1)
        out, cdf = K.gelu(x)
        want_out, want_cdf = K.np_gelu(x)
        same_bits(out, want_out)
        same_bits(K.gelu_grad(g, x, cdf), K.np_gelu_grad(g, x, want_cdf))


def test_gelu_is_the_formula_to_float32_rounding(kernels_on):
    """Against float64 maths: GELU and its derivative within a few float32 roundings where the
    values are not tiny (the gradient's two terms cancel for large negative inputs)."""
    x = np.linspace(-6, 6, 20001).astype(np.float32)
    out, cdf = K.gelu(x)
    grad = K.gelu_grad(np.ones_like(x), x, cdf)
    xd = x.astype(np.float64)
    erf = np.array([math.erf(v / math.sqrt(2)) for v in xd])
    want = 0.5 * xd * (1 + erf)
    want_grad = 0.5 * (1 + erf) + xd * np.exp(-0.5 * xd * xd) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=5e-7)
    np.testing.assert_allclose(grad, want_grad, rtol=2e-6, atol=2e-7)


@pytest.mark.parametrize("shape,channels", [((8, 6, 7, 9), 6), ((8, 6, 7, 9), 1), ((40, 30), 30),
                                            ((5000,), 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_prelu_loops_are_the_numpy_bodies(monkeypatch, shape, channels, dtype):
    rng = np.random.default_rng(7)
    x0 = rng.standard_normal(shape).astype(dtype)
    x0.flat[:len(SPECIAL)] = SPECIAL
    a0 = rng.standard_normal(channels).astype(dtype)
    head = rng.standard_normal(shape).astype(dtype)

    def run():
        x, a = nd.array(x0, dtype=dtype), nd.array(a0, dtype=dtype)
        x.attach_grad()
        a.attach_grad()
        with autograd.record():
            y = nd.LeakyReLU(x, a, act_type="prelu")
        y.backward(nd.array(head, dtype=dtype))
        return [v.asnumpy() for v in (y, x.grad, a.grad)]

    loops_on(monkeypatch, K)
    calls = count_calls(monkeypatch, K, "_prelu_forward")
    with np.errstate(all="ignore"):
        on = run()
        assert calls
        loops_off(monkeypatch)
        off = run()
    for a, b in zip(on, off):
        same_bits(a, b)


@pytest.mark.parametrize("act", ["gelu", "leaky", "layer_gelu", "layer_leaky"])
def test_nd_and_gluon_give_the_same_numbers_with_the_loops_off(monkeypatch, act):
    x0 = _data(6000, np.float32, 5).reshape(20, 300)
    x0[~np.isfinite(x0)] = 1.0
    head = _data(6000, np.float32, 6).reshape(20, 300)
    head[~np.isfinite(head)] = 0.5

    def run():
        x = nd.array(x0)
        x.attach_grad()
        layer = {"layer_gelu": nn.GELU, "layer_leaky": lambda: nn.LeakyReLU(0.1)}.get(act)
        with autograd.record():
            if layer is not None:
                y = layer()(x)
            elif act == "gelu":
                y = nd.LeakyReLU(x, act_type="gelu")
            else:
                y = nd.LeakyReLU(x, act_type="leaky", slope=0.3)
        y.backward(nd.array(head))
        return y.asnumpy(), x.grad.asnumpy()

    loops_on(monkeypatch)
    calls = count_calls(monkeypatch, K, "_gelu_forward", "_leaky_forward")
    on = run()
    assert calls, "the loop did not run"
    loops_off(monkeypatch)
    off = run()
    for a, b in zip(on, off):
        same_bits(a, b)


@pytest.mark.parametrize("shape", [(32, 35, 1000), (64, 10), (7, 300), (5000, 3), (3, 4, 129)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("temperature", [None, 2.0])
def test_softmax_rows_and_gradient_are_the_numpy_bodies(monkeypatch, shape, dtype, temperature):
    rng = np.random.default_rng(8)
    x0 = (rng.standard_normal(shape) * 3).astype(dtype)
    x0.flat[::17] = -0.0
    x0.reshape(-1, shape[-1])[1, 0] = np.inf       # a row of NaNs
    head = rng.standard_normal(shape).astype(dtype)

    def run():
        x = nd.array(x0, dtype=dtype)
        x.attach_grad()
        with autograd.record():
            y = nd.softmax(x, axis=-1, temperature=temperature)
        y.backward(nd.array(head, dtype=dtype))
        return [v.asnumpy() for v in (y, x.grad)]

    loops_on(monkeypatch, K)
    calls = count_calls(monkeypatch, K, "_softmax_divide", "_softmax_backward")
    with np.errstate(all="ignore"):
        on = run()
        assert set(calls) == {"_softmax_divide", "_softmax_backward"}
        loops_off(monkeypatch)
        off = run()
    for a, b in zip(on, off):
        same_bits(a, b, nan_sign=False)


def test_a_masked_softmax_keeps_its_zeros(monkeypatch):
    loops_on(monkeypatch, K)
    x = nd.array(np.random.default_rng(9).standard_normal((4, 6)).astype(np.float32))
    length = nd.array(np.array([0, 2, 6, 3]), dtype="int32")
    with np.errstate(all="ignore"):
        out = nd.softmax(x, length, axis=-1, use_length=True).asnumpy()
    assert (out[0] == 0).all() and (out[1, 2:] == 0).all() and (out[3, 3:] == 0).all()
    np.testing.assert_allclose(out[1:].sum(axis=1), 1, rtol=1e-6)
