"""``nd.BilinearSampler``, ``nd.GridGenerator``, ``nd.SpatialTransformer``,
``image.imrotate``/``random_rotate`` and the ``Rotate``/``RandomRotation`` transforms: MXNet
1.9.1's values bit for bit (tests/data/mxnet_rotate, recorded from the real MXNet by the same
``rotation_cases.record``; the affine parameters' gradients, matrix products, to float
rounding), gradients against finite differences, and the refusals."""
import os
import sys

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.base import ShapeError
from trainer_cli.gluon.data.vision import transforms

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data", "mxnet_rotate"))
import rotation_cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(HERE, "data", "mxnet_rotate", "records.npz")))
OURS = rotation_cases.record(mx)


def _bits(a):
    return a.view(np.uint64 if a.dtype == np.float64 else np.uint32)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_mxnets_bits(name):
    assert OURS[name].dtype == RECORDED[name].dtype and OURS[name].shape == RECORDED[name].shape
    if name.endswith("/grad_loc"):      # a product summed in another BLAS's order
        rtol = 1e-5 if OURS[name].dtype == np.float32 else 1e-12
        np.testing.assert_allclose(OURS[name], RECORDED[name], rtol=rtol, atol=rtol)
        return
    np.testing.assert_array_equal(_bits(OURS[name]), _bits(RECORDED[name]))


def test_sampler_gradients_match_finite_differences():
    rng = np.random.RandomState(3)
    data = rng.randn(1, 2, 4, 5)
    # Away from integer source positions, where the sampler is not differentiable.
    grid = rng.uniform(-0.9, 0.9, size=(1, 2, 3, 3))
    head = rng.randn(1, 2, 3, 3)

    def loss(d, g):
        return float((nd.BilinearSampler(nd.array(d, dtype="float64"),
                                          nd.array(g, dtype="float64")).asnumpy() * head).sum())
    x, g = nd.array(data, dtype="float64"), nd.array(grid, dtype="float64")
    x.attach_grad()
    g.attach_grad()
    with autograd.record():
        y = nd.BilinearSampler(x, g)
    y.backward(nd.array(head, dtype="float64"))
    for array, analytic, other_first in ((data, x.grad.asnumpy(), True),
                                         (grid, g.grad.asnumpy(), False)):
        numeric = np.zeros_like(array)
        for i in np.ndindex(array.shape):
            up, down = array.copy(), array.copy()
            up[i] += 1e-6
            down[i] -= 1e-6
            if other_first:
                numeric[i] = (loss(up, grid) - loss(down, grid)) / 2e-6
            else:
                numeric[i] = (loss(data, up) - loss(data, down)) / 2e-6
        np.testing.assert_allclose(analytic, numeric, rtol=1e-6, atol=1e-8)


def test_affine_grid_gradients_match_finite_differences():
    rng = np.random.RandomState(5)
    theta = rng.uniform(-0.8, 0.8, size=(2, 6))
    data = rng.randn(2, 2, 5, 6)
    head = rng.randn(2, 2, 4, 3)

    def loss(t):
        y = nd.SpatialTransformer(nd.array(data, dtype="float64"), nd.array(t, dtype="float64"),
                                  target_shape=(4, 3))
        return float((y.asnumpy() * head).sum())
    t = nd.array(theta, dtype="float64")
    t.attach_grad()
    with autograd.record():
        y = nd.SpatialTransformer(nd.array(data, dtype="float64"), t, target_shape=(4, 3))
    y.backward(nd.array(head, dtype="float64"))
    numeric = np.zeros_like(theta)
    for i in np.ndindex(theta.shape):
        up, down = theta.copy(), theta.copy()
        up[i] += 1e-6
        down[i] -= 1e-6
        numeric[i] = (loss(up) - loss(down)) / 2e-6
    np.testing.assert_allclose(t.grad.asnumpy(), numeric, rtol=1e-6, atol=1e-8)


def test_identity_affine_grid_is_the_output_positions():
    grid = nd.GridGenerator(nd.array([[1, 0, 0, 0, 1, 0]]), transform_type="affine",
                            target_shape=(3, 5)).asnumpy()
    np.testing.assert_allclose(grid[0, 0], np.tile(np.linspace(-1, 1, 5), (3, 1)), atol=1e-7)
    np.testing.assert_allclose(grid[0, 1], np.tile(np.linspace(-1, 1, 3)[:, None], (1, 5)),
                               atol=1e-7)
    flow = nd.GridGenerator(nd.zeros((1, 2, 3, 5)), transform_type="warp").asnumpy()
    np.testing.assert_allclose(flow, grid, atol=1e-7)


def test_identity_grid_reads_the_image_back():
    img = np.random.RandomState(1).rand(1, 3, 4, 6).astype(np.float32)
    ys, xs = np.meshgrid(np.linspace(-1, 1, 4), np.linspace(-1, 1, 6), indexing="ij")
    grid = nd.array(np.stack([xs, ys])[None].astype(np.float32))
    np.testing.assert_allclose(nd.BilinearSampler(nd.array(img), grid).asnumpy(), img,
                               rtol=1e-6, atol=1e-6)


