"""``mx.image.ImageDetIter`` and the detection augmenters: MXNet 1.9.1's batches and labels
(tests/data/mxnet_image_det, recorded from the real MXNet by the same ``det_cases.record``:
record files with and without an index, an image list file, a Python list, shuffling, random
crops, pads and flips, mean/std, padded, discarded and rolled-over last batches, ``draw_next``,
the augmenters called directly), bit for bit except colour jitter; invariants of the augmenters;
and clear errors for malformed labels, naming the file and the record."""
import json
import os
import random
import sys

import numpy as np
import pytest

import trainer_cli as mx

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_image_det")
sys.path.insert(0, HERE)
import det_cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(HERE, "det_batches.npz")))
OURS = det_cases.record(mx, HERE)
REC, IDX, LST = (os.path.join(HERE, "det." + ext) for ext in ("rec", "idx", "lst"))


def test_every_batch_mxnet_made_is_made():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(k for k in RECORDED if not k.startswith("jitter")))
def test_each_output_is_mxnets_bit_for_bit(name):
    assert OURS[name].dtype == RECORDED[name].dtype and OURS[name].shape == RECORDED[name].shape
    np.testing.assert_array_equal(OURS[name], RECORDED[name])


@pytest.mark.parametrize("name", sorted(k for k in RECORDED if k.startswith("jitter")))
def test_colour_jitter_batches_are_mxnets_to_rounding(name):
    # hue and the gray/saturation mixes go through nd.dot / sums whose float32 summation order
    # is the BLAS's in MXNet; the draws, crops and labels are still exact.
    assert OURS[name].dtype == RECORDED[name].dtype and OURS[name].shape == RECORDED[name].shape
    if name.endswith("/data"):
        np.testing.assert_allclose(OURS[name], RECORDED[name], rtol=1e-5, atol=1e-4)
    else:
        np.testing.assert_array_equal(OURS[name], RECORDED[name])


def test_names_and_provided_shapes():
    assert mx.image.ImageDetIter is mx.img.ImageDetIter is mx.image.det.ImageDetIter
    assert mx.image.detection.CreateDetAugmenter is mx.image.CreateDetAugmenter
    it = mx.image.ImageDetIter(2, (3, 8, 8), path_imglist=LST, path_root=HERE, data_name="x",
                               label_name="y")
    assert it.provide_data == [("x", (2, 3, 8, 8))] and it.provide_label == [("y", (2, 4, 6))]
    assert it.label_shape == (4, 6)
    names = [json.loads(a.dumps())[0] if isinstance(a.dumps(), str) else a.dumps()[0]
             for a in mx.image.CreateDetAugmenter((3, 8, 8), rand_crop=0.5, rand_mirror=True)]
    assert names == ["detrandomselectaug", "dethorizontalflipaug", "detborrowaug",
                     "detborrowaug"]


def _src(h=30, w=40):
    yy, xx = np.mgrid[0:h, 0:w]
    return mx.nd.array(np.stack([xx * 6, yy * 8, xx + yy], axis=2), dtype="uint8")


LABEL = np.array([[0, 0.1, 0.2, 0.5, 0.6], [1, 0.4, 0.3, 0.9, 0.95]], dtype=np.float32)


@pytest.mark.parametrize("seed", range(20))
def test_crop_keeps_the_boxes_on_the_pixels_they_covered(seed):
    # Independently of the recording: a crop at (x, y) of a source whose channels encode x and y
    # moves each kept box so that it covers the same source pixels, clipped to the crop.
    random.seed(seed)
    aug = mx.image.DetRandomCropAug(min_object_covered=0.3, area_range=(0.3, 1.0))
    src = _src()
    out, label = aug(src, LABEL.copy())
    img = out.asnumpy()
    h, w = img.shape[:2]
    x0, y0 = int(img[0, 0, 0]) // 6, int(img[0, 0, 1]) // 8
    assert np.all(0 <= label[:, 1:]) and np.all(label[:, 1:] <= 1)
    for row in label:
        orig = LABEL[LABEL[:, 0] == row[0]][0]
        np.testing.assert_allclose(row[1] * w + x0, max(orig[1] * 40, x0), atol=1e-4)
        np.testing.assert_allclose(row[4] * h + y0, min(orig[4] * 30, y0 + h), atol=1e-4)


