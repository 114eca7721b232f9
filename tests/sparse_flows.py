"""Replaying the sparse golden flows (format: tests/data/golden/sparse/README.md, the
``embedding_flow``, ``sparse_weight_flow`` and ``kvstore`` kinds) with either library: the same
code runs under trainer_cli (the tests) and under MXNet 1.9.1 (data/mxnet_sparse/
make_sparse_flows.py, which records the expected results), since one is the other's API.

``lib`` is a namespace with ``autograd``, ``gluon``, ``nd``, ``cpu`` and ``kvstore_create``.
``replay(lib, spec, tmp_dir)`` returns one record per op: the arrays the op reads (gradients,
weights, pulls), a learning rate, or for ``expect_error`` the exception raised and the position
of the call that raised it."""
from __future__ import annotations

import os

import numpy


def build(lib, value, ctx):
    """An array from a golden value: dense nested lists, or a row_sparse / csr dict."""
    if isinstance(value, dict) and value["stype"] == "row_sparse":
        data = numpy.asarray(value["data"], dtype=numpy.float32)
        return lib.nd.sparse.row_sparse_array((data, value["indices"]), shape=value["shape"],
                                              ctx=ctx)
    if isinstance(value, dict) and value["stype"] == "csr":
        return lib.nd.sparse.csr_matrix((value["data"], value["indices"], value["indptr"]),
                                        shape=value["shape"], ctx=ctx)
    return lib.nd.array(value, ctx=ctx)


def _embedding_flow(lib, spec, tmp_dir):
    nd, gluon = lib.nd, lib.gluon
    ctxs = [lib.cpu(i) for i in range(spec["num_ctx"])]
    if spec.get("sparse_weight"):
        # The table as a row_sparse weight in the kvstore: each forward pulls its rows.
        emb = gluon.contrib.nn.SparseEmbedding(spec["vocab"], spec["dim"])
    else:
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
    states = os.path.join(str(tmp_dir), "emb.states")
    box = {}

    def new_trainer():
        box["trainer"] = gluon.Trainer(params, spec["optimizer"], dict(spec["optimizer_params"]),
                                       **spec["trainer"])

    def grads():
        return {"grads": [[p.grad(c) for c in ctxs] for p in params]}

    def forward_backward(op):
        for j, ctx in enumerate(ctxs):
            x = nd.array(op["x"][j], ctx=ctx)
            coef = nd.array(op["coef"][j], ctx=ctx)
            with lib.autograd.record():
                e = emb(x)
                if scale is not None:
                    e = e * scale.data(ctx).reshape((1, 1, spec["dim"]))
                y = (e * coef).sum()
            y.backward()
        return grads()

    def weights(p):
        if p._stype == "default":
            return p.list_data()
        return p.list_row_sparse_data(nd.arange(0, spec["vocab"], dtype="int64"))

    def load_states(op):
        new_trainer()                       # a new Trainer over the same Parameters loads
        box["trainer"].load_states(states)

    ops = {
        "new_trainer": lambda op: new_trainer(),
        "forward_backward": forward_backward,
        "step": lambda op: box["trainer"].step(op["batch_size"]),
        "update": lambda op: box["trainer"].update(op["batch_size"]),
        "allreduce_grads": lambda op: box["trainer"].allreduce_grads(),
        "check": lambda op: {"weights": [weights(p) for p in params],
                             "lr": box["trainer"].learning_rate},
        "check_grads": lambda op: grads(),
        "save_states": lambda op: box["trainer"].save_states(states),
        "load_states": load_states,
    }
    return ops


