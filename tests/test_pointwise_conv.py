"""1x1 convolutions of stride 1 without padding (``nn.POINTWISE_PLANE``): each image multiplied
straight into the output, no column matrix made, forward or backward; the values and gradients
of the column path to rounding, finite differences agree, and the bits do not depend on the
thread count."""
import numpy as np
import pytest

from trainer_cli import autograd, nd
from trainer_cli.ndarray import _conv_kernels as K
from trainer_cli.ndarray import host_threads
from trainer_cli.ndarray import nn as NN


def _conv(arrays, relu, needs=(True, True, True)):
    """Output and gradients (x, w, b or None) of a 1x1 convolution, ReLU-fused when ``relu``."""
    x, w, b = (None if a is None else nd.array(a, dtype=a.dtype) for a in arrays)
    for a, need in zip((x, w, b), needs):
        if a is not None and need:
            a.attach_grad()
    head = np.cos(np.arange(x.shape[0] * w.shape[0] * x.shape[2] * x.shape[3]))
    with autograd.record():
        y = NN._convolution(x, w, b, (1, 1), None, None, None, w.shape[0], 1, None, relu)
    y.backward(nd.array(head.reshape(y.shape), dtype=x.dtype))
    grads = [a.grad.asnumpy() if a is not None and need else None
             for a, need in zip((x, w, b), needs)]
    return y.asnumpy(), grads


def _arrays(shape, filters, bias, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype),
            rng.standard_normal((filters, shape[1], 1, 1)).astype(dtype),
            rng.standard_normal(filters).astype(dtype) if bias else None]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, True), (False, True, False)])
def test_pointwise_is_the_column_path_without_columns(monkeypatch, relu, bias, needs):
    arrays = _arrays((3, 5, 6, 7), 4, bias)
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(NN, "PIECE_ELEMENTS", 64)        # several pieces of the batch
    monkeypatch.setattr(NN, "POINTWISE_PLANE", 1 << 30)
    ref_out, ref_grads = _conv(arrays, relu, needs)
    monkeypatch.setattr(NN, "POINTWISE_PLANE", 16)
    made = []
    real_im2col = K.im2col
    monkeypatch.setattr(K, "im2col", lambda *a, **k: made.append(1) or real_im2col(*a, **k))
    out, grads = _conv(arrays, relu, needs)
    assert not made
    np.testing.assert_allclose(out, ref_out, rtol=1e-13, atol=1e-13)
    for got, expect in zip(grads, ref_grads):
        if expect is None:
            assert got is None
        else:
            np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


def test_pointwise_gradients_are_finite_differences():
    x, w, b = _arrays((2, 3, 4, 5), 4, True, seed=3)
    _, (gx, gw, gb) = _conv([x, w, b], False)
    head = np.cos(np.arange(2 * 4 * 4 * 5)).reshape(2, 4, 4, 5)

    def value(x, w, b):
        y = np.einsum("fc,ncp->nfp", w[:, :, 0, 0], x.reshape(2, 3, 20)) + b[None, :, None]
        return float((y.reshape(head.shape) * head).sum())

    for arr, grad in ((x, gx), (w, gw), (b, gb)):
        flat = arr.reshape(-1)
        for i in range(0, flat.size, max(1, flat.size // 7)):
            keep = flat[i]
            flat[i] = keep + 1e-6
            up = value(x, w, b)
            flat[i] = keep - 1e-6
            down = value(x, w, b)
            flat[i] = keep
            assert abs((up - down) / 2e-6 - grad.reshape(-1)[i]) < 1e-6


def test_pointwise_gives_the_same_bits_on_one_two_and_three_threads(monkeypatch):
    arrays = _arrays((9, 16, 8, 8), 24, True, dtype=np.float32, seed=5)
    monkeypatch.setattr(NN, "PIECE_ELEMENTS", 2048)
    results = []
    for count in (1, 2, 3):
        monkeypatch.setattr(host_threads, "blas_threads", lambda: count)
        out, grads = _conv(arrays, True)
        results.append([out] + grads)
    for other in results[1:]:
        for got, expect in zip(other, results[0]):
            np.testing.assert_array_equal(got.view(np.uint32), expect.view(np.uint32))
