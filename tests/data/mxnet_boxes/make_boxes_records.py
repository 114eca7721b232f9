"""Records what MXNet 1.9.1 gives for the cases of boxes_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_boxes/make_boxes_records.py

Writes ``boxes.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import boxes_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "boxes.npz"), **boxes_cases.record(mxnet))
