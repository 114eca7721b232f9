"""Records what MXNet 1.9.1 gives for histogram_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_histogram/make_histogram_records.py
"""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import histogram_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "histogram.npz"), **histogram_cases.record(mxnet))
