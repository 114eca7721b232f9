"""``nd.contrib.BilinearResize2D``: values, dtypes, shapes and gradients are MXNet 1.9.1's bit
for bit in float16/32/64, every mode, with and without ``align_corners``
(tests/data/mxnet_roi/roi.npz, recorded from the real MXNet by ``roi_cases.record_resize``).
Also, independently of the recording: finite-difference gradients, exact invariants (identity,
linear ramps, 2x2 averages), the safe behaviour where MXNet writes outside its data, and the
errors."""
import os
import sys

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.ndarray import resize as resize_module

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_roi")
sys.path.insert(0, HERE)
import roi_cases  # noqa: E402

resize = nd.contrib.BilinearResize2D
RECORDED = {k: v for k, v in np.load(os.path.join(HERE, "roi.npz")).items()
            if k.startswith("BilinearResize2D/")}
OURS = roi_cases.record_resize(mx)


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_mxnets_bits(name):
    replay.same_bits(OURS[name], RECORDED[name])


def test_the_recorded_shapes_follow_the_modes():
    x = "BilinearResize2D/float32/"
    shapes = {k[len(x):]: v.shape[2:] for k, v in RECORDED.items()
              if k.startswith(x) and "/grad" not in k}
    assert shapes["align_corners=True,scale_height=1.7,scale_width=0.6"] == (8, 4)
    assert shapes["align_corners=True,height=4,scale_width=3.0,width=6"] == (4, 6)
    assert shapes["align_corners=True,mode=odd_scale,scale_height=2.5,scale_width=1.5"] == (
        11, 10)
    assert shapes["align_corners=True,mode=to_even_up"] == (6, 8)
    assert shapes["align_corners=True,mode=to_odd_down"] == (5, 7)
    assert shapes["align_corners=True,mode=to_even_down"] == (4, 6)
    assert shapes["like,align_corners=True"] == (9, 4)
    assert RECORDED["BilinearResize2D/empty"].shape == (2, 2, 0, 0)


# ----------------------------------------------------------------------------- gradients
@pytest.mark.parametrize("kw", [dict(height=11, width=13), dict(height=3, width=4),
                                dict(height=8, width=2, align_corners=False),
                                dict(height=1, width=9), dict(height=17, width=23,
                                                              align_corners=False)])
def test_gradient_is_the_finite_difference(kw):
    """The resize is linear in the data: a float64 central difference is exact to rounding."""
    rng = np.random.RandomState(0)
    x = rng.randn(2, 3, 5, 7)
    xa = nd.array(x, dtype="float64")
    xa.attach_grad()
    with autograd.record():
        y = resize(xa, **kw)
    wt = rng.randn(*y.shape)
    y.backward(nd.array(wt, dtype="float64"))
    v = rng.randn(*x.shape)
    eps = 1e-3
    f = [(resize(nd.array(x + s * eps * v, dtype="float64"), **kw).asnumpy() * wt).sum()
         for s in (1, -1)]
    np.testing.assert_allclose((xa.grad.asnumpy() * v).sum(), (f[0] - f[1]) / (2 * eps),
                               rtol=1e-8)


# ----------------------------------------------------------------------------- invariants
def test_same_size_is_the_identity_and_its_gradient_passes_through():
    x = nd.array(np.random.RandomState(1).randn(2, 3, 4, 5))
    x.attach_grad()
    with autograd.record():
        y = resize(x, height=4, width=5, align_corners=False)
    y.backward(nd.full(y.shape, 2.5))
    np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
    np.testing.assert_array_equal(x.grad.asnumpy(), np.full(x.shape, 2.5, np.float32))


def test_align_corners_samples_a_linear_ramp_on_the_corner_grid():
    h, w, oh, ow = 6, 9, 11, 4
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    x = (3.0 * yy - 2.0 * xx + 0.5)[None, None]
    got = resize(nd.array(x, dtype="float64"), height=oh, width=ow).asnumpy()[0, 0]
    sy = np.arange(oh) * np.float32(np.float32(h - 1) / np.float32(oh - 1))
    sx = np.arange(ow) * np.float32(np.float32(w - 1) / np.float32(ow - 1))
    want = 3.0 * sy[:, None] - 2.0 * sx[None, :] + 0.5
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
    assert got[0, 0] == x[0, 0, 0, 0] and got[-1, -1] == x[0, 0, -1, -1]


def test_halving_without_align_corners_averages_2x2_blocks():
    x = np.random.RandomState(2).randn(2, 3, 8, 6)
    got = resize(nd.array(x, dtype="float64"), height=4, width=3,
                 align_corners=False).asnumpy()
    want = x.reshape(2, 3, 4, 2, 3, 2).mean(axis=(3, 5))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- MXNet's unsafe cases
