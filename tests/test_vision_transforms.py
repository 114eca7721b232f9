"""gluon.data.vision.transforms and image decoding against real MXNet 1.9.1's outputs
(tests/data/mxnet_vision/vision_golden.npz, written by make_vision_golden.py there)."""
import os
import random

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import nd
from trainer_cli.gluon.data.vision import transforms as T
from trainer_cli.gluon.data.vision import _color
from trainer_cli.gluon.data.vision.image_file import ImageFileError, imread

HERE = os.path.join(os.path.dirname(__file__), "data", "mxnet_vision")
G = numpy.load(os.path.join(HERE, "vision_golden.npz"), allow_pickle=False)


def _u8(a):
    return nd.array(a, dtype="uint8")


def _same(got, key):
    want = G[key]
    got = got.asnumpy() if hasattr(got, "asnumpy") else got
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype)
    numpy.testing.assert_array_equal(got, want)     # bit for bit


def test_to_tensor_normalize_cast_are_mxnets():
    _same(T.ToTensor()(_u8(G["small"])), "to_tensor_small")
    _same(T.ToTensor()(_u8(G["batch"])), "to_tensor_batch")
    _same(T.ToTensor()(nd.array(G["fimg"])), "to_tensor_float")
    chw = nd.array(G["to_tensor_small"])
    _same(T.Normalize((0.1, 0.2, 0.3), (0.5, 0.6, 0.7))(chw), "normalize_3")
    _same(T.Normalize(0.4, 0.2)(chw), "normalize_scalar")
    _same(T.Normalize((0.1, 0.2, 0.3), (0.5, 0.6, 0.7))(nd.array(G["to_tensor_batch"])),
          "normalize_batch")
    _same(T.Cast("float16")(_u8(G["small"])), "cast_f16")
    _same(T.Cast()(_u8(G["small"])), "cast_default")


RESIZES = [("resize_16", (16,)), ("resize_10x7", ((10, 7),)), ("resize_up_45x30", ((45, 30),)),
           ("resize_half", ((16, 12),)), ("resize_keep_12", (12, True)),
           ("resize_keep_40", (40, True)), ("resize_nearest_20x9", ((20, 9), False, 0))]


@pytest.mark.parametrize("key,args", RESIZES, ids=[r[0] for r in RESIZES])
def test_resize_is_opencvs_bilinear_bit_for_bit(key, args):
    # OpenCV's fixed-point bilinear (8-bit) and float32 bilinear, as MXNet 1.9.1 runs them.
    _same(T.Resize(*args)(_u8(G["img"])), key)
    _same(T.Resize(*args)(nd.array(G["fimg"])), key + "_float")


def test_resize_batch_and_crops_are_mxnets():
    _same(T.Resize((4, 3))(_u8(G["batch"])), "resize_batch")
    _same(T.CenterCrop(16)(_u8(G["img"])), "center_crop_16")
    _same(T.CenterCrop((20, 10))(_u8(G["img"])), "center_crop_20x10")
    _same(T.CenterCrop(40)(_u8(G["img"])), "center_crop_big_40")
    _same(T.CropResize(2, 3, 20, 15, size=(10, 7), interpolation=1)(_u8(G["img"])), "crop_resize")
    # MXNet 1.9.1 fails on its own default interpolation=None; here it means bilinear.
    _same(T.CropResize(2, 3, 20, 15, size=(10, 7))(_u8(G["img"])), "crop_resize")
    _same(T.CropResize(1, 2, 5, 3)(_u8(G["batch"])), "crop_resize_batch")
    with pytest.raises(ValueError, match="does not fit"):
        T.CropResize(30, 0, 5, 5)(_u8(G["img"]))


def test_random_apply_draws_from_python_random_as_mxnet():
    img = _u8(G["img"])
    block = T.RandomApply(T.Compose([T.Cast("float16")]), p=0.3)
    random.seed(1)
    expected = [0.3 >= random.random() for _ in range(8)]
    random.seed(1)
    applied = [block(img).dtype == numpy.float16 for _ in range(8)]
    assert applied == expected and any(applied) and not all(applied)


def test_random_resized_crop_draws_mxnets_crop_from_python_random():
    crops = []
    for seed in range(5):
        random.seed(seed)
        crops.append(T.RandomResizedCrop((12, 10))(_u8(G["img"])).asnumpy())
    numpy.testing.assert_array_equal(numpy.stack(crops), G["random_resized_crop_seeds0to4"])


