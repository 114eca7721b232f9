"""``nd.sparse`` (row_sparse and csr arrays) against real MXNet 1.9.1 (tests/data/golden/sparse/
nd_sparse_01.json: every value a multiple of 1/8, so results are exact)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy
import pytest

import sparse_flows
from trainer_cli import autograd, cpu, nd
from trainer_cli.ndarray import sparse

CASE = json.loads((Path(__file__).resolve().parent / "data" / "golden" / "sparse" /
                   "nd_sparse_01.json").read_text())


def build(value, ctx=None):
    return sparse_flows.build(SimpleNamespace(nd=nd), value, ctx or cpu(0))


def check(got, record):
    """``got`` equals MXNet's record: storage type, stored indices and values, exactly."""
    if "stype" in record:
        assert got.stype == record["stype"]
        value = record["value"]
        if record["stype"] == "default":
            assert got.asnumpy().tolist() == value
        else:
            assert got.indices.asnumpy().tolist() == value["indices"]
            data = got.data.asnumpy()
            assert data.tolist() == value["data"] or (data.size == 0 and value["data"] == [])
            if record["stype"] == "csr":
                assert got.indptr.asnumpy().tolist() == value["indptr"]
            assert got.indices.dtype == numpy.int64
    if "dense" in record:
        assert got.asnumpy().tolist() == record["dense"]
    if "ctx" in record:
        assert got.context == cpu(record["ctx"])


CASES = list(zip(CASE["spec"]["ops"], CASE["result"]["records"]))


@pytest.mark.parametrize("op, record", CASES, ids=["%d-%s" % (i, op["op"]) for i, (op, _) in enumerate(CASES)])
def test_nd_sparse_matches_mxnet(op, record):
    kind = op["op"]
    if kind == "rsp_build":
        check(build(op["value"]), record)
    elif kind == "tostype":
        check(build(op["value"]).tostype(op["to"]), record)
    elif kind == "retain":
        check(nd.sparse.retain(build(op["value"]), nd.array(op["ids"], dtype="int64")), record)
    elif kind == "add":
        check(build(op["a"]) + build(op["b"]), record)
    elif kind == "mul_scalar":
        check(build(op["value"]) * op["scalar"], record)
    elif kind == "copyto":
        check(build(op["value"]).copyto(cpu(op["ctx"])), record)
    elif kind == "asnumpy":
        assert build(op["value"]).asnumpy().tolist() == record["dense"]
    elif kind == "dot":
        check(nd.sparse.dot(build(op["a"]), build(op["b"]), transpose_a=op.get("transpose_a", False)),
              record)
    elif kind == "dot_grad":
        a, w = build(op["a"]), build(op["w"])
        w.attach_grad(stype=op["grad_stype"])
        with autograd.record():
            y = nd.sparse.dot(a, w)
            loss = (y * nd.array(op["coef"])).sum()
        loss.backward()
        assert y.asnumpy().tolist() == record["y"]
        check(w.grad, record)
    elif kind == "zeros":
        check(nd.sparse.zeros(op["stype"], op["shape"]), record)
    elif kind == "expect_error":
        with pytest.raises(ValueError, match=record["mxnet_message"]):
            build(op["value"]).tostype(op["to"])
    else:
        raise AssertionError("unknown op %s" % kind)


def test_dot_gradient_by_finite_differences_and_accumulation():
    rng = numpy.random.default_rng(3)
    # float32-exact values: the csr is built from a float32 array and widened
    dense = (rng.standard_normal((5, 8)) * (rng.random((5, 8)) < 0.4)).astype(numpy.float32).astype(float)
    dense[:, 6:] = 0  # columns no entry touches: their rows must not be in the gradient
    csr = nd.array(dense).tostype("csr")
    w0 = rng.standard_normal((8, 3))
    coef = rng.standard_normal((5, 3))
    w = nd.array(w0, dtype="float64")
    csr64 = nd.sparse.csr_matrix(csr, dtype="float64")
    w.attach_grad(stype="row_sparse", grad_req="add")
    for _ in range(2):  # grad_req add: the second backward doubles the rows
        with autograd.record():
            loss = (nd.sparse.dot(csr64, w) * nd.array(coef, dtype="float64")).sum()
        loss.backward()
    expected = 2 * dense.T @ coef
    stored = sorted(set(numpy.nonzero(dense)[1].tolist()))
    assert w.grad.stype == "row_sparse" and w.grad.indices.asnumpy().tolist() == stored
    numpy.testing.assert_allclose(w.grad.asnumpy(), expected, rtol=1e-12, atol=1e-12)
    # finite differences of the loss in one stored and one unstored row
    def f(wv):
        return float(((dense @ wv) * coef).sum())
    for row in (stored[0], next(i for i in range(8) if i not in stored)):
        bumped = w0.copy()
        bumped[row, 1] += 1e-6
        fd = (f(bumped) - f(w0)) / 1e-6
        assert abs(fd - expected[row, 1] / 2) < 1e-5


def test_storage_stays_sparse_and_bad_input_is_refused():
    table = nd.sparse.zeros("row_sparse", (1_000_000, 64))
    assert table.data.shape == (0, 64) and table.shape == (1_000_000, 64)
    ids = nd.array([3, 999_999], dtype="int64")
    kept = nd.sparse.retain(table, ids)
    assert kept.data.shape == (2, 64) and kept.indices.asnumpy().tolist() == [3, 999_999]
    twice = kept + kept * 2.0
    assert twice.stype == "row_sparse" and twice.data.shape == (2, 64)
    with pytest.raises(ValueError, match="sorted, unique"):
        nd.sparse.row_sparse_array(([[1.0], [2.0]], [3, 1]), shape=(5, 1))
    with pytest.raises(ValueError, match="indptr"):
        nd.sparse.csr_matrix(([1.0], [0], [0, 2]), shape=(1, 3))
    with pytest.raises(ValueError, match="unknown storage type"):
        nd.zeros((2, 2)).tostype("coo")
    dense = nd.array([[1.0, 0.0], [0.0, 0.0]])
    same = dense.tostype("default")        # a new array, as MXNet 1.9.1's cast_storage gives
    assert same is not dense and same.asnumpy().tolist() == dense.asnumpy().tolist()
