"""Gluon's sparse path: ``Embedding(sparse_grad=True)`` gradients, ``Parameter(stype=...,
grad_stype=...)`` and its errors, and the Trainer's choice of kvstore and mode for sparse weights
and gradients (each rule checked against MXNet 1.9.1; the golden flows are in
test_sparse_golden_flows.py)."""
from __future__ import annotations

import tracemalloc

import numpy
import pytest
from hypothesis import given, settings, strategies as st

from gradcheck import numeric_grad
from trainer_cli import autograd, cpu, gluon, initializer, kvstore, nd
from trainer_cli.ndarray import sparse as nd_sparse
from trainer_cli.gluon.trainer import LOCAL, REDUCE, STORE

CTX2 = [cpu(0), cpu(1)]


def rsp_of(arr):
    return arr.indices.asnumpy().tolist(), arr.data.asnumpy()


# --------------------------------------------------------------------------- Embedding
def test_embedding_sparse_grad_is_structural_sorted_and_unique():
    emb = gluon.nn.Embedding(6, 2, sparse_grad=True)
    emb.initialize()
    assert emb.weight.grad_stype == "row_sparse" and emb.weight.stype == "default"
    with autograd.record():
        y = (emb(nd.array([[1, 4, 1], [4, 4, 4]])) * 0).sum()
    y.backward()
    grad = emb.weight.grad()
    assert grad.stype == "row_sparse"
    rows, values = rsp_of(grad)
    assert rows == [1, 4]                     # looked up, zero values, still stored (MXNet)
    assert values.tolist() == [[0, 0], [0, 0]]


def test_embedding_sparse_grad_sums_repeats_across_lookups():
    emb = gluon.nn.Embedding(6, 2, sparse_grad=True)
    emb.initialize()
    with autograd.record():
        y = emb(nd.array([[1, 2]])).sum() + 2 * emb(nd.array([[2, 5]])).sum()
    y.backward()
    rows, values = rsp_of(emb.weight.grad())
    assert rows == [1, 2, 5]                  # MXNet 1.9.1 gives exactly this
    assert values.tolist() == [[1, 1], [3, 3], [2, 2]]


@pytest.mark.parametrize("ids", [[[3, 0, 3, 7], [1, 1, 9, 0]], [[2]], [[5, 5, 5]]])
def test_embedding_sparse_backward_matches_dense_and_finite_differences(ids):
    rng = numpy.random.RandomState(3)
    table = rng.randn(10, 3)
    x = nd.array(ids, dtype="float64")
    head = rng.randn(*(numpy.shape(ids) + (3,)))

    def grad_of(sparse):
        w = nd.array(table, dtype="float64")
        w.attach_grad(stype="row_sparse" if sparse else None)
        with autograd.record():
            y = (nd.Embedding(x, w, input_dim=10, output_dim=3, sparse_grad=sparse)
                 * nd.array(head, dtype="float64")).sum()
        y.backward()
        return w.grad

    sparse, dense = grad_of(True), grad_of(False)
    assert sparse.stype == "row_sparse" and dense.stype == "default"
    assert sparse.indices.asnumpy().tolist() == sorted(set(numpy.ravel(ids)))
    numpy.testing.assert_allclose(sparse.asnumpy(), dense.asnumpy(), rtol=1e-15, atol=0)
    w = nd.array(table, dtype="float64")
    fd, = numeric_grad(lambda: nd.Embedding(x, w, input_dim=10, output_dim=3), [], [w], [head])
    numpy.testing.assert_allclose(sparse.asnumpy(), fd, rtol=1e-6, atol=1e-8)


def test_embedding_of_a_row_sparse_weight_reads_stored_rows_else_zeros():
    w = nd.sparse.row_sparse_array(([[1.0, 2.0], [3.0, 4.0]], [1, 3]), shape=(5, 2))
    w.attach_grad(stype="row_sparse")
    with autograd.record():
        out = nd.Embedding(nd.array([[3, 0], [1, 3]]), w, input_dim=5, output_dim=2,
                           sparse_grad=True)
        y = (out * nd.array([[[1, 1], [5, 5]], [[2, 2], [3, 3]]])).sum()
    y.backward()
    assert out.asnumpy().tolist() == [[[3, 4], [0, 0]], [[1, 2], [3, 4]]]
    rows, values = rsp_of(w.grad)
    assert rows == [0, 1, 3] and values.tolist() == [[5, 5], [2, 2], [4, 4]]


