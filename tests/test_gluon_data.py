"""gluon.data (ArrayDataset, DataLoader, samplers) and gluon.utils (split_and_load, clip_global_norm)."""
import json
import os
import warnings

import numpy as np
import pytest

import trainer_cli
from trainer_cli import cpu, nd
from trainer_cli.gluon.data import (ArrayDataset, BatchSampler, DataLoader, RandomSampler,
                                    SequentialSampler, SimpleDataset)
from trainer_cli.gluon.utils import clip_global_norm, split_and_load, split_bounds, split_data


def _dataset(n=10):
    features = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    labels = np.arange(n, dtype=np.int32)
    return ArrayDataset(features, labels)


def _label_batches(loader):
    return [batch[1].asnumpy().tolist() for batch in loader]


# ------------------------------------------------------------------------------ datasets
def test_array_dataset():
    x = nd.arange(12).reshape((4, 3))
    y = nd.array([1, 0, 1, 1])
    ds = ArrayDataset(x, y)
    assert len(ds) == 4
    sample, label = ds[2]
    np.testing.assert_array_equal(sample.asnumpy(), [6, 7, 8])
    assert label == 1.0 and isinstance(label, np.floating)  # 1-D NDArrays give NumPy scalars
    single = ArrayDataset(np.arange(3))
    assert single[1] == 1
    with pytest.raises(ValueError, match="same length"):
        ArrayDataset(np.zeros(3), np.zeros(4))


def test_transform_first_and_simple_dataset():
    ds = _dataset(4).transform_first(lambda x: x * 10)
    x, y = ds[1]
    np.testing.assert_array_equal(x, [20.0, 30.0])
    assert y == 1
    eager = SimpleDataset([1, 2, 3]).transform(lambda v: v + 1, lazy=False)
    assert isinstance(eager, SimpleDataset) and [eager[i] for i in range(3)] == [2, 3, 4]
    batch = next(iter(DataLoader(ds, batch_size=2)))
    np.testing.assert_array_equal(batch[0].asnumpy(), [[0.0, 10.0], [20.0, 30.0]])


# ------------------------------------------------------------------------------ DataLoader
def test_batches_in_order_with_dtypes_kept():
    loader = DataLoader(_dataset(), batch_size=4)
    assert len(loader) == 3
    batches = list(loader)
    data, label = batches[0]
    assert isinstance(batches[0], list) and data.shape == (4, 2) and label.shape == (4,)
    assert data.dtype == np.float32 and label.dtype == np.int32
    np.testing.assert_array_equal(data.asnumpy(), np.arange(8, dtype=np.float32).reshape(4, 2))
    assert _label_batches(loader) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_batchify_of_tuples_from_generic_datasets():
    samples = [(nd.array([i, i]), np.int64(i), float(i) / 2) for i in range(5)]
    data, label, extra = next(iter(DataLoader(SimpleDataset(samples), batch_size=3)))
    np.testing.assert_array_equal(data.asnumpy(), [[0, 0], [1, 1], [2, 2]])
    assert label.dtype == np.int64 and extra.dtype == np.float64
    plain = next(iter(DataLoader(ArrayDataset([3, 1, 2], [0.5, 1.5, 2.5]), batch_size=2)))
    assert plain[0].dtype == np.int64 and plain[0].asnumpy().tolist() == [3, 1]
    nd_labels = ArrayDataset(nd.ones((4, 2)), nd.array([0, 1, 2, 3], dtype="int32"))
    assert next(iter(DataLoader(nd_labels, batch_size=4)))[1].dtype == np.int32
    custom = DataLoader(_dataset(), batch_size=5, batchify_fn=lambda items: len(items))
    assert list(custom) == [5, 5]


def test_last_batch_modes():
    ds = _dataset(10)
    assert _label_batches(DataLoader(ds, batch_size=4, last_batch="keep"))[-1] == [8, 9]
    discard = DataLoader(ds, batch_size=4, last_batch="discard")
    assert len(discard) == 2 and _label_batches(discard) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    with pytest.raises(ValueError, match="last_batch"):
        DataLoader(ds, batch_size=4, last_batch="wrap")


