"""NDArray behaviour outside autograd: printing, dtypes, indexing, devices, saving, random."""
import numpy as np
import pytest

import trainer_cli
from trainer_cli import autograd, nd


def test_repr_like_mxnet(ctx):
    x = nd.array([[1, 2, 3, 4]], ctx=ctx)
    assert repr(x) == "\n[[1. 2. 3. 4.]]\n<NDArray 1x4 @%s>" % ctx
    assert str(nd.array([1.5, 2], ctx=ctx)) == "\n[1.5 2. ]\n<NDArray 2 @%s>" % ctx
    assert repr(nd.zeros((2, 1, 2), ctx=ctx, dtype="int32")) == \
        "\n[[[0 0]]\n\n [[0 0]]]\n<NDArray 2x1x2 @%s>" % ctx
    assert repr(nd.ones((1,), ctx=trainer_cli.cpu(1))).endswith("<NDArray 1 @cpu(1)>")


def test_dtype_defaults(ctx):
    assert nd.array([1, 2], ctx=ctx).dtype == np.float32
    assert nd.array(np.arange(3), ctx=ctx).dtype == np.float32  # numpy input too, as MXNet
    assert nd.array(np.arange(3.0), ctx=ctx).dtype == np.float32
    assert nd.array(nd.array([1], dtype="float64"), ctx=ctx).dtype == np.float64  # NDArray keeps
    for make in (nd.zeros, nd.ones, nd.empty):
        assert make((2, 2), ctx=ctx).dtype == np.float32
    assert nd.full((2,), 3, ctx=ctx).dtype == np.float32
    assert nd.arange(4, ctx=ctx).dtype == np.float32
    assert nd.random.uniform(shape=(2,), ctx=ctx).dtype == np.float32
    assert nd.random.normal(shape=(2,), ctx=ctx).dtype == np.float32
    assert nd.random.randint(0, 5, shape=(2,), ctx=ctx).dtype == np.int32


def test_float64_everywhere(ctx):
    x = nd.array([[1.0, 2.0]], ctx=ctx, dtype="float64")
    assert x.dtype == np.float64
    for make in (nd.zeros, nd.ones, nd.empty):
        assert make((2,), ctx=ctx, dtype="float64").dtype == np.float64
    assert nd.full((2,), 1, ctx=ctx, dtype=np.float64).dtype == np.float64
    assert nd.arange(3, ctx=ctx, dtype="float64").dtype == np.float64
    assert nd.random.uniform(shape=(2,), ctx=ctx, dtype="float64").dtype == np.float64
    assert nd.random.normal(shape=(2,), ctx=ctx, dtype="float64").dtype == np.float64
    results = [x + 1, 1 - x, x * x, x / 2, 2 / x, x ** 2, nd.exp(x), nd.softmax(x), x.sum(), x.mean(axis=1),
               nd.dot(x, x.T), nd.relu(x), nd.zeros_like(x), nd.ones_like(x), x.reshape((2, 1)), x[0], x.copy(),
               nd.FullyConnected(x, nd.ones((3, 2), ctx=ctx, dtype="float64"), num_hidden=3, no_bias=True),
               nd.concat(x, x, dim=0), nd.clip(x, 0, 1), nd.norm(x)]
    for r in results:
        assert r.dtype == np.float64
    assert x.astype("float32").dtype == np.float32
    assert x.astype(np.float32).astype("float64").dtype == np.float64
    assert x.cast("float32").dtype == np.float32
    assert x.astype("float64", copy=False) is x


