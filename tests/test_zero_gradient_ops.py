"""Operators MXNet records with a zero gradient (comparisons, argmax/argmin, argsort, topk's
indices and mask, one_hot): a variable reached only through them has its gradient written as
zeros, as MXNet 1.9.1 writes it (not left as it was), and a backward from one of them is zeros,
not an error. (MXNet's values for the script below: every gradient printed is zeros, w's 2.)"""
import numpy as np
import pytest

from trainer_cli import autograd, nd

OPS = {
    "argmax": lambda x: nd.argmax(x, axis=1), "argmin": lambda x: x.argmin(axis=0),
    "greater": lambda x: x > 0, "lesser_equal": lambda x: nd.lesser_equal(x, x * 0.5),
    "argsort": lambda x: nd.argsort(x), "topk": lambda x: nd.topk(x, k=1),
    "topk_mask": lambda x: nd.topk(x, k=2, ret_typ="mask"),
    "one_hot_of_argmax": lambda x: nd.one_hot(nd.argmax(x, axis=1), 3),
    "argmax_channel": lambda x: nd.argmax_channel(x),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_backward_from_a_zero_gradient_op_writes_zeros(name):
    x = nd.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])
    x.attach_grad()
    x.grad[:] = 7
    with autograd.record():
        y = OPS[name](x)
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), np.zeros((2, 3)))


def test_a_variable_reached_only_through_a_comparison_gets_zeros_not_its_old_gradient():
    x = nd.array([[1.0, -2.0, 3.0]])
    x.attach_grad()
    x.grad[:] = 7
    w = nd.array([2.0])
    w.attach_grad()
    with autograd.record():
        loss = ((x > 0) * w).sum()
    loss.backward()
    assert x.grad.asnumpy().tolist() == [[0.0, 0.0, 0.0]]
    assert w.grad.asnumpy().tolist() == [2.0]
    # outside record() nothing is recorded
    assert (x > 0)._node is None
