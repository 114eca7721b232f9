"""``nd.histogram`` and ``nd.khatri_rao``: MXNet 1.9.1's values, dtypes and shapes
(tests/data/mxnet_histogram, recorded from the real MXNet by ``histogram_cases.record``)."""

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd

RECORDED, histogram_cases = replay.recording("mxnet_histogram", "histogram.npz", "histogram_cases")
OURS = histogram_cases.record(mx)


def test_every_recorded_value_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_each_value_is_mxnets_bits(key):
    replay.same_bits(OURS[key], RECORDED[key])


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
