"""The fast paths of the Dense hot loop give the numbers of the plain formulation.

FullyConnected picks the GEMM operand order by batch size (NumPy), Dense(activation='relu') runs
as one fused op, and ``backward`` lets FullyConnected write a weight's gradient straight into its
buffer when that is the weight's only gradient.
"""
import numpy as np
import pytest

from trainer_cli import autograd, gluon, nd
from trainer_cli.gluon import nn
from gradcheck import check_grad


def rand(*shape, seed=0):
    return np.random.RandomState(seed).uniform(-1, 1, size=shape)


@pytest.mark.parametrize("rows", [1, 3, 5, 8, 40])      # below, at and above the 5 outputs
def test_fully_connected_gradients_at_every_batch_size(ctx, rows):
    check_grad(lambda x, w, b: nd.FullyConnected(x, w, b, num_hidden=5), rand(rows, 4),
               rand(5, 4, seed=1), rand(5, seed=2), ctx=ctx)


@pytest.mark.parametrize("rows", [2, 64, 300])
def test_fully_connected_float32_matches_float64_reference(ctx, rows):
    x, w, b = rand(rows, 50), rand(128, 50, seed=1), rand(128, seed=2)
    out = nd.FullyConnected(nd.array(x, ctx=ctx), nd.array(w, ctx=ctx), nd.array(b, ctx=ctx),
                            num_hidden=128)
    np.testing.assert_allclose(out.asnumpy(), x @ w.T + b, rtol=1e-5, atol=1e-5)


def _two_layer_grads(ctx, fused):
    net = nn.Sequential()
    if fused:
        net.add(nn.Dense(16, activation="relu", in_units=8))
    else:
        net.add(nn.Dense(16, in_units=8), nn.Activation("relu"))
    net.add(nn.Dense(3, in_units=16))
    net.initialize(ctx=ctx)
    for k, p in enumerate(net.collect_params().values()):
        p.set_data(nd.array(rand(*p.shape, seed=k), ctx=ctx))
    x = nd.array(rand(4, 8, seed=9), ctx=ctx)
    with autograd.record():
        out = net(x)
    out.backward(nd.array(rand(4, 3, seed=10), ctx=ctx))
    return out.asnumpy(), [p.grad(ctx).asnumpy() for p in net.collect_params().values()]


def test_dense_relu_fused_is_the_two_ops(ctx):
    out_a, grads_a = _two_layer_grads(ctx, fused=True)
    out_b, grads_b = _two_layer_grads(ctx, fused=False)
    np.testing.assert_array_equal(out_a, out_b)
    for a, b in zip(grads_a, grads_b):
        np.testing.assert_array_equal(a, b)


def test_dense_relu_with_a_hook_on_its_activation_runs_the_hook(ctx):
    layer = nn.Dense(4, activation="relu", in_units=3)
    layer.initialize(ctx=ctx)
    seen = []
    layer.act.register_forward_hook(lambda block, args, out: seen.append(out.shape))
    layer(nd.ones((2, 3), ctx=ctx))
    assert seen == [(2, 4)]


def test_weight_gradient_is_written_into_the_same_buffer(ctx, monkeypatch):
    handed_out = []
    original = autograd.direct_grad_buffer

    def spy(x):
        buf = original(x)
        handed_out.append(buf)
        return buf
    monkeypatch.setattr(autograd, "direct_grad_buffer", spy)
    layer = nn.Dense(6, in_units=4)
    layer.initialize(ctx=ctx)
    buffer = layer.weight.grad(ctx)._data
    x = nd.array(rand(3, 4), ctx=ctx)
    with autograd.record():
        out = layer(x)
    out.backward()
    # The weight's buffer (the bias's may be asked for too, for the fused ReLU/bias kernel).
    assert [b for b in handed_out if b is buffer] == [buffer]
    assert layer.weight.grad(ctx)._data is buffer
    expected = np.ones((3, 6)).T @ rand(3, 4)
    np.testing.assert_allclose(buffer.get() if hasattr(buffer, "get") else buffer, expected,
                               rtol=1e-6)
    trainer = gluon.Trainer(layer.collect_params(), "sgd", {"learning_rate": 0.1})
    trainer.step(3)         # the gradient counts as fresh: no stale-gradient error


def test_a_weight_used_twice_gets_both_contributions(ctx):
    # Two FullyConnected ops on one weight: no direct write may drop either gradient.
    def fn(x, w):
        return nd.FullyConnected(nd.FullyConnected(x, w, num_hidden=4, no_bias=True), w,
                                 num_hidden=4, no_bias=True)
    check_grad(fn, rand(3, 4), rand(4, 4, seed=1), ctx=ctx)


def test_add_mode_accumulates_over_backward_calls(ctx):
    w = nd.array(rand(5, 4), ctx=ctx)
    w.attach_grad(grad_req="add")
    x = nd.array(rand(3, 4, seed=1), ctx=ctx)
    for _ in range(2):
        with autograd.record():
            out = nd.FullyConnected(x, w, num_hidden=5, no_bias=True)
        out.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), 2 * np.ones((3, 5)).T @ rand(3, 4, seed=1),
                               rtol=1e-5)


def test_autograd_grad_leaves_the_buffers_alone(ctx):
    w = nd.array(rand(5, 4), ctx=ctx)
    w.attach_grad()
    before = w.grad.asnumpy().copy()
    x = nd.array(rand(3, 4, seed=1), ctx=ctx)
    with autograd.record():
        out = nd.FullyConnected(x, w, num_hidden=5, no_bias=True)
    (gw,) = autograd.grad(out, [w])
    np.testing.assert_array_equal(w.grad.asnumpy(), before)
    np.testing.assert_allclose(gw.asnumpy(), np.ones((3, 5)).T @ rand(3, 4, seed=1), rtol=1e-5)


def _graphs():
    """(heads, variables) of small graphs: chains, a weight used twice, a node feeding two."""
    w = nd.array(np.arange(6, dtype=np.float32).reshape(2, 3))
    b = nd.array(np.ones(3, np.float32))
    a = nd.array(np.ones((4, 2), np.float32))
    for v in (w, b, a):
        v.attach_grad()
    with autograd.record():
        chain = ((nd.dot(a, w) + b).relu() * 2).sum()
        twice = (nd.dot(a, w) * w.sum()).sum()       # w feeds two nodes
        shared = nd.dot(a, w)
        fork = (shared * shared).sum()               # one node feeds one node twice
        leaf_head = w * 3
    return [[chain], [twice], [fork], [leaf_head], [chain, twice]], (w, b, a)


def test_the_chain_walk_orders_and_finds_leaves_as_the_general_search():
    graphs, _ = _graphs()
    for heads in graphs:
        fast_leaves = {}
        fast = autograd._topological_nodes(heads, fast_leaves)
        general_leaves = {}
        real_chain = autograd._chain
        try:
            autograd._chain = lambda head, leaves: None
            general = autograd._topological_nodes(heads, general_leaves)
        finally:
            autograd._chain = real_chain
        assert [id(n) for n in fast] == [id(n) for n in general]
        assert fast_leaves.keys() == general_leaves.keys()
    chain = graphs[0][0]
    assert autograd._chain(chain, {}) is not None            # the walk took it
    assert autograd._chain(graphs[2][0], {}) is None         # not a chain: the general search