@pytest.mark.parametrize("seed", range(10))
def test_pad_puts_the_image_inside_the_fill_and_moves_the_boxes(seed):
    random.seed(seed)
    out, label = mx.image.DetRandomPadAug(pad_val=(1, 2, 3))(_src(), LABEL.copy())
    img = out.asnumpy()
    h, w = img.shape[:2]
    inside = np.argwhere(np.any(img != (1, 2, 3), axis=2))
    y0, x0 = inside.min(axis=0)
    assert h * w > 30 * 40 and np.array_equal(img[y0:y0 + 30, x0:x0 + 40], _src().asnumpy())
    np.testing.assert_allclose(label[:, 1] * w, LABEL[:, 1] * 40 + x0, rtol=1e-6)
    np.testing.assert_allclose(label[:, 4] * h, LABEL[:, 4] * 30 + y0, rtol=1e-6)


def test_flip_twice_is_the_identity_and_skip_prob_one_does_nothing():
    flip = mx.image.DetHorizontalFlipAug(1.0)
    src = _src()
    img, label = flip(*flip(src, LABEL.copy()))
    assert np.array_equal(img.asnumpy(), src.asnumpy())
    np.testing.assert_allclose(label, LABEL, atol=1e-7)
    skip = mx.image.DetRandomSelectAug([flip], skip_prob=1)
    img, label = skip(src, LABEL.copy())
    assert img is src and np.array_equal(label, LABEL)


def test_a_scalar_pad_val_fills_every_channel():
    # MXNet hands OpenCV a one-value Scalar: the first channel gets 9, the others what follows
    # the value in memory
    random.seed(0)
    img = mx.image.DetRandomPadAug(pad_val=9)(_src(), LABEL.copy())[0].asnumpy()
    assert np.all(img == 9, axis=2).sum() == img.shape[0] * img.shape[1] - 30 * 40


def test_every_label_is_read_and_padded_with_minus_one():
    it = mx.image.ImageDetIter(7, (3, 8, 8), path_imgrec=REC, path_imgidx=IDX)
    labels = it.next().label[0].asnumpy()
    for k in range(det_cases.COUNT):
        objs = np.array([o for o in det_cases.OBJECTS[k] if o[3] > o[1] and o[4] > o[2]],
                        dtype=np.float32)
        np.testing.assert_array_equal(labels[k, :len(objs)], objs)
        assert np.all(labels[k, len(objs):] == -1)


def test_reshape_and_sync_refuse_to_shrink_or_change_width():
    it = mx.image.ImageDetIter(2, (3, 8, 8), path_imgrec=REC, path_imgidx=IDX)
    with pytest.raises(ValueError, match="reduce label count from 4 to 3"):
        it.reshape(label_shape=(3, 5))
    with pytest.raises(ValueError, match="object width inconsistent: 5 vs 6"):
        it.reshape(label_shape=(4, 6))
    with pytest.raises(ValueError, match="length 2"):
        it.reshape(label_shape=(4,))
    other = mx.image.ImageDetIter(2, (3, 8, 8), path_imglist=LST, path_root=HERE)
    with pytest.raises(ValueError, match="object width mismatch: 5 vs 6"):
        it.sync_label_shape(other)
    with pytest.raises(TypeError, match="ImageDetIter"):
        it.sync_label_shape(object())


def _rec_with(tmp_path, label):
    from trainer_cli import recordio
    png = open(os.path.join(HERE, "det0.png"), "rb").read()
    rec = str(tmp_path / "bad.rec")
    w = recordio.MXRecordIO(rec, "w")
    w.write(recordio.pack(recordio.IRHeader(0, det_cases.LABELS(0), 0, 0), png))
    w.write(recordio.pack(recordio.IRHeader(0, label, 1, 0), png))
    w.close()
    return rec


@pytest.mark.parametrize("label, message", [
    ([2, 5, 0, 0.1, 0.1], r"Label shape is invalid: \(5,\)"),
    ([2, 5, 0, 0.1, 0.1, 0.5, 0.5, 1], "inconsistent with annotation width 5"),
    ([2, 5, 0, 0.5, 0.1, 0.2, 0.5], "no valid label"),
    ([2, 4, 0, 0.1, 0.1, 0.5, 0.5, 0.1, 0.2], "object width 4 must be >= 5"),
    ([0, 5, 0, 0.1, 0.1, 0.5, 0.5], "header width 0 must be >= 2"),
    ([2, 0, 0, 0.1, 0.1, 0.5, 0.5], "object width 0"),
    ([np.nan, 5, 0, 0.1, 0.1, 0.5, 0.5], "header width and object width must be numbers"),
    ([2, 6, 0, 0.1, 0.1, 0.5, 0.5, 1], "objects are 6 wide; those before it are 5"),
])
def test_malformed_labels_name_the_file_and_record(tmp_path, label, message):
    rec = _rec_with(tmp_path, label)
    with pytest.raises(RuntimeError, match=r"bad\.rec, record 1 .*" + message):
        mx.image.ImageDetIter(1, (3, 8, 8), path_imgrec=rec)


