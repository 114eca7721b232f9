"""Record MXNet 1.9.1's ``gluon.utils.split_data`` slice sizes for uneven batches.

    /tmp/mxvenv/bin/python tests/data/mxnet_split/make_split_cases.py

writes split_cases.json beside itself: for each (size, num_slice) the list of slice lengths along
axis 0 with ``even_split=False`` (MXNet raises for empty slices on other axes and when copying
an empty slice to another device; those cases are not recorded).
"""
import json
import os

import mxnet as mx
from mxnet.gluon.utils import split_data

HERE = os.path.dirname(os.path.abspath(__file__))
cases = []
for size in range(1, 13):
    for num_slice in range(1, 6):
        pieces = split_data(mx.nd.arange(size), num_slice, even_split=False)
        cases.append({"size": size, "num_slice": num_slice,
                      "values": [p.asnumpy().astype(int).tolist() for p in pieces]})
with open(os.path.join(HERE, "split_cases.json"), "w") as f:
    json.dump({"generated_by": "mxnet %s" % mx.__version__, "cases": cases}, f)
    f.write("\n")
