"""Autograd through sparse arrays: a recorded sparse operation has a gradient, with the storage
and values MXNet 1.9.1 gives (checked with the real library: the cases and numbers below are
its answers for this input)."""
import numpy as np
import pytest

from trainer_cli import autograd, nd


def _weight(stype):
    d = np.arange(20, dtype=np.float32).reshape(4, 5)
    d[1] = 0
    return nd.array(d).tostype(stype)


# expression, result stype (per input stype: same as input or default), gradient sum.
CASES = [
    ("w*1", "same", 20.0), ("w+1", "default", 20.0), ("w/2", "same", 10.0),
    ("dd+w", "default", 20.0), ("w+w", "same", 40.0), ("w*w", "same", 310.0),
    ("w.square()", "same", 310.0), ("nd.square(w)", "same", 310.0),
    ("nd.exp(w)", "default", 282342100.0), ("nd.dot(w, nd.ones((5,2)))", "default", 40.0),
    ("nd.sum(w)", "default", 20.0), ("2*w", "same", 40.0), ("-w", "same", -20.0),
    ("w-dd", "default", 20.0), ("w*dd", "same", 20.0),
]


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
@pytest.mark.parametrize("expr,out_stype,grad_sum", CASES)
def test_recorded_sparse_operation_gives_mxnets_gradient(stype, expr, out_stype, grad_sum):
    w = _weight(stype)
    w.attach_grad()
    assert w.grad.stype == stype            # MXNet: attach_grad keeps the array's storage
    dd = nd.ones((4, 5))
    with autograd.record():
        y = eval(expr)
    y.backward()
    assert y.stype == (stype if out_stype == "same" else "default")
    assert w.grad.stype == stype
    np.testing.assert_allclose(w.grad.asnumpy().sum(), grad_sum, rtol=1e-6)


def test_square_gradient_stores_the_rows_mxnet_stores():
    # MXNet: d(w*w)/dw = 2w stores rows 0, 2, 3 (row 1 of w is all zero).
    w = _weight("row_sparse")
    w.attach_grad()
    with autograd.record():
        y = w * w
    y.backward()
    assert w.grad.indices.asnumpy().tolist() == [0, 2, 3]
    np.testing.assert_allclose(w.grad.asnumpy(), 2 * _weight("default").asnumpy())


def test_dense_plus_sparse_gives_the_sparse_operand_ones():
    w = _weight("row_sparse")
    w.attach_grad()
    d = nd.ones((4, 5))
    d.attach_grad()
    with autograd.record():
        y = d + w
    y.backward()
    assert w.grad.asnumpy().tolist() == np.ones((4, 5)).tolist()
    assert d.grad.asnumpy().tolist() == np.ones((4, 5)).tolist()


def test_csr_dot_gradient_of_the_dense_operand_stays_row_sparse():
    x = _weight("csr")
    w = nd.ones((5, 2))
    w.attach_grad(stype="row_sparse")
    with autograd.record():
        y = nd.dot(x, w)
    y.backward()
    assert w.grad.stype == "row_sparse"
    np.testing.assert_allclose(w.grad.asnumpy(), _weight("default").asnumpy().T @ np.ones((4, 2)))
