"""Records what MXNet 1.9.1 gives for the cases of deferred_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_deferred/make_deferred_records.py

Writes ``deferred.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import deferred_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "deferred.npz"), **deferred_cases.record(mxnet))
