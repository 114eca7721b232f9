"""MXNet 1.9.1 updating a csr weight with a csr gradient (two steps of each optimizer case), for
``tests/test_sparse_optim_more.py``. Run with MXNet installed:
``python tests/data/sparse/gen_csr_weight.py`` writes ``mxnet_csr_weight.json`` beside this."""
import json
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = [["sgd", {}], ["sgd", {"momentum": 0.9}], ["sgd", {"wd": 0.1}], ["adam", {}],
         ["adagrad", {}], ["sgd", {"lazy_update": False}]]


def run(nd, opt_mod, name, kw, stype="csr"):
    d = np.arange(12, dtype="f4").reshape(3, 4) / 10
    d[1] = 0
    d[0, 1] = 0
    gd = np.zeros((3, 4), "f4")
    gd[1, 2] = 1
    gd[2, 0] = 2
    w, g = nd.array(d).tostype(stype), nd.array(gd).tostype(stype)
    u = opt_mod.get_updater(opt_mod.create(name, learning_rate=0.1, **kw))
    for _ in range(2):
        u(0, g, w)
    return w


if __name__ == "__main__":
    import mxnet as mx

    out = []
    for name, kw in CASES:
        try:
            w = run(mx.nd, mx.optimizer, name, kw)
            out.append({"optimizer": name, "params": kw, "stype": w.stype,
                        "weight": w.asnumpy().astype(float).tolist()})
        except mx.base.MXNetError as exc:
            out.append({"optimizer": name, "params": kw,
                        "error": str(exc).strip().split("\n")[-1][:200]})
    with open(os.path.join(HERE, "mxnet_csr_weight.json"), "w") as f:
        json.dump(out, f, indent=1)
