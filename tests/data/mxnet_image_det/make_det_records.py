"""The inputs of det_cases.py and what MXNet 1.9.1 gives for them:

    /work/mxvenv/bin/python tests/data/mxnet_image_det/make_det_records.py

(a venv with mxnet 1.9.1, 'numpy<1.24' and opencv-python-headless) writes ``det0.png`` ...
(small random images, ``det4.jpg`` a JPEG at quality 90), ``det.rec``/``det.idx`` (the encoded
images with ``det_cases.LABELS``, key k), ``det.lst`` (``det_cases.LIST_LABELS``) and
``det_batches.npz`` (``det_cases.record``)."""
import os
import sys

import cv2
import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import det_cases  # noqa: E402


def write_inputs():
    w = mxnet.recordio.MXIndexedRecordIO(os.path.join(HERE, "det.idx"),
                                         os.path.join(HERE, "det.rec"), "w")
    lines = []
    for k in range(det_cases.COUNT):
        img = det_cases._image(*det_cases.SIZES[k])
        ext = det_cases.EXT[k]
        params = [cv2.IMWRITE_JPEG_QUALITY, 90] if ext == ".jpg" else []
        ok, buf = cv2.imencode(ext, img, params)
        assert ok
        with open(os.path.join(HERE, "det%d%s" % (k, ext)), "wb") as f:
            f.write(buf.tobytes())
        header = mxnet.recordio.IRHeader(0, np.array(det_cases.LABELS(k), np.float32), k, 0)
        w.write_idx(k, mxnet.recordio.pack(header, buf.tobytes()))
        lines.append("\t".join([str(k)] + ["%g" % v for v in det_cases.LIST_LABELS(k)]
                               + ["det%d%s" % (k, ext)]) + "\n")
    w.close()
    with open(os.path.join(HERE, "det.lst"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    write_inputs()
    np.savez_compressed(os.path.join(HERE, "det_batches.npz"),
                        **det_cases.record(mxnet, HERE))
