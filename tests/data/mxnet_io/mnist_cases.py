"""``mx.io.MNISTIter`` as MXNet 1.9.1 runs it, written once against MXNet's API
(``record(mx, folder)``): the order its shuffle gives for several sizes and seeds (the images
carry their own index in their pixels), its parts, its batches (plain and flat, over two
passes) and what it provides.

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_recording.py mnist_cases mnist_iter.json

writes ``mnist_iter.json`` beside this file; tests/test_io_mnist.py runs ``record`` on
trainer_cli and compares.
"""
import hashlib
import os
import struct

import numpy as np

SIZES = (1, 2, 3, 7, 10, 11, 100, 1000, 60000)
SEEDS = (0, 1, 42, 12345, -1)
FULL_UP_TO = 1000       # orders up to this size are kept whole, larger ones as a digest


def write_idx(folder, name, n, rows, cols):
    """Images of ``rows`` x ``cols`` whose first three pixels spell their index (base 256), the
    rest a pattern; labels index % 10. Returns the two paths."""
    index = np.arange(n)
    pixels = (index[:, None] * 7 + np.arange(rows * cols)[None, :] * 3) % 256
    pixels[:, 0], pixels[:, 1], pixels[:, 2] = index % 256, index // 256 % 256, index // 65536
    images, labels = os.path.join(folder, name + "-images"), os.path.join(folder, name + "-labels")
    with open(images, "wb") as f:
        f.write(struct.pack(">IIII", 2051, n, rows, cols) + pixels.astype(np.uint8).tobytes())
    with open(labels, "wb") as f:
        f.write(struct.pack(">II", 2049, n) + (index % 10).astype(np.uint8).tobytes())
    return images, labels


def _indices(data):
    """The images' own indices, from their first three pixels (each a byte / 256)."""
    flat = np.round(data.reshape(data.shape[0], -1)[:, :3] * 256).astype(np.int64)
    return (flat[:, 0] + 256 * flat[:, 1] + 65536 * flat[:, 2]).tolist()


def record(mx, folder):
    out = {}
    for n in SIZES:
        images, labels = write_idx(folder, "n%d" % n, n, 1, 3)
        for seed in SEEDS:
            it = mx.io.MNISTIter(image=images, label=labels, batch_size=n, seed=seed, silent=True)
            order = _indices(next(it).data[0].asnumpy())
            if n > FULL_UP_TO:
                digest = hashlib.sha256(np.array(order, np.int64).tobytes()).hexdigest()
                order = {"first": order[:20], "sha256": digest}
            out["order/%d/%d" % (n, seed)] = order
    images, labels = write_idx(folder, "parts", 11, 2, 3)
    for shuffle in (False, True):
        for part in range(3):
            it = mx.io.MNISTIter(image=images, label=labels, batch_size=1, shuffle=shuffle,
                                 num_parts=3, part_index=part, silent=True)
            out["part/%s/%d" % (shuffle, part)] = [_indices(b.data[0].asnumpy())[0] for b in it]
    for flat in (False, True):
        it = mx.io.MNISTIter(image=images, label=labels, batch_size=4, shuffle=True, seed=7,
                             flat=flat, silent=True)
        passes = []
        for _ in range(2):
            passes.append([{"data": b.data[0].asnumpy().tolist(),
                            "label": b.label[0].asnumpy().tolist(), "pad": b.pad,
                            "dtypes": [str(b.data[0].dtype), str(b.label[0].dtype)]}
                           for b in it])
            it.reset()
        out["batches/flat=%s" % flat] = passes
        out["provides/flat=%s" % flat] = [
            [d.name, list(d.shape)] for d in it.provide_data + it.provide_label]
    it = mx.io.MNISTIter(image=images, label=labels, batch_size=5, data_name="x",
                         label_name="y", silent=True)
    out["provides/named"] = [[d.name, list(d.shape)] for d in it.provide_data + it.provide_label]
    return out
