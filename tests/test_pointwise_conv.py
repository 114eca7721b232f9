"""1x1 convolutions of stride 1 without padding (``nn.POINTWISE_PLANE``): each image multiplied
straight into the output, no column matrix made, forward or backward; the values and gradients
of the column path to rounding, finite differences agree, and the bits do not depend on the
thread count. Each shape is tried where the weight gradient is summed image by image and where
it is one GEMM over all the images (many channels on a small plane)."""
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


# (input shape, filters): the weight gradient image by image, then in one GEMM
# (filters x channels >= plane x (filters + channels)).
SHAPES = [((3, 5, 6, 7), 4), ((3, 40, 4, 4), 32)]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("needs", [(True, True, True), (True, False, True), (False, True, False)])
@pytest.mark.parametrize("shape, filters", SHAPES)
def test_pointwise_is_the_column_path_without_columns(monkeypatch, relu, bias, needs, shape,
                                                      filters):
    arrays = _arrays(shape, filters, bias)
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


@pytest.mark.parametrize("relu", [False, True])
def test_many_channels_on_a_small_plane_take_the_columns(monkeypatch, relu):
    """Filters x channels >= 2 x plane x (filters + channels): one GEMM a piece over the column
    matrix (a copy of the planes) instead of the images' thin GEMMs; the same values to
    rounding as image by image."""
    arrays = _arrays((3, 64, 4, 4), 64, True)
    monkeypatch.setattr(K, "MIN_SIZE", 16)
    monkeypatch.setattr(NN, "POINTWISE_COLUMNS", 1 << 30)
    ref_out, ref_grads = _conv(arrays, relu)
    monkeypatch.setattr(NN, "POINTWISE_COLUMNS", 2)
    made = []
    real_im2col = K.im2col
    monkeypatch.setattr(K, "im2col", lambda *a, **k: made.append(1) or real_im2col(*a, **k))
    out, grads = _conv(arrays, relu)
    assert made
    np.testing.assert_allclose(out, ref_out, rtol=1e-13, atol=1e-13)
    for got, expect in zip(grads, ref_grads):
        np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape, filters", [((2, 3, 4, 5), 4), ((2, 12, 2, 2), 10)])
def test_pointwise_gradients_are_finite_differences(shape, filters):
    x, w, b = _arrays(shape, filters, True, seed=3)
    _, (gx, gw, gb) = _conv([x, w, b], False)
    n, c, h, wd = shape
    head = np.cos(np.arange(n * filters * h * wd)).reshape(n, filters, h, wd)

    def value(x, w, b):
        y = np.einsum("fc,ncp->nfp", w[:, :, 0, 0], x.reshape(n, c, h * wd)) + b[None, :, None]
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


@pytest.mark.parametrize("shape, filters", [((9, 16, 8, 8), 24), ((9, 40, 4, 4), 32)])
def test_pointwise_gives_the_same_bits_on_one_two_and_three_threads(monkeypatch, shape, filters):
    arrays = _arrays(shape, filters, True, dtype=np.float32, seed=5)
    monkeypatch.setattr(NN, "PIECE_ELEMENTS", 2048)
    results = []
    for count in (1, 2, 3):
        monkeypatch.setattr(host_threads, "blas_threads", lambda: count)
        out, grads = _conv(arrays, True)
        results.append([out] + grads)
    for other in results[1:]:
        for got, expect in zip(other, results[0]):
            np.testing.assert_array_equal(got.view(np.uint32), expect.view(np.uint32))


@pytest.mark.parametrize("n, channels, filters, side, one_gemm", [
    (3, 5, 4, 6, False), (4, 40, 32, 4, True), (2, 64, 64, 5, True), (2, 64, 64, 6, False),
    (1, 7, 3, 1, True)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pointwise_weight_grad_sums_every_image(monkeypatch, n, channels, filters, side,
                                                one_gemm, dtype):
    """Both ways of the weight gradient give the sum of the images' products (to rounding), and
    the way is the one the rule picks: one GEMM, of copies of the two operands, where filters x
    channels >= plane x (filters + channels)."""
    rng = np.random.default_rng(n * 100 + side)
    plane = side * side
    gm = rng.standard_normal((n, filters, plane)).astype(dtype)
    x = rng.standard_normal((n, channels, side, side)).astype(dtype)
    out = np.full((filters, channels + 1), np.nan, dtype)
    copies = []
    real = np.ascontiguousarray
    monkeypatch.setattr(NN.numpy, "ascontiguousarray",
                        lambda *a, **k: copies.append(1) or real(*a, **k))
    NN._pointwise_weight_grad(gm, x, out[:, :channels])
    monkeypatch.undo()
    assert len(copies) == (2 if one_gemm else 0)
    expect = np.einsum("nfp,ncp->fc", gm.astype(np.float64),
                       x.reshape(n, channels, plane).astype(np.float64))
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out[:, :channels], expect, rtol=tol, atol=tol * plane * n)
    assert np.isnan(out[:, channels]).all()     # the column beside it (the bias's) untouched
