"""Records what MXNet 1.9.1 gives for adamw_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_adamw/make_adamw_records.py
"""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import adamw_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "adamw.npz"), **adamw_cases.record(mxnet))
