"""Sparse constructors and storage requests, against MXNet 1.9.1's answers (measured with the
real library for these inputs)."""
import warnings

import numpy as np
import pytest

from trainer_cli import context, nd

sp = nd.sparse


def _info(a):
    return a.stype, tuple(a.shape), np.dtype(a.dtype).name, a.asnumpy().tolist()


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_zeros_and_empty_honour_stype(stype):
    for make in (nd.zeros, nd.empty):
        a = make((3, 4), stype=stype)
        assert a.stype == stype and a.shape == (3, 4)
        assert len(a.indices.asnumpy()) == 0 and a.asnumpy().tolist() == np.zeros((3, 4)).tolist()
    assert nd.zeros((3, 4), stype="default").stype == "default"
    assert sp.empty(stype, (3, 4)).stype == stype
    assert sp.zeros_like(sp.zeros(stype, (3, 4), dtype="float64")).dtype == np.float64


def test_empty_row_sparse_gradient_from_nd_zeros_decays_no_row():
    # An empty row_sparse gradient built with nd.zeros(stype=...) stores nothing: lazy SGD
    # with weight decay leaves every row as it is (a dense zero would decay all of them).
    from trainer_cli import optimizer
    w = nd.ones((3, 2))
    opt = optimizer.SGD(learning_rate=0.1, wd=0.5)
    upd = optimizer.get_updater(opt)
    upd(0, nd.zeros((3, 2), stype="row_sparse"), w)
    assert w.asnumpy().tolist() == np.ones((3, 2)).tolist()


def test_asscipy_gives_a_scipy_csr_matrix():
    spsp = pytest.importorskip("scipy.sparse")
    c = nd.array([[0, 1], [2, 0]]).tostype("csr")
    m = c.asscipy()
    assert isinstance(m, spsp.csr_matrix) and m.toarray().tolist() == [[0, 1], [2, 0]]


def test_context_default_ctx():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert context.Context.default_ctx == context.current_context()
        with context.cpu(1):
            assert context.Context.default_ctx == context.cpu(1)


# (label, call, MXNet's (stype, shape, dtype, values) or the error type)
CONSTRUCTORS = [
    ("float64 data keeps float64", lambda: sp.csr_matrix((np.array([1., 2.]), np.array([0, 1]), np.array([0, 1, 2]))),
     ("csr", (2, 2), "float64", [[1.0, 0.0], [0.0, 2.0]])),
    ("int data keeps int64", lambda: sp.csr_matrix((np.array([1, 2]), np.array([0, 1]), np.array([0, 1, 2]))),
     ("csr", (2, 2), "int64", [[1, 0], [0, 2]])),
    ("list data is float32", lambda: sp.csr_matrix(([1., 2.], [0, 1], [0, 1, 2])),
     ("csr", (2, 2), "float32", [[1.0, 0.0], [0.0, 2.0]])),
    ("empty csr without shape", lambda: sp.csr_matrix((np.array([]), np.array([]), np.array([0, 0]))), ValueError),
    ("empty csr with shape", lambda: sp.csr_matrix((np.array([]), np.array([]), np.array([0, 0])), shape=(1, 3)),
     ("csr", (1, 3), "float64", [[0.0, 0.0, 0.0]])),
    ("(M, N)", lambda: sp.csr_matrix((2, 3)), ("csr", (2, 3), "float32", [[0.0] * 3] * 2)),
    ("(M, N) float64", lambda: sp.csr_matrix((2, 3), dtype="float64"), ("csr", (2, 3), "float64", [[0.0] * 3] * 2)),
    ("dense with another shape", lambda: sp.csr_matrix(np.ones((2, 2)), shape=(3, 2)), ValueError),
    ("dense numpy float64", lambda: sp.csr_matrix(np.ones((2, 2))), ("csr", (2, 2), "float64", [[1.0, 1.0]] * 2)),
    ("dense NDArray float64", lambda: sp.csr_matrix(nd.ones((2, 2), dtype="float64")),
     ("csr", (2, 2), "float64", [[1.0, 1.0]] * 2)),
    ("dtype argument", lambda: sp.csr_matrix((np.array([1., 2.]), np.array([0, 1]), np.array([0, 1, 2])), dtype="float16"),
     ("csr", (2, 2), "float16", [[1.0, 0.0], [0.0, 2.0]])),
    ("rsp float64 data", lambda: sp.row_sparse_array((np.ones((1, 2)), [1]), shape=(3, 2)),
     ("row_sparse", (3, 2), "float64", [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]])),
    ("rsp int32 data", lambda: sp.row_sparse_array((np.ones((1, 2), dtype=np.int32), [1]), shape=(3, 2)),
     ("row_sparse", (3, 2), "int32", [[0, 0], [1, 1], [0, 0]])),
    ("rsp (M, N)", lambda: sp.row_sparse_array((3, 2)), ("row_sparse", (3, 2), "float32", [[0.0, 0.0]] * 3)),
    ("rsp dense with another shape", lambda: sp.row_sparse_array(np.ones((2, 2)), shape=(3, 2)), ValueError),
    # MXNet needs SciPy for the COO form; this one does not. Duplicates are summed, as SciPy does.
    ("COO", lambda: sp.csr_matrix((np.array([1., 2., 3.]), (np.array([0, 1, 0]), np.array([1, 0, 1]))), shape=(2, 2)),
     ("csr", (2, 2), "float64", [[0.0, 4.0], [2.0, 0.0]])),
]


@pytest.mark.parametrize("label,call,want", CONSTRUCTORS, ids=[c[0] for c in CONSTRUCTORS])
def test_constructor_matches_mxnet(label, call, want):
    if isinstance(want, type):
        with pytest.raises(want):
            call()
    else:
        assert _info(call()) == want


def test_scipy_input():
    spsp = pytest.importorskip("scipy.sparse")
    m = spsp.coo_matrix(np.array([[0, 1.5], [2, 0]], dtype=np.float32))
    assert _info(sp.csr_matrix(m)) == ("csr", (2, 2), "float32", [[0.0, 1.5], [2.0, 0.0]])
    with pytest.raises(ValueError):
        sp.csr_matrix(m, shape=(3, 2))


def test_retain_keeps_requested_ids_verbatim_as_mxnet():
    # MXNet 1.9.1 (measured): retain of ids the array does not store returns those ids with zero
    # rows, not an empty array (semantics §10).
    x = sp.row_sparse_array((np.ones((1, 2)), [1]), shape=(3, 2))
    r = sp.retain(x, nd.array([0, 2], dtype="int64"))
    assert r.indices.asnumpy().tolist() == [0, 2] and r.data.shape == (2, 2)
    assert r.asnumpy().tolist() == [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]


def test_kvstore_initialised_with_nd_zeros_row_sparse_answers_row_sparse_pull():
    # MXNet 1.9.1 gives the same: row_sparse, rows [1, 2], the pushed row 2.
    from trainer_cli import kvstore
    kv = kvstore.create("local")
    kv.init(0, nd.zeros((4, 2), stype="row_sparse"))
    kv.push(0, sp.row_sparse_array(([[1.0, 2.0]], [2]), shape=(4, 2)))
    out = nd.zeros((4, 2), stype="row_sparse")
    kv.row_sparse_pull(0, out=out, row_ids=nd.array([1, 2], dtype="int64"))
    assert out.stype == "row_sparse" and out.indices.asnumpy().tolist() == [1, 2]
    assert out.asnumpy().tolist() == [[0, 0], [0, 0], [1, 2], [0, 0]]
