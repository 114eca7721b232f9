"""Records what MXNet 1.9.1's ImageRecordIter gives for the cases of image_record_cases.py:

    /tmp/mxvenv/bin/python tests/data/mxnet_io/make_image_record.py

Writes ``image_record.json`` beside itself."""
import json
import os
import sys
import tempfile

import mxnet

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import image_record_cases  # noqa: E402

with tempfile.TemporaryDirectory() as folder:
    recorded = image_record_cases.record(mxnet, folder)
with open(os.path.join(HERE, "image_record.json"), "w") as f:
    json.dump({"mxnet": mxnet.__version__, "cases": recorded}, f)
    f.write("\n")
