"""Records what MXNet 1.9.1's LibSVMIter gives for the cases of libsvm_cases.py:

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_libsvm.py

Writes ``libsvm.json`` beside itself."""
import json
import os
import sys
import tempfile

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import libsvm_cases  # noqa: E402

with tempfile.TemporaryDirectory() as folder:
    recorded = libsvm_cases.record(mxnet, folder)
with open(os.path.join(HERE, "libsvm.json"), "w") as f:
    json.dump({"mxnet": mxnet.__version__, "cases": recorded}, f)
    f.write("\n")
