"""Records what MXNet 1.9.1 gives for the cases of linalg_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_linalg/make_linalg_records.py

Writes ``linalg.npz`` beside itself."""
import os
import sys

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import linalg_cases  # noqa: E402
import numpy as np  # noqa: E402

np.savez_compressed(os.path.join(HERE, "linalg.npz"), **linalg_cases.record(mxnet))
