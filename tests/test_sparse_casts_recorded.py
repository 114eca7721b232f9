"""Storage casts, retain, copy and dot(csr.T, w) inside autograd.record(): recorded as MXNet
1.9.1 records them (gradients and their storage types as the real MXNet gives them for the same
calls). Before, the casts recorded nothing: alone the backward refused, beside another path to
the same variable its gradient was silently missing the cast's part."""
import numpy as np
import pytest

from trainer_cli import autograd, nd

W = np.array([[1.0, 2.0], [0.0, 0.0], [3.0, 4.0]], dtype=np.float32)
H = nd.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])


def _grad(make_var, f):
    v = make_var()
    v.attach_grad()
    with autograd.record():
        loss = (f(v) * H).sum()
    loss.backward()
    return v.grad.stype, v.grad.asnumpy().tolist()


@pytest.mark.parametrize("name,make_var,f,stype", [
    ("dense to row_sparse", lambda: nd.array(W), lambda v: v.tostype("row_sparse"), "default"),
    ("cast_storage to csr", lambda: nd.array(W), lambda v: nd.cast_storage(v, "csr"), "default"),
    ("there and back", lambda: nd.array(W),
     lambda v: v.tostype("row_sparse").tostype("default"), "default"),
    ("row_sparse variable to dense", lambda: nd.array(W).tostype("row_sparse"),
     lambda v: v.tostype("default"), "row_sparse"),
    ("csr variable to dense", lambda: nd.sparse.csr_matrix(W), lambda v: v.tostype("default"),
     "csr"),
])
def test_storage_casts_pass_the_gradient_through(name, make_var, f, stype):
    assert _grad(make_var, f) == (stype, H.asnumpy().tolist())


def test_a_cast_beside_another_path_adds_its_part():
    v = nd.array(W)
    v.attach_grad()
    with autograd.record():
        loss = (v.tostype("row_sparse") * H).sum() + (v * 2).sum()
    loss.backward()
    assert v.grad.asnumpy().tolist() == (H.asnumpy() + 2).tolist()


def test_dot_of_a_transposed_csr_gives_the_weight_its_gradient():
    x = nd.sparse.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], dtype=np.float32))
    w = nd.array([[1.0, 2.0], [3.0, 4.0]])
    w.attach_grad()
    with autograd.record():
        y = nd.sparse.dot(x, w, transpose_a=True)
        loss = y.sum() + (w * 0).sum()
    loss.backward()
    assert y.stype == "row_sparse"
    assert w.grad.asnumpy().tolist() == [[3.0, 3.0], [3.0, 3.0]]
    head = nd.array(np.arange(6, dtype=np.float32).reshape(3, 2))
    w2 = nd.array([[1.0, 2.0], [3.0, 4.0]])
    w2.attach_grad()
    with autograd.record():
        y = nd.dot(x, w2, transpose_a=True)
    y.backward(head)
    np.testing.assert_allclose(w2.grad.asnumpy(), x.asnumpy() @ head.asnumpy())


def test_retain_and_copy_of_a_row_sparse_variable():
    w4 = np.array([[1.0, 2.0], [0.0, 0.0], [3.0, 4.0], [0.0, 5.0]], dtype=np.float32)
    h4 = nd.array(np.arange(1, 9, dtype=np.float32).reshape(4, 2))
    for f, want in ((lambda v: nd.sparse.retain(v, nd.array([0, 1], dtype="int64")),
                     [[1.0, 2.0], [3.0, 4.0], [0.0, 0.0], [0.0, 0.0]]),
                    (lambda v: v.copy(), h4.asnumpy().tolist())):
        v = nd.array(w4).tostype("row_sparse")
        v.attach_grad()
        with autograd.record():
            loss = (f(v) * h4).sum()
        loss.backward()
        assert v.grad.stype == "row_sparse" and v.grad.asnumpy().tolist() == want
