"""The Trainer's step with row_sparse gradients and weights: storage stays sparse on the step path,
every mode gives the same numbers, and errors the kvstore's updater raises reach the caller
(MXNet swallows them). MXNet's own numbers: test_sparse_golden_flows.py."""
from __future__ import annotations

import tracemalloc

import numpy
import pytest

from trainer_cli import autograd, cpu, gluon, initializer, nd
from trainer_cli.contrib import amp
from trainer_cli.gluon.trainer import LOCAL, REDUCE, STORE

CTX2 = [cpu(0), cpu(1)]


def embedding(vocab, dim, ctxs, init=None):
    emb = gluon.nn.Embedding(vocab, dim, sparse_grad=True)
    emb.initialize(init=init or initializer.Zero(), ctx=ctxs)
    return emb


def forward_backward(emb, ctxs, batches):
    for ctx, ids in zip(ctxs, batches):
        x = nd.array(ids, ctx=ctx)
        with autograd.record():
            y = (emb(x) * nd.arange(emb.weight.shape[1], ctx=ctx).reshape((1, 1, -1))).sum()
        y.backward()


@pytest.mark.parametrize("num_ctx, trainer_args, mode, optim", [
    (1, {}, LOCAL, ("sgd", {"momentum": 0.9})),
    (1, {}, LOCAL, ("adam", {})),
    (2, {}, REDUCE, ("sgd", {"momentum": 0.9})),
    (2, {"update_on_kvstore": True}, STORE, ("adam", {})),
])
def test_sparse_step_allocates_no_table_sized_array(num_ctx, trainer_args, mode, optim):
    vocab, dim = 200_000, 16                  # a 12.8 MB table
    ctxs = CTX2[:num_ctx]
    emb = embedding(vocab, dim, ctxs)
    trainer = gluon.Trainer(emb.collect_params(), optim[0], dict(optim[1], learning_rate=0.1),
                            **trainer_args)
    assert trainer.mode == mode
    batches = [numpy.arange(c, vocab, vocab // 32).reshape(4, 8) for c in range(num_ctx)]
    forward_backward(emb, ctxs, batches)
    trainer.step(8)                           # creates the optimizer's (dense) states
    tracemalloc.start()
    try:
        forward_backward(emb, ctxs, batches)
        trainer.step(8)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < vocab * dim * 4 // 20, peak


def test_reduce_and_store_modes_give_the_same_weights():
    rng = numpy.random.RandomState(0)
    table = rng.randn(9, 3).astype(numpy.float32)
    batches = [[rng.randint(0, 9, size=(2, 3)).tolist() for _ in CTX2] for _ in range(3)]
    results = []
    for update_on_kvstore in (False, True):
        emb = embedding(9, 3, CTX2)
        emb.weight.set_data(nd.array(table))
        trainer = gluon.Trainer(emb.collect_params(), "sgd",
                                {"learning_rate": 0.1, "momentum": 0.9, "wd": 0.01},
                                update_on_kvstore=update_on_kvstore)
        for batch in batches:
            forward_backward(emb, CTX2, batch)
            trainer.step(4)
        assert trainer.mode == (STORE if update_on_kvstore else REDUCE)
        copies = [w.asnumpy() for w in emb.weight.list_data()]
        numpy.testing.assert_array_equal(copies[0], copies[1])
        results.append(copies[0])
    numpy.testing.assert_array_equal(results[0], results[1])
    assert not numpy.array_equal(results[0], table)


def test_an_updater_error_on_the_kvstore_reaches_the_caller():
    # AdaGrad refuses wd with row_sparse gradients; MXNet's kvstore swallows that error and
    # leaves the weight silently untouched.
    emb = embedding(5, 2, CTX2, init=initializer.One())
    trainer = gluon.Trainer(emb.collect_params(), "adagrad", {"wd": 0.1}, update_on_kvstore=True)
    forward_backward(emb, CTX2, [[[1, 2]], [[2, 3]]])
    with pytest.raises((ValueError, RuntimeError)):
        trainer.step(1)


def test_amp_skips_a_sparse_step_that_overflows():
    amp.init()
    emb = embedding(6, 2, [cpu(0)], init=initializer.One())
    trainer = gluon.Trainer(emb.collect_params(), "sgd", {"learning_rate": 0.5})
    amp.init_trainer(trainer)
    before = emb.weight.data().asnumpy()
    with autograd.record():
        y = (emb(nd.array([[1, 4]])) * float("inf")).sum()
        with amp.scale_loss(y, trainer) as scaled:
            pass
    scaled.backward()
    trainer.step(1)
    numpy.testing.assert_array_equal(emb.weight.data().asnumpy(), before)
    with autograd.record():
        y = emb(nd.array([[1, 4]])).sum()
        with amp.scale_loss(y, trainer) as scaled:
            pass
    scaled.backward()
    trainer.step(1)
    after = emb.weight.data().asnumpy()
    assert (after[[1, 4]] != 1).all() and (after[[0, 2, 3, 5]] == 1).all()


def test_row_sparse_states_stay_row_sparse_through_save_and_load(tmp_path):
    p = gluon.Parameter("w", shape=(6, 2), stype="row_sparse", grad_stype="row_sparse")
    p.initialize(init=initializer.One())
    trainer = gluon.Trainer([p], "adam", {"learning_rate": 0.1}, kvstore="local")
    x = nd.sparse.csr_matrix(([1.0, 2.0], [1, 4], [0, 1, 2]), shape=(2, 6))

    def step():
        w = p.row_sparse_data(nd.array([1, 4], dtype="int64"))
        with autograd.record():
            y = nd.sparse.dot(x, w).sum()
        y.backward()
        trainer.step(1)

    step()
    path = str(tmp_path / "sw.states")
    trainer.save_states(path)
    trainer.load_states(path)
    step()
    states = trainer.kvstore._updater.states[0]
    assert [s.stype for s in states] == ["row_sparse", "row_sparse"]
    trainer.save_states(path)
    from trainer_cli.optimizer.state_file import load_states_file
    by_device, _ = load_states_file(path)
    assert [s.stype for s in next(iter(by_device.values()))[0]] == ["row_sparse", "row_sparse"]
