"""Outputs of real MXNet 1.9.1's image transforms and image decoding, for tests/test_vision_*.py.

Run in a venv with MXNet 1.9.1:  python make_vision_golden.py
Writes vision_golden.npz (arrays only; read with allow_pickle=False) and the PNG files it
decodes, all beside this script.
"""
import os
import random
import struct
import zlib

import numpy as np
import mxnet as mx
from mxnet import nd
from mxnet.gluon.data.vision import transforms as T

HERE = os.path.dirname(os.path.abspath(__file__))


def write_png(path, pixels):
    """A PNG of uint8 ``pixels`` (H, W) gray, (H, W, 3) RGB or (H, W, 4) RGBA, without Pillow."""
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    h, w = pixels.shape[:2]
    channels = 1 if pixels.ndim == 2 else pixels.shape[2]
    color_type = {1: 0, 3: 2, 4: 6}[channels]
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    data = (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    with open(path, "wb") as f:
        f.write(data)


def main():
    rng = np.random.RandomState(42)
    out = {}
    img = rng.randint(0, 256, size=(24, 32, 3)).astype(np.uint8)       # H=24, W=32
    small = rng.randint(0, 256, size=(5, 7, 3)).astype(np.uint8)
    batch = rng.randint(0, 256, size=(2, 5, 7, 3)).astype(np.uint8)
    fimg = rng.rand(24, 32, 3).astype(np.float32) * 255
    out["img"], out["small"], out["batch"], out["fimg"] = img, small, batch, fimg

    out["to_tensor_small"] = T.ToTensor()(nd.array(small, dtype="uint8")).asnumpy()
    out["to_tensor_batch"] = T.ToTensor()(nd.array(batch, dtype="uint8")).asnumpy()
    out["to_tensor_float"] = T.ToTensor()(nd.array(fimg)).asnumpy()
    chw = out["to_tensor_small"]
    out["normalize_3"] = T.Normalize((0.1, 0.2, 0.3), (0.5, 0.6, 0.7))(nd.array(chw)).asnumpy()
    out["normalize_scalar"] = T.Normalize(0.4, 0.2)(nd.array(chw)).asnumpy()
    out["normalize_batch"] = T.Normalize((0.1, 0.2, 0.3), (0.5, 0.6, 0.7))(
        nd.array(out["to_tensor_batch"])).asnumpy()
    out["cast_f16"] = T.Cast("float16")(nd.array(small, dtype="uint8")).asnumpy()
    out["cast_default"] = T.Cast()(nd.array(small, dtype="uint8")).asnumpy()

    u8 = nd.array(img, dtype="uint8")
    for name, args in [("resize_16", (16,)), ("resize_10x7", ((10, 7),)),
                       ("resize_up_45x30", ((45, 30),)), ("resize_half", ((16, 12),)),
                       ("resize_keep_12", (12, True)), ("resize_keep_40", (40, True)),
                       ("resize_nearest_20x9", ((20, 9), False, 0))]:
        out[name] = T.Resize(*args)(u8).asnumpy()
        out[name + "_float"] = T.Resize(*args)(nd.array(fimg)).asnumpy()
    out["resize_batch"] = T.Resize((4, 3))(nd.array(batch, dtype="uint8")).asnumpy()
    out["center_crop_16"] = T.CenterCrop(16)(u8).asnumpy()
    out["center_crop_20x10"] = T.CenterCrop((20, 10))(u8).asnumpy()
    out["center_crop_big_40"] = T.CenterCrop(40)(u8).asnumpy()      # scale_down, then resize
    out["crop_resize"] = T.CropResize(2, 3, 20, 15, size=(10, 7), interpolation=1)(u8).asnumpy()
    out["crop_resize_batch"] = T.CropResize(1, 2, 5, 3)(nd.array(batch, dtype="uint8")).asnumpy()

    # RandomResizedCrop: MXNet draws its crop from Python's `random` module.
    crops = []
    for seed in range(5):
        random.seed(seed)
        crops.append(T.RandomResizedCrop((12, 10))(u8).asnumpy())
    out["random_resized_crop_seeds0to4"] = np.stack(crops)

    # The colour ops with a degenerate range [a, a] are deterministic.
    for dtype in ("uint8", "float32"):
        x = nd.array(img if dtype == "uint8" else fimg, dtype=dtype)
        out["brightness_1.3_" + dtype] = nd.image.random_brightness(x, 1.3, 1.3).asnumpy()
        out["contrast_0.6_" + dtype] = nd.image.random_contrast(x, 0.6, 0.6).asnumpy()
        out["saturation_1.4_" + dtype] = nd.image.random_saturation(x, 1.4, 1.4).asnumpy()
        out["hue_0.8_" + dtype] = nd.image.random_hue(x, 0.8, 0.8).asnumpy()
        out["hue_1.15_" + dtype] = nd.image.random_hue(x, 1.15, 1.15).asnumpy()
        out["lighting_" + dtype] = nd.image.adjust_lighting(x, alpha=(0.05, -0.1, 0.2)).asnumpy()

    # Decoding: the same PNG files read by mx.image.imread in colour and in grey.
    pngs = {"rgb": rng.randint(0, 256, size=(5, 6, 3)), "gray": rng.randint(0, 256, size=(4, 3)),
            "rgba": rng.randint(0, 256, size=(3, 4, 4))}
    for name, pixels in pngs.items():
        path = os.path.join(HERE, "tiny_%s.png" % name)
        write_png(path, pixels)
        out["imread_%s_flag1" % name] = mx.image.imread(path, 1).asnumpy()
        out["imread_%s_flag0" % name] = mx.image.imread(path, 0).asnumpy()
    for name in ("rgb", "gray"):                 # written by make_jpegs.py (Pillow)
        path = os.path.join(HERE, "tiny_%s.jpg" % name)
        out["imread_jpg_%s_flag1" % name] = mx.image.imread(path, 1).asnumpy()
        out["imread_jpg_%s_flag0" % name] = mx.image.imread(path, 0).asnumpy()
    np.savez_compressed(os.path.join(HERE, "vision_golden.npz"), **out)
    print(len(out), "arrays")


if __name__ == "__main__":
    main()