def _sparse_weight_flow(lib, spec, tmp_dir):
    nd, gluon = lib.nd, lib.gluon
    ctxs = [lib.cpu(i) for i in range(spec["num_ctx"])]
    shape = tuple(spec["shape"])
    p = gluon.Parameter("weight", shape=shape, stype="row_sparse", grad_stype="row_sparse")
    p.initialize(ctx=ctxs)
    p.set_data(nd.array(spec["init"]))
    dense = gluon.Parameter("dense", shape=(2,))
    dense.initialize(ctx=ctxs)
    states = os.path.join(str(tmp_dir), "sw.states")
    box = {}

    def ids(row_ids, ctx):
        return nd.array(row_ids, ctx=ctx, dtype="int64")

    def new_trainer():
        box["trainer"] = gluon.Trainer([p], spec["optimizer"], dict(spec["optimizer_params"]),
                                       **spec["trainer"])

    def forward_backward(op):
        pulled = [p.row_sparse_data(ids(op["row_ids"][j], c)) for j, c in enumerate(ctxs)]
        for j, ctx in enumerate(ctxs):
            x = build(lib, op["x"][j], ctx)
            coef = nd.array(op["coef"][j], ctx=ctx)
            with lib.autograd.record():
                y = (nd.sparse.dot(x, pulled[j]) * coef).sum()
            y.backward()
        return {"pulled": pulled, "grads": [p.grad(c) for c in ctxs]}

    def full_pull(op):
        out = nd.sparse.zeros("row_sparse", shape)
        box["trainer"]._row_sparse_pull(p, out, nd.arange(0, shape[0], dtype="int64"),
                                        full_idx=True)
        return {"weight": out}

    ops = {
        "new_trainer": lambda op: new_trainer(),
        "second_trainer": lambda op: gluon.Trainer([p], "sgd"),
        "data": lambda op: p.data(ctxs[0]),
        "list_data": lambda op: p.list_data(),
        "row_sparse_data_of_dense": lambda op: dense.row_sparse_data(ids([0], ctxs[0])),
        "forward_backward": forward_backward,
        "step": lambda op: box["trainer"].step(op["batch_size"]),
        "check": lambda op: {"weights": [p.row_sparse_data(ids(op["row_ids"][j], c))
                                         for j, c in enumerate(ctxs)],
                             "lr": box["trainer"].learning_rate},
        "check_list": lambda op: {"weights": p.list_row_sparse_data(ids(op["row_ids"], ctxs[0]))},
        "check_full_pull": full_pull,
        "save_states": lambda op: box["trainer"].save_states(states),
        "load_states": lambda op: box["trainer"].load_states(states),   # the same Trainer
    }
    return ops


def _kvstore(lib, spec, tmp_dir):
    nd = lib.nd
    kv = lib.kvstore_create(spec["type"])

    def outs_for(op):
        stype = op.get("out_stype", "row_sparse")
        return [nd.sparse.zeros(stype, op["shape"], ctx=lib.cpu(c)) if stype != "default"
                else nd.zeros(op["shape"], ctx=lib.cpu(c)) for c in op["out_ctx"]]

    def row_sparse_pull(op):
        outs = outs_for(op)
        ids = [nd.array(r, ctx=o.context, dtype="int64") for r, o in zip(op["row_ids"], outs)]
        kv.row_sparse_pull(op["key"], outs[0] if len(outs) == 1 else outs,
                           row_ids=ids[0] if len(ids) == 1 else ids)
        return {"outs": outs}

    def pull(op):
        outs = outs_for(op)
        kv.pull(op["key"], outs[0] if len(outs) == 1 else outs, ignore_sparse=op["ignore_sparse"])
        return {"outs": outs}

    ops = {
        "set_optimizer": lambda op: kv.set_optimizer(
            lib.optimizer.create(op["optimizer"], **op["optimizer_params"])),
        "init": lambda op: kv.init(op["key"], build(lib, op["value"], lib.cpu(0))),
        "push": lambda op: kv.push(op["key"], [build(lib, v, lib.cpu(v.get("ctx", 0)))
                                               for v in op["values"]]),
        "row_sparse_pull": row_sparse_pull,
        "pull": pull,
    }
    return ops


KINDS = {"embedding_flow": _embedding_flow, "sparse_weight_flow": _sparse_weight_flow,
         "kvstore": _kvstore}
# Failures of the harness itself (a missing feature), never taken for an expected error.
NOT_AN_ANSWER = (AttributeError, ImportError, NameError, NotImplementedError, KeyError)


def snapshot(value):
    """A record's arrays copied to the host as they are now (later ops change them in place):
    a dense array as a NumPy array, a sparse one as ``{"stype", "indices", "data"}`` (indices
    keep their dtype)."""
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [snapshot(v) for v in value]
    if hasattr(value, "stype") and hasattr(value, "asnumpy"):
        if value.stype == "default":
            return value.asnumpy()
        return {"stype": value.stype, "indices": value.indices.asnumpy(),
                "data": value.data.asnumpy()}
    return value


def replay(lib, spec, tmp_dir, stop_at=None):
    """One record per op of ``spec`` (up to the first op named ``stop_at``), taken by
    ``snapshot`` right after the op; None for ops that read nothing."""
    ops = KINDS[spec["kind"]](lib, spec, tmp_dir)
    records = []
    for op in spec["ops"]:
        if op["op"] == stop_at:
            break
        if op["op"] != "expect_error":
            result = ops[op["op"]](op)
            records.append(snapshot(result) if isinstance(result, dict) else None)
            continue
        record = {"raised": False}
        for j, call in enumerate(op["calls"]):
            try:
                ops[call["op"]](call)
            except NOT_AN_ANSWER:
                raise
            except Exception as exc:  # noqa: BLE001 - what was raised is the answer
                record = {"raised": True, "at": j, "exception": exc}
                break
        records.append(record)
    return records
