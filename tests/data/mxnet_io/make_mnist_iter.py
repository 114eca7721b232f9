"""Records what MXNet 1.9.1's MNISTIter gives for the cases of mnist_cases.py:

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_mnist_iter.py

Writes ``mnist_iter.json`` beside itself."""
import json
import os
import sys
import tempfile

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import mnist_cases  # noqa: E402

with tempfile.TemporaryDirectory() as folder:
    recorded = mnist_cases.record(mxnet, folder)
with open(os.path.join(HERE, "mnist_iter.json"), "w") as f:
    json.dump({"mxnet": mxnet.__version__, "cases": recorded}, f)
    f.write("\n")
