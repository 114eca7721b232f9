"""``nd`` names beyond the core ops: ``out=``, ``tostype``, the random aliases, and
docs/compat.md's account of every MXNet ``nd`` name that is missing here (the names of MXNet's
``nd`` are listed in tests/data/mxnet_nd/, written by tests/data/mxnet_ops/make_op_reference.py).
Values and gradients against MXNet's: tests/test_op_registry.py."""
import os
import re

import numpy as np
import pytest

from trainer_cli import autograd, nd

HERE = os.path.dirname(__file__)
DATA = os.path.join(HERE, "data", "mxnet_nd")


def test_out_writes_in_place_and_returns_out():
    x = nd.array([[1.0, 2.0], [3.0, 4.0]])
    out = nd.zeros((2, 2))
    view = out[0]
    assert nd.exp(x, out=out) is out
    np.testing.assert_allclose(out.asnumpy(), np.exp(x.asnumpy()), rtol=1e-6)
    assert view.asnumpy()[1] == pytest.approx(np.exp(2.0), rel=1e-6)
    parts = [nd.zeros((2, 1)), nd.zeros((2, 1))]
    assert nd.split(x, 2, axis=1, out=parts) == parts
    np.testing.assert_array_equal(parts[1].asnumpy(), [[2.0], [4.0]])
    assert nd.broadcast_add(x, x, out=out) is out and out.asnumpy()[1, 1] == 8.0
    assert nd.random.uniform(shape=(2, 2), out=out) is out
    with pytest.raises(ValueError, match="shape"):
        nd.exp(x, out=nd.zeros((3,)))


def test_out_inside_record_joins_the_graph():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    out = nd.zeros((2,))
    with autograd.record():
        y = nd.square(x, out=out)
        z = nd.sum(y * 3)
    z.backward()
    np.testing.assert_allclose(x.grad.asnumpy(), [6.0, 12.0])
    with pytest.raises(ValueError, match="attach_grad"):
        with autograd.record():
            nd.square(x, out=x)


def test_from_numpy_and_reset_arrays():
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    shared = nd.from_numpy(src)
    src[0, 0] = 7
    assert shared.asnumpy()[0, 0] == 7
    copied = nd.from_numpy(src, zero_copy=False)
    src[0, 0] = 8
    assert copied.asnumpy()[0, 0] == 7
    a, b = nd.ones((2,)), nd.ones((3, 1))
    nd.reset_arrays(a, b, num_arrays=2)
    assert not a.asnumpy().any() and not b.asnumpy().any()


def test_tostype_dense_is_a_copy():
    x = nd.array([[1.0, 0.0], [0.0, 2.0]])
    for y in (x.tostype("default"), nd.cast_storage(x, "default")):
        assert y is not x and y.stype == "default"
        np.testing.assert_array_equal(y.asnumpy(), x.asnumpy())
        y[0, 0] = 5
        assert x.asnumpy()[0, 0] == 1.0
    assert x.tostype("row_sparse").stype == "row_sparse"
    with pytest.raises(ValueError, match="unknown storage type"):
        x.tostype("dense")


