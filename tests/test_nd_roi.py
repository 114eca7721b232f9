"""``nd.ROIPooling``, ``nd.contrib.ROIAlign`` and ``nd.contrib.PSROIPooling``: values, dtypes,
shapes and gradients (data and ROIs) are MXNet 1.9.1's bit for bit, float16/32/64
(tests/data/mxnet_roi/roi.npz, recorded from the real MXNet by the same
``roi_cases.record_roi``). Also, independently of the recording: a plain loop of MXNet's rules,
finite-difference gradients, an exact linear-ramp invariant, the safe behaviour where MXNet reads
outside its data, grouping that leaves the bits alone, and the errors."""
import os
import sys

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.ndarray import roi as roi_module

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_roi")
sys.path.insert(0, HERE)
import roi_cases  # noqa: E402

ROIPooling = nd.ROIPooling
ROIAlign, PSROIPooling = nd.contrib.ROIAlign, nd.contrib.PSROIPooling

PREFIXES = ("ROIPooling/", "ROIAlign/", "PSROIPooling/")
RECORDED = {k: v for k, v in np.load(os.path.join(HERE, "roi.npz")).items()
            if k.startswith(PREFIXES)}
with np.errstate(over="ignore", invalid="ignore"):      # -FLT_MAX bins times the weights
    OURS = roi_cases.record_roi(mx, ROIPooling)


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_mxnets_bits(name):
    replay.same_bits(OURS[name], RECORDED[name])


def test_the_recording_exercises_the_edges():
    basic = RECORDED["ROIPooling/basic_float32"]
    assert not basic[[5, 10, 11, 12]].any()               # ROI past the image, bad batch
    assert (basic[4] == basic[4, :, :1, :1]).all()        # inverted: one pixel (1 x 1)
    assert (RECORDED["ROIPooling/special_float32"] == np.float32(-3.4028235e38)).any()
    assert np.isinf(RECORDED["ROIPooling/special_float16"]).any()
    assert np.isnan(RECORDED["ROIAlign/nan_corner"]).any()
    assert RECORDED["ROIAlign/position_sensitive"].shape == (10, 2, 2, 2)
    assert not RECORDED["ROIPooling/basic_float32/grad1"].any()      # rois: zero gradient


# ----------------------------------------------------------------------------- a plain loop
def _c_round(v):
    return float(np.sign(v) * np.floor(abs(v) + 0.5))


def _loop_roi_pooling(x, rois, ph, pw, scale):
    """MXNet's ROIPooling loop, written out (float64 data, so no dtype subtleties)."""
    n, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph, pw))
    for i, (b, x1, y1, x2, y2) in enumerate(rois):
        b = int(b)
        sw, sh, ew, eh = (int(_c_round(v * np.float32(scale))) for v in (x1, y1, x2, y2))
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        for p in range(ph):
            for q in range(pw):
                hs = min(max(int(np.floor(p * rh / ph)) + sh, 0), h)
                he = min(max(int(np.ceil((p + 1) * rh / ph)) + sh, 0), h)
                ws = min(max(int(np.floor(q * rw / pw)) + sw, 0), w)
                we = min(max(int(np.ceil((q + 1) * rw / pw)) + sw, 0), w)
                if he <= hs or we <= ws or not 0 <= b < n:
                    continue
                out[i, :, p, q] = x[b, :, hs:he, ws:we].max(axis=(1, 2))
    return out


def _random_rois(rng, count, n, h, w, spread=1.5):
    corners = rng.uniform(-0.3, spread, (count, 4)) * [w, h, w, h]
    return np.column_stack([rng.randint(0, n, count), corners])


def test_roi_pooling_is_the_plain_loop_on_random_rois():
    rng = np.random.RandomState(7)
    x = rng.randn(3, 4, 12, 10)
    rois = _random_rois(rng, 40, 3, 12, 10)
    for ph, pw, scale in ((3, 3, 1.0), (2, 5, 0.6), (7, 7, 0.25)):
        got = ROIPooling(nd.array(x, dtype="float64"), nd.array(rois, dtype="float64"),
                         pooled_size=(ph, pw), spatial_scale=scale).asnumpy()
        np.testing.assert_array_equal(got, _loop_roi_pooling(x, rois, ph, pw, scale))


