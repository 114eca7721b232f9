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
        # The data hold a NaN: the float32 erf's selects may pass on either sign of it.
        same_bits(got_out, want_out, nan_sign=False)
        same_bits(got_cdf, want_cdf, nan_sign=False)
        got = K.gelu_grad(g, x, got_cdf)
        if dtype is np.float64:
            assert got is None      # float64 keeps NumPy's exp
        else:
            same_bits(got, K.np_gelu_grad(g, x, want_cdf), nan_sign=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("slope", [0.01, 0.25, 1.7, -0.5])
def test_leaky_loops_are_the_numpy_bodies(kernels_on, dtype, slope):
    x, g = _data(3000, dtype, 3), _data(3000, dtype, 4)
    with np.errstate(all="ignore"):
        same_bits(K.leaky(x, slope), np.where(x > 0, x, x * slope).astype(dtype))
        same_bits(K.leaky_grad(g, x, slope), g * np.where(x > 0, 1, slope).astype(dtype))


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
    calls = count_calls(monkeypatch, K, "_gelu_forward", "_gelu_forward_f32", "_leaky_forward")
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

    # float32 rows take Cephes' exp in one loop a row; float64 NumPy's exp and the division loop.
    loops = ({"_softmax_forward"} if dtype == np.float32 else {"_softmax_divide"}) \
        | {"_softmax_backward"}
    _loops_give_the_bits_without_them(monkeypatch, run, loops)


def _loops_give_the_bits_without_them(monkeypatch, run, loops):
    """``run()`` with the loops on calls exactly ``loops`` and gives what it gives with them off
    (NaN's sign aside)."""
    loops_on(monkeypatch, K)
    calls = count_calls(monkeypatch, K, *loops)
    with np.errstate(all="ignore"):
        on = run()
        assert set(calls) == loops
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


# ----------------------------------------------------------------------------- Cephes' exp
# float32 sigmoid, tanh, ELU/SELU and softmax/log-softmax over the last axis take Cephes' exp
# (``_expf``): one loop where numba runs, the same operations over whole arrays where it does not.
_EXP_CASES = {
    "sigmoid": (lambda x: nd.sigmoid(x), {"_sigmoid_forward", "_sigmoid_backward"}),
    "tanh": (lambda x: nd.tanh(x), {"_tanh_forward", "_tanh_backward"}),
    "activation_sigmoid": (lambda x: nd.Activation(x, act_type="sigmoid"),
                           {"_sigmoid_forward", "_sigmoid_backward"}),
    "softrelu": (lambda x: nd.Activation(x, act_type="softrelu"), {"_sigmoid_forward"}),
    "elu": (lambda x: nd.LeakyReLU(x, act_type="elu", slope=0.7),
            {"_elu_forward", "_elu_backward"}),
    "selu": (lambda x: nd.LeakyReLU(x, act_type="selu"), {"_elu_forward", "_elu_backward"}),
    "layer_elu": (lambda x: nn.ELU(0.5)(x), {"_elu_forward", "_elu_backward"}),
    "layer_selu": (lambda x: nn.SELU()(x), {"_elu_forward", "_elu_backward"}),
    "layer_swish": (lambda x: nn.Swish(1.5)(x), {"_swish_forward", "_swish_backward"}),
    "swish_ops": (lambda x: x * nd.sigmoid(1.5 * x), {"_sigmoid_forward", "_sigmoid_backward"}),
    "log_softmax": (lambda x: nd.log_softmax(x, axis=-1),
                    {"_log_softmax_shift", "_log_softmax_backward"}),
    "log_softmax_t": (lambda x: nd.log_softmax(x, axis=-1, temperature=3.0),
                      {"_log_softmax_shift", "_log_softmax_backward"}),
    "softmax": (lambda x: nd.softmax(x, axis=-1), {"_softmax_forward", "_softmax_backward"}),
}


@pytest.mark.parametrize("case", sorted(_EXP_CASES))
@pytest.mark.parametrize("shape", [(20, 300), (3, 5, 7), (4099,)])
def test_cephes_exp_loops_are_the_numpy_bodies(monkeypatch, case, shape):
    fn, loops = _EXP_CASES[case]
    n = int(np.prod(shape))
    x0 = _data(n, np.float32, 11).reshape(shape)
    head = _data(n, np.float32, 12).reshape(shape)
    if case.endswith("softmax"):
        head[~np.isfinite(head)] = 0.5

    def run():
        x = nd.array(x0)
        x.attach_grad()
        with autograd.record():
            y = fn(x)
        y.backward(nd.array(head))
        return y.asnumpy(), x.grad.asnumpy()

    _loops_give_the_bits_without_them(monkeypatch, run, loops)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=True, allow_infinity=True), min_size=1,
                max_size=64))
