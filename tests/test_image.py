"""``mx.image`` against real MXNet 1.9.1's outputs (tests/data/mxnet_image/image_golden.npz,
written by make_image_golden.py there). The random augmenters draw from Python's ``random`` and
NumPy's global generator as MXNet's do, so seeding both gives MXNet's pixels."""
import json
import os
import random

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import image, nd

HERE = os.path.join(os.path.dirname(__file__), "data")
G = numpy.load(os.path.join(HERE, "mxnet_image", "image_golden.npz"), allow_pickle=False)
PNG = os.path.join(HERE, "mxnet_vision", "tiny_rgb.png")


def _same(got, key, exact=True):
    want = G[key]
    got = got.asnumpy() if hasattr(got, "asnumpy") else numpy.asarray(got)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.dtype)
    if exact:
        numpy.testing.assert_array_equal(got, want)
    else:
        numpy.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-4)


def test_reachable_as_mx_image_and_mx_img():
    assert mx.image is image and mx.img is image


@pytest.mark.parametrize("key", sorted(k for k in G.files if k.startswith("imresize")))
def test_imresize_every_interpolation_is_opencvs_bit_for_bit(key):
    _, kind, interp, size = key.split("_")
    w, h = map(int, size.split("x"))
    src = nd.array(G["img"], dtype="uint8") if kind == "u8" else nd.array(G["fimg"])
    _same(image.imresize(src, w, h, interp=int(interp)), key)


def test_resize_short_crops_normalize_are_mxnets():
    u8 = nd.array(G["img"], dtype="uint8")
    _same(image.resize_short(u8, 16), "resize_short_16")
    _same(image.resize_short(u8, 40, interp=1), "resize_short_40_interp1")
    tall = nd.array(G["img"].transpose(1, 0, 2).copy(), dtype="uint8")
    _same(image.resize_short(tall, 10), "resize_short_tall")
    _same(image.resize_short(u8, 12, interp=9), "resize_short_auto")
    _same(image.fixed_crop(u8, 3, 4, 10, 8), "fixed_crop")
    _same(image.fixed_crop(u8, 3, 4, 10, 8, size=(20, 16)), "fixed_crop_resized")
    for key, size in (("center_crop", (10, 8)), ("center_crop_up", (40, 30))):
        out, box = image.center_crop(u8, size)
        _same(out, key)
        assert box == tuple(G[key + "_box"].tolist())
    src = nd.array(G["fimg"])
    out = image.color_normalize(src, nd.array([123.68, 116.28, 103.53]),
                                nd.array([58.395, 57.12, 57.375]))
    _same(out, "color_normalize")
    assert image.scale_down((640, 480), (720, 120)) == tuple(G["scale_down"].tolist())


def test_imdecode_and_imread_are_mxnets():
    with open(PNG, "rb") as f:
        data = f.read()
    _same(image.imdecode(data), "imdecode")
    _same(image.imdecode(bytearray(data), flag=0), "imdecode_gray")
    _same(image.imdecode(data, to_rgb=0), "imdecode_bgr")
    _same(image.imdecode(numpy.frombuffer(data, dtype=numpy.uint8)), "imdecode")
    _same(image.imread(PNG), "imread")
    with pytest.raises(ValueError, match="bytes"):
        image.imdecode("not bytes")
    with pytest.raises(mx.MXNetError, match="cannot decode"):
        image.imdecode(b"not an image")
    with pytest.raises(mx.MXNetError, match="no_such.png"):
        image.imread(os.path.join(HERE, "no_such.png"))


def _seeded(aug, src):
    random.seed(11)
    numpy.random.seed(11)
    return aug(src.copy())


EIGVAL = numpy.array([55.46, 4.794, 1.148])
EIGVEC = numpy.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                      [-0.5836, -0.6948, 0.4203]])
AUGS = [
    ("aug_random_crop", lambda: image.RandomCropAug((10, 8)), "u8", True),
    ("aug_random_crop_up", lambda: image.RandomCropAug((40, 30), interp=1), "u8", True),
    ("aug_random_sized_crop", lambda: image.RandomSizedCropAug((12, 10), 0.3, (0.75, 1.33)),
     "u8", True),
    ("aug_center_crop", lambda: image.CenterCropAug((12, 10)), "u8", True),
    ("aug_resize", lambda: image.ResizeAug(16), "u8", True),
    ("aug_force_resize", lambda: image.ForceResizeAug((20, 15)), "u8", True),
    ("aug_flip", lambda: image.HorizontalFlipAug(1.0), "u8", True),
    ("aug_cast", lambda: image.CastAug(), "u8", True),
    ("aug_brightness", lambda: image.BrightnessJitterAug(0.3), "f32", False),
    ("aug_contrast", lambda: image.ContrastJitterAug(0.3), "f32", False),
    ("aug_saturation", lambda: image.SaturationJitterAug(0.3), "f32", False),
    ("aug_hue", lambda: image.HueJitterAug(0.3), "f32", False),
    ("aug_color_jitter", lambda: image.ColorJitterAug(0.2, 0.3, 0.4), "f32", False),
    ("aug_lighting", lambda: image.LightingAug(0.1, EIGVAL, EIGVEC), "f32", False),
    ("aug_normalize", lambda: image.ColorNormalizeAug(nd.array([1.0, 2.0, 3.0]),
                                                      nd.array([2.0, 3.0, 4.0])), "f32", False),
    ("aug_gray", lambda: image.RandomGrayAug(1.0), "f32", False),
]


