"""Records what MXNet 1.9.1 gives for the cases of straight_dope_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_straight_dope/make_straight_dope_records.py

Writes ``straight_dope.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import straight_dope_cases  # noqa: E402

records = straight_dope_cases.record(mxnet)
np.savez_compressed(os.path.join(HERE, "straight_dope.npz"), **records)
print("%d arrays" % len(records))
