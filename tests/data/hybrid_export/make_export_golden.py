"""Writes the export golden data with real MXNet 1.9.1: for each network of tests/export_cases.py,
MXNet's own export (NAME-symbol.json, NAME-0000.params) after a hybridized forward, and the input
and MXNet's output on the seeded weights (NAME-io.npz).

Run from the repository root in a venv that has MXNet:
    python tests/data/hybrid_export/make_export_golden.py
"""
import os
import sys

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # tests/

from export_cases import CASES, build, set_weights  # noqa: E402


def main():
    for name in CASES:
        net, x = build(name, mx)
        net.initialize()
        net.hybridize()
        net(mx.nd.array(x))
        set_weights(net)
        out = net(mx.nd.array(x)).asnumpy()
        net.export(os.path.join(HERE, name))
        np.savez(os.path.join(HERE, name + "-io.npz"), x=x, out=out)
        print(name, out.shape)


if __name__ == "__main__":
    main()
