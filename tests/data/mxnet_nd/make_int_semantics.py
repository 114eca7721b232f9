"""Integer arrays through MXNet 1.9.1's operators (the cases of int_semantics.py).

    /tmp/mxvenv/bin/python tests/data/mxnet_nd/make_int_semantics.py

Writes ``int_semantics.json`` beside itself; tests/test_int_semantics.py replays the cases.
"""
import json
import os
import sys

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import int_semantics  # noqa: E402

assert mxnet.__version__ == "1.9.1", mxnet.__version__
with open(os.path.join(HERE, "int_semantics.json"), "w") as f:
    json.dump({"mxnet": mxnet.__version__, "cases": int_semantics.run_all(mxnet)}, f, indent=1,
              sort_keys=True)
    f.write("\n")
