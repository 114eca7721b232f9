"""Depthwise 2-D convolutions (``num_group`` = channels = filters) on the CPU run tap by tap
(``ndarray/_depthwise``): the numba loops give their NumPy body's bits for output, input and
weight gradients over strides, dilations, paddings and kernel sizes, with NaN, infinities and
signed zeros in the data (a NaN's sign aside); both agree with the column-matrix path of every
other convolution, and the Gluon layer trains through them."""
import numpy as np
import pytest

from kernel_checks import count_calls, loops_off, loops_on, same_bits
from trainer_cli import autograd, gluon, initializer, nd
from trainer_cli.ndarray import _depthwise as D

pytest.importorskip("numba")

GEOMETRIES = [  # (n, c, h, w), kernel, stride, dilate, pad
    ((2, 5, 9, 11), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((3, 4, 12, 10), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((2, 3, 15, 14), (3, 3), (1, 2), (2, 1), (2, 1)),
    ((2, 6, 7, 7), (5, 5), (1, 1), (1, 1), (2, 2)),
    ((1, 3, 6, 6), (1, 1), (1, 1), (1, 1), (0, 0)),
    ((4, 8, 30, 30), (3, 3), (1, 1), (1, 1), (0, 0)),
    ((2, 3, 5, 5), (3, 3), (3, 3), (1, 1), (3, 3)),
    ((2, 3, 4, 9), (3, 5), (1, 1), (3, 2), (4, 4)),
    # planes of more than 128 outputs (several blocks of the pairwise sums), strides of rows or
    # columns alone, and a stride that does not divide the padded plane
    ((2, 3, 33, 29), (3, 3), (2, 2), (1, 1), (1, 1)),
    ((3, 2, 20, 18), (3, 3), (1, 1), (1, 1), (1, 1)),
    ((2, 2, 17, 23), (3, 3), (2, 1), (2, 2), (2, 1)),
    ((2, 2, 19, 16), (5, 3), (1, 3), (1, 1), (2, 1)),
]


def _out_sp(shape, kernel, stride, dilate, pad):
    return tuple((h + 2 * p - d * (k - 1) - 1) // s + 1
                 for h, p, d, k, s in zip(shape[2:], pad, dilate, kernel, stride))


def _same(a, b):
    """The same bits, except that a NaN may carry either sign where two NaNs met."""
    same_bits(a, b, nan_sign=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("geometry", GEOMETRIES)
@pytest.mark.parametrize("special", [False, True])
def test_the_loops_give_the_numpy_bodys_bits(dtype, geometry, special):
    shape, kernel, stride, dilate, pad = geometry
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((shape[1], 1) + kernel).astype(dtype)
    b = rng.standard_normal(shape[1]).astype(dtype)
    if special:
        x.flat[::13] = -0.0
        x.flat[5] = np.nan
        x.flat[-3] = -np.inf
        w.flat[1] = np.inf
    out_sp = _out_sp(shape, kernel, stride, dilate, pad)
    geo = (stride, dilate, pad, out_sp)
    with np.errstate(all="ignore"):
        want = D.np_forward(x, w, b, *geo)
        _same(D.forward(x, w, b, *geo), want)
        g = rng.standard_normal(want.shape).astype(dtype)
        g.flat[::7] = -0.0
        for got, ref in zip(D.backward(g, x, w, *geo, True, True),
                            D.np_backward(g, x, w, *geo, True, True)):
            _same(got, ref)


@pytest.mark.parametrize("geometry", GEOMETRIES[:4])
def test_the_column_path_computes_the_same(monkeypatch, geometry):
    """float64 through nd.Convolution: tap by tap against the column matrix that every other
    convolution takes (a different order of additions: agreement to rounding)."""
    shape, kernel, stride, dilate, pad = geometry
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal(shape)
    w0 = rng.standard_normal((shape[1], 1) + kernel)
    b0 = rng.standard_normal(shape[1])
    head = rng.standard_normal((shape[0], shape[1]) + _out_sp(shape, kernel, stride, dilate, pad))

    def run():
        x, w, b = (nd.array(a, dtype="float64") for a in (x0, w0, b0))
        for a in (x, w, b):
            a.attach_grad()
        with autograd.record():
            y = nd.Convolution(x, w, b, kernel=kernel, stride=stride, dilate=dilate, pad=pad,
                               num_filter=shape[1], num_group=shape[1])
        y.backward(nd.array(head, dtype="float64"))
        return [a.asnumpy() for a in (y, x.grad, w.grad, b.grad)]

    calls = count_calls(monkeypatch, D, "np_forward")
    loops_off(monkeypatch)          # the NumPy body, counted
    taps = run()
    assert calls
    monkeypatch.setattr(D, "applies", lambda *a: False)
    columns = run()
    for got, want in zip(taps, columns):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_depthwise_block_trains_the_same_with_and_without_numba(monkeypatch):
    def train():
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Conv2D(8, 3, padding=1, groups=8, in_channels=8),
                gluon.nn.Activation("relu"),
                gluon.nn.Conv2D(8, 3, strides=2, padding=1, groups=8, in_channels=8),
                gluon.nn.GlobalAvgPool2D(), gluon.nn.Dense(3, in_units=8))
        net.initialize(initializer.Xavier())
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
        rng = np.random.default_rng(2)
        x = nd.array(rng.standard_normal((6, 8, 12, 12)).astype(np.float32))
        y = nd.array(rng.integers(0, 3, 6).astype(np.float32))
        loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
        losses = []
        for _ in range(5):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(6)
            losses.append(float(loss.mean().asscalar()))
        return losses, [p.data().asnumpy() for p in net.collect_params().values()]

    import trainer_cli.random
    loops_on(monkeypatch)
    trainer_cli.random.seed(0)
    losses, on = train()
    assert losses[-1] < losses[0]
    loops_off(monkeypatch)
    trainer_cli.random.seed(0)
    _, off = train()
    for a, b in zip(on, off):
        same_bits(a, b)
