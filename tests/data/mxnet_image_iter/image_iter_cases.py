"""``mx.image.ImageIter`` as MXNet 1.9.1 runs it, written once against MXNet's API
(``record(mx, folder)``): a RecordIO file read through its index with shuffling and random
crops and flips, read in file order, an image list file with two labels a line, a Python list,
and one part of two; with the last batch padded, discarded and rolled over, over several
epochs. Python's and NumPy's generators are seeded first (MXNet shuffles with ``random`` and its
augmenters draw from both).

    /tmp/mxvenv/bin/python tests/data/mxnet_image_iter/make_records.py

writes the images, ``images.rec``/``.idx``/``.lst`` and ``batches.npz`` (the batches);
tests/test_image_iter.py replays ``record`` with trainer_cli."""
import os
import random

import numpy as np

COUNT = 7


def _epochs(it, epochs, out, name):
    for e in range(epochs):
        for b, batch in enumerate(it):
            out["%s/%d/%d/data" % (name, e, b)] = batch.data[0].asnumpy()
            out["%s/%d/%d/label" % (name, e, b)] = batch.label[0].asnumpy()
            out["%s/%d/%d/pad" % (name, e, b)] = np.array(batch.pad)
        it.reset()


def record(mx, folder):
    rec, idx, lst = (os.path.join(folder, "images." + ext) for ext in ("rec", "idx", "lst"))
    out = {}

    def seeded(seed):
        random.seed(seed)
        np.random.seed(seed)
    seeded(3)
    _epochs(mx.image.ImageIter(3, (3, 8, 8), path_imgrec=rec, path_imgidx=idx, shuffle=True,
                               rand_crop=True, rand_mirror=True), 2, out, "indexed_shuffled")
    seeded(4)
    _epochs(mx.image.ImageIter(3, (3, 8, 8), path_imgrec=rec, last_batch_handle="discard",
                               resize=9), 2, out, "sequential_discard")
    seeded(5)
    _epochs(mx.image.ImageIter(2, (3, 6, 6), label_width=2, path_imglist=lst, path_root=folder,
                               last_batch_handle="roll_over", rand_mirror=True), 3, out,
            "list_roll_over")
    seeded(6)
    listed = [[float(k % 3), "img%d.png" % k] for k in range(COUNT)]
    _epochs(mx.image.ImageIter(4, (3, 8, 8), imglist=listed, path_root=folder,
                               mean=True, std=True), 2, out, "python_list")
    seeded(7)
    _epochs(mx.image.ImageIter(2, (3, 8, 8), path_imgrec=rec, path_imgidx=idx, num_parts=2,
                               part_index=1), 1, out, "part_1_of_2")
    return out
