"""Makes ``reference.npz``: MXNet 1.9.1's values (and input gradients, where the op has one) for
the ``nd`` names that tests/test_nd_names.py checks. Run with the real MXNet
(``/tmp/mxvenv/bin/python``); the file it writes is committed.

Case ``NAME`` stores ``NAME/in<i>`` (the inputs), ``NAME/out<k>`` (the outputs), and for a
differentiable case ``NAME/head<k>`` and ``NAME/grad<i>``. It also writes the public names of MXNet's ``nd`` and
``nd.random`` (``mxnet_nd_names.txt``, ``mxnet_nd_random_names.txt``). The call per case (the same code runs
on both sides) is in ``CASES`` of the test module, as a function of ``nd`` and the inputs.
"""
import os
import sys

import numpy as np
import mxnet as mx
from mxnet import autograd, nd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from nd_cases import CASES, inputs  # noqa: E402

rng = np.random.RandomState(7)
out = {}
ONLY = sys.argv[1:]
for name, (fn, diff) in sorted(CASES.items()):
    if ONLY and name not in ONLY:
        continue
    print(name, file=sys.stderr, flush=True)
    arrays = [nd.array(a, dtype=a.dtype) for a in inputs(name)]
    for i in diff:
        arrays[i].attach_grad()
    if diff:
        with autograd.record():
            res = fn(nd, *arrays)
    else:
        res = fn(nd, *arrays)
    res = [res] if isinstance(res, nd.NDArray) else list(res)
    for i, a in enumerate(inputs(name)):
        out["%s/in%d" % (name, i)] = a
    for k, r in enumerate(res):
        out["%s/out%d" % (name, k)] = r.asnumpy()
    if diff:
        heads = [nd.array(rng.uniform(0.5, 1.5, size=r.shape).astype(r.dtype)) for r in res]
        autograd.backward(res, heads)
        for k, h in enumerate(heads):
            out["%s/head%d" % (name, k)] = h.asnumpy()
        for i in diff:
            out["%s/grad%d" % (name, i)] = arrays[i].grad.asnumpy()

# The public names of MXNet's ``nd`` and ``nd.random`` namespaces (docs/compat.md's table must
# account for each one that trainer_cli's ``nd`` lacks).
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "mxnet_nd_names.txt"), "w") as f:
    f.write("\n".join(sorted(n for n in dir(nd) if not n.startswith("_"))) + "\n")
with open(os.path.join(here, "mxnet_nd_random_names.txt"), "w") as f:
    f.write("\n".join(sorted(n for n in dir(nd.random) if not n.startswith("_"))) + "\n")

dest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.npz")
np.savez_compressed(dest, **out)
print("wrote %d arrays to %s (mxnet %s)" % (len(out), dest, mx.__version__), file=sys.stderr)
