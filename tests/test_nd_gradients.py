"""Every differentiable nd op against central finite differences (float64), and autograd semantics."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trainer_cli
from trainer_cli import autograd, nd
from gradcheck import check_grad

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def rand(*shape, low=-1.0, high=1.0, seed=None):
    rng = np.random.RandomState(seed if seed is not None else sum(shape) * 7 + len(shape))
    return rng.uniform(low, high, size=shape)


def away(*shape, margin=0.1, seed=None):
    """Random values in [-1, 1] at least ``margin`` away from zero (kinks of abs, relu, sign...)."""
    x = rand(*shape, seed=seed)
    return np.where(np.abs(x) < margin, np.sign(x + 1e-12) * (margin + np.abs(x)), x)


def distinct(*shape, seed=0):
    """Values with well-separated entries, so that max/min/sort have no ties (or near ties)."""
    rng = np.random.RandomState(seed)
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 + rng.uniform(0, 0.02, size=n) - n * 0.05).reshape(shape)


# ----------------------------------------------------------------------------- unary elementwise
UNARY = [
    ("exp", nd.exp, rand(3, 4)),
    ("log", nd.log, rand(3, 4, low=0.5, high=2.0)),
    ("log1p", nd.log1p, rand(3, 4, low=-0.5, high=2.0)),
    ("expm1", nd.expm1, rand(3, 4)),
    ("sqrt", nd.sqrt, rand(3, 4, low=0.5, high=2.0)),
    ("rsqrt", nd.rsqrt, rand(3, 4, low=0.5, high=2.0)),
    ("square", nd.square, rand(3, 4)),
    ("abs", nd.abs, away(3, 4)),
    ("abs_op", abs, away(3, 4)),
    ("sign", nd.sign, away(3, 4)),
    ("negative", nd.negative, rand(3, 4)),
    ("neg_op", lambda x: -x, rand(3, 4)),
    ("reciprocal", nd.reciprocal, away(3, 4, margin=0.3)),
    ("sin", nd.sin, rand(3, 4)),
    ("cos", nd.cos, rand(3, 4)),
    ("tanh", nd.tanh, rand(3, 4)),
    ("sigmoid", nd.sigmoid, rand(3, 4, low=-4, high=4)),
    ("relu", nd.relu, away(3, 4)),
    ("softrelu", nd.softrelu, rand(3, 4, low=-4, high=4)),
    ("clip", lambda x: nd.clip(x, -0.5, 0.5), away(3, 4) * 0.9 + 0.013),
    ("floor", nd.floor, rand(3, 4) * 3 + 0.05),
    ("ceil", nd.ceil, rand(3, 4) * 3 + 0.05),
    ("round", nd.round, rand(3, 4) * 3 + 0.05),
    ("act_relu", lambda x: nd.Activation(x, act_type="relu"), away(3, 4)),
    ("act_sigmoid", lambda x: nd.Activation(x, act_type="sigmoid"), rand(3, 4)),
    ("act_tanh", lambda x: nd.Activation(x, act_type="tanh"), rand(3, 4)),
    ("act_softrelu", lambda x: nd.Activation(x, act_type="softrelu"), rand(3, 4)),
    ("act_softsign", lambda x: nd.Activation(x, act_type="softsign"), away(3, 4)),
    ("leaky", lambda x: nd.LeakyReLU(x, act_type="leaky", slope=0.1), away(3, 4)),
    ("elu", lambda x: nd.LeakyReLU(x, act_type="elu", slope=0.7), away(3, 4)),
    ("selu", lambda x: nd.LeakyReLU(x, act_type="selu"), away(3, 4)),
    ("gelu", lambda x: nd.LeakyReLU(x, act_type="gelu"), rand(3, 4, low=-2, high=2)),
    ("method_exp", lambda x: x.exp(), rand(3, 4)),
    ("method_sigmoid", lambda x: x.sigmoid(), rand(3, 4)),
    ("method_clip", lambda x: x.clip(-0.5, 0.5), away(3, 4) * 0.9 + 0.013),
    ("copy", lambda x: x.copy(), rand(3, 4)),
    ("astype64", lambda x: x.astype("float64"), rand(3, 4)),
    ("pos", lambda x: +x, rand(3, 4)),
    ("log2", nd.log2, rand(3, 4, low=0.5, high=2.0)),
    ("log10", nd.log10, rand(3, 4, low=0.5, high=2.0)),
    ("tan", nd.tan, rand(3, 4)),
    ("arcsin", nd.arcsin, rand(3, 4) * 0.8),
    ("arccos", nd.arccos, rand(3, 4) * 0.8),
    ("arctan", nd.arctan, rand(3, 4) * 2),
    ("sinh", nd.sinh, rand(3, 4)),
    ("cosh", nd.cosh, rand(3, 4)),
    ("arcsinh", nd.arcsinh, rand(3, 4) * 2),
    ("arccosh", nd.arccosh, rand(3, 4, low=1.5, high=3.0)),
    ("arctanh", nd.arctanh, rand(3, 4) * 0.8),
    ("degrees", nd.degrees, rand(3, 4)),
    ("radians", nd.radians, rand(3, 4)),
    ("cbrt", nd.cbrt, away(3, 4, margin=0.3)),
    ("rcbrt", nd.rcbrt, away(3, 4, margin=0.3)),
    ("trunc", nd.trunc, rand(3, 4) * 3 + 0.05),
    ("rint", nd.rint, rand(3, 4) * 3 + 0.05),
    ("erf", nd.erf, rand(3, 4) * 2),
    ("softsign", nd.softsign, away(3, 4)),
    ("hard_sigmoid", nd.hard_sigmoid, rand(3, 4) * 2.4 + 0.05),
    ("smooth_l1", lambda x: nd.smooth_l1(x, scalar=2.0), away(3, 4) * 1.3 + 0.011),
    ("identity", nd.identity, rand(3, 4)),
    ("cast", lambda x: nd.cast(x, "float64"), rand(3, 4)),
    ("softmin", lambda x: nd.softmin(x, axis=0), rand(3, 4)),
    ("slice", lambda x: nd.slice(x, begin=(1, None), end=(3, -1)), rand(3, 4)),
    ("slice_step", lambda x: nd.slice(x, begin=(None, 3), end=(None, 0), step=(2, -2)), rand(3, 4)),
    ("broadcast_axis", lambda x: nd.broadcast_axis(x[:, :1], axis=1, size=3), rand(3, 4)),
    ("sum_axis", lambda x: nd.sum_axis(x, axis=1), rand(3, 4)),
    ("add_n", lambda x: nd.add_n(x, x * 2, nd.exp(x)), rand(3, 4)),
]


@pytest.mark.parametrize("name,fn,x", UNARY, ids=[u[0] for u in UNARY])
def test_unary(ctx, name, fn, x):
    check_grad(fn, x, ctx=ctx)


def test_prelu(ctx):
    check_grad(lambda x, g: nd.LeakyReLU(x, g, act_type="prelu"), away(2, 3, 4), rand(3), ctx=ctx)
    check_grad(lambda x, g: nd.LeakyReLU(x, g, act_type="prelu"), away(2, 3), rand(1), ctx=ctx)


# ----------------------------------------------------------------------------- binary, broadcasting
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "pow": lambda a, b: a ** b,
    "maximum": nd.maximum,
    "minimum": nd.minimum,
    "nd_add": nd.add, "nd_subtract": nd.subtract, "nd_multiply": nd.multiply, "nd_divide": nd.divide,
    "nd_power": nd.power, "broadcast_add": nd.broadcast_add, "broadcast_sub": nd.broadcast_sub,
    "broadcast_mul": nd.broadcast_mul, "broadcast_div": nd.broadcast_div,
    "elemwise_add": nd.elemwise_add, "broadcast_maximum": nd.broadcast_maximum,
    "broadcast_minimum": nd.broadcast_minimum, "broadcast_power": nd.broadcast_power,
}


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast together: any axis may be 1 on either side, leading axes dropped."""
    ndim = draw(st.integers(1, 4))
    full = draw(st.lists(st.integers(2, 3), min_size=ndim, max_size=ndim))
    shapes = []
    for _ in range(2):
        drop = draw(st.integers(0, ndim - 1))
        shape = [1 if draw(st.booleans()) else n for n in full[drop:]]
        shapes.append(tuple(shape))
    return shapes


