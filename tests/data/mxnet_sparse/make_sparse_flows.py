"""Writes more sparse-training flows recorded from the real MXNet 1.9.1, in the format of
tests/data/golden/sparse/ (README there: ``embedding_flow`` and ``sparse_weight_flow``), for the
Trainer paths those cases leave out: a dense weight with row_sparse gradients updated on the
kvstore, ``allreduce_grads`` + ``update``, a row_sparse weight on two devices with
``save_states``/``load_states``, ``gluon.contrib.nn.SparseEmbedding`` (an ``embedding_flow``
with ``"sparse_weight": true``; its ``check`` reads every row with ``list_row_sparse_data``),
and MXNet's errors for misused sparse Parameters.

Run with MXNet 1.9.1 (``/tmp/mxvenv/bin/python make_sparse_flows.py``); the suite only reads the
JSON files it writes (tests/test_sparse_golden_flows.py replays them)."""
import json
import os
import sys
import tempfile
from types import SimpleNamespace

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))     # tests/: the shared replayer
from sparse_flows import replay  # noqa: E402

MXNET = SimpleNamespace(autograd=autograd, gluon=gluon, nd=nd, cpu=mx.cpu,
                        kvstore_create=mx.kv.create, optimizer=mx.optimizer)


def tolist(a):
    return np.asarray(a, dtype=np.float32).tolist()


def as_json(value):
    """A replay record as the golden files hold it (values as lists, errors by name)."""
    if isinstance(value, dict):
        value = dict(value)
        if "exception" in value:
            exc = value.pop("exception")
            value.update(mxnet_exception=type(exc).__name__,
                         mxnet_message=str(exc).strip().split("\n")[0][:300])
        if "stype" in value:
            return {"stype": value["stype"], "indices": value["indices"].astype(np.int64).tolist(),
                    "data": tolist(value["data"])}
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json(v) for v in value]
    if isinstance(value, np.ndarray):
        return tolist(value)
    return value


def run(spec):
    with tempfile.TemporaryDirectory() as tmp:
        return [None if r is None else as_json(r) for r in replay(MXNET, spec, tmp)]


# ------------------------------------------------------------------------------------ the cases
def emb_ops(rng, num_ctx, vocab, dim, steps, step_ops):
    ops = [{"op": "new_trainer"}]
    for _ in range(steps):
        x, coef = [], []
        for _ in range(num_ctx):
            b, length = rng.randint(1, 4), rng.randint(1, 4)
            ids = rng.randint(0, vocab, size=(b, length))
            x.append(ids.tolist())
            c = rng.randn(b, length, dim).astype(np.float32)
            c[rng.rand(b, length) < 0.2] = 0.0        # looked up, zero gradient: still present
            coef.append(c.tolist())
        ops.append({"op": "forward_backward", "x": x, "coef": coef})
        ops += [dict(o) for o in step_ops]
    return ops


def csr_batch(rng, rows, vocab):
    indptr, indices, data = [0], [], []
    for _ in range(rows):
        cols = np.flatnonzero(rng.rand(vocab) < 0.35)
        values = rng.randn(len(cols)).astype(np.float32)
        values[rng.rand(len(cols)) < 0.2] = 0.0           # explicit zeros stay stored
        indices += cols.tolist()
        data += values.tolist()
        indptr.append(len(indices))
    return {"stype": "csr", "shape": [rows, vocab], "data": data, "indices": indices,
            "indptr": indptr}


def sw_fb(rng, num_ctx, vocab, dim):
    row_ids, x, coef = [], [], []
    for _ in range(num_ctx):
        b = rng.randint(1, 3)
        batch = csr_batch(rng, b, vocab)
        x.append(batch)
        row_ids.append(sorted(set(batch["indices"])) + [int(rng.randint(vocab))])
        coef.append(rng.randn(b, dim).astype(np.float32).tolist())
    return {"op": "forward_backward", "row_ids": row_ids, "x": x, "coef": coef}