def test_sparse_embedding_pulls_only_its_batch_rows():
    se = gluon.contrib.nn.SparseEmbedding(10, 2)
    se.initialize(init=initializer.One())
    with pytest.raises(RuntimeError, match="no Trainer"):
        se(nd.array([[1, 2]]))
    gluon.Trainer(se.collect_params(), "sgd")
    out = se(nd.array([[4, 2, 4]]))
    assert out.asnumpy().tolist() == [[[1, 1], [1, 1], [1, 1]]]
    assert se.weight._data[0].indices.asnumpy().tolist() == [2, 4]


def test_embedding_sparse_grad_into_a_dense_buffer_scatters():
    w = nd.array(numpy.ones((5, 2)))
    w.attach_grad()                           # dense buffer, sparse op
    with autograd.record():
        y = nd.Embedding(nd.array([1, 3, 1]), w, input_dim=5, output_dim=2, sparse_grad=True).sum()
    y.backward()
    assert w.grad.stype == "default"
    assert w.grad.asnumpy().tolist() == [[0, 0], [2, 2], [0, 0], [1, 1], [0, 0]]


def test_embedding_sparse_grad_add_accumulates_the_union():
    emb = gluon.nn.Embedding(6, 2, sparse_grad=True)
    emb.initialize()
    emb.weight.grad_req = "add"               # MXNet refuses this; here it accumulates
    for ids in ([[1, 2]], [[2, 3]]):
        with autograd.record():
            y = emb(nd.array(ids)).sum()
        y.backward()
    rows, values = rsp_of(emb.weight.grad())
    assert rows == [1, 2, 3] and values.tolist() == [[1, 1], [2, 2], [1, 1]]
    emb.weight.zero_grad()
    assert emb.weight.grad().indices.asnumpy().tolist() == []


def test_dense_gradient_into_row_sparse_buffer_keeps_nonzero_rows():
    p = gluon.Parameter("w", shape=(5, 2), grad_stype="row_sparse")
    p.initialize(init=initializer.One())
    coef = nd.array([[1, 1], [0, 0], [2, 0], [0, 0], [1, 1]])
    with autograd.record():
        y = (p.data() * coef).sum()
    y.backward()
    assert p.grad().indices.asnumpy().tolist() == [0, 2, 4]   # MXNet's storage fallback


