"""FullyConnected's numba passes (bias + ReLU, ReLU mask + bias gradient) give NumPy's bits.

The NumPy operations are the reference; each case runs both and compares raw bits, with NaN,
infinities and signed zeros in the data. Skipped where numba is not installed.
"""
import numpy as np
import pytest

from trainer_cli import _jit, autograd, gluon, nd
from trainer_cli.ndarray import _fc_kernels as K

pytest.importorskip("numba")

SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, 0.5, -2.0]


@pytest.fixture
def kernels_on(monkeypatch):
    monkeypatch.setattr(_jit, "_numba", None)
    monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    return monkeypatch


def _data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 3, shape)
    a.flat[:len(SPECIAL)] = SPECIAL
    return a.astype(dtype)


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))


SHAPES = [(4, 5), (9, 7), (64, 256), (256, 64), (3, 130), (130, 3), (128, 40), (1, 300), (300, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_bias_and_relu_are_numpys(kernels_on, dtype, shape):
    out = _data(shape, dtype, 1)
    for bias_on_rows in (True, False):
        for with_bias in (True, False):
            bias = _data(shape[0] if bias_on_rows else shape[1], dtype, 2) if with_bias else None
            for relu in (True, False):
                expect = out.copy()
                with np.errstate(all="ignore"):
                    if with_bias:
                        expect += bias.reshape(-1, 1) if bias_on_rows else bias
                    if relu:
                        np.maximum(expect, 0, out=expect)
                    got = out.copy()
                    ran = K.bias_relu(got, bias, bias_on_rows, relu)
                assert ran == (with_bias or relu)
                if ran:
                    _same_bits(got, expect)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_mask_and_bias_gradient_are_numpys(kernels_on, dtype, shape):
    g, out = _data(shape, dtype, 3), _data(shape, dtype, 4)
    g[-1] = -0.0           # a row (and a column) whose sum is a sum of signed zeros
    g[:, -1] = -0.0
    for batch_on_rows in (True, False):
        for relu in (True, False):
            with np.errstate(all="ignore"):
                got = K.relu_bias_grad(g, out, batch_on_rows, relu, True)
                masked = g * (out > 0) if relu else g
                # The layer's own layout: the batch down the rows, or the transposed forward's
                # F-order gradient whose transpose has one unit per row.
                expect = (masked.sum(axis=0) if batch_on_rows
                          else np.asfortranarray(masked.T).sum(axis=0))
            batch = shape[0] if batch_on_rows else shape[1]
            units = shape[1] if batch_on_rows else shape[0]
            if (batch_on_rows and units < 2) or (not batch_on_rows and batch > K._BLOCK):
                assert got is None      # layouts NumPy sums another way: left to NumPy
                continue
            _same_bits(got[0], masked)
            _same_bits(got[1], expect)


def test_kernels_leave_other_inputs_to_numpy(kernels_on):
    f32 = np.ones((8, 8), np.float32)
    assert not K.bias_relu(f32.astype(np.float16), None, True, True)
    assert not K.bias_relu(f32, np.ones(8, np.float64), True, False)       # mixed dtypes
    assert not K.bias_relu(np.asfortranarray(f32 + np.eye(8, dtype=np.float32)), None, True, True)
    assert not K.bias_relu(f32, np.ones(3, np.float32), True, False)       # wrong bias length
    assert K.relu_bias_grad(f32, f32, True, False, False) is None           # nothing to fuse
    kernels_on.setattr(K, "MIN_SIZE", 1 << 12)
    assert not K.bias_relu(f32, None, True, True)                           # small


def _mlp_step(batch, seed=0):
    """One recorded step of a ReLU MLP: output and every parameter's gradient."""
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(48, activation="relu", in_units=20),
            gluon.nn.Dense(40, activation="relu", in_units=48),
            gluon.nn.Dense(40, in_units=40), gluon.nn.Dense(6, in_units=40))
    net.initialize()
    rng = np.random.RandomState(seed)
    for p in net.collect_params().values():
        p.set_data(nd.array(rng.standard_normal(p.shape)))
    x = nd.array(rng.standard_normal((batch, 20)))
    y = nd.array(rng.randint(0, 6, batch))
    with autograd.record():
        out = net(x)
        loss = gluon.loss.SoftmaxCrossEntropyLoss()(out, y)
    loss.backward()
    return [out.asnumpy()] + [p.grad().asnumpy() for p in net.collect_params().values()]


@pytest.mark.parametrize("batch", [8, 40, 150])       # below, at and above the layer widths
def test_dense_layers_give_the_same_bits_with_and_without_kernels(kernels_on, batch):
    kernels_on.setattr(K, "MIN_SIZE", 1 << 60)
    reference = _mlp_step(batch)
    kernels_on.setattr(K, "MIN_SIZE", 16)
    calls = []
    for name in ("_bias_relu", "_grad_batch_cols", "_grad_batch_rows"):
        kernel = getattr(K, name)
        kernels_on.setattr(K, name, lambda *a, _k=kernel, _n=name: (calls.append(_n), _k(*a))[1])
    fused = _mlp_step(batch)
    assert "_bias_relu" in calls
    assert ("_grad_batch_rows" if batch >= 48 else "_grad_batch_cols") in calls
    for a, b in zip(reference, fused):
        _same_bits(a, b)


def test_small_layers_never_load_numba(kernels_on):
    kernels_on.setattr(_jit, "_numba", None)
    kernels_on.setattr(K, "MIN_SIZE", 1 << 12)
    _mlp_step(8)                                  # 8 x 48 outputs at most
    assert _jit._numba is None


def test_the_bias_gradient_is_summed_into_the_bias_buffer(kernels_on):
    g, out = _data((64, 40), np.float32, 5), _data((64, 40), np.float32, 6)
    buf = np.full(40, 7, np.float32)
    got = K.relu_bias_grad(g, out, True, True, True, buf)
    assert got[1] is buf
    _same_bits(buf, K.relu_bias_grad(g, out, True, True, True)[1])
    for wrong in (np.zeros(40, np.float64), np.zeros(39, np.float32), np.zeros(80, np.float32)[::2]):
        assert K.relu_bias_grad(g, out, True, True, True, wrong)[1] is not wrong

    layer = gluon.nn.Dense(40, activation="relu", in_units=20)
    layer.initialize()
    buffer = layer.bias.grad()._data
    x = nd.array(np.random.RandomState(0).standard_normal((64, 20)))
    with autograd.record():
        y = layer(x)
    y.backward()
    assert layer.bias.grad()._data is buffer and layer.bias.data()._fresh_grad
    _same_bits(buffer, np.where(y.asnumpy() > 0, 1, 0).astype(np.float32).sum(axis=0))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(40,), (4, 5, 3), (2, 3, 6, 5)])
def test_the_relu_activation_is_numpys(kernels_on, dtype, shape):
    """nd.relu / Activation('relu') on any shape: one kernel pass forward, one for the mask."""
    x_raw, head = _data(shape, dtype, 5), _data(shape, dtype, 6)
    calls = []
    for name in ("_relu_into", "_grad_batch_rows"):
        kernel = getattr(K, name)
        kernels_on.setattr(K, name, lambda *a, _k=kernel, _n=name: calls.append(_n) or _k(*a))
    runs = []
    for numba in (None, False):
        kernels_on.setattr(_jit, "_numba", numba)
        x = nd.array(x_raw, dtype=dtype)
        x.attach_grad()
        with np.errstate(all="ignore"), autograd.record():
            out = nd.Activation(x, act_type="relu")
        with np.errstate(all="ignore"):
            out.backward(nd.array(head, dtype=dtype))
        runs.append((out.asnumpy(), x.grad.asnumpy()))
    assert calls == ["_relu_into", "_grad_batch_rows"]
    for got, expect in zip(*runs):
        _same_bits(got, expect)
