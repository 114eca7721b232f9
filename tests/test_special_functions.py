"""``nd.gamma``, ``nd.gammaln`` and ``nd.erfinv``: values and gradients are MXNet 1.9.1's bit for
bit (NaN bits included) for special values, integer inputs and a dense sweep (every float16,
20000 float32 and float64 values per op), recorded from the real MXNet by the same
``special_cases.record`` (tests/data/mxnet_special/special.npz); the gradients agree with
finite differences; the numba loop over the C library gives the bits of the plain one."""
import math
import os
import sys

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import _jit, autograd, nd
from trainer_cli.ndarray import _libm, _special

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_special")
sys.path.insert(0, HERE)
import special_cases as cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(HERE, "special.npz")))


def _record_plain():
    # the ufunc over the C library: the numba loop is checked against it below, and compiling
    # it for every function would cost seconds here once another test has loaded numba
    saved, _libm._NUMBA_MIN = _libm._NUMBA_MIN, float("inf")
    try:
        with np.errstate(over="ignore"):        # the cases' float16 casts of large values
            return cases.record(mx)
    finally:
        _libm._NUMBA_MIN = saved


OURS = _record_plain()


def _bits(a):
    return a.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]) \
        if a.dtype.kind == "f" else a


def _same_bits(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, (what, got.dtype, want.dtype)
    differ = _bits(got) != _bits(want)
    if differ.any():
        i = np.nonzero(differ)[0][:5]
        raise AssertionError("%s: %d of %d differ, e.g. at %s: got %s, MXNet %s" % (
            what, differ.sum(), differ.size, i, got[i], want[i]))


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)


def _keys(prefix):
    return sorted({k.rsplit("/", 1)[0] for k in RECORDED if k.startswith(prefix)})


@pytest.mark.parametrize("key", _keys("special/"))
def test_special_values_and_gradients_are_mxnets_bits(key):
    for part in ("x", "g", "y", "dx"):
        _same_bits(OURS[key + "/" + part], RECORDED[key + "/" + part], key + "/" + part)


@pytest.mark.parametrize("key", _keys("int/"))
def test_integer_inputs_are_mxnets(key):
    # computed in double and converted back as x86 converts: inf and NaN to the minimum (erfinv's
    # NaN, a constant, to 0), large values wrapped through int32 for the narrow types
    _same_bits(OURS[key + "/y"], RECORDED[key + "/y"], key)


@pytest.mark.parametrize("key", _keys("sweep/"))
def test_dense_sweep_is_mxnets_bits(key):
    np.testing.assert_array_equal(OURS[key + "/x_digest"], RECORDED[key + "/x_digest"],
                                  err_msg="the sweep's inputs changed: rerun the generator")
    for part in ("y", "dx"):
        _same_bits(OURS["%s/%s_some" % (key, part)], RECORDED["%s/%s_some" % (key, part)],
                   "%s/%s (every %dth)" % (key, part, cases.STRIDE))
        bad = np.nonzero(OURS["%s/%s_digest" % (key, part)]
                         != RECORDED["%s/%s_digest" % (key, part)])[0]
        assert not bad.size, "%s/%s: blocks %s (of %d elements) differ" % (
            key, part, bad[:10], cases.BLOCK)


def _grad(op, x, dtype="float64"):
    a = nd.array(x, dtype=dtype)
    a.attach_grad()
    with autograd.record():
        y = getattr(nd, op)(a)
    y.backward()
    return a.grad.asnumpy()


# The float64 gradients of gamma and gammaln go through MXNet's digamma, whose float64 version
# takes a float logarithm (absolute error up to ~5e-7); erfinv's uses sqrt(pi) in float.
FD_POINTS = {
    "gamma": [0.3, 1.0, 1.7, 4.5, 9.2, 17.5, -0.5, -1.3, -2.7],
    "gammaln": [0.05, 0.6, 1.46, 3.0, 11.5, 250.0, 1e5, -0.5, -3.3],
    "erfinv": [-0.95, -0.3, 0.0, 1e-9, 0.5, 0.9, 0.999],
}


@pytest.mark.parametrize("op", sorted(FD_POINTS))
def test_float64_gradient_matches_finite_differences(op):
    x = np.array(FD_POINTS[op])
    h = 1e-6 * np.maximum(1.0, np.abs(x))
    if op == "erfinv":
        h = np.minimum(h, (1 - np.abs(x)) / 10)
    f = getattr(nd, op)
    numeric = (f(nd.array(x + h, dtype="float64")).asnumpy()
               - f(nd.array(x - h, dtype="float64")).asnumpy()) / (2 * h)
    ours = _grad(op, x)
    scale = np.maximum(1.0, np.abs(numeric))
    if op == "gamma":  # gamma' = gamma psi: psi's absolute error scaled by |gamma|
        scale = np.maximum(scale, np.abs(f(nd.array(x, dtype="float64")).asnumpy()))
    assert np.all(np.abs(ours - numeric) <= 2e-6 * scale), (ours, numeric)