# ----------------------------------------------------------------------------- gradients
def _finite_difference(fn, x, rois, seed):
    """The gradient of sum(w * fn(x)) against a central difference along a random direction
    (all three operators are piecewise linear in the data, so float64 differences are exact
    up to rounding)."""
    rng = np.random.RandomState(seed)
    xa, ra = nd.array(x, dtype="float64"), nd.array(rois, dtype="float64")
    xa.attach_grad()
    with autograd.record():
        y = fn(xa, ra)
    wt = rng.randn(*y.shape)
    y.backward(nd.array(wt, dtype="float64"))
    v = rng.randn(*x.shape)
    eps = 1e-4
    plus = (fn(nd.array(x + eps * v, dtype="float64"), ra).asnumpy() * wt).sum()
    minus = (fn(nd.array(x - eps * v, dtype="float64"), ra).asnumpy() * wt).sum()
    numeric = (plus - minus) / (2 * eps)
    analytic = (xa.grad.asnumpy() * v).sum()
    assert abs(analytic) > 1e-3
    np.testing.assert_allclose(analytic, numeric, rtol=1e-7)


@pytest.mark.parametrize("kw", [dict(pooled_size=(3, 2), spatial_scale=0.8),
                                dict(pooled_size=(2, 2), spatial_scale=1.0, sample_ratio=3),
                                dict(pooled_size=(2, 3), spatial_scale=0.5, aligned=True),
                                dict(pooled_size=(2, 2), spatial_scale=0.7,
                                     position_sensitive=True)])
def test_roi_align_gradient_is_the_finite_difference(kw):
    rng = np.random.RandomState(3)
    x = rng.randn(2, 8, 9, 11)
    rois = _random_rois(rng, 12, 2, 9, 11, spread=1.2)
    rois[:, 3:] = np.maximum(rois[:, 3:], rois[:, 1:3] + 1)       # aligned: non-empty
    _finite_difference(lambda d, r: ROIAlign(d, r, **kw), x, rois, 4)


def test_pooling_gradients_are_the_finite_difference():
    rng = np.random.RandomState(5)
    x = rng.randn(2, 8, 9, 11)                  # distinct values: the maxima are stable
    rois = _random_rois(rng, 12, 2, 9, 11)
    _finite_difference(lambda d, r: ROIPooling(d, r, pooled_size=(3, 2), spatial_scale=0.9),
                       x, rois, 6)
    _finite_difference(lambda d, r: PSROIPooling(d, r, spatial_scale=0.7, output_dim=2,
                                                 pooled_size=2), x, rois, 8)


def test_roi_align_averages_a_linear_ramp_exactly():
    """Bilinear samples of a linear function are exact, and the samples of a bin are symmetric
    about its centre: each output is the ramp at its bin's centre."""
    h, w = 20, 24
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    x = (2.0 * yy + 3.0 * xx + 1.0)[None, None]
    rois = np.array([[0, 2, 3, 14, 11], [0, 4.25, 5.5, 9.75, 16.0], [0, 1, 1, 2, 2]])
    for aligned in (False, True):
        for ratio in (-1, 2, 3):
            got = ROIAlign(nd.array(x, dtype="float64"), nd.array(rois, dtype="float64"),
                           pooled_size=(3, 4), spatial_scale=1.0, sample_ratio=ratio,
                           aligned=aligned).asnumpy()[:, 0]
            off = 0.5 if aligned else 0.0
            for i, (_, x1, y1, x2, y2) in enumerate(rois):
                sx, sy = x1 - off, y1 - off
                bw = max(x2 - x1, 0 if aligned else 1) / 4
                bh = max(y2 - y1, 0 if aligned else 1) / 3
                cy = sy + (np.arange(3) + 0.5) * bh
                cx = sx + (np.arange(4) + 0.5) * bw
                want = 2.0 * cy[:, None] + 3.0 * cx[None, :] + 1.0
                np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-12)


# ----------------------------------------------------------------------------- MXNet's unsafe cases
@pytest.mark.parametrize("op", ["ROIAlign", "PSROIPooling", "ROIPooling"])
def test_a_batch_index_outside_the_batch_gives_zeros_and_no_gradient(op):
    """MXNet's ROIAlign writes one element of a negative-index ROI and leaves the rest
    unwritten, and reads outside the data past the batch (as PSROIPooling does both ways):
    here such ROIs give zeros and add nothing to the gradient."""
    fn = {"ROIAlign": lambda d, r: ROIAlign(d, r, pooled_size=(2, 2), spatial_scale=1.0),
          "PSROIPooling": lambda d, r: PSROIPooling(d, r, spatial_scale=1.0, output_dim=2,
                                                    pooled_size=2),
          "ROIPooling": lambda d, r: ROIPooling(d, r, pooled_size=(2, 2), spatial_scale=1.0)}[op]
    x = np.random.RandomState(0).randn(2, 8, 6, 6).astype(np.float32)
    good = np.array([[0, 0, 0, 4, 4], [1, 1, 1, 5, 3]], np.float32)
    bad = np.array([[-1, 0, 0, 4, 4], [2, 1, 1, 5, 3], [-3.5, 0, 0, 2, 2]], np.float32)
    grads, outs = [], []
    for rois in (good, np.concatenate([bad[:1], good, bad[1:]])):
        xa = nd.array(x)
        xa.attach_grad()
        with autograd.record():
            y = fn(xa, nd.array(rois))
        y.backward()
        outs.append(y.asnumpy())
        grads.append(xa.grad.asnumpy())
    np.testing.assert_array_equal(outs[1][1:3], outs[0])
    assert not outs[1][[0, 3, 4]].any()
    np.testing.assert_array_equal(grads[1], grads[0])


