"""``mx.image.ImageIter``: MXNet 1.9.1's batches, bit for bit (tests/data/mxnet_image_iter,
recorded from the real MXNet by the same ``image_iter_cases.record``: record files with and
without an index, an image list file, a Python list, shuffling, random crops and flips, padded,
discarded and rolled-over last batches), and clear errors for bad inputs."""
import os
import sys

import numpy as np
import pytest

import trainer_cli as mx

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_image_iter")
sys.path.insert(0, HERE)
import image_iter_cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(HERE, "batches.npz")))
OURS = image_iter_cases.record(mx, HERE)


def test_every_batch_mxnet_made_is_made():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_batch_is_mxnets(name):
    assert OURS[name].dtype == RECORDED[name].dtype and OURS[name].shape == RECORDED[name].shape
    np.testing.assert_array_equal(OURS[name], RECORDED[name])


def test_provide_data_and_label():
    it = mx.image.ImageIter(2, (3, 8, 8), label_width=2, path_imglist=os.path.join(
        HERE, "images.lst"), path_root=HERE, data_name="x", label_name="y")
    assert it.provide_data == [("x", (2, 3, 8, 8))] and it.provide_label == [("y", (2, 2))]
    assert mx.image.ImageIter is mx.img.ImageIter


def test_bad_inputs_are_clear(tmp_path):
    with pytest.raises(ValueError, match="path_imgrec, path_imglist or imglist"):
        mx.image.ImageIter(2, (3, 8, 8))
    with pytest.raises(ValueError, match="3 channels"):
        mx.image.ImageIter(2, (1, 8, 8), path_imgrec=os.path.join(HERE, "images.rec"))
    with pytest.raises(ValueError, match="path_imgidx"):
        mx.image.ImageIter(2, (3, 8, 8), path_imgrec=os.path.join(HERE, "images.rec"),
                           shuffle=True)
    (tmp_path / "bad.lst").write_text("0\t1\timg0.png\nzero\t1\timg1.png\n")
    with pytest.raises(ValueError, match=r"bad\.lst, line 2"):
        mx.image.ImageIter(2, (3, 8, 8), path_imglist=str(tmp_path / "bad.lst"))
    (tmp_path / "broken.png").write_bytes(b"not a png")
    it = mx.image.ImageIter(1, (3, 8, 8), imglist=[[0.0, "broken.png"]], path_root=str(tmp_path))
    with pytest.raises(RuntimeError, match="Broken image filename: broken.png"):
        it.next()
