"""Records what MXNet 1.9.1 gives for the cases of roi_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_roi/make_roi_records.py

Writes ``roi.npz`` beside itself. One OpenMP thread: BilinearResize2D's backward adds from
several threads in whatever order they run; one thread gives its loop's order."""
import os
import sys

os.environ["OMP_NUM_THREADS"] = "1"
import numpy as np  # noqa: E402
import mxnet  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import roi_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "roi.npz"), **roi_cases.record(mxnet))
