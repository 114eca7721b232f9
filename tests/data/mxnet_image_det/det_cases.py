"""``mx.image.ImageDetIter`` and the detection augmenters as MXNet 1.9.1 runs them, written once
against MXNet's API (``record(mx, folder)``). Python's and NumPy's generators are seeded before
each case (MXNet's augmenters draw from both, and shuffle with ``random``).

The inputs (written by make_det_records.py): ``COUNT`` small images ``det<k>.png`` (one
``.jpg``), ``det.rec``/``det.idx`` holding them with labels of header width 2 or 4 and object
width 5 (``LABELS``), and ``det.lst`` with header width 3 and object width 6 (``LIST_LABELS``).

Cases: the record file read through its index (shuffled; random crops from three crop
augmenters, flips, pads, mean/std), read in file order (resize, always pad with a per-channel
value, discarded last batch), the list file (rolled-over last batch, crops of fixed aspect ratio
and area range), a Python list with a hand-made augmenter list, one part of two, colour jitter
(hue, PCA noise, gray; compared to a tolerance: ``nd.dot``'s rounding), ``reshape`` and
``sync_label_shape``, ``draw_next``, the crop and pad augmenters called directly over many seeds,
and ``dumps``.

    /work/mxvenv/bin/python tests/data/mxnet_image_det/make_det_records.py
"""
import hashlib
import os
import random

import numpy as np

COUNT = 7
SIZES = [(20, 24), (24, 20), (22, 28), (18, 18), (26, 22), (21, 25), (24, 24)]   # (h, w)
EXT = [".png", ".png", ".png", ".png", ".jpg", ".png", ".png"]


def _obj(cls, x0, y0, x1, y1):
    return [float(cls), x0, y0, x1, y1]


# Per image: [header width, object width, header extras..., objects...]. Image 2 has an empty
# box (dropped), image 5 an object of class -1 beside a valid one.
OBJECTS = [
    [_obj(0, 0.125, 0.25, 0.5, 0.75)],
    [_obj(1, 0.0625, 0.125, 0.4375, 0.5), _obj(2, 0.5, 0.5, 0.9375, 0.875)],
    [_obj(0, 0.25, 0.25, 0.75, 0.75), _obj(1, 0.5, 0.125, 0.5, 0.375),
     _obj(2, 0.0, 0.0, 0.25, 1.0)],
    [_obj(3, 0.375, 0.125, 0.625, 0.875)],
    [_obj(1, 0.0, 0.5, 1.0, 1.0), _obj(0, 0.25, 0.0, 0.5, 0.25)],
    [_obj(-1, 0.125, 0.125, 0.375, 0.375), _obj(2, 0.5, 0.25, 1.0, 0.75)],
    [_obj(0, 0.3125, 0.3125, 0.6875, 0.6875), _obj(1, 0.0, 0.0, 0.125, 0.125),
     _obj(2, 0.75, 0.0, 1.0, 0.5), _obj(3, 0.0, 0.75, 0.5, 1.0)],
]


def LABELS(k):
    """The record file's label of image k: header width 2, or 4 (with the image's size)."""
    h, w = SIZES[k]
    header = [2.0, 5.0] if k % 2 == 0 else [4.0, 5.0, float(w), float(h)]
    return header + [v for obj in OBJECTS[k] for v in obj]


def LIST_LABELS(k):
    """The list file's label of image k: header width 3, object width 6 (a 'difficult' flag)."""
    return [3.0, 6.0, 7.0] + [v for obj in OBJECTS[k] for v in obj + [float(k % 2)]]


def _epochs(it, epochs, out, name):
    for e in range(epochs):
        for b, batch in enumerate(it):
            out["%s/%d/%d/data" % (name, e, b)] = batch.data[0].asnumpy()
            out["%s/%d/%d/label" % (name, e, b)] = batch.label[0].asnumpy()
            out["%s/%d/%d/pad" % (name, e, b)] = np.array(batch.pad)
        it.reset()


def _seeded(seed):
    random.seed(seed)
    np.random.seed(seed)


def _image(h, w):
    rng = np.random.RandomState(h * 100 + w)
    return rng.randint(0, 256, (h, w, 3)).astype(np.uint8)


def _digest(data):
    """dtype, shape and SHA-256 of an array's bytes: the directly-called augmenters' images,
    compared bit for bit without storing them all."""
    head = "%s %s " % (data.dtype.str, data.shape)
    return np.array(head + hashlib.sha256(np.ascontiguousarray(data).tobytes()).hexdigest())


