"""Records what MXNet 1.9.1 gives for the cases of custom_op_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_custom_op/make_custom_op_records.py

Writes ``custom_op.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import custom_op_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "custom_op.npz"), **custom_op_cases.record(mxnet))