@pytest.mark.parametrize("key,make,kind,exact", AUGS, ids=[a[0] for a in AUGS])
def test_augmenters_seeded_as_mxnet_give_its_pixels(key, make, kind, exact):
    src = nd.array(G["img"], dtype="uint8") if kind == "u8" else nd.array(G["fimg"])
    _same(_seeded(make(), src), key, exact)


def test_create_augmenter_lists_and_runs_mxnets_pipeline():
    augs = image.CreateAugmenter((3, 14, 18), resize=20, rand_crop=True, rand_mirror=True,
                                 mean=True, std=True, brightness=0.1, contrast=0.1,
                                 saturation=0.1, hue=0.1, pca_noise=0.1, rand_gray=0.3)
    assert [type(a).__name__ for a in augs] == G["create_names"].tolist()
    _same(_seeded(image.SequentialAug(augs), nd.array(G["img"], dtype="uint8")),
          "create_pipeline", exact=False)
    augs2 = image.CreateAugmenter((3, 10, 12), rand_crop=True, rand_resize=True, mean=True,
                                  inter_method=1)
    assert [type(a).__name__ for a in augs2] == G["create2_names"].tolist()
    _same(_seeded(image.SequentialAug(augs2), nd.array(G["img"], dtype="uint8")),
          "create2_pipeline", exact=False)
    assert json.loads(augs[0].dumps()) == ["resizeaug", {"size": 20, "interp": 2}]
    with pytest.raises(ValueError, match="rand_resize"):
        image.CreateAugmenter((3, 10, 12), rand_resize=True)


def test_bad_inputs_say_what_is_wrong():
    with pytest.raises(ValueError, match="Unknown interp method 7"):
        image.resize_short(nd.zeros((4, 6, 3)), 2, interp=7)
    with pytest.raises(NotImplementedError, match="interpolation=5"):
        image.imresize(nd.zeros((4, 6, 3)), 2, 2, interp=5)
    with pytest.raises(ValueError, match=r"\(H, W, C\)"):
        image.center_crop(nd.zeros((4, 6)), (2, 2))
    with pytest.raises(AttributeError, match="no attribute 'ImageDetIterator'"):
        image.ImageDetIterator


def test_random_size_crop_draws_the_box_of_the_transform_of_the_same_name():
    # mx.image.random_size_crop and transforms.random_size_crop share one draw of the box: under
    # the same seed they crop the same box and pixels, and fall back to the centre alike.
    from trainer_cli.gluon.data.vision import transforms as T
    src = nd.array(G["img"], dtype="uint8")
    for area, ratio in ((0.3, (0.75, 1.33)), ((0.05, 0.2), (0.5, 2.0)), (50.0, (100.0, 200.0))):
        for seed in range(5):
            random.seed(seed)
            got, box = image.random_size_crop(src, (12, 10), area, ratio, interp=1)
            random.seed(seed)
            want, want_box = T.random_size_crop(src.asnumpy(), (12, 10), area, ratio, 1)
            assert box == want_box
            numpy.testing.assert_array_equal(got.asnumpy(), want)
    # The last case (50 times the image's area) never fits: the centre crop.
    assert box == image.center_crop(src, (12, 10), interp=1)[1]


def test_copy_make_border_is_opencvs():
    """(tests/data/mxnet_image/border_golden.npz, from MXNet 1.9.1 by border_cases.record.)"""
    import sys
    sys.path.insert(0, os.path.join(HERE, "mxnet_image"))
    import border_cases
    recorded = numpy.load(os.path.join(HERE, "mxnet_image", "border_golden.npz"))
    ours = border_cases.record(mx)
    assert sorted(ours) == sorted(recorded.files)
    for name in recorded.files:
        assert ours[name].dtype == recorded[name].dtype, name
        numpy.testing.assert_array_equal(ours[name], recorded[name], err_msg=name)
    with pytest.raises(ValueError, match="type must be"):
        image.copyMakeBorder(nd.ones((2, 2, 1)), 1, 1, 1, 1, type=5)
    with pytest.raises(ValueError, match=">= 0"):
        image.copyMakeBorder(nd.ones((2, 2, 1)), -1, 1, 1, 1)
