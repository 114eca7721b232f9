"""``nd.image``: values, dtypes and shapes against MXNet 1.9.1's (tests/data/mxnet_nd_image/
records.npz, recorded from the real MXNet by the same ``cases.record``), bit for bit; the
gradients against MXNet's where MXNet's are right and against finite differences; the random
operators' draws against trainer_cli's generator; and the errors for bad input.

Where MXNet is wrong the recorded bits are compared with the fix, not skipped: its flips leave
the middle column (row) of an odd-sized image unwritten and pass the gradient through unflipped,
and its int8 colour results wrap around (an undefined cast) where ours are clamped."""
import os
import sys

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.gluon.data.vision import transforms as T
from trainer_cli.ndarray import _image_arith

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_nd_image")
sys.path.insert(0, HERE)
import cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(HERE, "records.npz")))
OURS = cases.record(mx)
X = cases._inputs()
I = nd.image

ODD_FLIPS = {"flip_left_right_u8": -2, "flip_left_right_f16": -2, "flip_left_right_f64": -2,
             "flip_left_right_gray": None, "flip_top_bottom_gray": -3}
FLIP_GRADS = {"flip_left_right_grad_f32": 1, "flip_top_bottom_grad_f32": 0}
INT8 = tuple(k for k in RECORDED if "_i8" in k and k.startswith(
    ("brightness", "contrast", "saturation", "hue", "lighting")))
EXACT = sorted(set(RECORDED) - set(ODD_FLIPS) - set(FLIP_GRADS) - set(INT8))


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)
    assert len(EXACT) > 150


@pytest.mark.parametrize("name", EXACT)
def test_each_case_is_mxnets_bits(name):
    replay.same_bits(OURS[name], RECORDED[name])


