"""``mx.io.ImageRecordIter`` / ``ImageRecordUInt8Iter`` as MXNet 1.9.1 runs them without random
augmenters, written once against MXNet's API (``record(mx, folder)``): every batch's data (as a
SHA-256 of each image's float32 or uint8 bytes, with the batch's shape and first values), labels
and pad, over
two passes, for resizing (each interpolation), centre crops of larger and smaller images,
padding, fixed crop sizes, mirroring, normalisation, gray images, uint8 output, an image list's
labels, multi-value labels, an index file and ``round_batch`` either way.

The record file is made here from NumPy alone (a minimal PNG encoder and the RecordIO framing),
so that both libraries read the same bytes:

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_recording.py image_record_cases image_record.json

writes ``image_record.json`` beside this file; tests/test_io_image_record.py runs ``record`` on
trainer_cli and compares.
"""
import hashlib
import os
import struct
import zlib

import numpy as np

SIZES = [(20, 30), (24, 18), (16, 16), (40, 26), (13, 22), (30, 12), (21, 21)]   # (h, w)
MEAN_STD = dict(mean_r=123.68, mean_g=116.28, mean_b=103.53, std_r=58.395, std_g=57.12,
                std_b=57.375)

CASES = {
    "resize_center": dict(data_shape=(3, 16, 16), batch_size=3, resize=20, **MEAN_STD),
    "no_round": dict(data_shape=(3, 16, 16), batch_size=3, resize=20, round_batch=False),
    "mirror_scale": dict(data_shape=(3, 16, 16), batch_size=4, mirror=True, scale=1 / 255.0),
    "pad_cubic": dict(data_shape=(3, 16, 16), batch_size=3, resize=18, pad=2, fill_value=7,
                      inter_method=2),
    "area": dict(data_shape=(3, 10, 10), batch_size=3, resize=11, inter_method=3),
    "auto_nearest": dict(data_shape=(3, 20, 20), batch_size=2, resize=24, inter_method=9),
    "nearest": dict(data_shape=(3, 12, 12), batch_size=2, resize=14, inter_method=0),
    "lanczos": dict(data_shape=(3, 12, 12), batch_size=2, resize=15, inter_method=4),
    # (no image is 15x15: where one already has the data shape, MXNet's crop resizes into its
    # own input and gives garbage; docs/compat.md)
    "crop_size": dict(data_shape=(3, 15, 15), batch_size=3, max_crop_size=12, min_crop_size=12),
    "gray": dict(data_shape=(1, 14, 14), batch_size=3, resize=16, mean_r=100.0, std_r=30.0),
    "uint8": dict(data_shape=(3, 16, 16), batch_size=3, resize=17, uint8=True),
    "imglist": dict(data_shape=(3, 16, 16), batch_size=3, label_width=2, imglist=True),
    "multi_label": dict(data_shape=(3, 16, 16), batch_size=3, label_width=3, multi=True),
    "indexed": dict(data_shape=(3, 16, 16), batch_size=4, resize=16, indexed=True),
}


def _png(pixels):
    """A PNG file of ``pixels`` (H, W, 3) uint8, filter 0 on every row."""
    h, w = pixels.shape[:2]
    raw = b"".join(b"\0" + pixels[r].tobytes() for r in range(h))

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xffffffff))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def _framed(record):
    padded = record + b"\0" * (-len(record) % 4)
    return struct.pack("<II", 0xced7230a, len(record)) + padded


def write_files(folder):
    """``(rec, idx, multi-label rec, image list)`` paths of the cases' files in ``folder``."""
    rng = np.random.RandomState(12)
    rec, idx, multi, lst = (os.path.join(folder, n) for n in
                            ("images.rec", "images.idx", "multi.rec", "images.lst"))
    offsets, plain, labelled, lines = [], b"", b"", []
    for i, (h, w) in enumerate(SIZES):
        pixels = rng.randint(0, 256, size=(h, w, 3)).astype(np.uint8)
        pixels[:, : w // 3, 0] = 250        # some structure for the resizes to meet
        image = _png(pixels)
        offsets.append(len(plain))
        plain += _framed(struct.pack("<IfQQ", 0, float(i % 4), i, 0) + image)
        labels = np.array([i, 10 + i, 0.5 * i], np.float32)
        labelled += _framed(struct.pack("<IfQQ", 3, 0.0, i, 0) + labels.tobytes() + image)
        lines.append("%d\t%s\t%s\timage%d.png" % (i, float(2 * i), float(-i), i))
    for path, data in ((rec, plain), (multi, labelled)):
        with open(path, "wb") as f:
            f.write(data)
    with open(idx, "w") as f:
        f.write("".join("%d\t%d\n" % (i, o) for i, o in enumerate(offsets)))
    with open(lst, "w") as f:
        f.write("\n".join(lines) + "\n")
    return rec, idx, multi, lst


def _iterator(mx, files, case):
    rec, idx, multi, lst = files
    kw = dict(case)
    cls = mx.io.ImageRecordUInt8Iter if kw.pop("uint8", False) else mx.io.ImageRecordIter
    kw["path_imgrec"] = multi if kw.pop("multi", False) else rec
    if kw.pop("imglist", False):
        kw["path_imglist"] = lst
    if kw.pop("indexed", False):
        kw["path_imgidx"] = idx
    return cls(preprocess_threads=1, **kw)


def record(mx, folder):
    files = write_files(folder)
    out = {}
    for name, case in sorted(CASES.items()):
        it = _iterator(mx, files, case)
        passes = []
        for _ in range(2):
            batches = []
            for b in it:
                data = b.data[0].asnumpy()
                batches.append({"shape": list(data.shape), "dtype": str(data.dtype),
                                "sha256": [hashlib.sha256(image.tobytes()).hexdigest()
                                           for image in data],
                                "first": data.reshape(-1)[:6].tolist(),
                                "label": b.label[0].asnumpy().tolist(), "pad": b.pad})
            passes.append(batches)
            it.reset()
        out[name] = {"passes": passes,
                     "provide": [[d.name, list(d.shape)] for d in it.provide_data
                                 + it.provide_label]}
    return out