def test_rollover_carries_the_remainder_into_the_next_epoch():
    loader = DataLoader(_dataset(10), batch_size=4, last_batch="rollover")
    assert len(loader) == 2
    assert _label_batches(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(loader) == 3  # 2 carried + 10 new
    assert _label_batches(loader) == [[8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]
    assert len(loader) == 2
    assert _label_batches(loader) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_shuffle_is_reproducible_with_the_seed():
    ds = _dataset(20)
    np.random.seed(42)      # numpy's, as MXNet's DataLoader shuffles with numpy.random.shuffle
    loader = DataLoader(ds, batch_size=6, shuffle=True)
    first, second = _label_batches(loader), _label_batches(loader)
    for epoch in (first, second):
        assert sorted(sum(epoch, [])) == list(range(20))  # a permutation each epoch
        assert [len(b) for b in epoch] == [6, 6, 6, 2]
    assert first != second
    assert first != _label_batches(DataLoader(ds, batch_size=6))
    np.random.seed(42)
    again = DataLoader(ds, batch_size=6, shuffle=True)
    assert _label_batches(again) == first and _label_batches(again) == second
    # Samples stay paired with their labels under shuffling.
    for data, label in DataLoader(ds, batch_size=7, shuffle=True):
        np.testing.assert_array_equal(data.asnumpy()[:, 0], label.asnumpy() * 2)


def test_loader_argument_checks():
    ds = _dataset(6)
    with pytest.raises(ValueError, match="batch_size"):
        DataLoader(ds)
    sampler = BatchSampler(SequentialSampler(6), 4, "discard")
    loader = DataLoader(ds, batch_sampler=sampler)
    assert _label_batches(loader) == [[0, 1, 2, 3]]
    with pytest.raises(ValueError):
        DataLoader(ds, batch_size=2, batch_sampler=sampler)
    with pytest.raises(ValueError, match="shuffle"):
        DataLoader(ds, batch_size=2, shuffle=True, sampler=SequentialSampler(6))
    assert list(SequentialSampler(3, start=2)) == [2, 3, 4]
    assert sorted(RandomSampler(5)) == [0, 1, 2, 3, 4]


def test_shuffling_follows_numpy_random_seed_as_mxnets():
    # Real MXNet 1.9.1 after numpy.random.seed(42): RandomSampler(10) and the batches of
    # DataLoader(shuffle=True, batch_size=5) over 10 samples.
    np.random.seed(42)
    assert list(RandomSampler(10)) == [8, 1, 5, 0, 7, 2, 9, 4, 3, 6]
    np.random.seed(42)
    assert _label_batches(DataLoader(_dataset(10), batch_size=5, shuffle=True)) == \
        [[8, 1, 5, 0, 7], [2, 9, 4, 3, 6]]
    rng = np.random.default_rng(0)      # a Generator of one's own, as before
    assert list(RandomSampler(10, rng=rng)) == np.random.default_rng(0).permutation(10).tolist()


# ------------------------------------------------------------------------------ split_and_load
def test_split_and_load_even():
    data = nd.arange(24).reshape((6, 4))
    ctxs = [cpu(0), cpu(1), cpu(2)]
    parts = split_and_load(data, ctxs)
    assert [p.context for p in parts] == ctxs
    assert [p.shape for p in parts] == [(2, 4)] * 3
    np.testing.assert_array_equal(np.concatenate([p.asnumpy() for p in parts]), data.asnumpy())
    cols = split_and_load(data, [cpu(0), cpu(1)], batch_axis=1)
    assert [p.shape for p in cols] == [(6, 2), (6, 2)]
    np.testing.assert_array_equal(cols[1].asnumpy(), data.asnumpy()[:, 2:])
    with pytest.raises(ValueError, match="evenly"):
        split_and_load(nd.ones((5, 2)), ctxs)
    only = split_and_load(np.ones((3, 2)), [cpu(1)])
    assert len(only) == 1 and only[0].context == cpu(1) and only[0].dtype == np.float32


def _mxnet_split_cases():
    path = os.path.join(os.path.dirname(__file__), "data", "mxnet_split", "split_cases.json")
    with open(path) as f:
        return json.load(f)["cases"]


def test_split_data_uneven_gives_mxnet_1_9_1s_slices():
    # Recorded from the real MXNet 1.9.1 (data/mxnet_split/make_split_cases.py): the first
    # size % n slices get one item more, and slices past the items are empty.
    cases = _mxnet_split_cases()
    assert {"size": 10, "num_slice": 3, "values": [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]} in cases
    for case in cases:
        parts = split_data(nd.arange(case["size"]), case["num_slice"], even_split=False)
        assert [p.asnumpy().astype(int).tolist() for p in parts] == case["values"], case
        assert split_bounds(case["size"], case["num_slice"]) == [
            (sum(map(len, case["values"][:i])), sum(map(len, case["values"][:i + 1])))
            for i in range(case["num_slice"])]


def test_split_and_load_uneven_and_empty_slices_on_any_axis():
    parts = split_and_load(nd.arange(10), [cpu(0), cpu(1), cpu(2)], even_split=False)
    assert [p.asnumpy().tolist() for p in parts] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert [p.context for p in parts] == [cpu(0), cpu(1), cpu(2)]
    cols = split_data(nd.ones((2, 5)), 2, batch_axis=1, even_split=False)
    assert [c.shape for c in cols] == [(2, 3), (2, 2)]
    # MXNet 1.9.1 fails on these two (an empty slice_axis, and copying an empty slice).
    assert [c.shape for c in split_data(nd.ones((2, 2)), 3, batch_axis=1, even_split=False)] == [
        (2, 1), (2, 1), (2, 0)]
    fewer = split_and_load(nd.arange(2), [cpu(0), cpu(1), cpu(2)], even_split=False)
    assert [p.shape for p in fewer] == [(1,), (1,), (0,)] and fewer[2].context == cpu(2)


def test_split_and_load_on_device(ctx):
    parts = split_and_load(np.arange(8, dtype=np.float32).reshape(4, 2), [ctx, ctx])
    assert all(p.context == ctx for p in parts)
    np.testing.assert_array_equal(parts[1].asnumpy(), [[4, 5], [6, 7]])


# ------------------------------------------------------------------------------ clip_global_norm
def test_clip_global_norm_scales_above_max_norm(ctx):
    a = nd.array([[3.0, 0.0], [0.0, 4.0]], ctx=ctx)  # norm 5
    b = nd.array([12.0], ctx=ctx)  # joint norm 13
    norm = clip_global_norm([a, b], 1.0)
    assert norm == pytest.approx(13.0)
    scale = np.float32(1.0) / (np.float32(13.0) + np.float32(1e-8))
    np.testing.assert_array_equal(a.asnumpy(), np.array([[3, 0], [0, 4]], np.float32) * scale)
    np.testing.assert_array_equal(b.asnumpy(), np.array([12.0], np.float32) * scale)
    total = np.sqrt(sum((x.asnumpy().astype(np.float64) ** 2).sum() for x in (a, b)))
    assert total == pytest.approx(1.0, rel=1e-6)


def test_clip_global_norm_leaves_small_arrays_alone(ctx):
    a = nd.array([0.3, 0.4], ctx=ctx)
    norm = clip_global_norm([a], 1.0)
    assert norm == pytest.approx(0.5)
    np.testing.assert_array_equal(a.asnumpy(), np.array([0.3, 0.4], np.float32))


def test_clip_global_norm_return_types_and_nan():
    arrays = [nd.array([6.0, 8.0], dtype="float64")]
    out = clip_global_norm(arrays, 20.0, check_isfinite=False)
    assert isinstance(out, nd.NDArray) and out.shape == (1,) and out.dtype == np.float64
    assert out.asscalar() == 10.0
    as_scalar = clip_global_norm([nd.array([6.0, 8.0])], 5.0)
    assert float(as_scalar) == pytest.approx(10.0)
    with pytest.warns(UserWarning, match="nan or inf"):
        clip_global_norm([nd.array([np.nan, 1.0])], 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clip_global_norm([nd.array([np.inf])], 1.0, check_isfinite=False)
    with pytest.raises((ValueError, AssertionError)):
        clip_global_norm([], 1.0)