def test_like_may_have_another_batch_and_dtype_and_gets_a_zero_gradient():
    """MXNet zeroes ``like``'s gradient over the data's batch (writing past a smaller ``like``:
    heap corruption) in the data's dtype (an error for another dtype): here ``like``'s own shape
    and dtype."""
    x = nd.array(np.random.RandomState(3).randn(2, 3, 4, 5))
    like = nd.ones((1, 1, 7, 2), dtype="float64")
    x.attach_grad()
    like.attach_grad()
    with autograd.record():
        y = resize(x, like, mode="like")
    y.backward()
    assert y.shape == (2, 3, 7, 2)
    assert like.grad.shape == (1, 1, 7, 2) and like.grad.dtype == np.float64
    assert not like.grad.asnumpy().any()
    assert abs(x.grad.asnumpy().sum() - 2 * 3 * 7 * 2) < 1e-3


def test_sizes_past_int16_are_not_wrapped():
    """MXNet stores the new size in an int16 (40000 wraps to a negative size)."""
    assert resize(nd.ones((1, 1, 1, 2)), height=1, width=40000).shape == (1, 1, 1, 40000)


def test_an_empty_output_has_a_zero_gradient():
    x = nd.ones((1, 2, 3, 5))
    x.attach_grad()
    with autograd.record():
        y = resize(x, mode="to_even_down", height=1)
        z = resize(nd.ones((1, 1, 1, 5)), mode="to_even_down")
    y.backward()
    assert y.shape == (1, 2, 2, 4) and z.shape == (1, 1, 0, 4)
    with autograd.record():
        y = resize(x, scale_height=0.2, scale_width=0.1)
    y.backward()
    assert y.shape == (1, 2, 0, 0) and not x.grad.asnumpy().any()


def test_out_and_positional_order():
    x = nd.ones((1, 1, 2, 2))
    out = nd.zeros((1, 1, 3, 4))
    assert resize(x, None, 3, 4, out=out) is out            # data, like, height, width
    np.testing.assert_array_equal(out.asnumpy(), np.ones((1, 1, 3, 4), np.float32))


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(mode="bogus"), ValueError, "BilinearResize2D: mode must be one of size, odd_scale"),
    (dict(mode="like"), ValueError, "mode 'like' takes the second input like"),
    (dict(like=nd.ones((1, 1, 2, 2))), ValueError, "mode 'like' takes the second input like"),
    (dict(like=nd.ones((2, 2)), mode="like"), ValueError, "like must be 4-D"),
    (dict(scale_height=2.0), ValueError, "BilinearResize2D: scale_height needs scale_width"),
    (dict(mode="odd_scale", scale_width=2.0), ValueError,
     "mode 'odd_scale' needs scale_height and scale_width"),
    (dict(height=0), ValueError, "BilinearResize2D: height must be >= 1, got 0"),
    (dict(width=2.5), TypeError, "BilinearResize2D: width must be an integer"),
    (dict(scale_height=-1.0, scale_width=2.0), ValueError, "output size \\(-3, 10\\) is "
                                                           "negative"),
    (dict(scale_height=float("nan"), scale_width=2.0), ValueError,
     "BilinearResize2D: scale_height must be finite"),
    (dict(mode="odd_scale", scale_height=2.0, scale_width="x"), TypeError,
     "BilinearResize2D: scale_width must be a number"),
])
def test_errors_name_the_operator_and_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        resize(nd.ones((1, 1, 3, 5)), **kwargs)


def test_errors_on_the_data():
    with pytest.raises(ValueError, match="BilinearResize2D: data must be 4-D"):
        resize(nd.ones((3, 5)), height=2, width=2)
    with pytest.raises(TypeError, match="BilinearResize2D: data must be float16, float32 or "
                                        "float64, got int32"):
        resize(nd.ones((1, 1, 3, 5), dtype="int32"), height=2, width=2)
    with pytest.raises(TypeError, match="BilinearResize2D: data must be an NDArray"):
        resize(np.ones((1, 1, 3, 5)), height=2, width=2)


@pytest.mark.parametrize("kw", [dict(height=11, width=3), dict(height=2, width=9,
                                                               align_corners=False),
                                dict(mode="to_odd_up"), dict(height=5, width=7)])
def test_array_module_code_makes_no_hidden_host_transfer(monkeypatch, kw):
    """The xp code on a stand-in for CuPy that refuses implicit host transfers gives NumPy's
    bits (on a real GPU the gradient's adds may go in another order)."""
    from standin_xp import scatter_add, standin_array_module, to_device
    from trainer_cli.ndarray.interop import grad_buffer, raw, wrap
    standin_array_module(monkeypatch)
    monkeypatch.setattr(resize_module, "_scatter_add", scatter_add)
    x = np.random.RandomState(4).randn(2, 3, 5, 7).astype(np.float32)
    g = np.random.RandomState(5)
    runs = []
    for device in (False, True):
        move = to_device if device else np.copy
        xa = wrap(move(x), mx.cpu())
        xa.attach_grad()
        with autograd.record():
            y = resize_module.BilinearResize2D(xa, **kw)
        y.backward(wrap(move(g.randn(*y.shape).astype(np.float32)), mx.cpu()))
        g = np.random.RandomState(5)
        got = [raw(y), raw(grad_buffer(xa))]
        runs.append([a.get() if device else a for a in got])
    for a, b in zip(*runs):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
