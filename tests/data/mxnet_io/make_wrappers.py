"""Records what MXNet 1.9.1 gives for the cases of wrapper_cases.py:

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_wrappers.py

Writes ``wrappers.json`` beside itself."""
import json
import os
import sys

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import wrapper_cases  # noqa: E402

with open(os.path.join(HERE, "wrappers.json"), "w") as f:
    json.dump({"mxnet": mxnet.__version__, "cases": wrapper_cases.record(mxnet)}, f)
    f.write("\n")
