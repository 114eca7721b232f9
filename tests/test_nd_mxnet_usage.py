"""nd usage patterns a per-op sample test misses, against what the real MXNet 1.9.1 gives
(recorded by running the same calls there): integer arrays compared with non-integer scalars,
reductions with exclude over every axis, integer cumsum, topk/sort over the flattened array and
k=0, take(mode='raise'), float16 norm, and the arguments symbol-era code passes."""
import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import nd


def test_integer_array_against_a_scalar_compares_in_the_arrays_dtype():
    # MXNet converts the scalar to the array's dtype first: 1.5 -> 1, -1 -> 255 and 300 -> 44
    # for uint8.
    a = nd.array([1, 2, 3], dtype="int32")
    u = nd.array([0, 200, 255], dtype="uint8")
    assert (a == 1.5).asnumpy().tolist() == [1, 0, 0] and (a == 1.5).dtype == np.int32
    assert (a < 1.5).asnumpy().tolist() == [0, 0, 0]
    assert (a >= 1.5).asnumpy().tolist() == [1, 1, 1]
    assert nd.greater_equal(a, 2.5).asnumpy().tolist() == [0, 1, 1]
    assert (u > -1).asnumpy().tolist() == [0, 0, 0] and (u > -1).dtype == np.uint8
    assert (u < 300).asnumpy().tolist() == [1, 0, 0]
    f = nd.array([1.0, 2.0, 3.0])
    assert (f >= 1.5).asnumpy().tolist() == [0, 1, 1]        # floats: as they are


def test_exclude_without_axes_reduces_every_axis():
    x = nd.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for got, want in ((nd.sum(x, exclude=True), 21.0), (nd.mean(x, axis=(), exclude=True), 3.5),
                      (nd.max(x, exclude=True), 6.0)):
        assert got.shape == (1,) and got.asnumpy().tolist() == [want]
    assert nd.sum(x, axis=0, exclude=True).asnumpy().tolist() == [6.0, 15.0]


def test_integer_cumsum_keeps_and_wraps_its_dtype():
    got = nd.cumsum(nd.array([100, 100, 100], dtype="int8"))
    assert got.dtype == np.int8 and got.asnumpy().tolist() == [100, -56, 44]
    got = nd.cumsum(nd.array([3, 254, 7], dtype="uint8"))
    assert got.dtype == np.uint8 and got.asnumpy().tolist() == [3, 1, 8]
    assert nd.cumsum(nd.array([1, 2, 3], dtype="int32")).dtype == np.int32
    assert nd.cumsum(nd.array([1, 2, 3], dtype="int32"), dtype="int64").dtype == np.int64


def test_topk_and_sort_over_the_flattened_array_and_k_zero():
    v = nd.array([[3.0, 1.0, 2.0], [0.0, 5.0, 4.0]])
    assert nd.topk(v, k=3, axis=None).asnumpy().tolist() == [4.0, 5.0, 0.0]
    assert nd.sort(v, axis=None).asnumpy().tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert nd.topk(v, k=0).asnumpy().tolist() == [[0.0, 2.0, 1.0], [1.0, 2.0, 0.0]]
    assert nd.topk(v, k=0, ret_typ="value").asnumpy().tolist() == [[3.0, 2.0, 1.0],
                                                                   [5.0, 4.0, 0.0]]
    with pytest.raises(mx.base.MXNetError, match="larger than axis"):
        nd.topk(v, k=4)
    x = nd.array([3.0, 1.0, 2.0])
    x.attach_grad()
    with mx.autograd.record():
        y = nd.sort(x.reshape((1, 3)), axis=None)
    y.backward(nd.array([1.0, 2.0, 3.0]))
    assert x.grad.asnumpy().tolist() == [3.0, 1.0, 2.0]