def test_roi_align_aligned_refuses_an_empty_roi():
    """MXNet aborts the process (a failed CHECK inside an OpenMP loop)."""
    x = nd.ones((1, 2, 5, 5))
    with pytest.raises(ValueError, match="ROIAlign: with aligned=True .* roi 1"):
        ROIAlign(x, nd.array([[0, 0, 0, 3, 3], [0, 2, 2, 2, 4]]), pooled_size=(2, 2),
                 spatial_scale=1.0, aligned=True)
    # ... but not one MXNet skips (negative batch index), nor without aligned (1 x 1 then).
    y = ROIAlign(x, nd.array([[-1, 2, 2, 2, 4]]), pooled_size=(2, 2), spatial_scale=1.0,
                 aligned=True)
    assert not y.asnumpy().any()
    y = ROIAlign(x, nd.array([[0, 2, 2, 2, 4]]), pooled_size=(2, 2), spatial_scale=1.0)
    np.testing.assert_array_equal(y.asnumpy(), np.ones((1, 2, 2, 2), np.float32))


def test_psroi_pooling_refuses_too_few_channels():
    with pytest.raises(ValueError, match="at least output_dim \\* group_size\\*\\*2 = 18"):
        PSROIPooling(nd.ones((1, 8, 5, 5)), nd.array([[0, 0, 0, 3, 3]]), spatial_scale=1.0,
                     output_dim=2, pooled_size=3)


def test_no_rois_give_an_empty_result():
    """MXNet refuses a 0-row rois (its shape check reads 0 as unknown); here it is empty."""
    x = nd.ones((1, 4, 5, 5))
    x.attach_grad()
    rois = nd.array(np.zeros((0, 5), np.float32))
    with autograd.record():
        ys = [ROIPooling(x, rois, pooled_size=(2, 3), spatial_scale=1.0),
              ROIAlign(x, rois, pooled_size=(2, 3), spatial_scale=1.0),
              PSROIPooling(x, rois, spatial_scale=1.0, output_dim=1, pooled_size=2)]
        total = ys[0].sum() + ys[1].sum() + ys[2].sum()
    total.backward()
    assert [y.shape for y in ys] == [(0, 4, 2, 3), (0, 4, 2, 3), (0, 1, 2, 2)]
    assert not x.grad.asnumpy().any()


# ----------------------------------------------------------------------------- implementation
def test_processing_rois_in_groups_keeps_the_bits(monkeypatch):
    x = np.random.RandomState(1).randn(2, 8, 9, 11).astype(np.float32)
    calls = [lambda d, r: ROIPooling(d, r, pooled_size=(3, 2), spatial_scale=1.0),
             lambda d, r: ROIAlign(d, r, pooled_size=(2, 2), spatial_scale=0.7),
             lambda d, r: PSROIPooling(d, r, spatial_scale=0.6, output_dim=2, pooled_size=2)]

    def run():
        results = []
        for fn in calls:
            xa = nd.array(x)
            xa.attach_grad()
            with autograd.record():
                y = fn(xa, nd.array(roi_cases.ROIS))
            y.backward(nd.array(np.random.RandomState(2).randn(*y.shape)))
            results += [y.asnumpy(), xa.grad.asnumpy()]
        return results
    whole = run()
    monkeypatch.setattr(roi_module, "_GROUP_ELEMENTS", 1)       # one ROI at a time
    for a, b in zip(run(), whole):
        np.testing.assert_array_equal(a, b)


def test_names_and_out():
    assert {"ROIAlign", "PSROIPooling"} <= set(nd.contrib.__all__)
    assert "ROIPooling" in roi_module.__all__ and "ROIPooling" not in nd.contrib.__all__
    x, rois = nd.ones((1, 2, 4, 4)), nd.array([[0, 0, 0, 3, 3]])
    out = nd.zeros((1, 2, 2, 2))
    assert nd.contrib.ROIAlign(x, rois, (2, 2), 1.0, out=out) is out
    np.testing.assert_array_equal(out.asnumpy(), np.ones((1, 2, 2, 2), np.float32))
    y = ROIPooling(x, rois, (2, 2), 1.0)                 # MXNet's positional order
    np.testing.assert_array_equal(y.asnumpy(), np.ones((1, 2, 2, 2), np.float32))
    y = nd.contrib.PSROIPooling(x, rois, 1.0, 2, 1)
    assert y.shape == (1, 2, 1, 1)


