"""ndarray.finite.all_finite: one call over many arrays agrees with numpy.isfinite on each."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from trainer_cli import nd
from trainer_cli.ndarray.finite import all_finite

SHAPES = [(1,), (7,), (3, 5), (70000,), (300, 300)]   # below and above the loop's size limit
DTYPES = ["float16", "float32", "float64", "int32"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(SHAPES), st.sampled_from(DTYPES),
                          st.sampled_from([None, np.nan, np.inf, -np.inf]),
                          st.booleans(), st.integers(0, 2 ** 32 - 1)), min_size=1, max_size=5))
def test_agrees_with_numpy(ctx, specs):
    arrays, expected = [], True
    for shape, dtype, bad, strided, seed in specs:
        rng = np.random.default_rng(seed)
        a = rng.standard_normal(shape).astype(dtype)
        if bad is not None and a.dtype.kind == "f":
            a.reshape(-1)[rng.integers(a.size)] = bad
        if strided and a.ndim == 2 and a.shape[1] > 1:
            a = a[:, ::2]
        expected = expected and bool(np.isfinite(a).all())
        arrays.append(nd.array(a, dtype=a.dtype, ctx=ctx))
    assert all_finite(arrays) is expected


def test_a_sum_that_overflows_is_still_finite(ctx):
    big = nd.array(np.full(10, 3e38, np.float32), ctx=ctx)
    assert all_finite([big, nd.array(np.ones(3), ctx=ctx)]) is True
    assert all_finite([big, nd.array(np.array([1.0, np.inf], np.float32), ctx=ctx)]) is False


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_overflowing_sums_of_finite_values_are_finite(dtype):
    big = np.full(1000, np.finfo(dtype).max, dtype=dtype)
    assert all_finite([nd.array(big, dtype=dtype), nd.array(big[:10], dtype=dtype)]) is True
    big[-1] = np.nan
    assert all_finite([nd.array(big, dtype=dtype)]) is False


def test_empty_and_no_arrays():
    assert all_finite([]) is True
    assert all_finite([nd.array(np.zeros((0, 3), np.float32))]) is True
