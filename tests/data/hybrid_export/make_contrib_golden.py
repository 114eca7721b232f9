"""Writes the golden data of tests/test_hybrid_export_contrib.py with real MXNet 1.9.1: for each
network of tests/export_contrib_cases.py (blocks calling F.contrib operators), MXNet's own export
after a hybridized forward (contrib/NAME-symbol.json, contrib/NAME-0000.params) and its inputs
and outputs on the seeded weights (contrib/NAME-io.npz: x0, x1, ... and out0, out1, ...).

Run from the repository root in a venv that has MXNet:
    python tests/data/hybrid_export/make_contrib_golden.py
"""
import os
import sys

import mxnet as mx
import numpy as np

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "contrib")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from export_contrib_cases import CASES, build, set_weights  # noqa: E402


def outputs(out):
    return [o.asnumpy() for o in out] if isinstance(out, (list, tuple)) else [out.asnumpy()]


def main():
    os.makedirs(HERE, exist_ok=True)
    for name in CASES:
        net, inputs = build(name, mx)
        net.initialize()
        net.hybridize()
        net(*[mx.nd.array(x) for x in inputs])
        set_weights(net, mx)
        outs = outputs(net(*[mx.nd.array(x) for x in inputs]))
        net.export(os.path.join(HERE, name))
        arrays = {"x%d" % i: x for i, x in enumerate(inputs)}
        arrays.update({"out%d" % i: o for i, o in enumerate(outs)})
        np.savez_compressed(os.path.join(HERE, name + "-io.npz"), **arrays)
        print(name, [o.shape for o in outs])


if __name__ == "__main__":
    main()