def _operands(name, sa, sb, seed):
    rng = np.random.RandomState(seed)
    a = rng.uniform(0.5, 1.5, size=sa)
    b = rng.uniform(0.5, 1.5, size=sb)
    if name in ("maximum", "minimum", "broadcast_maximum", "broadcast_minimum"):
        # No ties: b is shifted away from a everywhere, on alternating sides.
        b = np.where(rng.rand(*sb) < 0.5, 0.2, 2.0) * b
    return a, b


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(shapes=broadcast_pair(), seed=st.integers(0, 1000))
def test_binary_broadcast(ctx, name, shapes, seed):
    a, b = _operands(name, shapes[0], shapes[1], seed)
    check_grad(BINARY[name], a, b, ctx=ctx)


def test_binary_same_array_both_sides(ctx):
    check_grad(lambda x: x * x + x / (x + 2) - x ** x, rand(3, 4, low=0.5, high=1.5), ctx=ctx)


SCALAR_FORMS = [
    ("x+s", lambda x: x + 1.5), ("s+x", lambda x: 1.5 + x),
    ("x-s", lambda x: x - 1.5), ("s-x", lambda x: 1.5 - x),
    ("x*s", lambda x: x * 1.5), ("s*x", lambda x: 1.5 * x),
    ("x/s", lambda x: x / 1.5), ("s/x", lambda x: 1.5 / x),
    ("x**s", lambda x: x ** 2.5), ("s**x", lambda x: 1.5 ** x),
    ("x**int", lambda x: x ** 3), ("int**x", lambda x: 2 ** x),
    ("np_scalar", lambda x: np.float64(2.0) * x - np.float32(0.5)),
    ("maximum_s", lambda x: nd.maximum(x, 1.0)), ("s_maximum", lambda x: nd.maximum(1.0, x)),
    ("minimum_s", lambda x: nd.minimum(x, 1.0)), ("s_minimum", lambda x: nd.minimum(1.0, x)),
    ("np_left", lambda x: np.array([1.0, 2.0, 3.0, 4.0]) - x),
    ("np_right", lambda x: x / np.array([[1.0], [2.0], [3.0]])),
]