def test_python_scalars_keep_float32(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    for r in (x + 1, 1 + x, x - 1.5, 1.5 - x, x * 2.0, 2.0 * x, x / 3, 3 / x, x ** 2, 2 ** x,
              x + np.float64(1.0), np.float64(2.0) * x, nd.maximum(x, 1.5), nd.minimum(2, x)):
        assert r.dtype == np.float32


def test_comparisons_give_floats(ctx):
    x = nd.array([1.0, 2.0, 3.0], ctx=ctx)
    y = nd.array([3.0, 2.0, 1.0], ctx=ctx)
    cases = {
        "==": (x == y, [0, 1, 0]), "!=": (x != y, [1, 0, 1]), "<": (x < y, [1, 0, 0]),
        "<=": (x <= y, [1, 1, 0]), ">": (x > y, [0, 0, 1]), ">=": (x >= y, [0, 1, 1]),
        ">s": (x > 2, [0, 0, 1]), "==s": (x == 2, [0, 1, 0]), "s<": (2 < x, [0, 0, 1]),
    }
    for name, (r, expect) in cases.items():
        assert r.dtype == np.float32, name
        np.testing.assert_array_equal(r.asnumpy(), expect, err_msg=name)
    assert (nd.array([1.0], ctx=ctx, dtype="float64") > 0).dtype == np.float64


def test_full_reductions_have_shape_1(ctx):
    x = nd.array([[1.0, 5.0], [3.0, 2.0]], ctx=ctx)
    for r in (x.sum(), x.mean(), x.max(), x.min(), x.prod(), x.norm(), nd.argmax(x), nd.argmin(x),
              nd.sum(x, axis=(0, 1)), nd.dot(x[0], x[1])):
        assert r.shape == (1,)
    assert x.sum(axis=1, keepdims=True).shape == (2, 1)
    assert x.sum(axis=0, exclude=True).shape == (2,)
    np.testing.assert_array_equal(nd.argmax(x, axis=1).asnumpy(), [1, 0])
    assert nd.argmax(x, axis=1).dtype == np.float32
    assert x.max().asscalar() == 5.0


def test_indexing_and_setitem(ctx):
    x = nd.array(np.arange(12).reshape(3, 4), ctx=ctx)
    assert x[1].shape == (4,)
    assert x[1, 2].shape == (1,) and x[1, 2].asscalar() == 6
    np.testing.assert_array_equal(x[1:3, ::2].asnumpy(), [[4, 6], [8, 10]])
    np.testing.assert_array_equal(x[[0, 0, 2]].asnumpy()[:, 0], [0, 0, 8])
    np.testing.assert_array_equal(x[nd.array([2, 1], ctx=ctx)].asnumpy()[:, 0], [8, 4])
    np.testing.assert_array_equal(x[:, -1].asnumpy(), [3, 7, 11])
    y = x.copy()
    y[:] = 0
    assert y.asnumpy().sum() == 0 and x.asnumpy().sum() == 66
    y[:] = x
    np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
    y[1] = 5
    y[0, 1:3] = nd.array([7, 8], ctx=ctx)
    y[2] = np.array([1, 2, 3, 4])
    y[:, 0] = [9, 9, 9]
    np.testing.assert_array_equal(y.asnumpy(), [[9, 7, 8, 3], [9, 5, 5, 5], [9, 2, 3, 4]])
    z = nd.zeros((2, 2), ctx=ctx)
    z[:] = 3.5
    assert z.asnumpy().tolist() == [[3.5, 3.5], [3.5, 3.5]]


def test_inplace_keeps_buffer_and_dtype(ctx):
    x = nd.ones((2, 2), ctx=ctx)
    raw = x._data
    x += 1
    x *= nd.array([[2.0, 3.0]], ctx=ctx)
    x -= 0.5
    x /= 2
    assert x._data is raw and x.dtype == np.float32
    np.testing.assert_allclose(x.asnumpy(), [[1.75, 2.75], [1.75, 2.75]])


def test_broadcast_to_result_is_writable(ctx):
    y = nd.broadcast_to(nd.array([[1.0, 2.0]], ctx=ctx), shape=(3, 2))
    y += 1
    y[0] = 0
    np.testing.assert_array_equal(y.asnumpy(), [[0, 0], [2, 3], [2, 3]])


def test_devices_copyto_as_in_context(ctx):
    other = trainer_cli.cpu(1)
    x = nd.array([1.0, 2.0], ctx=ctx)
    y = x.copyto(other)
    assert y.context == other and y is not x
    np.testing.assert_array_equal(y.asnumpy(), [1, 2])
    y[:] = 5
    assert x.asnumpy().tolist() == [1, 2]
    assert x.as_in_context(ctx) is x
    back = y.as_in_context(ctx)
    assert back.context == ctx and back.asnumpy().tolist() == [5, 5]
    target = nd.zeros((2,), ctx=other)
    assert x.copyto(target) is target
    assert target.asnumpy().tolist() == [1, 2]
    assert (x + 1).context == ctx
    with trainer_cli.cpu(1):
        assert nd.zeros((1,)).context == trainer_cli.cpu(1)
        assert trainer_cli.current_context() == trainer_cli.cpu(1)
    assert nd.zeros((1,)).context == trainer_cli.cpu(0)


def test_gradient_flows_across_contexts(ctx):
    x = nd.array([1.0, 2.0], ctx=ctx)
    x.attach_grad()
    with autograd.record():
        y = (x.copyto(trainer_cli.cpu(1)) * 3).sum()
    y.backward()
    assert x.grad.context == ctx
    np.testing.assert_array_equal(x.grad.asnumpy(), [3, 3])


def test_asscalar_and_conversions(ctx):
    x = nd.array([2.5], ctx=ctx)
    assert x.asscalar() == 2.5 and isinstance(x.asscalar(), np.float32)
    assert float(x) == 2.5 and int(x) == 2
    with pytest.raises(ValueError):
        nd.array([1, 2], ctx=ctx).asscalar()
    assert isinstance(x.asnumpy(), np.ndarray)
    assert np.asarray(nd.array([[1, 2]], ctx=ctx)).shape == (1, 2)
    assert nd.array([[1, 2]], ctx=ctx).tolist() == [[1.0, 2.0]]
    assert len(nd.zeros((3, 2), ctx=ctx)) == 3
    assert [r.shape for r in nd.zeros((3, 2), ctx=ctx)] == [(2,)] * 3
    assert bool(nd.array([1], ctx=ctx)) and not bool(nd.array([0], ctx=ctx))


def test_shape_methods(ctx):
    x = nd.array(np.arange(24).reshape(2, 3, 4), ctx=ctx)
    assert x.reshape((4, 6)).shape == (4, 6)
    assert x.reshape(4, -1).shape == (4, 6)
    assert x.reshape((0, -1)).shape == (2, 12)
    assert x.reshape((-3, 0)).shape == (6, 4)
    assert x.reshape((-4, 1, 2, -2)).shape == (1, 2, 3, 4)
    assert x.reshape((-1, 0), reverse=True).shape == (6, 4)
    assert x.T.shape == (4, 3, 2) and x.transpose((1, 0, 2)).shape == (3, 2, 4)
    assert x.flatten().shape == (2, 12) and nd.flatten(nd.zeros((5,))).shape == (5, 1)
    assert x.expand_dims(0).shape == (1, 2, 3, 4)
    assert nd.squeeze(nd.zeros((1, 3, 1))).shape == (3,)
    assert [p.shape for p in nd.split(x, 3, axis=1)] == [(2, 1, 4)] * 3
    assert nd.split(x, 2, axis=0, squeeze_axis=True)[0].shape == (3, 4)
    assert nd.stack(x, x, axis=1).shape == (2, 2, 3, 4)
    assert nd.concat(x, x, dim=2).shape == (2, 3, 8)
    assert nd.tile(x, (2, 1, 1)).shape == (4, 3, 4)
    assert nd.repeat(x, 2, axis=0).shape == (4, 3, 4)


def test_creation(ctx):
    np.testing.assert_array_equal(nd.arange(2, 8, 2, ctx=ctx).asnumpy(), [2, 4, 6])
    np.testing.assert_array_equal(nd.arange(3, repeat=2, ctx=ctx).asnumpy(), [0, 0, 1, 1, 2, 2])
    np.testing.assert_array_equal(nd.full((2,), 7, ctx=ctx).asnumpy(), [7, 7])
    np.testing.assert_array_equal(nd.eye(2, ctx=ctx).asnumpy(), np.eye(2))
    x = nd.array([[1, 2]], ctx=ctx, dtype="float64")
    for like, value in ((nd.zeros_like, 0), (nd.ones_like, 1)):
        r = like(x)
        assert r.shape == (1, 2) and r.dtype == np.float64 and r.context == ctx
        assert (r.asnumpy() == value).all()
    np.testing.assert_array_equal(nd.full_like(x, 4).asnumpy(), [[4, 4]])
    np.testing.assert_array_equal(nd.one_hot(nd.array([0, 2, 5], ctx=ctx), 3).asnumpy(),
                                  [[1, 0, 0], [0, 0, 1], [0, 0, 0]])


def test_sort_topk(ctx):
    x = nd.array([[3, 1, 2], [0, 5, 4]], ctx=ctx)
    np.testing.assert_array_equal(nd.sort(x).asnumpy(), [[1, 2, 3], [0, 4, 5]])
    np.testing.assert_array_equal(nd.sort(x, is_ascend=False).asnumpy(), [[3, 2, 1], [5, 4, 0]])
    np.testing.assert_array_equal(nd.argsort(x).asnumpy(), [[1, 2, 0], [0, 2, 1]])
    np.testing.assert_array_equal(nd.topk(x, k=2).asnumpy(), [[0, 2], [1, 2]])
    np.testing.assert_array_equal(nd.topk(x, k=1, ret_typ="value").asnumpy(), [[3], [5]])


def test_save_load_roundtrip(tmp_path, ctx):
    a = nd.array([[1, 2], [3, 4]], ctx=ctx)
    b = nd.array([0.5], ctx=ctx, dtype="float64")
    path = str(tmp_path / "arrays.params")
    nd.save(path, [a, b])
    loaded = nd.load(path)
    assert isinstance(loaded, list) and len(loaded) == 2
    np.testing.assert_array_equal(loaded[0].asnumpy(), a.asnumpy())
    assert loaded[1].dtype == np.float64
    nd.save(path, {"w": a, "b": b})
    loaded = nd.load(path)
    assert sorted(loaded) == ["b", "w"]
    np.testing.assert_array_equal(loaded["w"].asnumpy(), a.asnumpy())
    nd.save(path, a)
    (single,) = nd.load(path)
    np.testing.assert_array_equal(single.asnumpy(), a.asnumpy())
    with open(path, "rb") as f:
        assert f.read(8) == (0x112).to_bytes(8, "little")  # MXNet's binary format: no pickle


def test_random_seed_reproducible(ctx):
    def draw():
        return [nd.random.uniform(-1, 1, shape=(3, 2), ctx=ctx).asnumpy(),
                nd.random.normal(0, 2, shape=(4,), ctx=ctx).asnumpy(),
                nd.random.randint(0, 100, shape=(5,), ctx=ctx).asnumpy(),
                nd.random.shuffle(nd.arange(10, ctx=ctx)).asnumpy()]
    trainer_cli.random.seed(123)
    first = draw()
    trainer_cli.random.seed(123)
    second = draw()
    for f, s in zip(first, second):
        np.testing.assert_array_equal(f, s)
    trainer_cli.random.seed(124)
    assert not np.array_equal(draw()[0], first[0])


def test_random_distributions(ctx):
    trainer_cli.random.seed(0)
    u = nd.random.uniform(2, 3, shape=(2000,), ctx=ctx).asnumpy()
    assert u.min() >= 2 and u.max() < 3 and abs(u.mean() - 2.5) < 0.05
    n = nd.random.normal(1, 2, shape=(4000,), ctx=ctx).asnumpy()
    assert abs(n.mean() - 1) < 0.15 and abs(n.std() - 2) < 0.15
    r = nd.random.randint(-3, 3, shape=(1000,), ctx=ctx).asnumpy()
    assert r.min() == -3 and r.max() == 2
    out = nd.zeros((3,), ctx=ctx)
    assert nd.random.uniform(shape=(3,), ctx=ctx, out=out) is out


def test_shuffle_permutes_rows(ctx):
    x = nd.array(np.arange(20).reshape(10, 2), ctx=ctx)
    trainer_cli.random.seed(5)
    y = nd.random.shuffle(x).asnumpy()
    assert y.shape == (10, 2)
    assert sorted(y[:, 0].tolist()) == list(range(0, 20, 2))
    assert (y[:, 1] == y[:, 0] + 1).all()
    assert x.asnumpy()[:, 0].tolist() == list(range(0, 20, 2))  # input untouched


def test_nn_ops_forward_shapes(ctx):
    x = nd.ones((2, 3, 8, 8), ctx=ctx)
    w = nd.ones((4, 3, 3, 3), ctx=ctx)
    out = nd.Convolution(x, w, nd.zeros((4,), ctx=ctx), kernel=(3, 3), pad=(1, 1), num_filter=4)
    assert out.shape == (2, 4, 8, 8) and out.context == ctx
    assert out.asnumpy()[0, 0, 4, 4] == 27 and out.asnumpy()[0, 0, 0, 0] == 12
    assert nd.Pooling(x, kernel=(2, 2), stride=(2, 2)).shape == (2, 3, 4, 4)
    assert nd.Pooling(x, kernel=(3, 3), stride=(2, 2), pooling_convention="full").shape == (2, 3, 4, 4)
    assert nd.Pooling(x, kernel=(3, 3), stride=(2, 2)).shape == (2, 3, 3, 3)
    assert nd.Pooling(x, global_pool=True, pool_type="avg").shape == (2, 3, 1, 1)
    assert nd.Embedding(nd.array([[1, 2]], ctx=ctx), nd.ones((5, 6), ctx=ctx), input_dim=5,
                        output_dim=6).shape == (1, 2, 6)
    with pytest.raises(ValueError):
        nd.Convolution(x, nd.ones((4, 2, 3, 3), ctx=ctx), kernel=(3, 3), num_filter=4, no_bias=True)


def test_seeding_one_context_needs_no_device():
    # MXNet accepts mx.random.seed(s, ctx=mx.gpu(0)) anywhere; the GPU's stream starts from it at
    # its first draw, and the CPU's stream is left as it was.
    trainer_cli.random.seed(3)
    first = nd.random.uniform(shape=(3,)).asnumpy()
    trainer_cli.random.seed(3)
    trainer_cli.random.seed(5, ctx=trainer_cli.gpu(0))
    np.testing.assert_array_equal(nd.random.uniform(shape=(3,)).asnumpy(), first)
    trainer_cli.random.seed(7, ctx=trainer_cli.cpu())
    again = nd.random.uniform(shape=(3,)).asnumpy()
    trainer_cli.random.seed(7, ctx=trainer_cli.cpu())
    np.testing.assert_array_equal(nd.random.uniform(shape=(3,)).asnumpy(), again)


def test_inf_and_nan_come_silently_as_from_mxnet():
    # NumPy's RuntimeWarnings from inside the operators are not shown (MXNet's operators give
    # inf/NaN silently); a warning of the program's own NumPy call still is.
    import subprocess
    import sys
    code = ("import numpy as np, trainer_cli as mx\n"
            "x = mx.nd.array([0.0, -1.0])\n"
            "out = [mx.nd.log(x), mx.nd.sqrt(x), x / 0, mx.nd.log_softmax(mx.nd.array([[float('-inf')] * 2]))]\n"
            "print([o.asnumpy().tolist() for o in out])\n"
            "np.log(np.zeros(1))\n")
    done = subprocess.run([sys.executable, "-W", "default", "-c", code], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "inf" in done.stdout and "nan" in done.stdout
    assert done.stderr.count("RuntimeWarning") == 1 and "<string>:5" in done.stderr, done.stderr
