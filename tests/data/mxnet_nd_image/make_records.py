"""Records what MXNet 1.9.1 gives for the cases of cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_nd_image/make_records.py

Writes ``records.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "records.npz"), **cases.record(mxnet))
