"""``autograd.grad(create_graph=True)``: second derivatives against finite differences of first
derivatives, for the ops MXNet 1.9.1 differentiates twice (and the array arithmetic), and a
gradient penalty through a small network."""
import numpy as np
import pytest

import trainer_cli.random
from trainer_cli import autograd, nd
from trainer_cli.gluon import nn
from gradcheck import check_grad, to_nd

rng = np.random.RandomState(11)


def _second(fn, x_np, head_np):
    """d/dx sum(head * d/dx sum(fn(x))) by autograd (grad with create_graph, then backward)."""
    x = to_nd(x_np)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
        (g,) = autograd.grad(y, [x], create_graph=True)
        z = nd.sum(g * to_nd(head_np))
    z.backward()
    return g.asnumpy(), x.grad.asnumpy()


def _first(fn, x_np):
    x = to_nd(x_np)
    x.attach_grad()
    with autograd.record():
        y = fn(x)
    y.backward()
    return x.grad.asnumpy()


def _check_second(fn, x_np, rtol=1e-6, atol=1e-7, eps=1e-6):
    head = rng.uniform(-1, 1, x_np.shape)
    first, second = _second(fn, x_np, head)
    np.testing.assert_allclose(first, _first(fn, x_np), rtol=1e-12, atol=1e-12)
    numeric = np.zeros_like(x_np)
    for idx in np.ndindex(*x_np.shape):
        up, down = x_np.copy(), x_np.copy()
        up[idx] += eps
        down[idx] -= eps
        numeric[idx] = ((_first(fn, up) - _first(fn, down)) * head).sum() / (2 * eps)
    np.testing.assert_allclose(second, numeric, rtol=rtol, atol=atol * max(1, np.abs(numeric).max()))


UNARY = {
    "sin": (nd.sin, (-3, 3)), "cos": (nd.cos, (-3, 3)), "tan": (nd.tan, (-1, 1)),
    "sinh": (nd.sinh, (-2, 2)), "cosh": (nd.cosh, (-2, 2)), "tanh": (nd.tanh, (-2, 2)),
    "arcsin": (nd.arcsin, (-0.8, 0.8)), "arccos": (nd.arccos, (-0.8, 0.8)),
    "arctan": (nd.arctan, (-2, 2)), "arcsinh": (nd.arcsinh, (-2, 2)),
    "arccosh": (nd.arccosh, (1.2, 3)), "arctanh": (nd.arctanh, (-0.8, 0.8)),
    "radians": (nd.radians, (-2, 2)), "degrees": (nd.degrees, (-2, 2)),
    "exp": (nd.exp, (-2, 2)), "expm1": (nd.expm1, (-2, 2)), "log": (nd.log, (0.5, 3)),
    "log2": (nd.log2, (0.5, 3)), "log10": (nd.log10, (0.5, 3)), "log1p": (nd.log1p, (-0.5, 3)),
    "sqrt": (nd.sqrt, (0.5, 3)), "rsqrt": (nd.rsqrt, (0.5, 3)), "cbrt": (nd.cbrt, (0.5, 3)),
    "rcbrt": (nd.rcbrt, (0.5, 3)), "square": (nd.square, (-2, 2)),
    "reciprocal": (nd.reciprocal, (0.5, 3)), "sigmoid": (nd.sigmoid, (-3, 3)),
    "softrelu": (nd.softrelu, (-3, 3)), "negative": (lambda x: -x, (-2, 2)),
}


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_second_derivatives(name):
    op, (lo, hi) = UNARY[name]
    _check_second(lambda x: nd.sum(op(x) * op(x)), rng.uniform(lo, hi, (2, 3)))
    if name not in ("radians", "degrees", "negative"):     # linear: no second derivative
        _check_second(op, rng.uniform(lo, hi, (3,)))


@pytest.mark.parametrize("name,fn", [
    ("relu", lambda x: nd.sum(nd.relu(x) * x * x)),
    ("abs", lambda x: nd.sum(nd.abs(x) * x)),
    ("clip", lambda x: nd.sum(nd.square(nd.clip(x, -0.5, 0.7)) * x)),
])
def test_piecewise_second_derivatives(name, fn):
    x = rng.uniform(-1, 1, (2, 3))
    x = np.where(np.abs(x) < 0.05, 0.3, x)
    x = np.where(np.abs(np.abs(x) - 0.6) < 0.05, 0.2, x)
    _check_second(fn, x)


