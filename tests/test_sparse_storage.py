"""The storage dispatch around the sweep: the generated compat table, MXNet's fallback warning,
``out=`` and copies into sparse arrays, broadcasting, in-place operators."""
import logging
import os

import numpy as np
import pytest

from trainer_cli import nd
from trainer_cli.ndarray import fallback_log, storage

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _dense():
    d = np.arange(20, dtype=np.float32).reshape(4, 5)
    d[1] = 0
    return d


def test_compat_table_is_generated_from_the_dispatch_table():
    with open(os.path.join(ROOT, "docs", "compat.md"), encoding="utf-8") as f:
        text = f.read()
    start, stop = text.index(storage.BEGIN), text.index(storage.END) + len(storage.END)
    assert text[start:stop] == storage.render(), (
        "docs/compat.md's sparse table is stale: run python -c \"from trainer_cli import nd; "
        "nd.storage.update_doc('docs/compat.md')\"")


def test_the_table_names_every_exported_operator():
    table = "\n".join(row[0] for row in storage.describe())
    for name in nd.__all__:
        if callable(getattr(nd, name)) and name in storage.EXPORTED:
            assert name in table


def test_fallback_warning_only_when_asked():
    # A handler on the logger itself: other tests may stop propagation to the root logger.
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("trainer_cli.nd")
    logger.addHandler(handler)
    x = nd.array(_dense()).tostype("row_sparse")
    try:
        nd.exp(x)
        assert not records
        fallback_log.set_verbose(True)
        try:
            nd.exp(x)
            nd.exp(x)          # once per operator and storage, as MXNet
        finally:
            fallback_log.set_verbose(False)
    finally:
        logger.removeHandler(handler)
    messages = [r.getMessage() for r in records]
    assert len(messages) == 1
    assert "Storage type fallback detected:\noperator = exp\ninput storage types = " \
           "[row_sparse, ]" in messages[0]


def test_refusal_names_the_operator():
    with pytest.raises(ValueError, match="concatenate does not take row_sparse"):
        nd.concatenate([nd.zeros((2, 2), stype="row_sparse")])


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_out_into_a_sparse_array_casts_the_result(stype):
    out = nd.zeros((4, 5), stype=stype)
    res = nd.exp(nd.array(_dense()), out=out)
    assert res is out and out.stype == stype
    np.testing.assert_allclose(out.asnumpy(), np.exp(_dense()), rtol=1e-6)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_copies_into_and_out_of_sparse_arrays(stype):
    target = nd.zeros((4, 5), stype=stype)
    nd.array(_dense()).copyto(target)
    assert target.stype == stype and target.asnumpy().tolist() == _dense().tolist()
    dense = nd.zeros((4, 5))
    dense[:] = target
    assert dense.asnumpy().tolist() == _dense().tolist()
    target[:] = 2.0
    assert target.stype == stype and target.asnumpy().tolist() == np.full((4, 5), 2.0).tolist()
    assert nd.array(target).stype == stype


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_inplace_operators_keep_storage(stype):
    x = nd.array(_dense()).tostype(stype)
    x *= 2
    assert x.stype == stype and x.asnumpy().tolist() == (2 * _dense()).tolist()
    x += x
    assert x.stype == stype and x.asnumpy().tolist() == (4 * _dense()).tolist()
    x -= 1          # MXNet: (x - 1).copyto(x): the dense difference stored back sparse
    assert x.stype == stype and x.asnumpy().tolist() == (4 * _dense() - 1).tolist()


def test_broadcasting_between_sparse_arrays_falls_back_to_dense():
    a = nd.array(np.arange(4, dtype=np.float32).reshape(4, 1)).tostype("row_sparse")
    b = nd.array(_dense()).tostype("row_sparse")
    for got, want in [(a + b, np.arange(4).reshape(4, 1) + _dense()),
                      (a * b, np.arange(4).reshape(4, 1) * _dense()),
                      (b - a, _dense() - np.arange(4).reshape(4, 1))]:
        assert got.stype == "default"
        np.testing.assert_allclose(got.asnumpy(), want)


