"""Records what MXNet 1.9.1's ``test_utils`` gives for the cases of utils_cases.py:

    /tmp/mxvenv/bin/python tests/data/mxnet_test_utils/make_records.py

Writes ``records.json`` beside itself."""
import json
import os
import sys

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import utils_cases as cases  # noqa: E402

with open(os.path.join(HERE, "records.json"), "w") as f:
    json.dump({"mxnet": mxnet.__version__, "cases": cases.record(mxnet)}, f, indent=1)
    f.write("\n")