def test_embedding_sparse_backward_allocates_no_table_sized_array():
    vocab, dim = 200_000, 16                  # a 12.8 MB table
    emb = gluon.nn.Embedding(vocab, dim, sparse_grad=True)
    emb.initialize(init=initializer.Zero())
    x = nd.array(numpy.arange(0, vocab, vocab // 64).reshape(8, 8))
    tracemalloc.start()
    try:
        with autograd.record():
            y = emb(x).sum()
        y.backward()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < vocab * dim * 4 // 20, peak
    assert emb.weight.grad().indices.shape == (64,)


@settings(max_examples=60, deadline=None)
@given(ids=st.lists(st.integers(0, 40), max_size=300), big_table=st.booleans())
def test_embedding_grad_sort_is_a_stable_argsort(ids, big_table):
    # The ids sorted with their positions packed into the low bits, and (for a table too large
    # to pack into int64) NumPy's stable argsort, must both order equal ids as looked up.
    ids = numpy.array(ids, dtype=numpy.int64)
    table = 1 << 62 if big_table else 41
    sorted_ids, order = nd_sparse._stable_sort(ids, table)
    want = numpy.argsort(ids, kind="stable")
    assert order.dtype == numpy.int64 and order.tolist() == want.tolist()
    assert sorted_ids.tolist() == ids[want].tolist()


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@settings(max_examples=40, deadline=None)
@given(ids=st.lists(st.integers(0, 30), min_size=1, max_size=200), width=st.integers(1, 9),
       seed=st.integers(0, 2**16), scale=st.sampled_from([1, 137, 2**33 + 7]))
def test_embedding_grad_row_kernel_is_bitwise_the_numpy_path(dtype, ids, width, seed, scale):
    # ``scale`` spreads the ids over tables of 31 rows to 2**38: one to four radix passes.
    from trainer_cli import _jit
    from trainer_cli.ndarray import _embedding_kernels
    if not _jit.enabled():
        pytest.skip("numba not installed")
    ids = numpy.array(ids, dtype=numpy.int64) * scale
    table = 31 * scale
    grads = numpy.random.RandomState(seed).standard_normal((len(ids), width)).astype(dtype)
    grads[::7] *= 1e8        # sums whose bits depend on the order of the adds
    real = _embedding_kernels.group_rows
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_embedding_kernels, "MIN_SIZE", 1)
        assert real(ids, table, grads) is not None
        kernel = nd_sparse.embedding_grad(ids, grads, (table, width))
        patch.setattr(_embedding_kernels, "group_rows", lambda *a: None)
        plain = nd_sparse.embedding_grad(ids, grads, (table, width))
    assert kernel.rows.tolist() == plain.rows.tolist() == sorted(set(ids.tolist()))
    assert kernel.values.dtype == dtype and kernel.values.flags.c_contiguous
    assert kernel.values.tobytes() == plain.values.tobytes()


def test_embedding_grad_sums_repeated_ids_in_lookup_order():
    # float32 sums whose value depends on the order: lookup order, as the tape saw the rows.
    ids = numpy.array([7, 3, 7, 7, 0, 3], dtype=numpy.int64)
    grads = numpy.array([[1e8], [1.0], [1.0], [-1e8], [2.0], [1e8]], dtype=numpy.float32)
    grad = nd_sparse.embedding_grad(ids, grads, (9, 1))
    assert grad.rows.tolist() == [0, 3, 7]
    want = [grads[4, 0], grads[1, 0] + grads[5, 0], (grads[0, 0] + grads[2, 0]) + grads[3, 0]]
    assert grad.values[:, 0].tolist() == [numpy.float32(v) for v in want]


def test_a_received_sparse_gradient_is_adopted_once_and_copied_after():
    # A gradient made for the tape alone becomes the buffer's values without a copy; a second
    # buffer receiving the same gradient gets its own copy, and one that shares a caller's
    # array (csr dot's vjp) always copies.
    ids = numpy.array([4, 1], dtype=numpy.int64)
    grad = nd_sparse.embedding_grad(ids, numpy.ones((2, 3), numpy.float32), (6, 3))
    first, second = (nd.zeros((6, 3)) for _ in range(2))
    for w in (first, second):
        w.attach_grad(stype="row_sparse")
        grad.receive_into(w)
    assert first.grad._values is grad.values
    assert not numpy.shares_memory(second.grad._values, grad.values)
    shared = nd_sparse.RowSparseGrad(grad.rows, grad.values, (6, 3))
    third = nd.zeros((6, 3))
    third.attach_grad(stype="row_sparse")
    shared.receive_into(third)
    assert not numpy.shares_memory(third.grad._values, grad.values)
    assert third.grad.asnumpy().tolist() == first.grad.asnumpy().tolist()


def test_embedding_ids_clip_to_the_table():
    emb = gluon.nn.Embedding(5, 1, sparse_grad=True)
    emb.initialize(init=initializer.Constant(0))
    emb.weight.set_data(nd.array(numpy.arange(5, dtype=numpy.float32).reshape(5, 1)))
    x = nd.array([-3.0, -0.5, 0.9, 4.0, 4.7, 99.0, 2.2])
    with autograd.record():
        out = emb(x)
    out.backward()
    assert out.asnumpy()[:, 0].tolist() == [0, 0, 0, 4, 4, 4, 2]
    rows, values = rsp_of(emb.weight.grad())
    assert rows == [0, 2, 4] and values[:, 0].tolist() == [3, 1, 3]


# --------------------------------------------------------------------------- Parameter
def sparse_param(shape=(6, 2), ctx=None):
    p = gluon.Parameter("w", shape=shape, stype="row_sparse", grad_stype="row_sparse")
    p.initialize(ctx=ctx or [cpu(0)])
    p.set_data(nd.array(numpy.arange(numpy.prod(shape), dtype=numpy.float32).reshape(shape)))
    return p


def test_sparse_parameter_misuse_raises_as_mxnet():
    p = sparse_param()
    with pytest.raises(RuntimeError, match="row_sparse_data"):
        p.data()
    with pytest.raises(RuntimeError, match="row_sparse_data"):
        p.list_data()
    with pytest.raises(RuntimeError, match="no Trainer"):
        p.row_sparse_data(nd.array([0], dtype="int64"))
    with pytest.raises(TypeError):
        p.row_sparse_data([0, 1])
    first = gluon.Trainer([p], "sgd")
    with pytest.raises(RuntimeError, match="More than one trainers"):
        gluon.Trainer([p], "sgd")
    assert p._trainer() is first
    dense = gluon.Parameter("d", shape=(3,))
    dense.initialize()
    with pytest.raises(RuntimeError, match="storage type is default"):
        dense.row_sparse_data(nd.array([0], dtype="int64"))
    with pytest.raises(RuntimeError, match="storage type is default"):
        dense.list_row_sparse_data(nd.array([0], dtype="int64"))
    with pytest.raises(ValueError, match="csr"):
        gluon.Parameter("c", shape=(3, 3), stype="csr")
    with pytest.raises(AssertionError):
        gluon.Parameter("c", shape=(3, 3), grad_stype="dense")


def test_dense_parameter_with_sparse_gradients_may_have_several_trainers():
    emb = gluon.nn.Embedding(4, 2, sparse_grad=True)
    emb.initialize()
    gluon.Trainer(emb.collect_params(), "sgd")
    gluon.Trainer(emb.collect_params(), "sgd")


def test_row_sparse_data_pulls_sorted_unique_rows_into_its_own_copy():
    p = sparse_param(ctx=CTX2)
    trainer = gluon.Trainer([p], "sgd", kvstore="device")
    w = p.row_sparse_data(nd.array([4, 1, 4], dtype="int64", ctx=cpu(1)))
    assert w is p._data[1] and w.context == cpu(1)
    assert w.indices.asnumpy().tolist() == [1, 4]
    assert w.data.asnumpy().tolist() == [[2, 3], [8, 9]]
    # The copy on cpu(0) is left as it was (every row), until its own pull.
    assert p._data[0].indices.asnumpy().tolist() == [0, 1, 2, 3, 4, 5]
    ws = p.list_row_sparse_data(nd.array([2.0, 0.0]))       # float ids are taken as ints
    assert [a.indices.asnumpy().tolist() for a in ws] == [[0, 2], [0, 2]]
    assert trainer.mode == STORE


def test_sparse_parameter_keeps_every_row_stored_and_saves_dense(tmp_path):
    p = gluon.Parameter("w", shape=(4, 2), stype="row_sparse", grad_stype="row_sparse")
    p.initialize(init=initializer.Zero())
    assert p._data[0].indices.asnumpy().tolist() == [0, 1, 2, 3]
    value = numpy.array([[1, 2], [0, 0], [3, 4], [0, 0]], dtype=numpy.float32)
    p.set_data(nd.array(value))
    # MXNet drops the zero rows here, then its sparse SGD momentum refuses the weight.
    assert p._data[0].indices.asnumpy().tolist() == [0, 1, 2, 3]
    params = gluon.ParameterDict()
    params._params["w"] = p
    params.save(str(tmp_path / "w.npz"))
    loaded = gluon.ParameterDict()
    q = loaded.get("w", shape=(4, 2), stype="row_sparse", grad_stype="row_sparse")
    loaded.load(str(tmp_path / "w.npz"))
    assert q._data[0].stype == "row_sparse"
    numpy.testing.assert_array_equal(q._data[0].asnumpy(), value)


# --------------------------------------------------------------------------- Trainer modes
def embedding(num_ctx):
    emb = gluon.nn.Embedding(5, 2, sparse_grad=True)
    emb.initialize(ctx=CTX2[:num_ctx])
    return emb


def test_sparse_gradients_one_context_has_no_kvstore():
    trainer = gluon.Trainer(embedding(1).collect_params(), "sgd")
    assert trainer.mode == LOCAL and trainer.kvstore is None and trainer._update_on_kvstore is None
    trainer = gluon.Trainer(embedding(1).collect_params(), "sgd", update_on_kvstore=True)
    assert trainer.mode == LOCAL and trainer.kvstore is None


def test_sparse_gradients_default_to_local_updates_whatever_the_environment(monkeypatch):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "1")
    trainer = gluon.Trainer(embedding(2).collect_params(), "sgd")
    assert trainer.mode == REDUCE and trainer.kvstore.type == "device"
    assert trainer._update_on_kvstore is False
    trainer = gluon.Trainer(embedding(2).collect_params(), "sgd", update_on_kvstore=True)
    assert trainer.mode == STORE and trainer._update_on_kvstore is True
    trainer = gluon.Trainer(embedding(2).collect_params(), "sgd", kvstore=None)
    assert trainer.mode == LOCAL and trainer.kvstore is None


