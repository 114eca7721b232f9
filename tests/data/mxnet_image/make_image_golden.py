"""Outputs of real MXNet 1.9.1's ``mx.image`` functions and augmenters, for tests/test_image.py.

Run in a venv with MXNet 1.9.1:  python make_image_golden.py
Writes image_golden.npz (arrays only; read with allow_pickle=False) beside this script. The
random augmenters draw from Python's ``random`` and NumPy's global generator, as MXNet's do, so
the test seeds both the same way and expects the same pixels.
"""
import os
import random

import numpy as np
import mxnet as mx
from mxnet import image, nd

HERE = os.path.dirname(os.path.abspath(__file__))
PNG = os.path.join(HERE, "..", "mxnet_vision", "tiny_rgb.png")


def main():
    rng = np.random.RandomState(7)
    out = {}
    img = rng.randint(0, 256, size=(24, 32, 3)).astype(np.uint8)
    fimg = (rng.rand(24, 32, 3) * 255).astype(np.float32)
    out["img"], out["fimg"] = img, fimg
    u8, f32 = nd.array(img, dtype="uint8"), nd.array(fimg)
    sizes = [(16, 12), (10, 7), (45, 30), (8, 6), (20, 33)]
    for interp in (0, 1, 2, 3, 4):
        for w, h in sizes:
            out["imresize_u8_%d_%dx%d" % (interp, w, h)] = image.imresize(
                u8, w, h, interp=interp).asnumpy()
            out["imresize_f32_%d_%dx%d" % (interp, w, h)] = image.imresize(
                f32, w, h, interp=interp).asnumpy()
    out["resize_short_16"] = image.resize_short(u8, 16).asnumpy()
    out["resize_short_40_interp1"] = image.resize_short(u8, 40, interp=1).asnumpy()
    out["resize_short_tall"] = image.resize_short(nd.array(img.transpose(1, 0, 2).copy(),
                                                           dtype="uint8"), 10).asnumpy()
    out["resize_short_auto"] = image.resize_short(u8, 12, interp=9).asnumpy()
    out["fixed_crop"] = image.fixed_crop(u8, 3, 4, 10, 8).asnumpy()
    out["fixed_crop_resized"] = image.fixed_crop(u8, 3, 4, 10, 8, size=(20, 16)).asnumpy()
    c, box = image.center_crop(u8, (10, 8))
    out["center_crop"], out["center_crop_box"] = c.asnumpy(), np.array(box)
    c, box = image.center_crop(u8, (40, 30))
    out["center_crop_up"], out["center_crop_up_box"] = c.asnumpy(), np.array(box)
    out["color_normalize"] = image.color_normalize(
        f32.copy(), nd.array([123.68, 116.28, 103.53]), nd.array([58.395, 57.12, 57.375])).asnumpy()
    out["scale_down"] = np.array(image.scale_down((640, 480), (720, 120)))
    with open(PNG, "rb") as f:
        data = f.read()
    out["imdecode"] = image.imdecode(data).asnumpy()
    out["imdecode_gray"] = image.imdecode(data, flag=0).asnumpy()
    out["imdecode_bgr"] = image.imdecode(data, to_rgb=0).asnumpy()
    out["imread"] = image.imread(PNG).asnumpy()

    # random ones, seeded the way the test seeds them
    def seeded(key, aug, src):
        random.seed(11)
        np.random.seed(11)
        out[key] = aug(src.copy()).asnumpy()

    seeded("aug_random_crop", image.RandomCropAug((10, 8)), u8)
    seeded("aug_random_crop_up", image.RandomCropAug((40, 30), interp=1), u8)
    seeded("aug_random_sized_crop", image.RandomSizedCropAug((12, 10), 0.3, (0.75, 1.33)), u8)
    seeded("aug_center_crop", image.CenterCropAug((12, 10)), u8)
    seeded("aug_resize", image.ResizeAug(16), u8)
    seeded("aug_force_resize", image.ForceResizeAug((20, 15)), u8)
    seeded("aug_flip", image.HorizontalFlipAug(1.0), u8)
    seeded("aug_cast", image.CastAug(), u8)
    seeded("aug_brightness", image.BrightnessJitterAug(0.3), f32)
    seeded("aug_contrast", image.ContrastJitterAug(0.3), f32)
    seeded("aug_saturation", image.SaturationJitterAug(0.3), f32)
    seeded("aug_hue", image.HueJitterAug(0.3), f32)
    seeded("aug_color_jitter", image.ColorJitterAug(0.2, 0.3, 0.4), f32)
    eigval = np.array([55.46, 4.794, 1.148])
    eigvec = np.array([[-0.5675, 0.7192, 0.4009], [-0.5808, -0.0045, -0.8140],
                       [-0.5836, -0.6948, 0.4203]])
    seeded("aug_lighting", image.LightingAug(0.1, eigval, eigvec), f32)
    seeded("aug_normalize", image.ColorNormalizeAug(nd.array([1.0, 2.0, 3.0]),
                                                    nd.array([2.0, 3.0, 4.0])), f32)
    seeded("aug_gray", image.RandomGrayAug(1.0), f32)
    augs = image.CreateAugmenter((3, 14, 18), resize=20, rand_crop=True, rand_mirror=True,
                                 mean=True, std=True, brightness=0.1, contrast=0.1,
                                 saturation=0.1, hue=0.1, pca_noise=0.1, rand_gray=0.3)
    out["create_names"] = np.array([type(a).__name__ for a in augs])

    def pipeline(src):
        for a in augs:
            src = a(src)
        return src
    seeded("create_pipeline", pipeline, u8)
    augs2 = image.CreateAugmenter((3, 10, 12), rand_crop=True, rand_resize=True, mean=True,
                                  inter_method=1)
    out["create2_names"] = np.array([type(a).__name__ for a in augs2])

    def pipeline2(src):
        for a in augs2:
            src = a(src)
        return src
    seeded("create2_pipeline", pipeline2, u8)
    np.savez_compressed(os.path.join(HERE, "image_golden.npz"), **out)


if __name__ == "__main__":
    main()