@pytest.mark.parametrize("name", sorted(ODD_FLIPS))
def test_flips_are_mxnets_and_write_the_middle_of_odd_images(name):
    want = RECORDED[name]
    got = replay.same_layout(OURS[name], want)
    axis = ODD_FLIPS[name]
    if axis is None:                      # even along the flipped axis: all written by MXNet
        np.testing.assert_array_equal(got, want)
        return
    size = got.shape[axis]
    assert size % 2 == 1
    keep = [i for i in range(size) if i != size // 2]
    np.testing.assert_array_equal(np.take(got, keep, axis), np.take(want, keep, axis))
    source = X[name.rsplit("_", 1)[1]]
    np.testing.assert_array_equal(np.take(got, [size // 2], axis), np.take(source, [size // 2],
                                                                           axis))


@pytest.mark.parametrize("name", sorted(FLIP_GRADS))
def test_flip_gradient_is_the_head_gradient_flipped_back(name):
    # MXNet passes the head gradient through unflipped; ours is it flipped (the true gradient)
    got, want = OURS[name], RECORDED[name]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, np.flip(want, FLIP_GRADS[name]))


@pytest.mark.parametrize("name", sorted(INT8))
def test_int8_colour_results_are_mxnets_or_clamped_where_mxnet_wraps(name):
    got, want = OURS[name], RECORDED[name]
    assert got.dtype == want.dtype == np.int8 and got.shape == want.shape
    differ = got != want
    np.testing.assert_array_equal(got[~differ], want[~differ])
    assert np.isin(got[differ], (-128, 127)).all()


# ------------------------------------------------------------------------------- gradients
def _numeric_grad(fn, x, w, eps=1e-6):
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        hi = (fn(nd.array(x, dtype=x.dtype)).asnumpy() * w).sum()
        flat[i] = old - eps
        lo = (fn(nd.array(x, dtype=x.dtype)).asnumpy() * w).sum()
        flat[i] = old
        grad.reshape(-1)[i] = (hi - lo) / (2 * eps)
    return grad


@pytest.mark.parametrize("op", ["to_tensor", "normalize", "crop", "flip_left_right",
                                "flip_top_bottom", "crop4", "to_tensor4"])
def test_gradients_match_finite_differences(op):
    rng = np.random.RandomState(3)
    shape = (2, 4, 5, 3) if op.endswith("4") else (4, 5, 3)
    fn = {"to_tensor": I.to_tensor, "to_tensor4": I.to_tensor,
          "normalize": lambda d: I.normalize(d, (0.1, 0.2, 0.3), (0.5, 2.0, 3.0)),
          "crop": lambda d: I.crop(d, 1, 2, 3, 2), "crop4": lambda d: I.crop(d, 0, 1, 4, 3),
          "flip_left_right": I.flip_left_right, "flip_top_bottom": I.flip_top_bottom}[op]
    x = rng.uniform(0, 1, size=shape)
    if op == "normalize":
        x = x.reshape(3, 4, 5)
    data = nd.array(x, dtype="float64")
    data.attach_grad()
    with autograd.record():
        out = fn(data)
        w = rng.uniform(-1, 1, size=out.shape)
        (out * nd.array(w, dtype="float64")).sum().backward()
    assert data.grad.dtype == np.float64
    # to_tensor's output is float32: its (linear) difference quotient over a wide step
    eps, rtol = (0.5, 1e-5) if op.startswith("to_tensor") else (1e-6, 1e-6)
    np.testing.assert_allclose(data.grad.asnumpy(), _numeric_grad(fn, x, w, eps), rtol=rtol,
                               atol=1e-8)


def test_random_flip_gradient_follows_the_draw():
    x = nd.array(X["f32"])
    x.attach_grad()
    seen = set()
    for _ in range(12):
        with autograd.record():
            out = I.random_flip_left_right(x)
        out.backward(nd.array(np.arange(out.size, dtype="float32").reshape(out.shape)))
        flipped = not (out.asnumpy() == X["f32"]).all()
        g = np.arange(x.size, dtype="float32").reshape(x.shape)
        np.testing.assert_array_equal(x.grad.asnumpy(), g[:, ::-1] if flipped else g)
        seen.add(flipped)
    assert seen == {True, False}


def test_resize_has_no_gradient_but_a_same_size_resize_passes_it_through():
    x = nd.array(X["bigf"])
    x.attach_grad()
    with autograd.record():
        out = I.resize(x, (17, 13))
    out.backward(nd.ones(out.shape))
    np.testing.assert_array_equal(x.grad.asnumpy(), np.ones(x.shape, "float32"))
    with autograd.record():
        out = I.resize(x, (5, 4))
    with pytest.raises(ValueError, match="resize: no gradient flows through an image resize"):
        out.backward(nd.ones(out.shape))


# ------------------------------------------------------------------------------- random draws
@pytest.mark.parametrize("op,fn", [("random_brightness", _image_arith.brightness),
                                   ("random_contrast", _image_arith.contrast),
                                   ("random_saturation", _image_arith.saturation),
                                   ("random_hue", _image_arith.hue)])
def test_random_colour_operators_draw_their_factor_from_the_seeded_generator(op, fn):
    img = nd.array(X["u8"], dtype="uint8")
    outs = []
    for seed in (11, 12):
        mx.random.seed(seed)
        out = getattr(I, op)(img, 0.5, 1.5).asnumpy()
        mx.random.seed(seed)
        factor = mx.random.generator(None).uniform(0.5, 1.5)
        assert 0.5 <= factor <= 1.5
        np.testing.assert_array_equal(out, fn(X["u8"], factor))
        outs.append(out)
    assert not (outs[0] == outs[1]).all()


def test_random_flips_take_either_outcome_with_probability_one_half():
    img = nd.array(X["batch"], dtype="uint8")
    mx.random.seed(5)
    counts = {"lr": 0, "tb": 0}
    for _ in range(400):
        a = I.random_flip_left_right(img).asnumpy()
        b = I.random_flip_top_bottom(img).asnumpy()
        if (a == X["batch"]).all():
            pass
        else:
            np.testing.assert_array_equal(a, X["batch"][:, :, ::-1])
            counts["lr"] += 1
        if not (b == X["batch"]).all():
            np.testing.assert_array_equal(b, X["batch"][:, ::-1])
            counts["tb"] += 1
    assert 160 < counts["lr"] < 240 and 160 < counts["tb"] < 240


def test_random_color_jitter_and_lighting_are_the_gluon_transforms_draws():
    img = nd.array(X["u8"], dtype="uint8")
    mx.random.seed(9)
    ours = [I.random_color_jitter(img, 0.3, 0.3, 0.3, 0.1).asnumpy() for _ in range(3)]
    mx.random.seed(9)
    block = T.RandomColorJitter(0.3, 0.3, 0.3, 0.1)
    theirs = [block(img).asnumpy() for _ in range(3)]
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(a, b)
    assert not (ours[0] == ours[1]).all()
    mx.random.seed(4)
    lit = I.random_lighting(nd.array(X["f32"]), 0.1).asnumpy()
    mx.random.seed(4)
    weights = mx.random.generator(None).normal(0, 0.1, size=3)
    np.testing.assert_array_equal(lit, _image_arith.lighting(X["f32"], weights))
    shift = lit - X["f32"]
    assert np.allclose(shift, shift[:1, :1], atol=1e-3)      # one offset per channel
    np.testing.assert_array_equal(I.random_lighting(nd.array(X["f32"]), 0).asnumpy(), X["f32"])


def test_random_lighting_weights_are_normal_with_alpha_std():
    mx.random.seed(0)
    img = nd.zeros((1, 1, 3))
    shifts = np.stack([I.random_lighting(img, 2.0).asnumpy().ravel() for _ in range(3000)])
    weights = np.linalg.solve(_image_arith._EIG.astype(np.float64), shifts.T).T
    assert abs(weights.mean()) < 0.1 and abs(weights.std() - 2.0) < 0.1


# ------------------------------------------------------------------------------- behaviour
def test_outputs_are_new_arrays_and_one_channel_colour_ops_copy():
    gray = nd.array(X["gray"], dtype="uint8")
    for out in (I.random_hue(gray, 0.3, 0.3), I.adjust_lighting(gray, (1, 2, 3)),
                I.random_saturation(gray, 0.5, 0.5), I.random_color_jitter(gray, 0, 0, 0, 0),
                I.random_color_jitter(nd.array(X["u8"], dtype="uint8"), 0, -1, 0, 0)):
        assert out._data is not gray._data and not np.shares_memory(out._data, gray._data)
    np.testing.assert_array_equal(I.random_hue(gray, 0.3, 0.3).asnumpy(), X["gray"])
    np.testing.assert_array_equal(I.random_color_jitter(nd.array(X["u8"], dtype="uint8"), 0, 0,
                                                        0, -1).asnumpy(), X["u8"])


def test_normalize_clamps_integer_results_where_mxnets_cast_is_undefined():
    x = nd.array(np.array([[[0, 10, 200]]]), dtype="uint8")
    out = I.normalize(x, mean=20, std=0.5)
    assert out.dtype == np.uint8
    np.testing.assert_array_equal(out.asnumpy(), [[[0, 0, 255]]])     # -40, -20, 360
    out = I.normalize(nd.array(np.array([[[7]]]), dtype="int32"), mean=0.5, std=2)
    np.testing.assert_array_equal(out.asnumpy(), [[[3]]])


def test_normalize_defaults_are_zero_mean_and_unit_std():
    x = nd.array(X["chw"])
    np.testing.assert_array_equal(I.normalize(x).asnumpy(), X["chw"])


def test_gluon_transforms_share_the_operators_arithmetic():
    for k in ("u8", "f16", "f64", "batch"):
        np.testing.assert_array_equal(T.ToTensor()(nd.array(X[k], dtype=X[k].dtype)).asnumpy(),
                                      RECORDED["to_tensor_" + k])
    np.testing.assert_array_equal(
        T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))(nd.array(X["chw64"],
                                                                           dtype="float64")),
        RECORDED["normalize_chw64"])
    np.testing.assert_array_equal(T.Resize((8, 5))(nd.array(X["bigd"], dtype="float64")),
                                  RECORDED["resize_bigd_8x5"])


