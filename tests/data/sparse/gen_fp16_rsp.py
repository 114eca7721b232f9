"""MXNet 1.9.1's updates of a float16 row_sparse weight with ``multi_precision=True`` (two
steps, a row_sparse float16 gradient on rows 1 and 3), for ``tests/test_sparse_optim_more.py``.
Run with MXNet installed: ``python tests/data/sparse/gen_fp16_rsp.py`` writes
``mxnet_fp16_rsp.json`` beside this script."""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [["sgd", {"momentum": 0.9}], ["sgd", {}], ["adam", {}]]


def run(nd, opt_mod, name, kw):
    w0 = (np.arange(12).reshape(4, 3) / 10).astype("float16")
    w = nd.array(w0, dtype="float16").tostype("row_sparse")
    g = nd.sparse.row_sparse_array((np.ones((2, 3), dtype="float16"), [1, 3]), shape=(4, 3),
                                   dtype="float16")
    o = opt_mod.create(name, learning_rate=0.1, multi_precision=True, wd=0.01, **kw)
    u = opt_mod.get_updater(o)
    for _ in range(2):
        u(0, g, w)
    return w


if __name__ == "__main__":
    import mxnet as mx

    out = []
    for name, kw in CASES:
        w = run(mx.nd, mx.optimizer, name, kw)
        out.append({"optimizer": name, "params": kw, "stype": w.stype,
                    "dtype": np.dtype(w.dtype).name, "weight": w.asnumpy().astype(float).tolist()})
    with open(os.path.join(HERE, "mxnet_fp16_rsp.json"), "w") as f:
        json.dump(out, f, indent=1)