@pytest.mark.parametrize("call, error, match", [
    (lambda x, r: ROIPooling(x, r, pooled_size=(2,), spatial_scale=1.0), ValueError,
     "ROIPooling: pooled_size must be \\(height, width\\)"),
    (lambda x, r: ROIPooling(x, r, pooled_size=(2, 0), spatial_scale=1.0), ValueError,
     "ROIPooling: pooled_size must be >= 1, got 0"),
    (lambda x, r: ROIPooling(x, r, spatial_scale=1.0), ValueError,
     "ROIPooling: pooled_size .* is required"),
    (lambda x, r: ROIPooling(x, r, pooled_size=(2, 2), spatial_scale=2.0), ValueError,
     "ROIPooling: spatial_scale must be in \\[0, 1\\], got 2.0"),
    (lambda x, r: ROIAlign(x, r, pooled_size=(2, 2)), ValueError,
     "ROIAlign: spatial_scale is required"),
    (lambda x, r: ROIAlign(x, r[:, :4], pooled_size=(2, 2), spatial_scale=1.0), ValueError,
     "ROIAlign: rois must be \\(num_rois, 5\\)"),
    (lambda x, r: ROIAlign(x[0], r, pooled_size=(2, 2), spatial_scale=1.0), ValueError,
     "ROIAlign: data must be 4-D"),
    (lambda x, r: ROIAlign(x, r.astype("float64"), pooled_size=(2, 2), spatial_scale=1.0),
     TypeError, "ROIAlign: data and rois must share one dtype"),
    (lambda x, r: ROIAlign(x.astype("int32"), r.astype("int32"), pooled_size=(2, 2),
                           spatial_scale=1.0), TypeError, "float16, float32 or float64"),
    (lambda x, r: ROIAlign(x, r, pooled_size=(2, 2), spatial_scale=1.0,
                           position_sensitive=True), ValueError,
     "ROIAlign: with position_sensitive=True the channels \\(6\\) must be a multiple"),
    (lambda x, r: ROIAlign(x, r, pooled_size=(2, 2), spatial_scale=1.0, sample_ratio=1.5),
     TypeError, "ROIAlign: sample_ratio must be an integer"),
    (lambda x, r: ROIAlign(x, np.ones((1, 5)), pooled_size=(2, 2), spatial_scale=1.0),
     TypeError, "ROIAlign takes two NDArrays"),
    (lambda x, r: PSROIPooling(x, r, spatial_scale=1.0, pooled_size=2), ValueError,
     "PSROIPooling: output_dim and pooled_size are required"),
    (lambda x, r: PSROIPooling(x, r, spatial_scale=1.0, output_dim=0, pooled_size=1),
     ValueError, "PSROIPooling: output_dim must be >= 1, got 0"),
    (lambda x, r: PSROIPooling(x, r, spatial_scale=1.0, output_dim=1, pooled_size=(2, 2)),
     TypeError, "PSROIPooling: pooled_size must be an integer"),
])
def test_errors_name_the_operator_and_argument(call, error, match):
    with pytest.raises(error, match=match):
        call(nd.ones((1, 6, 5, 5)), nd.array([[0, 0, 0, 3, 3]]))


# ----------------------------------------------------------------------------- device code paths
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op", ["ROIPooling", "ROIAlign", "ROIAlign_ps_aligned", "PSROIPooling"])
def test_array_module_code_makes_no_hidden_host_transfer(monkeypatch, op, dtype):
    """The xp code on a stand-in for CuPy that refuses implicit host transfers gives NumPy's
    bits (on a real GPU the gradient's adds may go in another order)."""
    from standin_xp import run_on, scatter_add, standin_array_module
    standin_array_module(monkeypatch)
    monkeypatch.setattr(roi_module, "_scatter_add", scatter_add)
    fn = {"ROIPooling": lambda d, r: roi_module.ROIPooling(d, r, (3, 2), 1.0),
          "ROIAlign": lambda d, r: roi_module.ROIAlign(d, r, (3, 2), 0.8),
          "ROIAlign_ps_aligned": lambda d, r: roi_module.ROIAlign(
              d, r[:4], (2, 2), 0.7, 2, True, True),
          "PSROIPooling": lambda d, r: roi_module.PSROIPooling(d, r, 0.6, 2, 2)}[op]
    x = np.random.RandomState(4).randn(2, 8, 9, 11).astype(dtype)
    rois = roi_cases.ALIGNED_ROIS.astype(dtype)
    for a, b in zip(*[run_on(fn, [x, rois], device) for device in (False, True)]):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
