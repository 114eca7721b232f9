"""The gradient of ``repeat`` (and so of nearest ``UpSampling``) sums each element's copies with
one strided add per copy instead of NumPy's reduction over a short axis: NumPy's bits, signed
zeros, NaN and infinities included, on every axis and count."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kernel_checks import same_bits
from trainer_cli import autograd, nd
from trainer_cli.ndarray import ops


@settings(max_examples=40, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4), count=st.integers(1, 10),
       axis=st.integers(0, 4), dtype=st.sampled_from([np.float32, np.float64, np.float16]),
       seed=st.integers(0, 1000))
def test_the_passes_give_numpys_sum(monkeypatch_module, shape, count, axis, dtype, seed):
    axis %= len(shape) + 1
    full = list(shape)
    full.insert(axis, count)
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(full).astype(dtype)
    specials = np.array([-0.0, 0.0, np.nan, np.inf, -np.inf, 6e4], dtype)
    v.flat[rng.integers(0, v.size, max(1, v.size // 4))] = rng.choice(specials, max(1, v.size // 4))
    with np.errstate(all="ignore"):     # two NaNs meeting: either sign (NumPy's loops differ)
        same_bits(ops._sum_repeats(v, axis), v.sum(axis=axis), nan_sign=False)


@pytest.fixture(scope="module")
def monkeypatch_module():
    patch = pytest.MonkeyPatch()
    patch.setattr(ops, "_SHORT_SUM_MIN", 1)      # the passes on arrays of any size
    yield patch
    patch.undo()


def test_all_negative_zeros_sum_to_positive_zero_as_in_numpy(monkeypatch_module):
    v = np.full((3, 2, 4), -0.0, np.float32)
    out = ops._sum_repeats(v, 1)
    assert not np.signbit(out).any() and not np.signbit(v.sum(axis=1)).any()


@pytest.mark.parametrize("axis", [None, 0, 2, 3])
def test_repeat_and_upsampling_gradients(axis):
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((4, 16, 12, 10)).astype(np.float32)
    x = nd.array(x0)
    x.attach_grad()
    with autograd.record():
        y = nd.repeat(x, 3, axis=axis) if axis is not None else nd.repeat(x, 2)
    head = rng.standard_normal(y.shape).astype(np.float32)
    y.backward(nd.array(head))
    if axis is None:
        want = head.reshape(-1, 2).sum(axis=1).reshape(x0.shape)
    else:
        new = x0.shape[:axis] + (x0.shape[axis], 3) + x0.shape[axis + 1:]
        want = head.reshape(new).sum(axis=axis + 1)
    same_bits(x.grad.asnumpy(), want)
    with autograd.record():
        up = nd.UpSampling(x, scale=2, sample_type="nearest")
    head = rng.standard_normal(up.shape).astype(np.float32)
    up.backward(nd.array(head))
    want = head.reshape(4, 16, 24, 10, 2).sum(axis=4).reshape(4, 16, 12, 2, 10).sum(axis=3)
    same_bits(x.grad.asnumpy(), want)
    np.testing.assert_array_equal(up.asnumpy(), x0.repeat(2, axis=2).repeat(2, axis=3))