def test_no_dense_operator_reads_stored_values():
    # The array's stored values are never what a dense operator sees: its dense field is the
    # full array, and writing it is refused instead of lost.
    x = nd.array(_dense()).tostype("row_sparse")
    assert x._data.shape == (4, 5)
    with pytest.raises(TypeError):
        x._data = np.zeros((4, 5), np.float32)
    assert nd.ones_like(x).shape == (4, 5)
    assert (1 / nd.array(_dense()).tostype("csr")).shape == (4, 5)


def test_scalar_comparison_keeps_storage_only_where_zero_maps_to_zero():
    x = nd.array(_dense()).tostype("row_sparse")
    assert (x > 1).stype == "row_sparse" and (x < 1).stype == "default"
    np.testing.assert_array_equal((x < 1).asnumpy(), (_dense() < 1).astype(np.float32))
    assert (x / 0).stype == "default"


def test_dot_forward_stype_and_sparse_dot_alias():
    c = nd.array([[0, 1.0], [2, 0]]).tostype("csr")
    w = nd.ones((2, 3))
    assert nd.dot(c, w).stype == "default"
    out = nd.dot(c, w, forward_stype="csr")
    assert out.stype == "csr" and out.asnumpy().tolist() == [[1.0] * 3, [2.0] * 3]
    assert nd.dot(w.T, w, forward_stype="row_sparse").stype == "row_sparse"
    assert nd.sparse.dot(c, w).asnumpy().tolist() == [[1.0] * 3, [2.0] * 3]
    assert nd.dot(c, w, transpose_a=False).stype == "default"
    assert nd.dot(c, nd.ones((2, 3)), transpose_a=True).stype == "row_sparse"


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_no_nan_is_lost_where_an_absent_zero_meets_inf_nan_or_division_by_zero(stype):
    # 0 * inf, 0 / 0: the dense answer has NaN at absent positions, so the result densifies
    # instead of keeping a sparse 0 there.
    x = nd.array(_dense()).tostype(stype)
    inf_row = np.ones((4, 5), np.float32)
    inf_row[1, 2] = np.inf            # row 1 of x is absent
    zero_col = np.ones((1, 5), np.float32)
    zero_col[0, 0] = 0
    cases = [(lambda: x * nd.array(inf_row), _dense() * inf_row),
             (lambda: x * float("inf"), _dense() * np.inf),
             (lambda: x * float("nan"), _dense() * np.nan)]
    if stype == "csr":
        cases.append((lambda: x / nd.array(zero_col), _dense() / zero_col))
    with np.errstate(all="ignore"):
        for call, want in cases:
            got = call()
            np.testing.assert_array_equal(got.asnumpy(), want.astype(np.float32))
    assert (x * 2).stype == stype


def test_nd_sparse_holds_mxnets_sparse_namespace_operators():
    from trainer_cli.ndarray import storage
    for name in ("exp", "log", "sum", "mean", "slice", "where", "concat", "broadcast_minus",
                 "ElementWiseSum", "FullyConnected", "elemwise_div", "norm", "sigmoid"):
        assert getattr(nd.sparse, name) is getattr(nd, name), name
        assert name in nd.sparse.__all__
    x = nd.array([[0, 1], [0, 0], [2, 0]]).tostype("row_sparse")
    assert nd.sparse.exp(x).stype == "default"           # MXNet's dense fallback
    assert nd.sparse.gs_retain(x, nd.array([0, 2])).stype == "row_sparse"
    csr = nd.array([[0, 1], [0, 0], [2, 0]]).tostype("csr")
    part = nd.sparse.slice(csr, begin=(1,), end=(3,))
    assert part.stype == "csr" and part.asnumpy().tolist() == [[0, 0], [2, 0]]
    assert csr[1:3].asnumpy().tolist() == [[0, 0], [2, 0]]     # Python's slice still inside
    assert set(storage._SPARSE_NAMESPACE) >= {"slice", "sum"}