def test_malformed_labels_in_a_list_name_the_list_and_entry(tmp_path):
    lst = tmp_path / "bad.lst"
    lst.write_text("0\t2\t5\t0\t0.1\t0.1\t0.5\t0.5\tdet0.png\n"
                   "7\t2\t5\t0\t0.1\t0.1\t0.5\tdet1.png\n")
    with pytest.raises(ValueError, match=r"bad\.lst, index 7 \(det1\.png\): Label shape"):
        mx.image.ImageDetIter(1, (3, 8, 8), path_imglist=str(lst), path_root=HERE)
    with pytest.raises(RuntimeError, match=r"imglist entry 2 \(det1\.png\): .*no valid label"):
        mx.image.ImageDetIter(1, (3, 8, 8), path_root=HERE, imglist=[
            det_cases.LABELS(0) + ["det0.png"], [2, 5, 0, 0.5, 0.5, 0.5, 0.5, "det1.png"]])
    rec = _rec_with(tmp_path, det_cases.LABELS(1))
    idx_free = mx.image.ImageDetIter(1, (3, 8, 8), path_imgrec=rec)
    assert idx_free.label_shape == (2, 5)


def test_bad_arguments_are_clear():
    with pytest.raises(TypeError, match="DetBorrowAug: augmenter must be an mx.image.Augmenter"):
        mx.image.DetBorrowAug(lambda x: x)
    with pytest.raises(ValueError, match="DetRandomSelectAug: aug_list may hold DetAugmenters"):
        mx.image.DetRandomSelectAug([mx.image.CastAug()])
    with pytest.raises(ValueError, match="min_object_covered has 2 values; .* have 1 or 3"):
        mx.image.CreateMultiRandCropAugmenter(min_object_covered=[0.1, 0.2],
                                              area_range=[(0.1, 1), (0.2, 1), (0.3, 1)])
    with pytest.raises(ValueError, match="rand_pad needs a single area_range"):
        mx.image.CreateDetAugmenter((3, 8, 8), rand_crop=1, rand_pad=1,
                                    area_range=[(0.1, 1.0), (0.3, 2.0)])
    with pytest.raises(ValueError, match="mean must be True or an array"):
        mx.image.CreateDetAugmenter((3, 8, 8), mean=[1, 2, 3])
    with pytest.raises(TypeError, match="aspect_ratio_range must be a number or a"):
        mx.image.DetRandomCropAug(aspect_ratio_range="wide")
    with pytest.warns(UserWarning, match="Skip DetRandomCropAug due to invalid area_range"):
        assert not mx.image.DetRandomCropAug(area_range=(0.9, 0.1)).enabled
    with pytest.warns(UserWarning, match="Skip DetRandomPadAug due to invalid aspect_ratio"):
        assert not mx.image.DetRandomPadAug(aspect_ratio_range=(0, 1)).enabled
    with pytest.raises(ValueError, match="holds no images"):
        mx.image.ImageDetIter(1, (3, 8, 8), imglist=[])


def test_draw_next_without_opencv_draws_the_boxes_and_says_what_it_leaves_out():
    it = mx.image.ImageDetIter(1, (3, 20, 24), path_imgrec=REC, path_imgidx=IDX)
    with pytest.warns(UserWarning, match="without class names"):
        drawn = it.draw_next(color=(255, 0, 0), thickness=1, id2labels={0: "cat"})
        first, second = next(drawn), next(drawn)
    # image 0: one box (0.125, 0.25)-(0.5, 0.75) of 24 x 20; BGR, so red is channel 2
    assert first.dtype == np.uint8 and first.shape == (20, 24, 3)
    edge = np.zeros((20, 24), bool)
    edge[5, 3:13] = edge[15, 3:13] = edge[5:16, 3] = edge[5:16, 12] = True
    assert np.all(first[edge] == (0, 0, 255))
    # image 1's first box, (0.0625, 0.125)-(0.4375, 0.5): red too (MXNet's is blue here)
    assert np.all(second[2, 1:11] == (0, 0, 255)) and np.all(second[2:11, 1] == (0, 0, 255))
