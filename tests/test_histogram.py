"""``nd.histogram`` and ``nd.khatri_rao``: MXNet 1.9.1's values, dtypes and shapes
(tests/data/mxnet_histogram, recorded from the real MXNet by ``histogram_cases.record``)."""
import os
import sys

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import autograd, nd

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_histogram")
sys.path.insert(0, HERE)
import histogram_cases  # noqa: E402

RECORDED = dict(np.load(os.path.join(HERE, "histogram.npz")))
OURS = histogram_cases.record(mx)


def test_every_recorded_value_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_each_value_is_mxnets_bits(key):
    got, want = np.asarray(OURS[key]), RECORDED[key]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_counts_agree_with_numpy_and_arguments_are_checked():
    x = np.random.RandomState(3).rand(1000).astype(np.float32) * 10
    counts, edges = nd.histogram(nd.array(x), bins=8, range=(0, 10))
    want, _ = np.histogram(x, bins=8, range=(0, 10))
    assert counts.asnumpy().tolist() == want.tolist()
    with pytest.raises(ValueError, match="integer or an NDArray"):
        nd.histogram(nd.array(x), bins=2.5)
    with pytest.raises(ValueError, match="min < max"):
        nd.histogram(nd.array(x), bins=3, range=(2, 2))
    with pytest.raises(ValueError, match="4 columns"):
        nd.khatri_rao(nd.ones((2, 4)), nd.ones((2, 3)))


def test_khatri_rao_has_the_products_gradient():
    a, b = nd.array([[1.0, 2.0], [3.0, 4.0]]), nd.array([[5.0, 6.0]])
    a.attach_grad()
    with autograd.record():
        y = nd.khatri_rao(a, b)
    y.backward()
    assert a.grad.asnumpy().tolist() == [[5.0, 6.0], [5.0, 6.0]]