def test_cephes_exp_loops_on_any_float32_values(values):
    # Where two NaNs meet (a NaN input's and inf * 0's, say), which one goes on is the
    # compiler's choice: NaN-ness is compared, not the sign.
    from trainer_cli.ndarray import _expf as E
    x = np.array(values, dtype=np.float32)
    g = np.linspace(-2, 2, x.size, dtype=np.float32)
    f = np.float32
    with pytest.MonkeyPatch.context() as patch, np.errstate(all="ignore"):
        loops_on(patch, K, min_size=1)
        same_bits(K.sigmoid(x), E.np_sigmoid(x), nan_sign=False)
        same_bits(K.tanh(x), E.np_tanh(x), nan_sign=False)
        for scale in (None, 1.0507):
            want_scale = None if scale is None else f(scale)
            same_bits(K.elu(x, 0.3, scale), K.np_elu(x, f(0.3), want_scale), nan_sign=False)
            same_bits(K.elu_grad(g, x, 0.3, scale), K.np_elu_grad(g, x, f(0.3), want_scale),
                      nan_sign=False)
        row = x.reshape(1, -1)
        same_bits(K.softmax_f32(row), K.np_softmax_f32(row), nan_sign=False)
        logp = K.log_softmax_f32(row)
        same_bits(logp, K.np_log_softmax_f32(row), nan_sign=False)
        same_bits(K.log_softmax_grad_f32(g.reshape(1, -1), logp),
                  K.np_log_softmax_grad_f32(g.reshape(1, -1), logp), nan_sign=False)
        t = -np.abs(x)
        out = np.empty_like(t)
        assert K.exp_or_zero(t, out)
        same_bits(out, K.np_exp_or_zero(t), nan_sign=False)
        out, cdf = K.gelu(x)
        want_out, want_cdf = K.np_gelu(x)
        same_bits(out, want_out, nan_sign=False)
        same_bits(K.gelu_grad(g, x, cdf), K.np_gelu_grad(g, x, want_cdf), nan_sign=False)


def _ulps(got, exact):
    """|got - exact| in units of float32's spacing at the exact value."""
    return np.abs(got.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32))


def test_cephes_functions_are_within_a_few_ulp(kernels_on):
    x = np.concatenate([-np.linspace(0, 87, 400001), -np.logspace(-30, 0, 1001),
                        np.linspace(-9, 9, 100001)]).astype(np.float32)
    neg = np.minimum(x, 0)
    xd, negd = x.astype(np.float64), neg.astype(np.float64)
    from trainer_cli.ndarray import _expf as E
    assert _ulps(E.np_exp_neg(neg), np.exp(negd)).max() <= 3
    assert _ulps(E.np_expm1_neg(neg), np.expm1(negd)).max() <= 1.5
    assert _ulps(K.sigmoid(x), 1 / (1 + np.exp(-xd))).max() <= 4
    tanh = np.tanh(xd)
    assert _ulps(K.tanh(x)[tanh != 0], tanh[tanh != 0]).max() <= 4
    assert np.signbit(E.np_expm1_neg(np.array([-0.0], np.float32)))[0]


def test_elu_and_log_softmax_are_the_formulas(kernels_on):
    x = np.linspace(-20, 5, 30001).astype(np.float32)
    xd = x.astype(np.float64)
    elu = nd.LeakyReLU(nd.array(x), act_type="elu", slope=0.7).asnumpy()
    np.testing.assert_allclose(elu, np.where(xd > 0, xd, 0.7 * np.expm1(xd)), rtol=3e-7,
                               atol=0)
    rows = x[:30000].reshape(30, 1000)
    want = rows - rows.max(axis=1, keepdims=True).astype(np.float64)
    want -= np.log(np.exp(want).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(nd.log_softmax(nd.array(rows)).asnumpy(), want, rtol=1e-6,
                               atol=1e-6)
    # Exponentials under ln(FLT_MIN) are 0: a softmax keeps an impossible class at 0.
    assert nd.softmax(nd.array([[0, -np.inf, -200.0]])).asnumpy().tolist() == [[1, 0, 0]]


@pytest.mark.parametrize("beta", [1.0, 1.7])
def test_swish_is_the_bits_of_its_recorded_operations(kernels_on, beta):
    """Gluon's Swish runs as one operation on float32 CPU arrays; its output and gradient are
    those of ``x * sigmoid(beta * x)`` recorded operation by operation (what MXNet's layer
    and an exported graph run)."""
    x0 = _data(6000, np.float32, 13).reshape(20, 300)
    head = _data(6000, np.float32, 14).reshape(20, 300)
    calls = count_calls(kernels_on, K, "_swish_forward", "_swish_backward")
    results = []
    for layer in (nn.Swish(beta), lambda x: x * nd.sigmoid(beta * x)):
        x = nd.array(x0)
        x.attach_grad()
        with autograd.record(), np.errstate(all="ignore"):
            y = layer(x)
        with np.errstate(all="ignore"):
            y.backward(nd.array(head))
        results.append((y.asnumpy(), x.grad.asnumpy()))
    assert set(calls) == {"_swish_forward", "_swish_backward"}
    for a, b in zip(*results):
        same_bits(a, b, nan_sign=False)