def test_identities_hold():
    x = np.linspace(0.25, 20, 40)
    g = nd.gamma(nd.array(x, dtype="float64")).asnumpy()
    np.testing.assert_allclose(nd.gamma(nd.array(x + 1, dtype="float64")).asnumpy(), x * g,
                               rtol=1e-13)
    np.testing.assert_allclose(np.exp(nd.gammaln(nd.array(x, dtype="float64")).asnumpy()), g,
                               rtol=1e-12)
    y = np.linspace(-0.999, 0.999, 41)
    inv = nd.erfinv(nd.array(y, dtype="float64")).asnumpy()
    np.testing.assert_allclose([math.erf(v) for v in inv], y, rtol=1e-14, atol=1e-16)
    # gammaln's gradient at the poles: MXNet's psi returns the largest double (inf in float32)
    np.testing.assert_array_equal(_grad("gammaln", [0.0, -2.0]), np.finfo(np.float64).max)
    np.testing.assert_array_equal(_grad("gammaln", [0.0, -2.0], "float32"), np.inf)


def test_shapes_dtypes_and_empty():
    for op in cases.OPS:
        for dtype in ("float16", "float32", "float64", "int32"):
            out = getattr(nd, op)(nd.ones((2, 0, 3), dtype=dtype))
            assert out.shape == (2, 0, 3) and out.dtype == np.dtype(dtype)
        x = np.linspace(0.05, 0.95, 12, dtype=np.float32).reshape(3, 4)
        transposed = getattr(nd, op)(nd.array(x).T).asnumpy()
        np.testing.assert_array_equal(transposed, getattr(nd, op)(nd.array(x)).asnumpy().T)


@pytest.mark.skipif(not _jit.enabled(), reason="numba is not available")
@pytest.mark.parametrize("name,dtype", [("lgammaf", np.float32), ("tgamma", np.float64)])
def test_numba_loop_gives_the_plain_bits(name, dtype, monkeypatch):
    x = cases.sweep_inputs("gamma", np.dtype(dtype).name)[:4096]
    assert x.size >= _libm._NUMBA_MIN
    _libm._LOOPS.pop(name, None)
    monkeypatch.setattr(_libm, "_NUMBA_MIN", float("inf"))
    plain = _libm.call(name, x)
    assert name not in _libm._LOOPS
    monkeypatch.undo()
    monkeypatch.setattr(_jit, "loaded", lambda: True)
    fast = _libm.call(name, x)
    assert name in _libm._LOOPS
    _same_bits(fast, plain, name)


class _SciPyLike:
    """``cupyx.scipy.special`` on the CuPy stand-in: our CPU functions computed on the host,
    with SciPy's values at the poles (which the device path must turn into MXNet's)."""

    @staticmethod
    def _host(fn, a, poles=None):
        from standin_xp import to_device
        x = a.get()
        with np.errstate(all="ignore"):
            r = np.asarray(fn(x), dtype=x.dtype)
        if poles is not None:
            r[(x <= 0) & (x == np.floor(x))] = poles
        return to_device(r)

    def gamma(self, a):
        return self._host(_special.gamma, a, np.inf)

    def gammaln(self, a):
        return self._host(_special.gammaln, a, np.inf)

    def digamma(self, a):
        return self._host(lambda x: _special.psi(x).reshape(x.shape), a, np.nan)

    def erfinv(self, a):
        return self._host(lambda x: _special.erfinv64(x).reshape(x.shape), a)


@pytest.mark.parametrize("op", cases.OPS)
def test_device_code_path_makes_no_host_transfer_and_keeps_mxnets_poles(monkeypatch, op):
    from standin_xp import standin_array_module, to_device
    from trainer_cli.ndarray.interop import grad_buffer, raw, wrap
    standin_array_module(monkeypatch)
    monkeypatch.setattr(_special, "_cupy_special", _SciPyLike)
    for dtype in cases.FLOATS + ("int32",):
        with np.errstate(over="ignore"):
            x = np.array(cases.SPECIAL[op] if dtype != "int32" else cases.INT_VALUES, dtype=dtype)
        g = cases.head(x.shape, dtype, "device", op)
        got = []
        for move in (np.copy, to_device):
            a = wrap(move(x), mx.cpu())
            a.attach_grad()
            with autograd.record():
                y = getattr(nd, op)(a)
            if dtype != "int32":
                y.backward(wrap(move(g), mx.cpu()))
            out = [raw(y)] + ([raw(grad_buffer(a))] if dtype != "int32" else [])
            got.append([o.get() if move is to_device else o for o in out])
        for cpu, dev in zip(*got):
            assert cpu.dtype == dev.dtype and cpu.shape == dev.shape
            # the device's exp (erfinv's gradient) is not the C library's: last bits may differ
            np.testing.assert_allclose(dev.astype(np.float64), cpu.astype(np.float64),
                                       rtol=1e-3 if dtype == "float16" else 1e-6, atol=0,
                                       equal_nan=True, err_msg="%s %s" % (op, dtype))