def test_sparse_gradients_refuse_a_store_that_is_not_native():
    @kvstore.register
    class PlainSparseTestStore(kvstore.KVStoreBase):
        type = "plainsparseteststore"

        def is_capable(self, capability):
            return False

    with pytest.raises(ValueError, match="sparse gradients"):
        gluon.Trainer(embedding(2).collect_params(), "sgd", kvstore="plainsparseteststore").mode


def test_sparse_weight_always_updates_on_a_kvstore():
    trainer = gluon.Trainer([sparse_param()], "sgd")
    assert trainer.mode == STORE and trainer.kvstore.type == "device"
    with pytest.raises(TypeError, match="row_sparse parameters"):
        gluon.Trainer([sparse_param()], "sgd", kvstore=None).mode
    with pytest.raises(ValueError, match="update_on_kvstore=False"):
        gluon.Trainer([sparse_param()], "sgd", update_on_kvstore=False).mode
    trainer = gluon.Trainer([sparse_param()], "sgd", kvstore="local")
    with pytest.raises(RuntimeError, match="update_on_kvstore"):
        trainer.allreduce_grads()


def test_allreduce_of_sparse_gradients_gives_every_context_the_union_sum():
    emb = embedding(2)
    emb.weight.set_data(nd.zeros((5, 2)))
    trainer = gluon.Trainer(emb.collect_params(), "sgd", update_on_kvstore=False)
    for ctx, ids in zip(CTX2, ([[0, 3]], [[3, 4, 4]])):
        with autograd.record():
            y = emb(nd.array(ids, ctx=ctx)).sum()
        y.backward()
    trainer.allreduce_grads()
    for ctx in CTX2:
        rows, values = rsp_of(emb.weight.grad(ctx))
        assert rows == [0, 3, 4] and values.tolist() == [[1, 1], [2, 2], [2, 2]]
        assert emb.weight.grad(ctx).context == ctx
    # The store never held a dense copy of the table for these sparse gradients.
    assert trainer.kvstore._store[0].stype == "row_sparse"


def test_sparse_weight_with_dense_gradients_cannot_step():
    p = gluon.Parameter("w", shape=(5, 2), stype="row_sparse")
    p.initialize()
    trainer = gluon.Trainer([p], "sgd")
    w = p.row_sparse_data(nd.array([1, 2], dtype="int64"))
    x = nd.sparse.csr_matrix(([1.0, 2.0], [1, 2], [0, 1, 2]), shape=(2, 5))
    with autograd.record():
        y = nd.sparse.dot(x, w).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="row_sparse"):
        trainer.step(1)
