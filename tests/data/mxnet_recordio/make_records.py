"""Files written by MXNet 1.9.1's ``mx.recordio`` (with OpenCV for the images), which
tests/test_recordio.py reads back and writes again:

    /tmp/mxvenv/bin/pip install opencv-python-headless 'numpy<1.24'
    /tmp/mxvenv/bin/python tests/data/mxnet_recordio/make_records.py

- ``plain.rec`` / ``plain.idx``: the records of ``PLAIN`` (empty, unaligned lengths, the magic
  number at aligned and unaligned offsets, so that some are written in parts), keys 10, 11, ...
- ``images.rec`` / ``images.idx``: ``pack_img`` of small images (BGR, gray, BGRA; PNG, and
  JPEG at quality 90) with number and array labels.
- ``expected.npz``: for each image record, its header and ``unpack_img`` with iscolor -1, 0
  and 1, as OpenCV decodes them; and ``gluon.data.vision.ImageRecordDataset``'s images of the
  file with flag 1 and 0.
"""
import os

import numpy as np
import mxnet as mx

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC = (0xced7230a).to_bytes(4, "little")
PLAIN = [b"", b"a", b"abcd", MAGIC, b"xy" + b"zw" + MAGIC + b"tail", MAGIC * 3 + b"q",
         b"12345678" + MAGIC, b"k" + MAGIC + b"unaligned", bytes(range(256)) * 3]


def images():
    rng = np.random.RandomState(0)
    smooth = np.add.outer(np.arange(6) * 30, np.arange(8) * 20).astype(np.uint8)
    bgr = np.stack([smooth, smooth[::-1], 255 - smooth], axis=2)
    return [
        ("bgr_png", mx.recordio.IRHeader(0, 3.0, 7, 0), bgr, ".png"),
        ("gray_png", mx.recordio.IRHeader(0, [1.0, 2.5, -3.0], 8, 1), smooth, ".png"),
        ("bgra_png", mx.recordio.IRHeader(0, 0.0, 9, 2),
         np.concatenate([bgr, rng.randint(0, 256, (6, 8, 1)).astype(np.uint8)], axis=2), ".png"),
        ("bgr_jpg", mx.recordio.IRHeader(0, [4.0, 5.0], 10, 3), bgr, ".jpg"),
    ]


def main():
    w = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, "plain.idx"),
                                      os.path.join(HERE, "plain.rec"), "w")
    for k, record in enumerate(PLAIN):
        w.write_idx(10 + k, record)
    w.close()
    w = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, "images.idx"),
                                      os.path.join(HERE, "images.rec"), "w")
    expected = {}
    for k, (name, header, img, fmt) in enumerate(images()):
        record = mx.recordio.pack_img(header, img, quality=90, img_fmt=fmt)
        w.write_idx(k, record)
        for iscolor in (-1, 0, 1):
            head, decoded = mx.recordio.unpack_img(record, iscolor)
            expected["%s/%d" % (name, iscolor)] = decoded
        expected[name + "/label"] = np.atleast_1d(np.asarray(head.label, dtype=np.float32))
        expected[name + "/ids"] = np.array([head.flag, head.id, head.id2], dtype=np.int64)
    w.close()
    for flag in (1, 0):
        dataset = mx.gluon.data.vision.ImageRecordDataset(os.path.join(HERE, "images.rec"), flag)
        for k in range(len(dataset)):
            expected["dataset/%d/%d" % (k, flag)] = dataset[k][0].asnumpy()
    np.savez_compressed(os.path.join(HERE, "expected.npz"), **expected)


if __name__ == "__main__":
    main()
