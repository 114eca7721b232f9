"""Records what MXNet 1.9.1 gives for the cases of contrib_rnn_cases.py:

    /tmp/mxvenv/bin/python tests/data/mxnet_contrib_rnn/make_records.py

Writes ``records.npz`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import contrib_rnn_cases  # noqa: E402

np.savez_compressed(os.path.join(HERE, "records.npz"), **contrib_rnn_cases.record(mxnet))
np.savez_compressed(os.path.join(HERE, "dynamic_unroll.npz"),
                    **contrib_rnn_cases.record_dynamic_unroll(mxnet))
