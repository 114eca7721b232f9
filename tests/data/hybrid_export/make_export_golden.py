"""Writes the export golden data with real MXNet 1.9.1: for each network of tests/export_cases.py,
MXNet's own export (NAME-symbol.json, NAME-0000.params) after a hybridized forward, and the input
and MXNet's output on the seeded weights (NAME-io.npz; the recurrent-cell cases, which may take
several inputs, store them as x0, x1, ...; the language model, whose inputs and outputs are
nested lists, stores them flattened as x0, x1, x2 and out0, out1, out2); for a few model-zoo networks the SHA-256 of MXNet's
two files (model_zoo-sha256.json).

Run from the repository root in a venv that has MXNet:
    python tests/data/hybrid_export/make_export_golden.py
"""
import hashlib
import json
import os
import sys

import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # tests/

from export_cases import (CASES, CELL_CASES, ZOO, build, build_cell,  # noqa: E402
                          build_language_model, build_zoo, set_weights)


def main():
    for name in CASES:
        net, x = build(name, mx)
        net.initialize()
        net.hybridize()
        net(mx.nd.array(x))
        set_weights(net, mx)
        out = net(mx.nd.array(x)).asnumpy()
        net.export(os.path.join(HERE, name))
        np.savez(os.path.join(HERE, name + "-io.npz"), x=x, out=out)
        print(name, out.shape)
    for name in CELL_CASES:
        net, inputs = build_cell(name, mx)
        net.initialize()
        net.hybridize()
        net(*[mx.nd.array(x) for x in inputs])
        set_weights(net, mx)
        out = net(*[mx.nd.array(x) for x in inputs]).asnumpy()
        net.export(os.path.join(HERE, name))
        np.savez(os.path.join(HERE, name + "-io.npz"), out=out,
                 **{"x%d" % i: x for i, x in enumerate(inputs)})
        print(name, out.shape)
    # Inputs and outputs nested in lists: x, [h, c] in, scores, [h, c] out.
    net, (x, states) = build_language_model(mx)
    net.initialize()
    net.hybridize()
    net(mx.nd.array(x), [mx.nd.array(s) for s in states])
    set_weights(net, mx)
    scores, (h, c) = net(mx.nd.array(x), [mx.nd.array(s) for s in states])
    net.export(os.path.join(HERE, "lm_states"))
    np.savez(os.path.join(HERE, "lm_states-io.npz"), x0=x, x1=states[0], x2=states[1],
             out0=scores.asnumpy(), out1=h.asnumpy(), out2=c.asnumpy())
    digests = {}
    for name in ZOO:
        net, x = build_zoo(name, mx)
        net.initialize()
        net(mx.nd.array(x))   # eager: MXNet's oneDNN arrays refuse set_data after a cached run
        set_weights(net, mx)
        net.hybridize()
        net(mx.nd.array(x))
        path = os.path.join("/tmp", "zoo-export-" + name)
        net.export(path)
        digests[name] = [hashlib.sha256(open(path + suffix, "rb").read()).hexdigest()
                         for suffix in ("-symbol.json", "-0000.params")]
    with open(os.path.join(HERE, "model_zoo-sha256.json"), "w") as f:
        json.dump(digests, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
