"""``nd.contrib.adamw_update`` / ``mp_adamw_update`` as MXNet 1.9.1 computes them, written once
against MXNet's API (``record(mx)``): three steps of each from seeded arrays, with and without
clipping, lr other than 1, weight decay, float32, float16 and float64 (non-MP), a skipped step (an
infinite rescale_grad), out= the weight and a new output; the weight, mean, var and grad after
each step (GluonNLP's BERTAdam calls them so).

    /work/mxvenv/bin/python tests/data/mxnet_adamw/make_adamw_records.py
"""
import numpy as np

CASES = {
    "bertadam": dict(lr=1.0, eta=0.01, wd=0.01, beta1=0.9, beta2=0.999, epsilon=1e-6),
    "clip_lr": dict(lr=0.5, eta=0.1, wd=0.0, clip_gradient=0.3),
    "defaults": dict(lr=1.0, eta=0.001),
}


def record(mx):
    nd, c = mx.nd, mx.nd.contrib
    out = {}
    for name, kw in sorted(CASES.items()):
        for dtype in ("float32", "float16", "float64"):
            rng = np.random.RandomState(len(name))
            w = nd.array(rng.randn(4, 5), dtype=dtype)
            mean, var = nd.zeros((4, 5), dtype=dtype), nd.zeros((4, 5), dtype=dtype)
            for step in range(3):
                g = nd.array(rng.randn(4, 5) * 2, dtype=dtype)
                scale = nd.full((1,), [0.5, np.inf, 2.0][step])
                c.adamw_update(w, g, mean, var, scale, out=w, **kw)
                key = "%s/%s/%d" % (name, dtype, step)
                out[key + "/w"], out[key + "/grad"] = w.asnumpy(), g.asnumpy()
                out[key + "/mean"], out[key + "/var"] = mean.asnumpy(), var.asnumpy()
        rng = np.random.RandomState(len(name) + 100)
        w32 = nd.array(rng.randn(3, 4), dtype="float32")
        w16 = w32.astype("float16")
        mean, var = nd.zeros((3, 4)), nd.zeros((3, 4))
        for step in range(3):
            g = nd.array(rng.randn(3, 4), dtype="float16")
            new = c.mp_adamw_update(w16, g, mean, var, w32, nd.full((1,), 1.0 / (step + 1)),
                                    **kw)
            key = "mp_%s/%d" % (name, step)
            out[key + "/new"], out[key + "/w16"] = new.asnumpy(), w16.asnumpy()
            out[key + "/w32"], out[key + "/grad"] = w32.asnumpy(), g.asnumpy()
            out[key + "/mean"], out[key + "/var"] = mean.asnumpy(), var.asnumpy()
            w16 = new
    return out
