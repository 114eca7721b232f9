"""Records what MXNet 1.9.1 gives for the cases of one ``*_cases.py`` module beside this file
(its ``record(mx, folder)``, run in a temporary folder), as JSON:

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_recording.py mnist_cases mnist_iter.json
    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_recording.py image_record_cases image_record.json
    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_recording.py libsvm_cases libsvm.json
"""
import importlib
import json
import os
import sys
import tempfile

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

cases, output = importlib.import_module(sys.argv[1]), sys.argv[2]
with tempfile.TemporaryDirectory() as folder:
    recorded = cases.record(mxnet, folder)
with open(os.path.join(HERE, output), "w") as f:
    json.dump({"mxnet": mxnet.__version__, "cases": recorded}, f)
    f.write("\n")
