"""Elementwise operators that keep sparsity, with MXNet 1.9.1's storage rules (values checked
against the dense computation; storage types and stored rows as MXNet returned them for the
same inputs)."""
import numpy as np
import pytest

from trainer_cli import nd
from trainer_cli.ndarray import sparse


def _a():
    return sparse.row_sparse_array((np.array([[1, 2], [3, 4], [0, 0]], dtype=np.float32),
                                    np.array([0, 2, 4])), shape=(5, 2))


def _b():
    return sparse.row_sparse_array((np.array([[5, 6], [7, 8]], dtype=np.float32),
                                    np.array([2, 3])), shape=(5, 2))


def test_mul_of_two_row_sparse_is_row_sparse_over_the_union():
    for got in (sparse.elemwise_mul(_a(), _b()), _a() * _b()):
        assert got.stype == "row_sparse" and got.indices.asnumpy().tolist() == [0, 2, 3, 4]
        assert np.array_equal(got.asnumpy(), _a().asnumpy() * _b().asnumpy())


def test_mul_with_a_dense_array_keeps_the_sparse_rows_either_way():
    d = nd.array(np.arange(10, dtype=np.float32).reshape(5, 2))
    for got in (sparse.elemwise_mul(_a(), d), sparse.elemwise_mul(d, _a())):
        assert got.stype == "row_sparse" and got.indices.asnumpy().tolist() == [0, 2, 4]
        assert np.array_equal(got.asnumpy(), _a().asnumpy() * d.asnumpy())


def test_sub_of_two_row_sparse_is_row_sparse_over_the_union():
    got = sparse.elemwise_sub(_a(), _b())
    assert got.stype == "row_sparse" and got.indices.asnumpy().tolist() == [0, 2, 3, 4]
    assert np.array_equal(got.asnumpy(), _a().asnumpy() - _b().asnumpy())


@pytest.mark.parametrize("name", ["abs", "sign", "square", "sqrt", "negative", "floor", "ceil",
                                  "rint", "trunc", "fix", "sin", "tan", "arcsin", "arctan", "sinh",
                                  "tanh", "arcsinh", "expm1", "log1p", "degrees", "radians",
                                  "relu"])
def test_zero_preserving_unary_ops_keep_storage_and_positions(name):
    op = getattr(sparse, name)
    x = sparse.row_sparse_array((np.array([[0.25, 0.5], [0.75, 0.0]], dtype=np.float32),
                                 np.array([1, 3])), shape=(4, 2))
    c = sparse.csr_matrix((np.array([0.25, -0.5, 0.0], dtype=np.float32), np.array([0, 1, 1]),
                           np.array([0, 2, 3])), shape=(2, 3))
    # The dense operator of the same name (nd.rint is MXNet's: halves go down, -0.5 -> -1).
    dense_op = {"relu": lambda v: np.maximum(v, 0), "abs": np.abs, "fix": np.fix,
                "rint": lambda v: getattr(nd, name)(nd.array(v)).asnumpy()}.get(
        name, getattr(np, name, None))
    for arr in (x, c):
        with np.errstate(all="ignore"):   # sqrt of a negative entry is NaN, as in MXNet
            got = op(arr)
            want = dense_op(arr.asnumpy())
        assert got.stype == arr.stype
        assert got.indices.asnumpy().tolist() == arr.indices.asnumpy().tolist()
        assert np.allclose(got.asnumpy(), want, equal_nan=True)
    dense = nd.array(np.array([[0.5, 0.0]], dtype=np.float32))
    assert op(dense).stype == "default"