C = rng.uniform(-1, 1, (1, 3))


@pytest.mark.parametrize("name,fn", [
    ("mul_div_pow", lambda x: nd.sum((x * x) / (x + 3) + x ** 3 - 2 ** x + 1 / (x + 4))),
    ("broadcast", lambda x: nd.sum(x * to_nd(C) * x + nd.sum(x, axis=0, keepdims=True) * x)),
    ("sub_rsub_pow", lambda x: nd.sum((3 - x) * (x - 1) + nd.power(x + 2, x + 2))),
    ("mean_sum_axes", lambda x: nd.mean(nd.square(nd.sum(x * x, axis=1)), axis=0) * 3),
    ("max_min", lambda x: nd.sum(nd.maximum(x, x * 0.5) * nd.minimum(x, to_nd(C)) * x)),
    ("reshape", lambda x: nd.sum(nd.reshape(x * x, (3, 2)) * nd.flatten(x).reshape((3, 2)))),
    ("dot", lambda x: nd.sum(nd.square(nd.dot(x, x, transpose_b=True)))),
    ("dot_ta", lambda x: nd.sum(nd.exp(nd.dot(x, nd.sin(x), transpose_a=True)))),
])
def test_array_arithmetic_second_derivatives(name, fn):
    x = rng.uniform(0.2, 1.0, (2, 3))
    _check_second(fn, x)


@pytest.mark.parametrize("act", [None, "relu", "tanh", "sigmoid"])
def test_fully_connected_second_derivatives(act):
    w = to_nd(rng.randn(4, 3))
    b = to_nd(rng.randn(4))

    def fn(x):
        out = nd.FullyConnected(x, w, b, num_hidden=4)
        if act is not None:
            out = nd.Activation(out, act_type=act)
        return nd.sum(nd.square(out) * out)
    x = rng.randn(2, 3)
    _check_second(fn, x, rtol=1e-5)


def test_gradient_penalty_matches_finite_differences():
    """WGAN-GP's penalty: ((|d critic / d x| - 1)^2).mean() back-propagated to the weights."""
    # Its own seeds: drawn from the shared streams, the weights depended on the tests run before
    # it, and some draws leave every ReLU unit dead (a zero input gradient, whose norm's sqrt has
    # no derivative).
    trainer_cli.random.seed(5)
    local = np.random.RandomState(5)
    net = nn.HybridSequential()
    net.add(nn.Dense(5, activation="tanh"), nn.Dense(4, activation="relu"), nn.Dense(1))
    net.initialize()
    net.cast("float64")
    x = local.randn(3, 4)
    net(to_nd(x))

    def penalty(xs):
        with autograd.record():
            out = net(xs)
            (gx,) = autograd.grad(out, [xs], create_graph=True)
            norm = nd.sqrt(nd.sum(nd.square(gx), axis=1))
            return nd.mean(nd.square(norm - 1))

    xs = to_nd(x)
    xs.attach_grad()
    check_grad(lambda: penalty(xs), params=list(net.collect_params().values()),
               rtol=1e-5, atol=1e-7)


def test_plain_grad_and_errors():
    x = to_nd([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = nd.softmax(x)
    with pytest.raises(NotImplementedError, match="softmax"):
        autograd.grad(y, [x], create_graph=True)
    # Without create_graph the result carries no graph.
    with autograd.record():
        y = nd.sum(x * x)
    (g,) = autograd.grad(y, [x], retain_graph=True)
    assert g._node is None
    # MXNet 1.9.1 returns a list for a single variable too.
    single = autograd.grad(y, x)
    assert isinstance(single, list) and len(single) == 1
    np.testing.assert_allclose(single[0].asnumpy(), [2.0, 4.0])
    with pytest.raises(ValueError, match="empty"):
        autograd.grad(y, [])
    # A variable the head does not depend on gets zeros.
    other = to_nd([3.0])
    other.attach_grad()
    with autograd.record():
        y = nd.sum(nd.exp(x))
    gx, go = autograd.grad(y, [x, other], create_graph=True)
    np.testing.assert_allclose(gx.asnumpy(), np.exp([1.0, 2.0]))
    assert go.asnumpy().tolist() == [0.0]
