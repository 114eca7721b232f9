"""Rotation and bilinear sampling as MXNet 1.9.1 computes them, written once against MXNet's
API (``record(mx)``): ``nd.BilinearSampler`` forward and both gradients (float32 and float64,
grids reaching past the image and onto its edges, a grid that reads each cell many times),
``nd.GridGenerator`` (affine, warp) and ``nd.SpatialTransformer`` forward and backward, and
``image.imrotate``/``random_rotate`` and the ``Rotate``/``RandomRotation`` transforms. The
gradients of affine parameters (``*/grad_loc``) are matrix products summed in the BLAS's order.

    /tmp/mxvenv/bin/python tests/data/mxnet_rotate/make_records.py

records ``records.npz``; tests/test_rotate.py replays ``record`` with trainer_cli."""
import numpy as np


def _sampler(mx, out, name, data, grid, head):
    x, g = mx.nd.array(data, dtype=data.dtype), mx.nd.array(grid, dtype=grid.dtype)
    x.attach_grad()
    g.attach_grad()
    with mx.autograd.record():
        y = mx.nd.BilinearSampler(x, g)
    y.backward(mx.nd.array(head, dtype=head.dtype))
    out[name + "/out"] = y.asnumpy()
    out[name + "/grad_data"] = x.grad.asnumpy()
    out[name + "/grad_grid"] = g.grad.asnumpy()


def _recorded(mx, out, name, fn, inputs, rng):
    arrays = [mx.nd.array(a, dtype=a.dtype) for a in inputs]
    for a in arrays:
        a.attach_grad()
    with mx.autograd.record():
        y = fn(*arrays)
    y.backward(mx.nd.array(rng.randn(*y.shape).astype(y.dtype), dtype=y.dtype))
    out[name + "/out"] = y.asnumpy()
    for label, a in zip(("grad_data", "grad_loc") if len(arrays) == 2 else ("grad_loc",), arrays):
        out[name + "/" + label] = a.grad.asnumpy()


def record(mx):
    nd, transforms = mx.nd, mx.gluon.data.vision.transforms
    out = {}
    rng = np.random.RandomState(0)
    for dtype in (np.float32, np.float64):
        data = rng.randn(2, 3, 5, 6).astype(dtype)
        grid = (rng.rand(2, 2, 4, 7) * 2.6 - 1.3).astype(dtype)
        grid[0, :, 0, 0] = [-1, -1]
        grid[0, :, 0, 1] = [1, 1]
        grid[1, :, 1, 1] = [0.2, -1]
        _sampler(mx, out, "sampler_%s" % np.dtype(dtype).name, data, grid,
                 rng.randn(2, 3, 4, 7).astype(dtype))
    # An 8x upsampling grid: each input cell is read by dozens of output positions.
    ys, xs = np.meshgrid(np.linspace(-1, 1, 24), np.linspace(-1, 1, 32), indexing="ij")
    grid = np.stack([xs, ys])[None].astype(np.float32)
    _sampler(mx, out, "sampler_upsample", rng.randn(1, 2, 3, 4).astype(np.float32), grid,
             rng.randn(1, 2, 24, 32).astype(np.float32))
    theta = (np.array([[0.9, 0.2, 0.1, -0.3, 1.1, -0.2], [1.2, -0.4, 0.05, 0.3, 0.8, 0.3]])
             + rng.randn(2, 6) * 0.1).astype(np.float32)
    _recorded(mx, out, "grid_affine", lambda t: nd.GridGenerator(
        t, transform_type="affine", target_shape=(5, 7)), [theta], rng)
    flow = rng.randn(2, 2, 4, 6).astype(np.float32)
    out["grid_warp/out"] = nd.GridGenerator(nd.array(flow), transform_type="warp").asnumpy()
    x = nd.array(flow)
    x.attach_grad()
    with mx.autograd.record():
        y = nd.GridGenerator(x, transform_type="warp")
    y.backward(nd.array(rng.randn(2, 2, 4, 6).astype(np.float32)))
    out["grid_warp/grad_flow"] = x.grad.asnumpy()
    data = rng.randn(2, 3, 6, 8).astype(np.float32)
    _recorded(mx, out, "spatial_transformer", lambda d, t: nd.SpatialTransformer(
        d, t, target_shape=(5, 7), transform_type="affine", sampler_type="bilinear"),
        [data, theta], rng)
    img = nd.array(rng.rand(3, 7, 9).astype(np.float32))
    batch = nd.array(rng.rand(2, 3, 6, 6).astype(np.float32))
    out["imrotate_30"] = mx.image.imrotate(img, 30).asnumpy()
    out["imrotate_-75_zoom_in"] = mx.image.imrotate(img, -75, zoom_in=True).asnumpy()
    out["imrotate_120.5_zoom_out"] = mx.image.imrotate(img, 120.5, zoom_out=True).asnumpy()
    out["imrotate_batch"] = mx.image.imrotate(batch, nd.array([10, 200])).asnumpy()
    out["imrotate_batch_45_zoom_out"] = mx.image.imrotate(batch, 45, zoom_out=True).asnumpy()
    np.random.seed(7)
    out["random_rotate_batch"] = mx.image.random_rotate(batch, (-30, 30)).asnumpy()
    out["random_rotate_zoom_in"] = mx.image.random_rotate(img, (-30, 30), zoom_in=True).asnumpy()
    out["Rotate_33"] = transforms.Rotate(33)(img).asnumpy()
    np.random.seed(8)
    rotation = transforms.RandomRotation((-90, 90), rotate_with_proba=0.5)
    out["RandomRotation_x4"] = np.stack([rotation(img).asnumpy() for _ in range(4)])
    return out
