"""``nd.contrib``: each operator's values, dtypes, shapes and gradients are MXNet 1.9.1's, bit
for bit (tests/data/mxnet_nd/contrib.npz, recorded from the real MXNet by the same
``contrib_cases.record``); the control flow drives recorded recurrences with MXNet's
gradients; every other MXNet contrib name says it is absent."""
import os
import sys

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.base import NotInTrainerCLIError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_nd")
sys.path.insert(0, HERE)
import contrib_cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(HERE, "contrib.npz")))
OURS = contrib_cases.record(mx)


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)


# MXNet runs its fused BatchNorm + ReLU through oneDNN, whose statistics and gradients sum in
# another order than MXNet's own BatchNorm (which trainer_cli's follows): float32 rounding.
ONEDNN = tuple(k for k in RECORDED if k.startswith("BatchNorm"))


@pytest.mark.parametrize("name", sorted(set(RECORDED) - set(ONEDNN)))
def test_each_case_is_mxnets_bits(name):
    replay.same_bits(OURS[name], RECORDED[name])


@pytest.mark.parametrize("name", sorted(ONEDNN))
def test_fused_batchnorm_relu_is_mxnets_to_float_rounding(name):
    want = RECORDED[name]
    got = replay.same_layout(OURS[name], want)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    else:
        np.testing.assert_array_equal(got, want)


def test_every_mxnet_contrib_name_is_here_or_says_it_is_absent():
    with open(os.path.join(HERE, "mxnet_nd_contrib_names.txt")) as f:
        names = f.read().split()
    present = [n for n in names if n in nd.contrib.__all__]
    assert len(present) >= 19
    for name in names:
        if name in present:
            assert callable(getattr(nd.contrib, name))
        else:
            with pytest.raises(NotInTrainerCLIError, match="nd.contrib.%s" % name):
                getattr(nd.contrib, name)


def test_operators_take_out_and_sparse_inputs():
    x = nd.array([[1.0, 2.0], [3.0, 4.0]])
    out = nd.zeros((2, 2))
    assert nd.contrib.quadratic(x, a=1, out=out) is out
    assert out.asnumpy().tolist() == [[1.0, 4.0], [9.0, 16.0]]
    picked = nd.contrib.boolean_mask(x.tostype("row_sparse"), nd.array([0, 1]))
    assert picked.asnumpy().tolist() == [[3.0, 4.0]]
    assert nd.contrib.CTCLoss is nd.CTCLoss


def test_while_loop_pads_with_zeros_and_checks_its_arguments():
    outputs, last = nd.contrib.while_loop(lambda v: v.sum() > 1, lambda v: (v * 3, v * 0.5),
                                          nd.array([4.0]), max_iterations=5)
    assert outputs.asnumpy().ravel().tolist() == [12.0, 6.0, 0.0, 0.0, 0.0]
    assert last.asnumpy().tolist() == [1.0]
    with pytest.raises(ValueError, match="max_iterations"):
        nd.contrib.while_loop(lambda v: True, lambda v: (v, v), nd.ones(1))
    with pytest.raises(ValueError, match="consistent"):
        nd.contrib.while_loop(lambda v, w: True, lambda v, w: (v, [v]), [nd.ones(1), nd.ones(1)],
                              max_iterations=2)
    with pytest.raises(TypeError, match="foreach's data"):
        nd.contrib.foreach(lambda d, s: (d, s), [nd.ones(2), 3], nd.ones(1))


def test_refusals():
    with pytest.raises(ValueError, match="axis=0"):
        nd.contrib.boolean_mask(nd.ones((2, 2)), nd.ones(2), axis=1)
    with pytest.raises(ValueError, match="one entry per row"):
        nd.contrib.boolean_mask(nd.ones((2, 2)), nd.ones(3))
    with pytest.raises(ValueError, match="new_tensor must be"):
        nd.contrib.index_copy(nd.ones((3, 2)), nd.array([0]), nd.ones((2, 2)))
    with pytest.raises(ValueError, match="not supported"):
        nd.contrib.getnnz(nd.ones((2, 2)).tostype("csr"), axis=0)


def test_a_reversed_gradient_trains_against_its_loss():
    w = nd.array([1.0])
    w.attach_grad()
    with autograd.record():
        loss = (nd.contrib.gradientmultiplier(w, scalar=-1.0) * 2).sum()
    loss.backward()
    assert w.grad.asnumpy().tolist() == [-2.0]


ATTENTION = dict(np.load(os.path.join(HERE, "contrib_attention.npz")))
OURS_ATTENTION = contrib_cases.record_attention(mx)


@pytest.mark.parametrize("name", sorted(ATTENTION))
def test_the_interleaved_attention_products_are_mxnets(name):
    """(Matrix products: the same bits here, compared to float rounding so that another BLAS
    build passes.)"""
    got, want = OURS_ATTENTION[name], ATTENTION[name]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7 * np.abs(want).max())


POOLING = dict(np.load(os.path.join(HERE, "contrib_pooling.npz")))
OURS_POOLING = contrib_cases.record_pooling(mx)


@pytest.mark.parametrize("name", sorted(POOLING))
def test_adaptive_average_pooling_is_mxnets_bits(name):
    got, want = OURS_POOLING[name], POOLING[name]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_rand_zipfian_draws_log_uniform_classes_and_counts_them_as_mxnet_does():
    mx.random.seed(11)
    samples, true_counts, sample_counts = nd.contrib.rand_zipfian(nd.array([0, 5]), 20000, 50)
    drawn = samples.asnumpy()
    assert drawn.dtype == np.int64 and drawn.min() >= 0 and drawn.max() < 50
    # P(c) = log((c + 2) / (c + 1)) / log(51): the drawn frequencies within 5 sigma of it
    for c in (0, 1, 7, 30):
        p = np.log((c + 2) / (c + 1)) / np.log(51)
        assert abs((drawn == c).mean() - p) < 5 * np.sqrt(p * (1 - p) / 20000)
    # a sampled class's expected count is the one it has as a true class
    again = nd.contrib.rand_zipfian(samples[:50], 20000, 50)[1]
    np.testing.assert_array_equal(sample_counts.asnumpy()[:50], again.asnumpy())
    np.testing.assert_allclose(true_counts.asnumpy(),
                               np.log([2 / 1, 7 / 6]) / np.log(51) * 20000, rtol=1e-15)
    mx.random.seed(11)
    assert (nd.contrib.rand_zipfian(nd.array([0]), 20000, 50)[0].asnumpy() == drawn).all()
