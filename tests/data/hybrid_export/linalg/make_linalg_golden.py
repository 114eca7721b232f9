"""Exports tests/export_linalg_cases.py's network with real MXNet 1.9.1 (hybridized), beside
itself: linalg-symbol.json, linalg-0000.params, and linalg-io.npz (the inputs ``x``, ``a`` and
the outputs ``out0``..``out3``).

    /tmp/mxvenv/bin/python tests/data/hybrid_export/linalg/make_linalg_golden.py
"""
import os
import sys

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))

import export_linalg_cases as cases  # noqa: E402


def main():
    net = cases.linalg_net(mx)
    net.initialize()
    x, a = cases.inputs()
    net(mx.nd.array(x), mx.nd.array(a))
    cases.set_weights(net, mx.nd)
    net.hybridize()
    outs = net(mx.nd.array(x), mx.nd.array(a))
    net.export(os.path.join(HERE, "linalg"))
    np.savez(os.path.join(HERE, "linalg-io.npz"), x=x, a=a,
             **{"out%d" % i: o.asnumpy() for i, o in enumerate(outs)})


if __name__ == "__main__":
    assert mx.__version__ == "1.9.1", mx.__version__
    main()
