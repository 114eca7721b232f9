"""Records what MXNet 1.9.1 gives for the cases of multibox_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_multibox/make_multibox_records.py

Writes ``multibox.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import multibox_cases  # noqa: E402

records = multibox_cases.record(mxnet)
records.update(multibox_cases.errors(mxnet))
np.savez_compressed(os.path.join(HERE, "multibox.npz"), **records)
print("%d arrays" % len(records))