def test_a_full_turn_and_a_quarter_turn():
    img = nd.array(np.random.RandomState(2).rand(1, 5, 5).astype(np.float32))
    np.testing.assert_allclose(mx.image.imrotate(img, 360).asnumpy(), img.asnumpy(), atol=1e-5)
    # Counter-clockwise: the right column comes to the top row.
    quarter = mx.image.imrotate(img, 90).asnumpy()
    np.testing.assert_allclose(quarter[0, 0, :], img.asnumpy()[0, :, -1], atol=1e-5)


def test_refusals():
    img = nd.ones((3, 4, 4))
    with pytest.raises(ValueError, match="cannot be both"):
        mx.image.imrotate(img, 10, zoom_in=True, zoom_out=True)
    with pytest.raises(TypeError, match="float32"):
        mx.image.imrotate(img.astype("float64"), 10)
    with pytest.raises(TypeError, match="scalar"):
        mx.image.imrotate(img, nd.array([10]))
    with pytest.raises(ValueError, match="number of images"):
        mx.image.imrotate(nd.ones((2, 3, 4, 4)), nd.array([1, 2, 3]))
    with pytest.raises(TypeError, match="ToTensor"):
        transforms.Rotate(10)(nd.ones((4, 4, 3), dtype="uint8"))
    with pytest.raises(ValueError, match="ordered"):
        transforms.RandomRotation((10, -10))
    with pytest.raises(ValueError, match="between 0 and 1"):
        transforms.RandomRotation((-10, 10), rotate_with_proba=2)
    with pytest.raises(ShapeError, match="grid"):
        nd.BilinearSampler(nd.ones((1, 1, 2, 2)), nd.ones((1, 3, 2, 2)))
    with pytest.raises(TypeError, match="dtype"):
        nd.BilinearSampler(nd.ones((1, 1, 2, 2)), nd.ones((1, 2, 2, 2), dtype="float64"))
    with pytest.raises(ValueError, match="target_shape"):
        nd.GridGenerator(nd.ones((1, 6)), transform_type="affine")
    with pytest.raises(ShapeError, match=r"\(N, 6\)"):
        nd.GridGenerator(nd.ones((1, 4)), transform_type="affine", target_shape=(2, 2))
    with pytest.raises(ShapeError, match="flow"):
        nd.GridGenerator(nd.ones((1, 3, 2, 2)), transform_type="warp")
    with pytest.raises(ValueError, match="transform_type"):
        nd.GridGenerator(nd.ones((1, 6)), transform_type="perspective", target_shape=(2, 2))
    with pytest.raises(ValueError, match="sampler_type"):
        nd.SpatialTransformer(nd.ones((1, 1, 2, 2)), nd.ones((1, 6)), target_shape=(2, 2),
                              sampler_type="nearest")


def test_random_rotation_can_leave_the_image_alone():
    img = nd.ones((3, 4, 4))
    assert transforms.RandomRotation((-10, 10), rotate_with_proba=0.0)(img) is img


@pytest.mark.gpu
@pytest.mark.skipif(not mx.num_gpus(), reason="no GPU visible to CuPy")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_sampler_on_the_gpu_gives_the_cpu_bits(dtype):
    rng = np.random.RandomState(4)
    data = rng.randn(2, 3, 5, 6).astype(dtype)
    grid = (rng.rand(2, 2, 4, 7) * 2.6 - 1.3).astype(dtype)
    head = rng.randn(2, 3, 4, 7).astype(dtype)
    results = []
    for ctx in (mx.cpu(), mx.gpu(0)):
        x, g = nd.array(data, ctx=ctx, dtype=dtype), nd.array(grid, ctx=ctx, dtype=dtype)
        x.attach_grad()
        g.attach_grad()
        with autograd.record():
            y = nd.BilinearSampler(x, g)
        y.backward(nd.array(head, ctx=ctx, dtype=dtype))
        results.append([y.asnumpy(), x.grad.asnumpy(), g.grad.asnumpy()])
    for a, b in zip(*results):
        np.testing.assert_array_equal(_bits(a), _bits(b))
    img = nd.array(data[0].astype(np.float32), ctx=mx.gpu(0))
    np.testing.assert_array_equal(
        _bits(mx.image.imrotate(img, 30, zoom_in=True).asnumpy()),
        _bits(mx.image.imrotate(img.as_in_context(mx.cpu()), 30, zoom_in=True).asnumpy()))


@pytest.mark.gpu
@pytest.mark.skipif(not mx.num_gpus(), reason="no GPU visible to CuPy")
def test_the_spatial_transformer_on_the_gpu_agrees_with_the_cpu():
    """(Its affine grid is a matrix product: cuBLAS and the CPU's BLAS may round apart.)"""
    rng = np.random.RandomState(6)
    data = rng.randn(2, 3, 6, 8).astype(np.float32)
    theta = rng.uniform(-0.9, 0.9, size=(2, 6)).astype(np.float32)
    head = rng.randn(2, 3, 5, 7).astype(np.float32)
    results = []
    for ctx in (mx.cpu(), mx.gpu(0)):
        x, t = nd.array(data, ctx=ctx), nd.array(theta, ctx=ctx)
        x.attach_grad()
        t.attach_grad()
        with autograd.record():
            y = nd.SpatialTransformer(x, t, target_shape=(5, 7))
        y.backward(nd.array(head, ctx=ctx))
        results.append([y.asnumpy(), x.grad.asnumpy(), t.grad.asnumpy()])
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
