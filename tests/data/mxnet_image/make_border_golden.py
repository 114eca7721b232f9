"""Records what MXNet 1.9.1 gives for the cases of border_cases.py:

    /tmp/mxvenv/bin/python tests/data/mxnet_image/make_border_golden.py

Writes ``border_golden.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import border_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "border_golden.npz"), **border_cases.record(mxnet))