@pytest.mark.parametrize("name,fn", SCALAR_FORMS, ids=[s[0] for s in SCALAR_FORMS])
def test_scalar_forms(ctx, name, fn):
    x = rand(3, 4, low=0.5, high=1.5)
    x[np.abs(x - 1.0) < 0.05] += 0.1  # keep maximum/minimum with 1.0 away from ties
    check_grad(fn, x, ctx=ctx)


def test_where(ctx):
    cond = nd.array((rand(3, 4) > 0).astype(np.float64), ctx=ctx, dtype="float64")
    check_grad(lambda x, y: nd.where(cond, x, y), rand(3, 4), rand(3, 4), ctx=ctx)
    rows = nd.array([1, 0, 1], ctx=ctx)  # a 1-D condition picks rows, as MXNet
    out = check_grad(lambda x, y: nd.where(rows, x, y), rand(3, 4), rand(3, 4), ctx=ctx)
    np.testing.assert_array_equal(out[0][1], 0)
    np.testing.assert_array_equal(out[1][0], 0)


def test_block_grad(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        y = (nd.BlockGrad(x * 3) * x + nd.stop_gradient(x)).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [3, 6])


# ----------------------------------------------------------------------------- reductions
REDUCERS = {
    "sum": nd.sum, "mean": nd.mean, "max": nd.max, "min": nd.min, "prod": nd.prod,
}


@st.composite
def reduction_case(draw):
    ndim = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=ndim, max_size=ndim)))
    kind = draw(st.sampled_from(["none", "int", "tuple", "empty"]))
    if kind == "none":
        axis = None
    elif kind == "empty":
        axis = ()
    elif kind == "int":
        axis = draw(st.integers(-ndim, ndim - 1))
    else:
        axis = tuple(draw(st.lists(st.integers(0, ndim - 1), min_size=1, max_size=ndim, unique=True)))
        if draw(st.booleans()):
            axis = tuple(a - ndim for a in axis)
    return shape, axis, draw(st.booleans()), draw(st.booleans())


@pytest.mark.parametrize("name", sorted(REDUCERS))
@SETTINGS
@given(case=reduction_case(), seed=st.integers(0, 1000))
def test_reductions(ctx, name, case, seed):
    shape, axis, keepdims, exclude = case
    if exclude and axis is None:
        exclude = False
    x = distinct(*shape, seed=seed) if name in ("max", "min") else rand(*shape, low=0.5, high=1.5, seed=seed)
    check_grad(lambda a: REDUCERS[name](a, axis=axis, keepdims=keepdims, exclude=exclude), x, ctx=ctx)


@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm(ctx, axis, keepdims):
    x = away(2, 3, 4)
    check_grad(lambda a: nd.norm(a, axis=axis, keepdims=keepdims), x, ctx=ctx)
    check_grad(lambda a: nd.norm(a, ord=1, axis=axis, keepdims=keepdims), x, ctx=ctx)


def test_reduction_methods(ctx):
    x = distinct(2, 3, 4, seed=3)
    check_grad(lambda a: a.sum(axis=1) + a.mean(axis=1) + a.max(axis=1) + a.min(axis=1), x, ctx=ctx)
    check_grad(lambda a: a.sum() * a.mean(), x, ctx=ctx)
    check_grad(lambda a: a.norm(), x, ctx=ctx)


# ----------------------------------------------------------------------------- indexing
INDEX_CASES = [
    ("int", 1), ("neg_int", -1), ("slice", slice(1, 3)), ("step", slice(None, None, 2)),
    ("neg_step", slice(None, None, -1)), ("tuple", (1, slice(0, 2))), ("int_int", (0, 2)),
    ("ellipsis", (Ellipsis, 1)), ("newaxis", (None, slice(1, 3))), ("list_dup", [0, 2, 0, 0]),
    ("array_dup", np.array([[1, 1], [2, 0]])), ("mixed", (slice(None), [1, 3, 1])),
    ("two_arrays", ([0, 0, 2], [1, 1, 3])), ("bool_mask", np.array([True, False, True])),
    ("full", slice(None)),
]


