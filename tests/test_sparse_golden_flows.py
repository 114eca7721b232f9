"""Sparse training flows replayed against real MXNet 1.9.1 (tests/data/golden/sparse/; format in
/work/shared/reference/golden/sparse/README.md): ``Embedding(sparse_grad=True)`` under a Trainer
(``embedding_flow``), a row_sparse weight updated on the kvstore (``sparse_weight_flow``), and
the kvstore's row_sparse push/pull (``kvstore``). Storage types and indices must match exactly,
values within float32 rounding (|got - expected| <= 1e-6 + 1e-5 |expected|)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest

from trainer_cli import autograd, cpu, gluon, kvstore, nd

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "golden" / "sparse"
# More flows in the same format, recorded from MXNet 1.9.1 by mxnet_sparse/make_sparse_flows.py.
MORE = DATA / "mxnet_sparse"
ATOL, RTOL = 1e-6, 1e-5


def load(name):
    path = GOLDEN / name if (GOLDEN / name).exists() else MORE / name
    return json.loads(path.read_text())


def build(value, ctx):
    if isinstance(value, dict) and value["stype"] == "row_sparse":
        data = numpy.asarray(value["data"], dtype=numpy.float32)
        return nd.sparse.row_sparse_array((data, value["indices"]), shape=value["shape"], ctx=ctx)
    if isinstance(value, dict) and value["stype"] == "csr":
        return nd.sparse.csr_matrix((value["data"], value["indices"], value["indptr"]),
                                    shape=value["shape"], ctx=ctx)
    return nd.array(value, ctx=ctx)


def assert_close(got, expected, what):
    got = numpy.asarray(got, dtype=numpy.float64)
    expected = numpy.asarray(expected, dtype=numpy.float64)
    if expected.size == 0 and got.size == 0:
        return
    assert got.shape == expected.shape, "%s: shape %s != %s" % (what, got.shape, expected.shape)
    bad = numpy.abs(got - expected) > ATOL + RTOL * numpy.abs(expected)
    assert not bad.any(), "%s: got %s expected %s" % (what, got[bad][:5], expected[bad][:5])


def check_value(got, expected, what):
    """A recorded value: dense nested lists, or ``{"stype", "indices", "data"}`` (exact stype and
    indices, int64 indices, close values)."""
    if isinstance(expected, dict):
        assert got.stype == expected["stype"], "%s: stype %s != %s" % (what, got.stype,
                                                                     expected["stype"])
        assert got.indices.dtype == numpy.int64, what
        assert got.indices.asnumpy().tolist() == expected["indices"], "%s: indices %s != %s" % (
            what, got.indices.asnumpy().tolist(), expected["indices"])
        assert_close(got.data.asnumpy(), expected["data"], what)
    else:
        assert got.stype == "default", "%s: stype %s, expected dense" % (what, got.stype)
        assert_close(got.asnumpy(), expected, what)


def check_lr(got, expected, what):
    assert abs(got - expected) <= RTOL * abs(expected), "%s: lr %s != %s" % (what, got, expected)


# --------------------------------------------------------------------------- embedding_flow
def replay_embedding_flow(spec, tmp_path):
    ctxs = [cpu(i) for i in range(spec["num_ctx"])]
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
    states = str(tmp_path / "emb.states")
    trainer = None

    def new_trainer():
        return gluon.Trainer(params, spec["optimizer"], dict(spec["optimizer_params"]),
                             **spec["trainer"])

    def grads():
        return [[p.grad(c) for c in ctxs] for p in params]

    def call(op):
        nonlocal trainer
        kind = op["op"]
        if kind == "new_trainer":
            trainer = new_trainer()
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
            getattr(trainer, kind)(op["batch_size"])
        elif kind == "allreduce_grads":
            trainer.allreduce_grads()
        elif kind == "check":
            return {"weights": [p.list_data() for p in params], "lr": trainer.learning_rate}
        elif kind == "check_grads":
            return {"grads": grads()}
        elif kind == "save_states":
            trainer.save_states(states)
        elif kind == "load_states":
            trainer = new_trainer()
            trainer.load_states(states)
        else:
            raise AssertionError("unknown op %s" % kind)
        return None

    return call


# --------------------------------------------------------------------------- sparse_weight_flow
def replay_sparse_weight_flow(spec, tmp_path):
    ctxs = [cpu(i) for i in range(spec["num_ctx"])]
    shape = tuple(spec["shape"])
    p = gluon.Parameter("weight", shape=shape, stype="row_sparse", grad_stype="row_sparse")
    p.initialize(ctx=ctxs)
    p.set_data(nd.array(spec["init"]))
    dense = gluon.Parameter("dense", shape=(2,))
    dense.initialize(ctx=ctxs)
    states = str(tmp_path / "sw.states")
    trainer = None

    def ids(row_ids, ctx):
        return nd.array(row_ids, ctx=ctx, dtype="int64")

    def call(op):
        nonlocal trainer
        kind = op["op"]
        if kind == "new_trainer":
            trainer = gluon.Trainer([p], spec["optimizer"], dict(spec["optimizer_params"]),
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
                x = build(op["x"][j], ctx)
                coef = nd.array(op["coef"][j], ctx=ctx)
                with autograd.record():
                    y = (nd.sparse.dot(x, pulled[j]) * coef).sum()
                y.backward()
            return {"pulled": pulled, "grads": [p.grad(c) for c in ctxs]}
        elif kind == "step":
            trainer.step(op["batch_size"])
        elif kind == "check":
            return {"weights": [p.row_sparse_data(ids(op["row_ids"][j], c))
                                for j, c in enumerate(ctxs)], "lr": trainer.learning_rate}
        elif kind == "check_list":
            return {"weights": p.list_row_sparse_data(ids(op["row_ids"], ctxs[0]))}
        elif kind == "check_full_pull":
            out = nd.sparse.zeros("row_sparse", shape)
            trainer._row_sparse_pull(p, out, nd.arange(0, shape[0], dtype="int64"), full_idx=True)
            return {"weight": out}
        elif kind == "save_states":
            trainer.save_states(states)
        elif kind == "load_states":
            trainer.load_states(states)
        else:
            raise AssertionError("unknown op %s" % kind)
        return None

    return call


# --------------------------------------------------------------------------- kvstore
def replay_kvstore(spec, tmp_path):
    kv = kvstore.create(spec["type"])

    def outs_for(op):
        return [nd.sparse.zeros(op.get("out_stype", "row_sparse"), op["shape"], ctx=cpu(c))
                if op.get("out_stype", "row_sparse") != "default"
                else nd.zeros(op["shape"], ctx=cpu(c)) for c in op["out_ctx"]]

    def call(op):
        kind = op["op"]
        if kind == "set_optimizer":
            from trainer_cli import optimizer
            kv.set_optimizer(optimizer.create(op["optimizer"], **op["optimizer_params"]))
        elif kind == "init":
            kv.init(op["key"], build(op["value"], cpu(0)))
        elif kind == "push":
            kv.push(op["key"], [build(v, cpu(v.get("ctx", 0))) for v in op["values"]])
        elif kind == "row_sparse_pull":
            outs = outs_for(op)
            ids = [nd.array(r, ctx=o.context, dtype="int64") for r, o in zip(op["row_ids"], outs)]
            kv.row_sparse_pull(op["key"], outs[0] if len(outs) == 1 else outs,
                               row_ids=ids[0] if len(ids) == 1 else ids)
            return {"outs": outs}
        elif kind == "pull":
            outs = outs_for(op)
            kv.pull(op["key"], outs[0] if len(outs) == 1 else outs,
                    ignore_sparse=op["ignore_sparse"])
            return {"outs": outs}
        else:
            raise AssertionError("unknown op %s" % kind)
        return None

    return call


REPLAYERS = {"embedding_flow": replay_embedding_flow, "sparse_weight_flow": replay_sparse_weight_flow,
             "kvstore": replay_kvstore}
# MXNet's exception types and what meets them here (README, "Tolerances").
MEETS = {"MXNetError": (RuntimeError, ValueError), "AssertionError": (AssertionError, ValueError),
         "ValueError": (ValueError,), "RuntimeError": (RuntimeError,), "TypeError": (TypeError,),
         "UserWarning": (UserWarning,)}


def run_case(name, tmp_path, stop_at=None):
    """Replay ``name`` and compare every record (up to the first op named ``stop_at``)."""
    case = load(name)
    call = REPLAYERS[case["spec"]["kind"]](case["spec"], tmp_path)
    for i, (op, expected) in enumerate(zip(case["spec"]["ops"], case["result"]["records"])):
        if op["op"] == stop_at:
            break
        what = "%s op %d (%s)" % (name, i, op["op"])
        if op["op"] == "expect_error":
            raised_at = None
            for j, sub in enumerate(op["calls"]):
                try:
                    call(sub)
                except (AttributeError, ImportError, NameError, NotImplementedError):
                    raise
                except MEETS[expected["mxnet_exception"]]:
                    raised_at = j
                    break
            assert raised_at == expected["at"], "%s: expected %s at call %s, raised at %s" % (
                what, expected["mxnet_exception"], expected["at"], raised_at)
            continue
        got = call(op)
        if expected is None:
            continue
        for key in ("grads", "weights"):
            if key not in expected:
                continue
            for p, (gp, ep) in enumerate(zip(got[key], expected[key])):
                if isinstance(ep, list) and ep and isinstance(ep[0], (dict, list)) and \
                        isinstance(gp, list):
                    assert len(gp) == len(ep), what
                    for c, (gc, ec) in enumerate(zip(gp, ep)):
                        check_value(gc, ec, "%s %s[%d][%d]" % (what, key, p, c))
                else:
                    check_value(gp, ep, "%s %s[%d]" % (what, key, p))
        for key in ("pulled", "outs"):
            if key in expected:
                assert len(got[key]) == len(expected[key]), what
                for c, (gc, ec) in enumerate(zip(got[key], expected[key])):
                    check_value(gc, ec, "%s %s[%d]" % (what, key, c))
        if "weight" in expected:
            check_value(got["weight"], expected["weight"], what)
        if "lr" in expected:
            check_lr(got["lr"], expected["lr"], what)
    return case


def test_golden_kvstore_push_row_sparse_and_pull(tmp_path):
    run_case("kv_local_push_rsp_pull.json", tmp_path)


@pytest.mark.parametrize("name", ["emb_2ctx_device_sgd_mom_lazy.json",
                                  "emb_1ctx_adam_save_load.json", "sw_1ctx_local_sgd_mom.json"])
def test_golden_sparse_gradients_and_pulls_before_the_first_step(name, tmp_path):
    run_case(name, tmp_path, stop_at="step")


FLOWS = ["emb_2ctx_device_sgd_mom_lazy.json", "emb_1ctx_adam_save_load.json",
         "sw_1ctx_local_sgd_mom.json", "gluon_emb_2ctx_store_adam.json",
         "gluon_emb_2ctx_local_allreduce_update_sgd_std.json",
         "gluon_sw_2ctx_device_adam_save_load.json", "gluon_sw_no_kvstore_error.json",
         "gluon_sw_update_on_kvstore_false_error.json"]


@pytest.mark.parametrize("name", FLOWS)
def test_sparse_training_flow_matches_mxnet(name, tmp_path):
    run_case(name, tmp_path)
