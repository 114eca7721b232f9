"""The in-process kvstores with row_sparse values, by MXNet 1.9.1's rules (each checked against
the real library): push sums row_sparse values from several devices into the union of their
rows and, without an updater, replaces the stored value (storage type included);
``row_sparse_pull`` gives exactly the sorted unique requested rows; ``pull`` skips row_sparse
outputs unless ``ignore_sparse=False``."""
from __future__ import annotations

import numpy
import pytest

from trainer_cli import cpu, kvstore, nd


def rsp(rows, values, shape=(6, 2), ctx=None):
    return nd.sparse.row_sparse_array((numpy.asarray(values, dtype=numpy.float32), rows),
                                      shape=shape, ctx=ctx or cpu(0))


def parts(arr):
    return arr.indices.asnumpy().tolist(), arr.data.asnumpy().tolist()


@pytest.fixture(params=["local", "device"])
def kv(request):
    return kvstore.create(request.param)


def test_push_from_three_devices_sums_the_union_and_replaces(kv):
    kv.init(0, nd.ones((6, 2)))
    kv.push(0, [rsp([0, 3], [[1, 1], [2, 2]]), rsp([3, 5], [[10, 10], [1, 2]], ctx=cpu(1)),
                rsp([], numpy.zeros((0, 2)), ctx=cpu(2))])
    out = nd.sparse.zeros("row_sparse", (6, 2))
    kv.pull(0, out, ignore_sparse=False)
    # A dense key pushed row_sparse values becomes row_sparse, and its old contents are gone.
    assert parts(out) == ([0, 3, 5], [[1, 1], [12, 12], [1, 2]])
    dense = nd.zeros((6, 2))
    kv.pull(0, dense)
    assert dense.asnumpy().tolist() == [[1, 1], [0, 0], [0, 0], [12, 12], [0, 0], [1, 2]]
    kv.push(0, rsp([2], [[7, 7]]))
    kv.pull(0, out, ignore_sparse=False)
    assert parts(out) == ([2], [[7, 7]])


def test_pushed_value_is_copied_not_aliased(kv):
    kv.init("w", rsp([0], [[1, 1]]))
    grad = rsp([1], [[2, 2]])
    kv.push("w", grad)
    grad[:] = rsp([4], [[9, 9]])
    out = nd.sparse.zeros("row_sparse", (6, 2))
    kv.row_sparse_pull("w", out, row_ids=nd.array([1, 4], dtype="int64"))
    assert parts(out) == ([1, 4], [[2, 2], [0, 0]])


def test_row_sparse_pull_sorted_unique_and_absent_rows_zero(kv):
    kv.init(3, rsp([0, 2, 5], [[1, 2], [3, 4], [5, 6]]))
    out = nd.sparse.zeros("row_sparse", (6, 2), ctx=cpu(1))
    kv.row_sparse_pull(3, out, row_ids=nd.array([5, 1, 5, 0], dtype="int64", ctx=cpu(1)))
    assert out.context == cpu(1)
    assert parts(out) == ([0, 1, 5], [[1, 2], [0, 0], [5, 6]])
    assert out.indices.dtype == numpy.int64
    # One row_ids for several outs; then one per out.
    outs = [nd.sparse.zeros("row_sparse", (6, 2), ctx=cpu(i)) for i in range(2)]
    kv.row_sparse_pull(3, outs, row_ids=nd.array([2, 2, 3], dtype="int64"))
    assert [parts(o)[0] for o in outs] == [[2, 3], [2, 3]]
    assert [o.context for o in outs] == [cpu(0), cpu(1)]
    kv.row_sparse_pull(3, outs, row_ids=[nd.array([5], dtype="int64"), nd.array([0.0, 2.0])])
    assert [parts(o) for o in outs] == [([5], [[5, 6]]), ([0, 2], [[1, 2], [3, 4]])]
    kv.row_sparse_pull(3, outs[0], row_ids=nd.array([], dtype="int64"))
    assert parts(outs[0]) == ([], [])


def test_row_sparse_pull_refuses_dense_keys_and_dense_outs(kv):
    kv.init(1, nd.ones((4, 2)))
    with pytest.raises(ValueError, match="expects a row_sparse value"):
        kv.row_sparse_pull(1, nd.sparse.zeros("row_sparse", (4, 2)),
                           row_ids=nd.array([1], dtype="int64"))
    kv.init(2, rsp([1], [[1, 1]], shape=(4, 2)))
    with pytest.raises(ValueError, match="row_sparse outputs"):
        kv.row_sparse_pull(2, nd.zeros((4, 2)), row_ids=nd.array([1], dtype="int64"))
    with pytest.raises(ValueError, match="row_ids"):
        kv.row_sparse_pull(2, [nd.sparse.zeros("row_sparse", (4, 2))] * 2,
                           row_ids=[nd.array([1], dtype="int64")])


def test_pull_into_row_sparse_outputs_needs_ignore_sparse_false(kv):
    kv.init(1, nd.array([[1, 1], [0, 0], [2, 2], [3, 3]]))
    out = nd.sparse.zeros("row_sparse", (4, 2))
    with pytest.warns(UserWarning, match="ignore_sparse"):
        kv.pull(1, out)
    assert parts(out) == ([], [])
    kv.pull(1, out, ignore_sparse=False)           # a dense value arrives without its zero rows
    assert parts(out) == ([0, 2, 3], [[1, 1], [2, 2], [3, 3]])


def test_dense_push_onto_a_row_sparse_key_makes_it_dense(kv):
    kv.init(1, rsp([1], [[1, 1]], shape=(4, 2)))
    kv.push(1, nd.ones((4, 2)) * 3)
    with pytest.raises(ValueError, match="expects a row_sparse value"):
        kv.row_sparse_pull(1, nd.sparse.zeros("row_sparse", (4, 2)),
                           row_ids=nd.array([1], dtype="int64"))
    # row_sparse plus dense from two devices sums to dense (MXNet's ElementwiseSum).
    kv.push(1, [rsp([2], [[1, 2]], shape=(4, 2)), nd.ones((4, 2), ctx=cpu(1))])
    out = nd.zeros((4, 2))
    kv.pull(1, out)
    assert out.asnumpy().tolist() == [[1, 1], [1, 1], [2, 3], [1, 1]]


def test_updater_gets_the_row_sparse_sum_and_the_stored_weight(kv):
    seen = []
    kv.init(0, nd.ones((6, 2)))
    kv._set_updater(lambda key, grad, weight: seen.append((key, grad.stype, parts(grad),
                                                           weight.stype)))
    kv.push(0, [rsp([1], [[1, 1]]), rsp([1, 4], [[2, 2], [3, 3]], ctx=cpu(1))])
    assert seen == [(0, "row_sparse", ([1, 4], [[3, 3], [3, 3]]), "default")]


def test_compression_with_row_sparse_values_is_refused():
    kv = kvstore.create("device")
    kv.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kv.init(0, nd.zeros((6, 2)))
    with pytest.raises(ValueError, match="row_sparse"):
        kv.push(0, [rsp([1], [[1, 1]]), rsp([2], [[1, 1]], ctx=cpu(1))])
