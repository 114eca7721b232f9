"""Records what MXNet 1.9.1 gives for the cases of contrib_cases.py:

    /tmp/mxvenv/bin/python tests/data/mxnet_nd/make_contrib_records.py

Writes ``contrib.npz``, ``contrib_attention.npz`` and ``contrib_pooling.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import contrib_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "contrib.npz"), **contrib_cases.record(mxnet))
np.savez_compressed(os.path.join(HERE, "contrib_attention.npz"),
                    **contrib_cases.record_attention(mxnet))
np.savez_compressed(os.path.join(HERE, "contrib_pooling.npz"),
                    **contrib_cases.record_pooling(mxnet))
