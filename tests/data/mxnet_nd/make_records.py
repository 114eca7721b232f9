"""Records what MXNet 1.9.1 gives for the cases of views.py (which results share memory with
their source) and of int_semantics.py (integer arrays through the operators):

    /tmp/mxvenv/bin/python tests/data/mxnet_nd/make_records.py

Writes ``views.json`` and ``int_semantics.json`` beside itself; tests/test_fresh_outputs.py and
tests/test_int_semantics.py replay the same cases with trainer_cli.
"""
import json
import os
import sys

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import int_semantics  # noqa: E402
import views  # noqa: E402

assert mxnet.__version__ == "1.9.1", mxnet.__version__
for module, name in ((views, "views.json"), (int_semantics, "int_semantics.json")):
    with open(os.path.join(HERE, name), "w") as f:
        json.dump({"mxnet": mxnet.__version__, "cases": module.run_all(mxnet)}, f, indent=1,
                  sort_keys=True)
        f.write("\n")
