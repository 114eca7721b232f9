"""Writes more sparse-training flows recorded from the real MXNet 1.9.1, in the format of
tests/data/golden/sparse/ (README there: ``embedding_flow`` and ``sparse_weight_flow``), for the
Trainer paths those cases leave out: a dense weight with row_sparse gradients updated on the
kvstore, ``allreduce_grads`` + ``update``, a row_sparse weight on two devices with
``save_states``/``load_states``, and MXNet's errors for misused sparse Parameters.

Run with MXNet 1.9.1 (``/tmp/mxvenv/bin/python make_sparse_flows.py``); the suite only reads the
JSON files it writes (tests/test_sparse_golden_flows.py replays them)."""
import json
import os
import sys
import tempfile

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

HERE = os.path.dirname(os.path.abspath(__file__))


def tolist(a):
    return np.asarray(a, dtype=np.float32).tolist()


def record_value(arr):
    if arr.stype == "default":
        return tolist(arr.asnumpy())
    return {"stype": arr.stype, "indices": arr.indices.asnumpy().astype(np.int64).tolist(),
            "data": tolist(arr.data.asnumpy())}


def error_record(exc, at):
    name = type(exc).__name__
    return {"raised": True, "at": at, "mxnet_exception": name,
            "mxnet_message": str(exc).strip().split("\n")[0][:300]}


def run_embedding_flow(spec, tmp):
    ctxs = [mx.cpu(i) for i in range(spec["num_ctx"])]
    emb = gluon.nn.Embedding(spec["vocab"], spec["dim"], sparse_grad=True)
    emb.initialize(ctx=ctxs)
    emb.weight.set_data(nd.array(spec["emb_init"]))
    params = [emb.weight]
    scale = None
    if spec["dense_init"] is not None:
        scale = gluon.Parameter("scale", shape=(spec["dim"],))
        scale.initialize(ctx=ctxs)
        scale.set_data(nd.array(spec["dense_init"]))
        params.append(scale)
    states = os.path.join(tmp, "emb.states")
    box = {}

    def new_trainer():
        return gluon.Trainer(params, spec["optimizer"], dict(spec["optimizer_params"]),
                             **spec["trainer"])

    def grads():
        return [[record_value(p.grad(c)) for c in ctxs] for p in params]

    def call(op):
        kind = op["op"]
        if kind == "new_trainer":
            box["t"] = new_trainer()
        elif kind == "forward_backward":
            for j, ctx in enumerate(ctxs):
                x = nd.array(op["x"][j], ctx=ctx)
                coef = nd.array(op["coef"][j], ctx=ctx)
                with autograd.record():
                    e = emb(x)
                    if scale is not None:
                        e = e * scale.data(ctx).reshape((1, 1, spec["dim"]))
                    y = (e * coef).sum()
                y.backward()
            return {"grads": grads()}
        elif kind in ("step", "update"):
            getattr(box["t"], kind)(op["batch_size"])
        elif kind == "allreduce_grads":
            box["t"].allreduce_grads()
        elif kind == "check":
            return {"weights": [[tolist(d.asnumpy()) for d in p.list_data()] for p in params],
                    "lr": box["t"].learning_rate}
        elif kind == "check_grads":
            return {"grads": grads()}
        elif kind == "save_states":
            box["t"].save_states(states)
        elif kind == "load_states":
            box["t"] = new_trainer()
            box["t"].load_states(states)
        else:
            raise AssertionError(kind)
        return None

    return call


def run_sparse_weight_flow(spec, tmp):
    ctxs = [mx.cpu(i) for i in range(spec["num_ctx"])]
    shape = tuple(spec["shape"])
    p = gluon.Parameter("weight", shape=shape, stype="row_sparse", grad_stype="row_sparse")
    p.initialize(ctx=ctxs)
    p.set_data(nd.array(spec["init"]))
    dense = gluon.Parameter("dense", shape=(2,))
    dense.initialize(ctx=ctxs)
    states = os.path.join(tmp, "sw.states")
    box = {}

    def ids(row_ids, ctx):
        return nd.array(row_ids, ctx=ctx, dtype="int64")

    def call(op):
        kind = op["op"]
        if kind == "new_trainer":
            box["t"] = gluon.Trainer([p], spec["optimizer"], dict(spec["optimizer_params"]),
                                     **spec["trainer"])
        elif kind == "second_trainer":
            gluon.Trainer([p], "sgd")
        elif kind == "data":
            p.data(ctxs[0])
        elif kind == "list_data":
            p.list_data()
        elif kind == "row_sparse_data_of_dense":
            dense.row_sparse_data(ids([0], ctxs[0]))
        elif kind == "forward_backward":
            pulled = [p.row_sparse_data(ids(op["row_ids"][j], c)) for j, c in enumerate(ctxs)]
            for j, ctx in enumerate(ctxs):
                x = nd.sparse.csr_matrix((op["x"][j]["data"], op["x"][j]["indices"],
                                          op["x"][j]["indptr"]), shape=op["x"][j]["shape"],
                                         ctx=ctx)
                coef = nd.array(op["coef"][j], ctx=ctx)
                with autograd.record():
                    y = (nd.sparse.dot(x, pulled[j]) * coef).sum()
                y.backward()
            return {"pulled": [record_value(w) for w in pulled],
                    "grads": [record_value(p.grad(c)) for c in ctxs]}
        elif kind == "step":
            box["t"].step(op["batch_size"])
        elif kind == "check":
            return {"weights": [record_value(p.row_sparse_data(ids(op["row_ids"][j], c)))
                                for j, c in enumerate(ctxs)], "lr": box["t"].learning_rate}
        elif kind == "check_list":
            return {"weights": [record_value(w) for w in
                                p.list_row_sparse_data(ids(op["row_ids"], ctxs[0]))]}
        elif kind == "check_full_pull":
            out = nd.sparse.zeros("row_sparse", shape)
            box["t"]._row_sparse_pull(p, out, nd.arange(0, shape[0], dtype="int64"),
                                      full_idx=True)
            return {"weight": record_value(out)}
        elif kind == "save_states":
            box["t"].save_states(states)
        elif kind == "load_states":
            box["t"].load_states(states)
        else:
            raise AssertionError(kind)
        return None

    return call


RUNNERS = {"embedding_flow": run_embedding_flow, "sparse_weight_flow": run_sparse_weight_flow}


def run(spec):
    records = []
    with tempfile.TemporaryDirectory() as tmp:
        call = RUNNERS[spec["kind"]](spec, tmp)
        for op in spec["ops"]:
            if op["op"] == "expect_error":
                rec = {"raised": False}
                for j, sub in enumerate(op["calls"]):
                    try:
                        call(sub)
                    except Exception as exc:  # noqa: BLE001 - recording what MXNet raises
                        rec = error_record(exc, j)
                        break
                records.append(rec)
            else:
                records.append(call(op))
    return records


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