def cases():
    rng = np.random.RandomState(15)
    out = {}
    vocab, dim = 7, 3
    out["gluon_emb_2ctx_store_adam.json"] = {
        "kind": "embedding_flow", "num_ctx": 2, "vocab": vocab, "dim": dim,
        "emb_init": rng.randn(vocab, dim).astype(np.float32).tolist(),
        "dense_init": rng.randn(dim).astype(np.float32).tolist(),
        "optimizer": "adam", "optimizer_params": {"learning_rate": 0.05, "wd": 0.01},
        "lr_scheduler": None, "trainer": {"kvstore": "device", "update_on_kvstore": True},
        "ops": emb_ops(rng, 2, vocab, dim, 2, [{"op": "step", "batch_size": 3}, {"op": "check"}])
        + [{"op": "save_states"}, {"op": "load_states"}, {"op": "check"}]
        + emb_ops(rng, 2, vocab, dim, 2, [{"op": "step", "batch_size": 3},
                                          {"op": "check"}])[1:],
    }
    out["gluon_emb_2ctx_local_allreduce_update_sgd_std.json"] = {
        "kind": "embedding_flow", "num_ctx": 2, "vocab": vocab, "dim": dim,
        "emb_init": rng.randn(vocab, dim).astype(np.float32).tolist(), "dense_init": None,
        "optimizer": "sgd",
        "optimizer_params": {"learning_rate": 0.1, "wd": 0.05, "lazy_update": False},
        "lr_scheduler": None, "trainer": {"kvstore": "local", "update_on_kvstore": False},
        "ops": emb_ops(rng, 2, vocab, dim, 3, [{"op": "allreduce_grads"}, {"op": "check_grads"},
                                               {"op": "update", "batch_size": 2},
                                               {"op": "check"}])
        + [{"op": "expect_error", "calls": [{"op": "step", "batch_size": 2}]}],
    }
    vocab, dim = 8, 2
    ops = [{"op": "new_trainer"}]
    for _ in range(2):
        ops += [sw_fb(rng, 2, vocab, dim), {"op": "step", "batch_size": 2},
                {"op": "check", "row_ids": [[0, 3, 7], [5, 1, 1]]}]
    ops += [{"op": "check_list", "row_ids": [6, 2, 0]}, {"op": "save_states"}]
    ops += [sw_fb(rng, 2, vocab, dim), {"op": "step", "batch_size": 2},
            {"op": "load_states"}, sw_fb(rng, 2, vocab, dim), {"op": "step", "batch_size": 2},
            {"op": "check", "row_ids": [[1, 2], [4]]}, {"op": "check_full_pull"}]
    ops += [{"op": "expect_error", "calls": [{"op": "second_trainer"}]},
            {"op": "expect_error", "calls": [{"op": "data"}]},
            {"op": "expect_error", "calls": [{"op": "list_data"}]},
            {"op": "expect_error", "calls": [{"op": "row_sparse_data_of_dense"}]}]
    out["gluon_sw_2ctx_device_adam_save_load.json"] = {
        "kind": "sparse_weight_flow", "num_ctx": 2, "shape": [vocab, dim],
        "init": (rng.randn(vocab, dim) + 3.0).astype(np.float32).tolist(),
        "optimizer": "adam", "optimizer_params": {"learning_rate": 0.1, "wd": 0.02},
        "lr_scheduler": None, "trainer": {"kvstore": "device"}, "ops": ops,
    }
    base = {"kind": "sparse_weight_flow", "num_ctx": 1, "shape": [vocab, dim],
            "init": (rng.randn(vocab, dim) + 3.0).astype(np.float32).tolist(),
            "optimizer": "sgd", "optimizer_params": {"learning_rate": 0.1}, "lr_scheduler": None}
    fb = sw_fb(rng, 1, vocab, dim)
    out["gluon_sw_no_kvstore_error.json"] = dict(
        base, trainer={"kvstore": None},
        ops=[{"op": "expect_error", "calls": [{"op": "new_trainer"}, fb]}])
    out["gluon_sw_update_on_kvstore_false_error.json"] = dict(
        base, trainer={"kvstore": "device", "update_on_kvstore": False},
        ops=[{"op": "expect_error", "calls": [{"op": "new_trainer"}, fb]}])
    out["gluon_sparse_embedding_2ctx_adam.json"] = {
        "kind": "embedding_flow", "sparse_weight": True, "num_ctx": 2, "vocab": 7,
        "dim": 3, "emb_init": rng.randn(7, 3).astype(np.float32).tolist(),
        "dense_init": rng.randn(3).astype(np.float32).tolist(),
        "optimizer": "adam", "optimizer_params": {"learning_rate": 0.1, "wd": 0.01},
        "lr_scheduler": None, "trainer": {"kvstore": "device"},
        "ops": emb_ops(rng, 2, 7, 3, 3, [{"op": "step", "batch_size": 4}, {"op": "check"}]),
    }
    return out


def main():
    assert mx.__version__ == "1.9.1", mx.__version__
    for name, spec in cases().items():
        result = {"records": run(spec)}
        with open(os.path.join(HERE, name), "w") as f:
            json.dump({"spec": spec, "result": result}, f)
        print(name, file=sys.stderr)


if __name__ == "__main__":
    main()