def test_take_modes():
    v = nd.array([10.0, 11.0, 12.0])
    idx = nd.array([0, 4, -1])
    assert nd.take(v, idx).asnumpy().tolist() == [10.0, 12.0, 10.0]            # clip
    assert nd.take(v, idx, mode="wrap").asnumpy().tolist() == [10.0, 11.0, 12.0]
    assert nd.take(v, nd.array([2, 0]), mode="raise").asnumpy().tolist() == [12.0, 10.0]
    with pytest.raises(mx.base.MXNetError, match="outside") as info:
        nd.take(v, idx, mode="raise")
    assert isinstance(info.value, IndexError)
    with pytest.raises(ValueError, match="mode"):
        nd.take(v, idx, mode="nearest")


def test_float16_norm_does_not_overflow():
    # MXNet 1.9.1 sums the squares in float16 and says 452.5 (MXNET_SAFE_ACCUMULATION=1
    # recommended); here they are summed in float32: sqrt(3000) * 10 = 547.7.
    got = nd.full((3000,), 10.0, dtype="float16").norm()
    assert got.dtype == np.float16 and got.asnumpy().tolist() == [547.5]


def test_arguments_of_symbol_era_code():
    x = nd.ones((2, 3))
    assert nd.Concat(x, x, dim=0, num_args=2).shape == (4, 3)
    with pytest.raises(mx.base.MXNetError, match="num_args"):
        nd.concat(x, x, dim=0, num_args=3)
    assert nd.broadcast_like(nd.ones((1, 3)), nd.zeros((3, 4)), lhs_axes=(0,),
                             rhs_axes=(1,)).shape == (4, 3)
    assert nd.reshape_like(nd.ones((2, 3, 4)), nd.zeros((6, 5)), lhs_begin=0, lhs_end=2,
                           rhs_begin=0, rhs_end=1).shape == (6, 4)
    assert nd.maximum(1, 2) == 2 and nd.minimum(1, 2) == 1
    assert x.writable


def test_random_draws_with_array_parameters():
    # MXNet's _sample_* operators: one draw per parameter element, `shape` more each; the shapes
    # are those the real MXNet 1.9.1 gives.
    mx.random.seed(0)
    lo, hi = nd.array([0.0, 10.0]), nd.array([1.0, 20.0])
    assert nd.random.uniform(lo, hi).shape == (2,)
    draws = nd.random.uniform(lo, hi, shape=3000)
    assert draws.shape == (2, 3000) and draws.dtype == np.float32
    d = draws.asnumpy()
    assert 0 <= d[0].min() and d[0].max() < 1 and 10 <= d[1].min() and d[1].max() < 20
    z = nd.random.normal(nd.array([0.0, 100.0]), nd.array([1.0, 0.01]), shape=4000).asnumpy()
    np.testing.assert_allclose(z.mean(1), [0, 100], atol=0.1)
    np.testing.assert_allclose(z.std(1), [1, 0.01], rtol=0.1)
    assert nd.random.normal(lo, hi, shape=2).shape == (2, 2)
    scale = nd.array([1.0, 4.0])
    for draws, mean in ((nd.random.exponential(scale, shape=20000), [1, 4]),
                        (nd.random.poisson(scale, shape=20000), [1, 4]),
                        (nd.random.gamma(nd.array([2.0, 3.0]), nd.array([1.0, 2.0]),
                                         shape=20000), [2, 6])):
        assert draws.shape == (2, 20000)
        np.testing.assert_allclose(draws.asnumpy().mean(1), mean, rtol=0.05)
    mx.random.seed(5)
    first = nd.random.uniform(lo, hi, shape=4).asnumpy()
    mx.random.seed(5)
    assert np.array_equal(nd.random.uniform(lo, hi, shape=4).asnumpy(), first)
    with pytest.raises(TypeError, match="same type"):
        nd.random.uniform(lo, 1.0)