@pytest.mark.parametrize("call,exc,match", [
    (lambda: I.to_tensor(nd.ones((4, 5))), ValueError,
     r"to_tensor: data must have shape \(H, W, C\) or \(N, H, W, C\), got shape \(4, 5\)"),
    (lambda: I.to_tensor(np.ones((2, 2, 3))), TypeError, "to_tensor: data must be an NDArray"),
    (lambda: I.to_tensor(nd.ones((2, 2, 3), dtype="int16")), TypeError,
     "to_tensor: data's dtype must be one of"),
    (lambda: I.normalize(nd.ones((4, 2, 2))), ValueError,
     r"normalize: the image must have 1 or 3 channels \(axis -3\)"),
    (lambda: I.normalize(nd.ones((2, 2))), ValueError,
     r"normalize: data must have shape \(C, H, W\) or \(N, C, H, W\)"),
    (lambda: I.normalize(nd.ones((3, 2, 2)), mean=(1, 2)), ValueError,
     "normalize: mean must have 1 or 3 values"),
    (lambda: I.normalize(nd.ones((1, 2, 2)), std=(1, 2, 3)), ValueError,
     "normalize: std must have 1 or 1 values"),
    (lambda: I.normalize(nd.ones((3, 2, 2)), mean="a"), TypeError,
     "normalize: mean must be a number or a sequence"),
    (lambda: I.resize(nd.ones((4, 4, 3), dtype="float16"), 2), TypeError,
     "resize: data's dtype must be uint8, float32 or float64"),
    (lambda: I.resize(nd.ones((4, 4, 3), dtype="int32"), 2), TypeError, "resize: data's dtype"),
    (lambda: I.resize(nd.ones((4, 4, 3)), (0, 2)), ValueError,
     "resize: size must be greater than 0"),
    (lambda: I.resize(nd.ones((4, 4, 3)), (1, 2, 3)), ValueError,
     "resize: size must have 1 or 2 values"),
    (lambda: I.resize(nd.ones((4, 4, 3))), ValueError, "resize: size must have 1 or 2 values"),
    (lambda: I.resize(nd.ones((4, 4, 3)), 2, interp=5), ValueError,
     "resize: interp must be 0"),
    (lambda: I.resize(nd.ones((4, 4)), 2), ValueError, "resize: data must have shape"),
    (lambda: I.resize(nd.ones((0, 4, 3)), 2), ValueError, "resize: cannot resize an empty"),
    (lambda: I.crop(nd.ones((4, 6, 3)), -1, 0, 2, 2), ValueError,
     "crop: the box x=-1, y=0, width=2, height=2 must lie inside the image of width 6"),
    (lambda: I.crop(nd.ones((4, 6, 3)), 5, 0, 2, 2), ValueError, "crop: the box x=5"),
    (lambda: I.crop(nd.ones((4, 6, 3)), 0, 0, 0, 2), ValueError,
     "crop: width and height must be greater than 0"),
    (lambda: I.crop(nd.ones((4, 6, 4)), 0, 0, 2, 2), ValueError,
     r"crop: the image must have 1 or 3 channels \(axis -1\)"),
    (lambda: I.flip_left_right(nd.ones((4, 6))), ValueError, "flip_left_right: data must have"),
    (lambda: I.random_brightness(nd.ones((4, 6, 3)), -1, 2), ValueError,
     "random_brightness: min_factor must be a number >= 0, got -1"),
    (lambda: I.random_contrast(nd.ones((2, 4, 6, 3)), 1, 2), ValueError,
     r"random_contrast: data must have shape \(H, W, C\), got shape \(2, 4, 6, 3\)"),
    (lambda: I.random_hue(nd.ones((4, 6, 2)), 1, 2), ValueError,
     "random_hue: the image must have 1 or 3 channels"),
    (lambda: I.adjust_lighting(nd.ones((4, 6, 3)), (1, 2)), ValueError,
     "adjust_lighting: alpha must have 3 values, got 2"),
    (lambda: I.random_lighting(nd.ones((4, 6, 3)), -0.1), ValueError,
     "random_lighting: alpha_std must be a number >= 0"),
    (lambda: I.random_color_jitter(nd.ones((4, 6, 3, 1)), 0.1, 0.1, 0.1, 0.1), ValueError,
     "random_color_jitter: data must have shape"),
])
def test_bad_input_is_a_clear_error(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_every_public_name_is_mxnets():
    assert sorted(I.__all__) == sorted(
        ["adjust_lighting", "crop", "flip_left_right", "flip_top_bottom", "normalize",
         "random_brightness", "random_color_jitter", "random_contrast",
         "random_flip_left_right", "random_flip_top_bottom", "random_hue", "random_lighting",
         "random_saturation", "resize", "to_tensor"])