@pytest.mark.parametrize("name,key", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_getitem(ctx, name, key):
    check_grad(lambda a: a[key], rand(3, 4, 2), ctx=ctx)


def test_getitem_ndarray_index(ctx):
    idx = nd.array([2, 0, 2], ctx=ctx)
    check_grad(lambda a: a[idx], rand(3, 4), ctx=ctx)
    check_grad(lambda a: a[1][2:4] * a[0, 1], rand(3, 4), ctx=ctx)


def test_slice_axis(ctx):
    check_grad(lambda a: nd.slice_axis(a, axis=1, begin=1, end=3), rand(2, 4, 3), ctx=ctx)
    check_grad(lambda a: nd.slice_axis(a, axis=-1, begin=0, end=-1), rand(2, 4, 3), ctx=ctx)


# ----------------------------------------------------------------------------- shapes
SHAPE_CASES = [
    ("reshape", lambda a: a.reshape((4, 6))),
    ("reshape_args", lambda a: a.reshape(6, 4)),
    ("reshape_-1", lambda a: nd.reshape(a, shape=(-1, 3))),
    ("reshape_0", lambda a: nd.reshape(a, shape=(0, -1))),
    ("reshape_-2", lambda a: nd.reshape(a, shape=(2, -2))),
    ("reshape_-3", lambda a: nd.reshape(a, shape=(-3, 4))),
    ("reshape_-4", lambda a: nd.reshape(a, shape=(-4, 1, 2, 0, 4))),
    ("reshape_-4_infer", lambda a: nd.reshape(a, shape=(0, -4, -1, 1, 0))),
    ("reshape_reverse", lambda a: nd.reshape(a, shape=(-1, 0), reverse=True)),
    ("reshape_like", lambda a: nd.reshape_like(a, nd.zeros((6, 4)))),
    ("flatten", nd.flatten), ("Flatten", nd.Flatten),
    ("expand_dims", lambda a: nd.expand_dims(a, axis=1)),
    ("squeeze", lambda a: nd.squeeze(a[:, :1], axis=1)),
    ("transpose", nd.transpose), ("transpose_axes", lambda a: nd.transpose(a, axes=(1, 0, 2))),
    ("transpose_neg", lambda a: nd.transpose(a, axes=(-1, 0, 1))), ("T", lambda a: a.T),
    ("swapaxes", lambda a: nd.swapaxes(a, 0, 2)), ("flip", lambda a: nd.flip(a, axis=1)),
    ("broadcast_to", lambda a: nd.broadcast_to(a[:, :1], shape=(2, 3, 4))),
    ("broadcast_to_0", lambda a: nd.broadcast_to(a[:1], shape=(5, 0, 0))),
    ("broadcast_like", lambda a: nd.broadcast_like(a[:1, :, :1], nd.zeros((2, 3, 4)))),
    ("tile", lambda a: nd.tile(a, reps=(2, 1, 3))), ("tile_more", lambda a: nd.tile(a, reps=(2, 1, 1, 2))),
    ("tile_less", lambda a: nd.tile(a, reps=(2,))),
    ("repeat", lambda a: nd.repeat(a, repeats=2, axis=1)), ("repeat_none", lambda a: nd.repeat(a, 3)),
    ("repeat_neg", lambda a: nd.repeat(a, repeats=2, axis=-1)),
]


@pytest.mark.parametrize("name,fn", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_shape_ops(ctx, name, fn):
    check_grad(fn, rand(2, 3, 4), ctx=ctx)


# ----------------------------------------------------------------------------- products
DOT_CASES = [
    ((4,), (4,), False, False), ((3, 4), (4,), False, False), ((4,), (4, 5), False, False),
    ((3, 4), (4, 5), False, False), ((4, 3), (4, 5), True, False), ((3, 4), (5, 4), False, True),
    ((4, 3), (5, 4), True, True), ((2, 3, 4), (4, 5), False, False), ((2, 3, 4), (4, 2, 5), False, False),
    ((4, 2, 3), (4, 5), True, False), ((2, 3, 4), (5, 2, 4), False, True),
    ((4, 2, 3), (5, 3, 4), True, True),
]


@pytest.mark.parametrize("sa,sb,ta,tb", DOT_CASES)
def test_dot(ctx, sa, sb, ta, tb):
    check_grad(lambda a, b: nd.dot(a, b, transpose_a=ta, transpose_b=tb), rand(*sa), rand(*sb), ctx=ctx)


def test_dot_matches_mxnet_shapes():
    a, b = rand(4, 2, 3, low=0.0), rand(5, 3, 4, low=0.0)
    out = nd.dot(nd.array(a), nd.array(b), transpose_a=True, transpose_b=True)
    assert out.shape == (2, 3, 5, 3)
    expect = (a.reshape(4, 6).T @ b.reshape(15, 4).T).reshape(2, 3, 5, 3)
    np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-5)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_dot(ctx, ta, tb):
    sa = (2, 4, 3) if ta else (2, 3, 4)
    sb = (2, 5, 4) if tb else (2, 4, 5)
    check_grad(lambda a, b: nd.batch_dot(a, b, transpose_a=ta, transpose_b=tb), rand(*sa), rand(*sb), ctx=ctx)


@pytest.mark.parametrize("flatten", [True, False])
@pytest.mark.parametrize("no_bias", [False, True])
def test_fully_connected(ctx, flatten, no_bias):
    x = rand(2, 3, 4)
    w = rand(5, 12) if flatten else rand(5, 4)
    if no_bias:
        check_grad(lambda x, w: nd.FullyConnected(x, w, num_hidden=5, no_bias=True, flatten=flatten), x, w, ctx=ctx)
    else:
        check_grad(lambda x, w, b: nd.FullyConnected(x, w, b, num_hidden=5, flatten=flatten), x, w, rand(5), ctx=ctx)


# ----------------------------------------------------------------------------- softmax
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("temperature", [None, 2.0])
def test_softmax(ctx, op, axis, temperature):
    fn = getattr(nd, op)
    check_grad(lambda a: fn(a, axis=axis, temperature=temperature), rand(2, 3, 4) * 3, ctx=ctx)


# ----------------------------------------------------------------------------- joining, splitting
def test_concat_stack_split(ctx):
    a, b, c = rand(2, 3), rand(2, 4), rand(2, 1)
    check_grad(lambda a, b, c: nd.concat(a, b, c, dim=1), a, b, c, ctx=ctx)
    check_grad(lambda a, b: nd.concat(a, b, dim=0), rand(2, 3), rand(4, 3), ctx=ctx)
    check_grad(lambda a, b: nd.concatenate([a, b], axis=-1), rand(2, 3), rand(2, 2), ctx=ctx)
    for axis in (0, 1, 2, -1):
        check_grad(lambda a, b: nd.stack(a, b, axis=axis), rand(2, 3), rand(2, 3), ctx=ctx)
    check_grad(lambda a, b: nd.stack([a, b]), rand(2, 3), rand(2, 3), ctx=ctx)
    check_grad(lambda a: nd.split(a, num_outputs=3, axis=1), rand(2, 6), ctx=ctx)
    check_grad(lambda a: nd.split(a, num_outputs=2, axis=0, squeeze_axis=True), rand(2, 3), ctx=ctx)
    check_grad(lambda a: nd.split(a, 2, axis=-1)[1] * 2, rand(2, 3, 4), ctx=ctx)


# ----------------------------------------------------------------------------- gathering
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_pick(ctx, axis, keepdims):
    x = rand(3, 4, 5)
    n = x.shape[axis]
    shape = list(x.shape)
    shape[axis] = 1
    idx = np.random.RandomState(1).randint(0, n, size=shape)
    if not keepdims:
        idx = idx.squeeze(axis)
    index = nd.array(idx, ctx=ctx)
    check_grad(lambda a: nd.pick(a, index, axis=axis, keepdims=keepdims), x, ctx=ctx)


def test_pick_modes(ctx):
    index = nd.array([0, 5, -1], ctx=ctx)
    check_grad(lambda a: nd.pick(a, index), rand(3, 4), ctx=ctx)
    check_grad(lambda a: nd.pick(a, index, mode="wrap"), rand(3, 4), ctx=ctx)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_take(ctx, axis):
    index = nd.array([[0, 1], [1, 1], [0, 0]], ctx=ctx)
    check_grad(lambda a: nd.take(a, index, axis=axis), rand(2, 3, 2), ctx=ctx)
    check_grad(lambda a: nd.take(a, nd.array([3, -1, 0], ctx=ctx), axis=axis, mode="wrap"), rand(2, 3, 2), ctx=ctx)


# ----------------------------------------------------------------------------- composite
def test_composite_mlp_loss(ctx):
    x, label = rand(4, 5), nd.array([0, 2, 1, 2], ctx=ctx)

    def loss(w1, b1, w2, b2):
        h = nd.relu(nd.FullyConnected(x_nd, w1, b1, num_hidden=6))
        out = nd.FullyConnected(h, w2, b2, num_hidden=3)
        return -nd.pick(nd.log_softmax(out), label).mean() + 0.01 * (w1 ** 2).sum()
    x_nd = nd.array(x, ctx=ctx, dtype="float64")
    check_grad(loss, rand(6, 5), rand(6, low=0.1, high=0.5), rand(3, 6), rand(3), ctx=ctx)


def test_inplace_outside_graph_feeds_graph(ctx):
    # A constant updated by a recorded value becomes part of the graph.
    def fn(w):
        acc = nd.zeros((3,), ctx=ctx, dtype="float64")
        acc += w * 2  # acc is now in the graph: a second in-place op would raise, as in MXNet
        buf = nd.zeros((2, 3), ctx=ctx, dtype="float64")
        buf[1] = w
        return acc + buf.sum(axis=0)
    check_grad(fn, rand(3), ctx=ctx)


# ----------------------------------------------------------------------------- nn ops
CONV_CASES = [
    dict(kernel=(3, 3)),
    dict(kernel=(3, 3), pad=(1, 1)),
    dict(kernel=(2, 3), stride=(2, 1), pad=(1, 0)),
    dict(kernel=(3, 3), dilate=(2, 1), pad=(2, 1)),
    dict(kernel=(1, 1)),
    dict(kernel=(3, 3), num_group=2, pad=(1, 1)),
    dict(kernel=(2, 2), stride=2, no_bias=True),
]


@pytest.mark.parametrize("kw", CONV_CASES, ids=[str(c) for c in CONV_CASES])
def test_convolution(ctx, kw):
    kw = dict(kw)
    groups = kw.get("num_group", 1)
    x = rand(2, 4, 5, 6)
    w = rand(6, 4 // groups, *kw["kernel"])
    if kw.get("no_bias"):
        check_grad(lambda x, w: nd.Convolution(x, w, num_filter=6, **kw), x, w, ctx=ctx)
    else:
        check_grad(lambda x, w, b: nd.Convolution(x, w, b, num_filter=6, **kw), x, w, rand(6), ctx=ctx)


def test_convolution_1d(ctx):
    check_grad(lambda x, w, b: nd.Convolution(x, w, b, kernel=(3,), stride=(2,), pad=(1,), num_filter=3),
               rand(2, 2, 7), rand(3, 2, 3), rand(3), ctx=ctx)


def test_convolution_matches_direct():
    rng = np.random.RandomState(0)
    x, w, b = rng.rand(2, 4, 6, 7), rng.rand(6, 2, 3, 2), rng.rand(6)
    out = nd.Convolution(nd.array(x, dtype="float64"), nd.array(w, dtype="float64"), nd.array(b, dtype="float64"),
                         kernel=(3, 2), stride=(2, 1), dilate=(1, 2), pad=(1, 1), num_filter=6, num_group=2)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    oh, ow = (6 + 2 - 3) // 2 + 1, (7 + 2 - 3) // 1 + 1
    expect = np.zeros((2, 6, oh, ow))
    for n in range(2):
        for f in range(6):
            g = f // 3
            for i in range(oh):
                for j in range(ow):
                    patch = xp[n, 2 * g:2 * g + 2, 2 * i:2 * i + 3, j:j + 4:2]
                    expect[n, f, i, j] = (patch * w[f]).sum() + b[f]
    assert out.shape == expect.shape
    np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-12)


POOL_CASES = [
    dict(kernel=(2, 2), stride=(2, 2), pool_type="max"),
    dict(kernel=(3, 3), stride=(1, 1), pool_type="max", pad=(1, 1)),
    dict(kernel=(3, 2), stride=(2, 2), pool_type="max", pooling_convention="full"),
    dict(kernel=(2, 2), stride=(2, 2), pool_type="avg"),
    dict(kernel=(3, 3), stride=(2, 2), pool_type="avg", pad=(1, 1)),
    dict(kernel=(3, 3), stride=(2, 2), pool_type="avg", pad=(1, 1), count_include_pad=False),
    dict(kernel=(3, 2), stride=(2, 2), pool_type="avg", pooling_convention="full"),
    dict(kernel=(2, 2), stride=(1, 1), pool_type="sum"),
    dict(kernel=(1, 1), pool_type="max", global_pool=True),
    dict(kernel=(1, 1), pool_type="avg", global_pool=True),
    dict(kernel=(1, 1), pool_type="sum", global_pool=True),
]


@pytest.mark.parametrize("kw", POOL_CASES, ids=[str(c) for c in POOL_CASES])
def test_pooling(ctx, kw):
    check_grad(lambda x: nd.Pooling(x, **kw), distinct(2, 3, 5, 6, seed=4), ctx=ctx)


def test_pooling_1d(ctx):
    check_grad(lambda x: nd.Pooling(x, kernel=(3,), stride=(2,), pad=(1,), pool_type="max"),
               distinct(2, 2, 7, seed=5), ctx=ctx)
    check_grad(lambda x: nd.Pooling(x, kernel=(3,), stride=(2,), pool_type="avg"), rand(2, 2, 7), ctx=ctx)


def test_pooling_values_match_mxnet_definition():
    x = np.arange(1.0, 26.0).reshape(1, 1, 5, 5)
    a = nd.array(x, dtype="float64")
    # avg, pad 1, count_include_pad: the divisor is the window clipped to the padded input.
    out = nd.Pooling(a, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg").asnumpy()
    xp = np.pad(x[0, 0], 1)
    expect = np.array([[xp[2 * i:2 * i + 3, 2 * j:2 * j + 3].sum() / 9 for j in range(3)] for i in range(3)])
    np.testing.assert_allclose(out[0, 0], expect)
    out = nd.Pooling(a, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type="avg",
                     count_include_pad=False).asnumpy()
    counts = np.array([[4, 6, 4], [6, 9, 6], [4, 6, 4]])
    np.testing.assert_allclose(out[0, 0], expect * 9 / counts)
    # full convention: ceil, windows past the edge divide by their clipped size.
    out = nd.Pooling(a, kernel=(2, 2), stride=(2, 2), pool_type="avg", pooling_convention="full").asnumpy()
    assert out.shape == (1, 1, 3, 3)
    assert out[0, 0, 2, 2] == 25.0 and out[0, 0, 0, 2] == (5 + 10) / 2
    out = nd.Pooling(a, kernel=(2, 2), stride=(2, 2), pool_type="max", pooling_convention="full").asnumpy()
    np.testing.assert_array_equal(out[0, 0], [[7, 9, 10], [17, 19, 20], [22, 24, 25]])


def test_max_pool_ties_go_to_first():
    x = nd.ones((1, 1, 2, 2), dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = nd.Pooling(x, kernel=(2, 2), pool_type="max")
    y.backward()
    np.testing.assert_array_equal(x.grad.asnumpy()[0, 0], [[1, 0], [0, 0]])


@pytest.mark.parametrize("train", [True, False])
@pytest.mark.parametrize("fix_gamma", [False, True])
@pytest.mark.parametrize("shape,axis", [((4, 3, 2, 2), 1), ((5, 3), 1), ((2, 3, 4), -1)])
def test_batchnorm_grad(ctx, train, fix_gamma, shape, axis):
    c = shape[axis]
    mm = nd.array(rand(c, seed=1), ctx=ctx, dtype="float64")
    mv = nd.array(rand(c, low=0.5, high=1.5, seed=2), ctx=ctx, dtype="float64")
    check_grad(lambda x, g, b: nd.BatchNorm(x, g, b, mm, mv, eps=1e-5, fix_gamma=fix_gamma, axis=axis),
               rand(*shape) * 2 + 0.5, rand(c, low=0.5, high=1.5), rand(c), ctx=ctx, train_mode=train,
               rtol=1e-5)


def test_batchnorm_use_global_stats(ctx):
    mm = nd.array(rand(3, seed=1), ctx=ctx, dtype="float64")
    mv = nd.array(rand(3, low=0.5, high=1.5, seed=2), ctx=ctx, dtype="float64")
    before = mm.asnumpy()
    check_grad(lambda x, g, b: nd.BatchNorm(x, g, b, mm, mv, fix_gamma=False, use_global_stats=True),
               rand(4, 3), rand(3), rand(3), ctx=ctx, train_mode=True)
    np.testing.assert_array_equal(mm.asnumpy(), before)


def test_batchnorm_values_and_running_stats(ctx):
    x = rand(6, 3, 2, 2) * 3 + 1
    gamma, beta = rand(3, seed=5), rand(3, seed=6)
    mm, mv = nd.zeros(3, ctx=ctx), nd.ones(3, ctx=ctx)
    args = [nd.array(a, ctx=ctx) for a in (x, gamma, beta)]
    args[0].attach_grad()
    with autograd.record():
        out = nd.BatchNorm(*args, mm, mv, eps=1e-5, momentum=0.9, fix_gamma=False)
    np.testing.assert_array_equal(mm.asnumpy(), np.zeros(3))     # updated by the backward
    out.backward()
    mean = x.mean(axis=(0, 2, 3))
    var = x.var(axis=(0, 2, 3))  # biased, as MXNet's CPU operator
    expect = (x - mean.reshape(1, 3, 1, 1)) / np.sqrt(var.reshape(1, 3, 1, 1) + 1e-5) \
        * gamma.reshape(1, 3, 1, 1) + beta.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(mm.asnumpy(), 0.1 * mean, rtol=1e-5)
    np.testing.assert_allclose(mv.asnumpy(), 0.9 + 0.1 * var, rtol=1e-5)
    # Inference uses (and leaves) the moving statistics.
    out = nd.BatchNorm(*args, mm, mv, eps=1e-5, fix_gamma=False)
    rm, rv = mm.asnumpy(), mv.asnumpy()
    expect = (x - rm.reshape(1, 3, 1, 1)) / np.sqrt(rv.reshape(1, 3, 1, 1) + 1e-5) \
        * gamma.reshape(1, 3, 1, 1) + beta.reshape(1, 3, 1, 1)
    np.testing.assert_allclose(out.asnumpy(), expect, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(mm.asnumpy(), rm)
    # fix_gamma (the op's default) sets gamma to 1, as MXNet does.
    nd.BatchNorm(*args, mm, mv)
    np.testing.assert_array_equal(args[1].asnumpy(), np.ones(3))


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_layernorm(ctx, axis):
    shape = (3, 4, 5)
    c = shape[axis]
    check_grad(lambda x, g, b: nd.LayerNorm(x, g, b, axis=axis, eps=1e-5),
               rand(*shape) * 2 + 0.3, rand(c, low=0.5, high=1.5), rand(c), ctx=ctx, rtol=1e-5)


def test_dropout(ctx):
    def fn(x):
        trainer_cli.random.seed(7)
        return nd.Dropout(x, p=0.4)
    x = rand(20, 10)
    check_grad(fn, x, ctx=ctx, train_mode=True)
    check_grad(fn, x, ctx=ctx, train_mode=False)
    with autograd.record():
        trainer_cli.random.seed(7)
        y = fn(nd.array(x, ctx=ctx, dtype="float64")).asnumpy()
    kept = y != 0
    assert 0.4 < kept.mean() < 0.8
    np.testing.assert_allclose(y[kept], x[kept] / 0.6)
    np.testing.assert_array_equal(nd.Dropout(nd.array(x, ctx=ctx), p=0.4).asnumpy(), x.astype(np.float32))


def test_dropout_axes_and_always(ctx):
    def fn(x):
        trainer_cli.random.seed(3)
        return nd.Dropout(x, p=0.5, axes=(1,), mode="always")
    check_grad(fn, rand(4, 6, 3), ctx=ctx, train_mode=False)
    with autograd.pause():
        y = fn(nd.ones((4, 6, 3), ctx=ctx)).asnumpy()
    assert (y == y[:, :1, :]).all()  # one mask value along the shared axis
    assert set(np.unique(y)) <= {0.0, 2.0}


def test_embedding(ctx):
    idx = nd.array([[0, 2, 2], [4, 0, 2]], ctx=ctx)
    grads = check_grad(lambda w: nd.Embedding(idx, w, input_dim=5, output_dim=3), rand(5, 3), ctx=ctx)
    assert grads[0][1].sum() == 0 and grads[0][3].sum() == 0
    w = nd.array(rand(5, 3), ctx=ctx)
    out = nd.Embedding(idx, w, input_dim=5, output_dim=3)
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out.asnumpy()[1, 0], w.asnumpy()[4])


# ----------------------------------------------------------------------------- autograd semantics
def test_grad_req_write_and_add(ctx):
    x = nd.array([1.0, 2.0, 3.0], ctx=ctx)
    x.attach_grad()
    for _ in range(2):
        with autograd.record():
            y = (x * x).sum()
        y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [2, 4, 6])
    x.attach_grad(grad_req="add")
    for _ in range(3):
        with autograd.record():
            y = (x * x).sum()
        y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [6, 12, 18])
    x.attach_grad(grad_req="null")
    assert x.grad is None


def test_grad_buffer_identity_kept(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    x.attach_grad()
    buf = x.grad
    with autograd.record():
        y = x * 3
    y.backward()
    assert x.grad is buf
    np.testing.assert_allclose(buf.asnumpy(), [3, 3])


def test_retain_graph(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [2, 4])
    with pytest.raises(trainer_cli.base.MXNetError, match="retain_graph"):
        y.backward()    # its whole graph is freed: no variable is reached


def test_a_freed_graph_is_a_constant_as_in_mxnet(ctx):
    # MXNet 1.9.1 (checked in the real library): a state computed in the graph of an earlier
    # backward() (a recurrent state carried over without detach()) is a constant in the next
    # one; the variables reached only through it keep their gradients (write or add) as they
    # were, and a backward that reaches no variable at all is an error.
    x = nd.array([1.0, 2.0, 3.0], ctx=ctx)
    x.attach_grad()
    w = nd.array([1.0, 1.0, 2.0], ctx=ctx)
    w.attach_grad()
    a = nd.array([1.0, 2.0], ctx=ctx)
    a.attach_grad(grad_req="add")
    with autograd.record():
        h = x * 2
        s = a * a
        y = (h * w).sum() + s.sum()
    y.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [2, 2, 4])
    np.testing.assert_allclose(a.grad.asnumpy(), [2, 4])
    with autograd.record():
        z = (h * h * w).sum() + (s * 3).sum()
    z.backward()
    np.testing.assert_allclose(w.grad.asnumpy(), [4, 16, 36])
    np.testing.assert_allclose(x.grad.asnumpy(), [2, 2, 4])     # not reached: as it was
    np.testing.assert_allclose(a.grad.asnumpy(), [2, 4])        # nothing added
    with autograd.record():
        only_freed = (h * 2).sum()
    with pytest.raises(trainer_cli.base.MXNetError, match="already freed"):
        only_freed.backward()


def test_pause_and_modes(ctx):
    assert not autograd.is_recording() and not autograd.is_training()
    x = nd.array([1.0, 2.0], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        y = x * 2
        with autograd.pause():
            assert not autograd.is_recording() and not autograd.is_training()
            z = x * 5  # not recorded
        with autograd.pause(train_mode=True):
            assert autograd.is_training()
        w = y + z
    w.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [2, 2])
    with autograd.record(train_mode=False):
        assert autograd.is_recording() and not autograd.is_training()
        with autograd.train_mode():
            assert autograd.is_training() and autograd.is_recording()
        with autograd.predict_mode():
            assert not autograd.is_training()
    assert not autograd.is_recording()


def test_set_recording_training():
    prev = autograd.set_recording(True)
    try:
        assert autograd.is_recording() and prev is False
    finally:
        autograd.set_recording(False)
    prev = autograd.set_training(True)
    assert autograd.set_training(prev) is True


def test_backward_out_grad(ctx):
    x = nd.array([[1.0, 2.0], [3.0, 4.0]], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        y = x * x
    y.backward(nd.array([[1.0, 0.5], [0.0, 2.0]], ctx=ctx))
    np.testing.assert_allclose(x.grad.asnumpy(), [[2, 2], [0, 16]])
    with autograd.record():
        a, b = x * 2, x.sum()
    autograd.backward([a, b], [nd.ones((2, 2), ctx=ctx), nd.array([3.0], ctx=ctx)])
    np.testing.assert_allclose(x.grad.asnumpy(), np.full((2, 2), 5.0))


def test_heads_not_in_graph_raise(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    with autograd.record():
        y = x * 2  # x has no gradient buffer: nothing recorded
    with pytest.raises(Exception):
        y.backward()
    z = nd.array([1.0], ctx=ctx)
    z.attach_grad()
    y = z * 2  # outside record()
    with pytest.raises(Exception):
        y.backward()


def test_attach_grad_on_non_leaf_detaches(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        y = x * 3
        y.attach_grad()
        z = (y * y).sum()
    z.backward()
    np.testing.assert_allclose(y.grad.asnumpy(), [6, 12])
    np.testing.assert_allclose(x.grad.asnumpy(), [0, 0])


def test_inplace_outside_record_keeps_buffer(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    x.attach_grad()
    raw = x._data
    x += 1
    x -= nd.array([0.5, 0.5], ctx=ctx)
    x *= 2
    x /= 4
    x[:] = x * 2
    x[0] = 7
    assert x._data is raw
    np.testing.assert_allclose(x.asnumpy(), [7, 2.5])


def test_inplace_on_recorded_arrays_raises(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        y = x * 2
        with pytest.raises(ValueError, match="inplace"):
            y += 1
        with pytest.raises(ValueError, match="inplace"):
            x *= 2
        with pytest.raises(ValueError, match="inplace"):
            y[0] = 5


def test_detach_and_grad_function(ctx):
    x = nd.array([1.0, 2.0, 3.0], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        y = x * x
        z = (y.detach() * x).sum()
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [1, 4, 9])
    with autograd.record():
        y = (x ** 3).sum()
    (g,) = autograd.grad(y, [x])
    np.testing.assert_allclose(g.asnumpy(), 3 * np.array([1, 4, 9]))


def test_mark_variables(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    gbuf = nd.zeros((2,), ctx=ctx)
    autograd.mark_variables([x], [gbuf], "add")
    for _ in range(2):
        with autograd.record():
            y = (x * 4).sum()
        y.backward()
    np.testing.assert_allclose(gbuf.asnumpy(), [8, 8])


def test_custom_function(ctx):
    class Sigmoid(autograd.Function):
        def forward(self, x):
            y = 1 / (1 + nd.exp(-x))
            self.save_for_backward(y)
            return y

        def backward(self, dy):
            (y,) = self.saved_tensors
            return dy * y * (1 - y)
    check_grad(lambda x: Sigmoid()(x) * 2, rand(3, 4), ctx=ctx)


def test_float32_grads_stay_float32(ctx):
    x = nd.array([[1.0, 2.0]], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        y = (nd.softmax(x * 2.0) + 1.5 / x).sum()
    y.backward()
    assert x.grad.dtype == np.float32
