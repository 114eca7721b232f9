"""Records what MXNet 1.9.1 gives for the cases of special_cases.py (nd.gamma, nd.gammaln,
nd.erfinv: special values, integer inputs and a dense sweep, values and gradients):

    /work/mxvenv/bin/python tests/data/mxnet_special/make_special_records.py

Writes ``special.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import special_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "special.npz"), **special_cases.record(mxnet))
