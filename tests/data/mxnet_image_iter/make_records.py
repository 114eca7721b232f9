"""The inputs of image_iter_cases.py and what MXNet 1.9.1 gives for them:

    /tmp/mxvenv/bin/pip install opencv-python-headless 'numpy<1.24'
    /tmp/mxvenv/bin/python tests/data/mxnet_image_iter/make_records.py

writes seven small PNG images (``img0.png`` ... of sizes 9x10 to 12x13), ``images.rec`` with
``images.idx`` (the PNG bytes, label k % 3, key k), ``images.lst`` (two labels a line) and
``batches.npz``."""
import os
import sys

import cv2
import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import image_iter_cases  # noqa: E402


def write_inputs():
    rng = np.random.RandomState(0)
    w = mxnet.recordio.MXIndexedRecordIO(os.path.join(HERE, "images.idx"),
                                         os.path.join(HERE, "images.rec"), "w")
    lines = []
    for k in range(image_iter_cases.COUNT):
        img = rng.randint(0, 256, (9 + k % 4, 10 + k % 3, 3)).astype(np.uint8)
        ok, png = cv2.imencode(".png", img)
        assert ok
        with open(os.path.join(HERE, "img%d.png" % k), "wb") as f:
            f.write(png.tobytes())
        w.write_idx(k, mxnet.recordio.pack(mxnet.recordio.IRHeader(0, float(k % 3), k, 0),
                                           png.tobytes()))
        lines.append("%d\t%d\t%.1f\timg%d.png\n" % (k, k % 3, k / 2.0, k))
    w.close()
    with open(os.path.join(HERE, "images.lst"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    write_inputs()
    np.savez_compressed(os.path.join(HERE, "batches.npz"),
                        **image_iter_cases.record(mxnet, HERE))