def test_random_aliases_shapes_dtypes_and_moments():
    from trainer_cli import random as tc_random
    tc_random.seed(3)
    n = 20000
    checks = [
        (nd.uniform(-1, 3, shape=(n,)), 1.0, 4.0 / 3),
        (nd.normal(2, 0.5, shape=(n,)), 2.0, 0.25),
        (nd.random_uniform(0, 2, shape=(n,)), 1.0, 1.0 / 3),
        (nd.random_normal(0, 2, shape=(n,)), 0.0, 4.0),
        (nd.random_exponential(2, shape=(n,)), 2.0, 4.0),
        (nd.random_gamma(2, 3, shape=(n,)), 6.0, 18.0),
        (nd.random_poisson(4, shape=(n,)), 4.0, 4.0),
        (nd.random_negative_binomial(3, 0.4, shape=(n,)), 4.5, 11.25),
        (nd.random_generalized_negative_binomial(2.0, 0.5, shape=(n,)), 2.0, 4.0),
        (nd.random.negative_binomial(3, 0.4, shape=(n,)), 4.5, 11.25),
    ]
    for arr, mean, var in checks:
        a = arr.asnumpy().astype(np.float64)
        assert arr.dtype == np.float32 and arr.shape == (n,)
        assert abs(a.mean() - mean) < 5 * np.sqrt(var / n), (a.mean(), mean)
        assert abs(a.var() / var - 1) < 0.1, (a.var(), var)
    r = nd.random_randint(2, 5, shape=(50,))
    assert r.dtype == np.int32 and set(np.unique(r.asnumpy())) <= {2, 3, 4}
    like = nd.zeros((3, 2), dtype="float64")
    for fn in (nd.random.uniform_like, nd.random.normal_like, nd.random.exponential_like,
               nd.random.gamma_like, nd.random.poisson_like, nd.random.negative_binomial_like,
               nd.random.generalized_negative_binomial_like):
        out = fn(like)
        assert out.shape == (3, 2) and out.dtype == np.float64
    mu, sigma = nd.array([0.0, 100.0]), nd.array([1.0, 0.001])
    s = nd.sample_normal(mu, sigma, shape=(4000,))
    assert s.shape == (2, 4000)
    assert abs(s.asnumpy()[1].mean() - 100) < 0.01 and abs(s.asnumpy()[0].std() - 1) < 0.1
    u = nd.sample_uniform(nd.array([0.0, 10.0]), nd.array([1.0, 11.0]), shape=3)
    assert u.shape == (2, 3) and (u.asnumpy()[1] >= 10).all()
    e = nd.sample_exponential(nd.array([4.0]), shape=(n,)).asnumpy()
    assert abs(e.mean() - 0.25) < 0.02           # MXNet's parameter is the rate
    for fn, args in ((nd.sample_gamma, (nd.array([2.0]), nd.array([3.0]))),
                     (nd.sample_poisson, (nd.array([4.0]),)),
                     (nd.sample_negative_binomial, (nd.array([3.0]), nd.array([0.4]))),
                     (nd.sample_generalized_negative_binomial, (nd.array([2.0]), nd.array([0.5])))):
        assert fn(*args, shape=(5,)).shape == (1, 5)
    sh = nd.shuffle(nd.arange(10))
    assert sorted(sh.asnumpy().tolist()) == list(range(10))


def _names(file):
    with open(os.path.join(DATA, file)) as f:
        return [line.strip() for line in f if line.strip()]


def _compat_table():
    """{name: status} from the table in docs/compat.md's "The nd namespace" section."""
    with open(os.path.join(HERE, "..", "docs", "compat.md")) as f:
        text = f.read()
    section = text.split("### The `nd` namespace", 1)[1].split("\n## ", 1)[0]
    table = {}
    for line in section.splitlines():
        m = re.match(r"\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|", line)
        if m and not set(m.group(1)) <= set("-: ") and m.group(1) != "Names":
            for name in re.findall(r"`([^`]+)`", m.group(1)):
                table[name] = m.group(2)
    return table


def test_every_mxnet_nd_name_is_here_or_in_the_compat_table():
    table = _compat_table()
    missing = [n for n in _names("mxnet_nd_names.txt") if not hasattr(nd, n)]
    unaccounted = [n for n in missing if n not in table]
    assert not unaccounted, "MXNet nd names neither implemented nor in docs/compat.md: %s" % unaccounted
    stale = [n for n in table if hasattr(nd, n)]
    assert not stale, "docs/compat.md lists names that now exist: %s" % stale
    rnd_missing = [n for n in _names("mxnet_nd_random_names.txt")
                   if not hasattr(nd.random, n) and "random." + n not in table]
    assert not rnd_missing, rnd_missing
