"""Sparse training flows replayed against real MXNet 1.9.1 (tests/data/golden/sparse/; format in
/work/shared/reference/golden/sparse/README.md): ``Embedding(sparse_grad=True)`` under a Trainer
(``embedding_flow``), a row_sparse weight updated on the kvstore (``sparse_weight_flow``), and
the kvstore's row_sparse push/pull (``kvstore``). Storage types and indices must match exactly,
values within float32 rounding (|got - expected| <= 1e-6 + 1e-5 |expected|)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy
import pytest

from sparse_flows import replay
from trainer_cli import autograd, cpu, gluon, kvstore, nd, optimizer

DATA = Path(__file__).resolve().parent / "data"
GOLDEN = DATA / "golden" / "sparse"
# More flows in the same format, recorded from MXNet 1.9.1 by mxnet_sparse/make_sparse_flows.py.
MORE = DATA / "mxnet_sparse"
ATOL, RTOL = 1e-6, 1e-5


def load(name):
    path = GOLDEN / name if (GOLDEN / name).exists() else MORE / name
    return json.loads(path.read_text())


TRAINER_CLI = SimpleNamespace(autograd=autograd, gluon=gluon, nd=nd, cpu=cpu,
                              kvstore_create=kvstore.create, optimizer=optimizer)
# MXNet's exception types and what meets them here (README, "Tolerances").
MEETS = {"MXNetError": (RuntimeError, ValueError), "AssertionError": (AssertionError, ValueError),
         "ValueError": (ValueError,), "RuntimeError": (RuntimeError,), "TypeError": (TypeError,),
         "UserWarning": (UserWarning,)}


def assert_close(got, expected, what):
    got = numpy.asarray(got, dtype=numpy.float64)
    expected = numpy.asarray(expected, dtype=numpy.float64)
    if expected.size == 0 and got.size == 0:
        return
    assert got.shape == expected.shape, "%s: shape %s != %s" % (what, got.shape, expected.shape)
    bad = numpy.abs(got - expected) > ATOL + RTOL * numpy.abs(expected)
    assert not bad.any(), "%s: got %s expected %s" % (what, got[bad][:5], expected[bad][:5])


def check_value(got, expected, what):
    """A snapshot against a recorded value: dense nested lists, or ``{"stype", "indices",
    "data"}`` (exact stype and int64 indices, close values)."""
    if isinstance(expected, dict):
        assert isinstance(got, dict) and got["stype"] == expected["stype"], (
            "%s: %s, expected %s" % (what, got if not isinstance(got, dict) else got["stype"],
                                     expected["stype"]))
        assert got["indices"].dtype == numpy.int64, what
        assert got["indices"].tolist() == expected["indices"], "%s: indices %s != %s" % (
            what, got["indices"].tolist(), expected["indices"])
        assert_close(got["data"], expected["data"], what)
    else:
        assert isinstance(got, numpy.ndarray), "%s: %s, expected a dense array" % (what, got)
        assert_close(got, expected, what)


def check_record(got, expected, what):
    """Every array of a record (nested lists of them by parameter and context) and its lr."""
    if expected is None:
        return
    if "raised" in expected:
        assert got["raised"], "%s: MXNet raised %s, nothing was raised" % (
            what, expected["mxnet_exception"])
        assert got["at"] == expected["at"], "%s: raised at call %d, MXNet at %d" % (
            what, got["at"], expected["at"])
        assert isinstance(got["exception"], MEETS[expected["mxnet_exception"]]), (
            "%s: raised %r where MXNet raised %s" % (what, got["exception"],
                                                     expected["mxnet_exception"]))
        return

    def walk(g, e, where):
        if isinstance(e, list) and e and isinstance(e[0], (list, dict)) and isinstance(g, list):
            assert len(g) == len(e), "%s: %d values, expected %d" % (where, len(g), len(e))
            for i, (gi, ei) in enumerate(zip(g, e)):
                walk(gi, ei, "%s[%d]" % (where, i))
        else:
            check_value(g, e, where)

    for key, value in expected.items():
        if key == "lr":
            assert abs(got["lr"] - value) <= RTOL * abs(value), "%s: lr %s != %s" % (
                what, got["lr"], value)
        else:
            walk(got[key], value, "%s %s" % (what, key))


def run_case(name, tmp_path, stop_at=None):
    """Replay ``name`` with trainer_cli and compare every record (up to the first ``stop_at``)."""
    case = load(name)
    got = replay(TRAINER_CLI, case["spec"], tmp_path, stop_at)
    expected = case["result"]["records"]
    assert stop_at is not None or len(got) == len(expected), name
    for i, (op, g, e) in enumerate(zip(case["spec"]["ops"], got, expected)):
        check_record(g, e, "%s op %d (%s)" % (name, i, op["op"]))


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
         "gluon_sw_update_on_kvstore_false_error.json", "gluon_sparse_embedding_2ctx_adam.json"]


@pytest.mark.parametrize("name", FLOWS)
def test_sparse_training_flow_matches_mxnet(name, tmp_path):
    run_case(name, tmp_path)