def record(mx, folder):
    rec, idx, lst = (os.path.join(folder, "det." + ext) for ext in ("rec", "idx", "lst"))
    out = {}
    _seeded(11)
    it = mx.image.ImageDetIter(3, (3, 12, 12), path_imgrec=rec, path_imgidx=idx, shuffle=True,
                               rand_crop=1, rand_pad=0.5, rand_mirror=True, mean=True, std=True,
                               min_object_covered=[0.1, 0.5, 0.9], max_attempts=20)
    out["indexed/label_shape"] = np.array(it.label_shape)
    out["indexed/provide_label"] = np.array(it.provide_label[0][1])
    _epochs(it, 2, out, "indexed")

    _seeded(12)
    it = mx.image.ImageDetIter(2, (3, 12, 14), path_imgrec=rec, resize=20, rand_pad=1,
                               pad_val=(10, 200, 30), area_range=(0.05, 2.0), inter_method=1,
                               last_batch_handle="discard")
    _epochs(it, 2, out, "sequential")

    _seeded(13)
    it = mx.image.ImageDetIter(3, (3, 10, 10), path_imglist=lst, path_root=folder,
                               last_batch_handle="roll_over", rand_crop=0.7, rand_mirror=True,
                               aspect_ratio_range=1.0, area_range=(0.3, 1.0),
                               min_eject_coverage=0.5, mean=np.array([120.0, 110.0, 100.0]),
                               std=np.array([60.0]), label_name="boxes")
    out["list/label_shape"] = np.array(it.label_shape)
    _epochs(it, 3, out, "list")

    _seeded(14)
    listed = [LABELS(k) + ["det%d%s" % (k, EXT[k])] for k in range(COUNT)]
    augs = [mx.image.DetRandomSelectAug([mx.image.DetRandomCropAug(area_range=(0.5, 1.0)),
                                         mx.image.DetRandomPadAug(pad_val=(1, 2, 3))], 0.2),
            mx.image.DetHorizontalFlipAug(0.7),
            mx.image.DetBorrowAug(mx.image.ForceResizeAug((9, 11), 10)),
            mx.image.DetBorrowAug(mx.image.CastAug())]
    it = mx.image.ImageDetIter(4, (3, 11, 9), imglist=listed, path_root=folder, aug_list=augs)
    _epochs(it, 2, out, "python_list")

    _seeded(15)
    it = mx.image.ImageDetIter(2, (3, 8, 8), path_imgrec=rec, path_imgidx=idx, num_parts=2,
                               part_index=1, rand_crop=0.5, rand_pad=0.5)
    _epochs(it, 1, out, "part_1_of_2")

    _seeded(16)
    it = mx.image.ImageDetIter(4, (3, 12, 12), path_imgrec=rec, path_imgidx=idx,
                               brightness=0.2, contrast=0.2, saturation=0.2, hue=0.1,
                               pca_noise=0.1, rand_gray=0.5, mean=True)
    _epochs(it, 1, out, "jitter")

    # reshape and sync_label_shape: the longer label shape wins, batches padded with -1
    a = mx.image.ImageDetIter(2, (3, 8, 8), path_imgrec=rec, path_imgidx=idx)
    b = mx.image.ImageDetIter(2, (3, 8, 8), imglist=listed[:2], path_root=folder)
    out["sync/before"] = np.array([a.label_shape, b.label_shape])
    a.sync_label_shape(b)
    out["sync/after"] = np.array([a.label_shape, b.label_shape, b.provide_label[0][1][1:]])
    b.reshape(label_shape=(6, 5))
    _epochs(b, 1, out, "reshaped")

    # draw_next: random colours from NumPy, mean/std undone, thicknesses 1 to 3
    for thickness in (1, 2, 3):
        _seeded(20 + thickness)
        it = mx.image.ImageDetIter(1, (3, 20, 24), path_imgrec=rec, path_imgidx=idx,
                                   rand_crop=0.5, rand_pad=0.5, mean=True, std=True)
        for n, img in enumerate(it.draw_next(thickness=thickness, mean=True, std=True)):
            out["draw/%d/%d" % (thickness, n)] = img
            if n == 3:
                break

    # the crop and pad proposals, called directly
    # a smooth source (x and y in two channels) shows where a crop or pad put it, and packs small
    yy, xx = np.mgrid[0:30, 0:40]
    src = mx.nd.array(np.stack([xx * 6, yy * 8, xx + yy], axis=2), dtype="uint8")
    label = np.array([OBJECTS[6][k] for k in range(4)], dtype=np.float32)
    crops = [mx.image.DetRandomCropAug(), mx.image.DetRandomCropAug(0.5, (0.5, 2.0), (0.1, 0.9),
                                                                    0.1, 10),
             mx.image.DetRandomCropAug(0.0, 1.0, 0.5, 0.7, 5)]
    pads = [mx.image.DetRandomPadAug(),
            mx.image.DetRandomPadAug((0.5, 2.0), (1.5, 4.0), 3, (7, 8, 9))]
    for seed in range(15):
        for name, aug in [("crop%d" % i, a) for i, a in enumerate(crops)] + \
                         [("pad%d" % i, a) for i, a in enumerate(pads)]:
            _seeded(100 + seed)
            img, lab = aug(src, label.copy())
            out["aug/%s/%d/data" % (name, seed)] = _digest(img.asnumpy())
            out["aug/%s/%d/label" % (name, seed)] = lab
    _seeded(5)
    img, lab = mx.image.DetHorizontalFlipAug(1.0)(src, label.copy())
    out["aug/flip/data"], out["aug/flip/label"] = img.asnumpy(), lab

    augs = mx.image.CreateDetAugmenter((3, 16, 16), resize=20, rand_crop=0.5, rand_pad=0.5,
                                       rand_gray=0.1, rand_mirror=True, mean=True, std=True,
                                       brightness=0.1, contrast=0.1, saturation=0.1,
                                       pca_noise=0.1, hue=0.1, min_object_covered=[0.3, 0.7])
    out["dumps"] = np.array([str(a.dumps()) for a in augs])
    return out
