"""Records what MXNet 1.9.1 gives for the cases of deformable_cases.py:

    /work/mxvenv/bin/python tests/data/mxnet_deformable/make_deformable_records.py

Writes ``deformable.npz`` (``record`` and ``record_blocks``, plus ``load/out``: the output of the
block whose parameters it writes) and ``deformable_block.params`` beside itself."""
import os
import sys

import numpy as np
import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import deformable_cases  # noqa: E402

records = deformable_cases.record(mxnet)
records.update(deformable_cases.record_blocks(mxnet))
records["load/out"] = deformable_cases.save_block_params(
    mxnet, os.path.join(HERE, "deformable_block.params"))
np.savez_compressed(os.path.join(HERE, "deformable.npz"), **records)