def test_python_ints_beyond_an_integer_dtype_wrap_as_in_mxnet():
    # NumPy 2 refuses them; MXNet (on NumPy 1) converts them as C does.
    u8 = nd.array([1, 2, 3], dtype="uint8")
    u8[0] = 300
    u8[1] = -1
    assert u8.asnumpy().tolist() == [44, 255, 3]
    assert nd.array([-1, 256], dtype="uint8").asnumpy().tolist() == [255, 0]
    assert (-7 % nd.array([2, 3], dtype="uint8")).asnumpy().tolist() == [1, 0]
    assert (nd.array([7, 8], dtype="uint8") % -3).asnumpy().tolist() == [7, 8]   # % 253
    assert (nd.array([2, 3], dtype="uint8") + 300).asnumpy().tolist() == [46, 47]
    f = nd.array([1.5, 2.5])
    f[0] = 300
    assert f.asnumpy().tolist() == [300.0, 2.5]


def test_errors_mxnet_raises_as_mxnet_error():
    x = nd.ones((2, 3))
    for call, builtin in ((lambda: x.reshape((5, 5)), ValueError),
                          (lambda: x.reshape((1, 0, 0, 0)), ValueError),
                          (lambda: x.copyto(nd.zeros((3, 2))), ValueError),
                          (lambda: x.squeeze(axis=0), ValueError),
                          (lambda: x.transpose((0, 0)), ValueError),
                          (lambda: nd.broadcast_to(x, (4, 3)), ValueError),
                          (lambda: nd.slice_axis(x, axis=5, begin=0, end=1), IndexError),
                          (lambda: (nd.ones((2,)) * 2).backward(), ValueError)):
        with pytest.raises(mx.base.MXNetError) as info:
            call()
        assert isinstance(info.value, builtin)


def test_methods_of_more_operators():
    x = nd.array([[1.0, np.nan, 3.0], [4.0, 5.0, 6.0]])
    assert x.nansum().asnumpy().tolist() == [19.0]
    assert x.nanprod(axis=1).asnumpy().tolist() == [3.0, 120.0]
    assert x.shape_array().asnumpy().tolist() == [2, 3] and x.shape_array().dtype == np.int64
    assert x.size_array().asnumpy().tolist() == [6]


def test_one_element_arrays_assign_into_one_element():
    # d2l: multistep_preds[i] = net(...) of shape (1, 1); losses[epoch] = l.mean() of shape (1,).
    x = nd.zeros(6)
    x[2] = nd.array([[7.0]])
    x[3] = nd.array([8.0])
    x[4] = np.array([[9.0]])
    assert x.asnumpy().tolist() == [0, 0, 7, 8, 9, 0]
    y = nd.zeros((2, 3))
    y[1, 2] = nd.array([9.0])
    assert y.asnumpy().tolist() == [[0, 0, 0], [0, 0, 9]]
    with pytest.raises(ValueError):
        x[1:3] = nd.array([1.0, 2.0, 3.0])
    z = nd.zeros(3)
    w = nd.array([2.0])
    w.attach_grad()
    with mx.autograd.record():
        z[1] = w * 3
        total = z.sum()
    total.backward()
    assert z.asnumpy().tolist() == [0, 6, 0] and w.grad.asnumpy().tolist() == [3.0]


def test_numpy_reductions_of_an_ndarray_are_ndarrays_as_in_mxnet():
    """``numpy.sum(x)`` calls ``x.sum(axis=None, out=None)``: MXNet 1.9.1 answers with NDArrays
    ([10.], [4.], [1.], [24.], [3.] for this x; its mean refuses NumPy's ``dtype=None``)."""
    x = nd.array([[1, 2], [3, 4]])
    got = {f: getattr(np, f)(x) for f in ("sum", "max", "min", "prod", "argmax", "mean")}
    assert all(isinstance(v, nd.NDArray) for v in got.values())
    assert {f: v.asnumpy().tolist() for f, v in got.items()} == {
        "sum": [10.0], "max": [4.0], "min": [1.0], "prod": [24.0], "argmax": [3.0],
        "mean": [2.5]}
    assert np.sum(x, axis=0).asnumpy().tolist() == [4.0, 6.0]
    out = nd.zeros((2,))
    assert x.sum(axis=1, out=out) is out and out.asnumpy().tolist() == [3.0, 7.0]