def test_bicubic_area_lanczos_resize_are_opencvs_as_in_mx_image():
    # nd.image.resize and mx.image.imresize both call cv::resize: the same golden pixels
    golden = numpy.load(os.path.join(HERE, "..", "mxnet_image", "image_golden.npz"))
    for interp in (2, 3, 4):
        got = T.Resize((10, 7), interpolation=interp)(_u8(golden["img"])).asnumpy()
        numpy.testing.assert_array_equal(got, golden["imresize_u8_%d_10x7" % interp])
    with pytest.raises(NotImplementedError, match="interpolation=5"):
        T.Resize((20, 9), interpolation=5)(_u8(G["img"]))


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_colour_operators_are_mxnets_bit_for_bit(dtype):
    x = G["img"] if dtype == "uint8" else G["fimg"]
    _same(_color.brightness(x, 1.3), "brightness_1.3_" + dtype)
    _same(_color.contrast(x, 0.6), "contrast_0.6_" + dtype)
    _same(_color.saturation(x, 1.4), "saturation_1.4_" + dtype)
    _same(_color.hue(x, 0.8), "hue_0.8_" + dtype)
    _same(_color.hue(x, 1.15), "hue_1.15_" + dtype)
    _same(_color.lighting(x, (0.05, -0.1, 0.2)), "lighting_" + dtype)


def test_random_transforms_draw_from_the_seeded_generator():
    img = _u8(G["img"])
    flips = set()
    for _ in range(16):
        out = T.RandomFlipLeftRight()(img).asnumpy()
        if (out == G["img"]).all():
            flips.add("kept")
        else:
            numpy.testing.assert_array_equal(out, G["img"][:, ::-1])
            flips.add("flipped")
    assert flips == {"kept", "flipped"}
    out = T.RandomFlipTopBottom()(img).asnumpy()
    assert (out == G["img"]).all() or (out == G["img"][::-1]).all()
    # A factor from the range, applied by MXNet's operator: the output is one of its outputs.
    mx.random.seed(3)
    a = T.RandomBrightness(0.5)(img).asnumpy()
    mx.random.seed(3)
    assert (T.RandomBrightness(0.5)(img).asnumpy() == a).all()
    mx.random.seed(3)
    factor = mx.random.generator(None).uniform(0.5, 1.5)
    numpy.testing.assert_array_equal(a, _color.brightness(G["img"], factor))
    assert 0.5 <= factor <= 1.5 and not (a == G["img"]).all()
    jitter = T.RandomColorJitter(0.3, 0.3, 0.3, 0.1)(img)
    assert jitter.shape == img.shape and jitter.dtype == numpy.uint8
    lit = T.RandomLighting(0.1)(nd.array(G["fimg"])).asnumpy()
    shift = lit - G["fimg"]
    assert numpy.allclose(shift, shift[:1, :1], atol=1e-3)        # one offset per channel
    for block in (T.RandomContrast(0.4), T.RandomSaturation(0.4), T.RandomHue(0.1)):
        assert block(img).shape == img.shape


def test_compose_groups_and_applies_in_order():
    pipeline = T.Compose([T.Resize(16), T.CenterCrop(12), T.ToTensor(), T.Normalize(0.5, 0.5)])
    out = pipeline(_u8(G["img"])).asnumpy()
    want = (G["resize_16"][2:14, 2:14].transpose(2, 0, 1).astype(numpy.float32) / 255 - 0.5) / 0.5
    numpy.testing.assert_allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", ["rgb", "gray", "rgba"])
def test_png_decoding_is_mxnets_in_colour_and_gray(name):
    path = os.path.join(HERE, "tiny_%s.png" % name)
    _same(imread(path, 1), "imread_%s_flag1" % name)
    _same(imread(path, 0), "imread_%s_flag0" % name)


def test_bad_image_files_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\nnot really")
    with pytest.raises(ImageFileError, match=r"bad\.png: cannot decode"):
        imread(str(bad))
    with pytest.raises(ImageFileError, match=r"missing\.png: cannot read"):
        imread(str(tmp_path / "missing.png"))
    os.mkfifo(tmp_path / "fifo.png")
    with pytest.raises(ImageFileError, match="not a regular file"):
        imread(str(tmp_path / "fifo.png"))


def test_jpeg_decoding_matches_mxnet_in_colour_and_within_one_in_gray():
    # Written by make_jpegs.py with Pillow, decoded by MXNet 1.9.1 (OpenCV's libjpeg).
    path = os.path.join(HERE, "tiny_rgb.jpg")
    _same(imread(path, 1), "imread_jpg_rgb_flag1")
    gray = imread(path, 0).astype(int)
    want = G["imread_jpg_rgb_flag0"].astype(int)
    assert gray.shape == want.shape and numpy.abs(gray - want).max() <= 1
    assert (gray != want).mean() < 0.01          # one pixel of 768 differs by one level today
    _same(imread(os.path.join(HERE, "tiny_gray.jpg"), 0), "imread_jpg_gray_flag0")
    _same(imread(os.path.join(HERE, "tiny_gray.jpg"), 1), "imread_jpg_gray_flag1")
