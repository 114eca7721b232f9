"""Which NDArray results share memory with their source in MXNet 1.9.1: each case writes into
the result and records whether the source changed.

    /tmp/mxvenv/bin/python tests/data/mxnet_nd/make_views.py

Writes ``views.json`` beside itself; ``views.CASES`` is replayed with trainer_cli by
tests/test_fresh_outputs.py.
"""
import json
import os
import sys

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import views  # noqa: E402

assert mxnet.__version__ == "1.9.1", mxnet.__version__
with open(os.path.join(HERE, "views.json"), "w") as f:
    json.dump({"mxnet": mxnet.__version__, "cases": views.run_all(mxnet)}, f, indent=1,
              sort_keys=True)
    f.write("\n")
