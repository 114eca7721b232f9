"""The sparse path on the GPU: arrays, autograd, every optimizer's row_sparse rule, the
kvstores, the Trainer and the runner on gpu(0) give the CPU path's numbers (float32 rounding:
CUDA fuses multiply-adds where NumPy rounds twice), keep absent rows' bits, and keep storage on
the device and sparse (no table-sized allocation on the step path).

Every test here needs a GPU and is skipped where CuPy sees none; the CPU path's own tests (against
MXNet's goldens) are test_optim_sparse.py, test_nd_sparse*.py, test_sparse_trainer.py and
test_sparse_runner.py.
"""
from __future__ import annotations

import numpy
import pytest

import trainer_cli
from trainer_cli import autograd, cpu, gluon, gpu, initializer, kvstore, nd
from trainer_cli import optimizer as opt
from trainer_cli.ndarray import sparse

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(trainer_cli.num_gpus() == 0, reason="no GPU visible to CuPy")]

RTOL, ATOL = 2e-5, 1e-6


def close(got, want, what=""):
    numpy.testing.assert_allclose(numpy.asarray(got, numpy.float64),
                                  numpy.asarray(want, numpy.float64), rtol=RTOL, atol=ATOL,
                                  err_msg=what)


def on_device(x):
    """The array's storage (every part of a sparse one) lives on the GPU."""
    import cupy
    parts = [x._data] + [getattr(x, name) for name in ("_indices", "_indptr")
                         if getattr(x, name, None) is not None]
    return x.context == gpu(0) and all(isinstance(p, cupy.ndarray) for p in parts)


def _rand(shape, seed):
    return numpy.random.default_rng(seed).standard_normal(shape).astype(numpy.float32)


def _rows(n, count, seed):
    return numpy.sort(numpy.random.default_rng(seed).choice(n, count, replace=False))


# ------------------------------------------------------------------------------ arrays
def test_row_sparse_and_csr_arrays_live_and_compute_on_the_gpu():
    dense = _rand((8, 5), 0)
    dense[[1, 4, 6]] = 0
    csr_np = dense.copy()
    csr_np[csr_np < 0.3] = 0
    for ctx in (cpu(0), gpu(0)):
        rsp = nd.array(dense, ctx=ctx).tostype("row_sparse")
        csr = nd.array(csr_np, ctx=ctx).tostype("csr")
        if ctx == gpu(0):
            assert on_device(rsp) and on_device(csr)
        assert rsp.indices.asnumpy().tolist() == [0, 2, 3, 5, 7]
        close(rsp.asnumpy(), dense)
        close(csr.asnumpy(), csr_np)
        kept = rsp.retain(nd.array([2, 5, 6], dtype="int64", ctx=ctx))
        assert kept.indices.asnumpy().tolist() == [2, 5, 6]   # MXNet keeps every id asked for
        other = sparse.row_sparse_array((_rand((2, 5), 1), [1, 2]), shape=(8, 5), ctx=ctx)
        results = {
            "add": sparse.add(rsp, other),
            "mul": sparse.elemwise_mul(rsp, other),
            "sqrt_abs": sparse.sqrt(sparse.abs(rsp)) if hasattr(sparse, "sqrt") else rsp,
            "dot": sparse.dot(csr, nd.array(_rand((5, 3), 2), ctx=ctx)),
            "dot_t": sparse.dot(csr, nd.array(_rand((8, 3), 3), ctx=ctx), transpose_a=True),
        }
        if ctx == cpu(0):
            want = {k: (v.stype, v.asnumpy()) for k, v in results.items()}
            continue
        for key, value in results.items():
            assert value.stype == want[key][0], key
            assert on_device(value), key
            close(value.asnumpy(), want[key][1], key)
    assert results["dot_t"].stype == "row_sparse"


def test_dot_gradients_through_csr_on_the_gpu():
    x_np = _rand((6, 4), 4)
    x_np[x_np < 0.5] = 0
    w_np = _rand((4, 3), 5)
    grads = []
    for ctx in (cpu(0), gpu(0)):
        x = nd.array(x_np, ctx=ctx).tostype("csr")
        w = nd.array(w_np, ctx=ctx)
        w.attach_grad()
        with autograd.record():
            y = (sparse.dot(x, w) ** 2).sum()
        y.backward()
        grads.append(w.grad.asnumpy())
    close(grads[1], grads[0])
    close(grads[0], 2 * x_np.T @ (x_np @ w_np))


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_embedding_gradient_on_the_gpu_is_the_same_bits_every_time(dtype):
    """Repeated ids are summed in lookup order by a kernel, not by atomic adds: the GPU's
    row_sparse gradient has the same bits run after run, and the CPU's sums up to rounding
    (NumPy's reduceat adds pairwise)."""
    rng = numpy.random.default_rng(11)
    ids = rng.integers(0, 300, size=5000).astype(numpy.int64)       # many repeats
    grads = (rng.standard_normal((5000, 7)) * 10.0 ** rng.integers(-6, 6, (5000, 1))).astype(dtype)
    import cupy
    want = sparse.embedding_grad(ids, grads, (300, 7))
    runs = []
    for _ in range(3):
        got = sparse.embedding_grad(cupy.asarray(ids), cupy.asarray(grads), (300, 7))
        assert cupy.asnumpy(got.rows).tolist() == want.rows.tolist()
        runs.append(cupy.asnumpy(got.values))
    assert runs[0].tobytes() == runs[1].tobytes() == runs[2].tobytes()
    # Another order of adding: each partial sum rounds, up to about (terms x eps) x max|term|.
    scale = float(numpy.abs(grads).max()) * (1e-5 if dtype == numpy.float32 else 1e-13)
    numpy.testing.assert_allclose(runs[0], want.values, rtol=0, atol=scale)


@pytest.mark.parametrize("sparse_grad", [False, True])
def test_embedding_gradients_with_repeated_ids_are_the_cpus_bits_on_the_gpu(sparse_grad):
    """Rows looked up several times add up in lookup order on the GPU too (no atomic adds): the
    dense gradient is bitwise the CPU's (``numpy.add.at``), run after run; the row_sparse one is
    the same every run."""
    rng = numpy.random.default_rng(12)
    ids = rng.integers(0, 50, size=(40, 25)).astype(numpy.float32)
    coef = (rng.standard_normal((40, 25, 6)) * 10.0 ** rng.integers(-4, 4, (40, 25, 1)))
    grads = []
    for ctx in (cpu(0), gpu(0), gpu(0)):
        emb = gluon.nn.Embedding(50, 6, sparse_grad=sparse_grad)
        emb.initialize(init=initializer.Zero(), ctx=ctx)
        with autograd.record():
            y = (emb(nd.array(ids, ctx=ctx)) * nd.array(coef.astype(numpy.float32), ctx=ctx)).sum()
        y.backward()
        grads.append(emb.weight.grad(ctx).asnumpy())
    assert grads[1].tobytes() == grads[2].tobytes()
    if not sparse_grad:
        assert grads[1].tobytes() == grads[0].tobytes()
    else:
        numpy.testing.assert_allclose(grads[1], grads[0], rtol=1e-5,
                                      atol=1e-5 * float(numpy.abs(coef).max()))


def test_scatter_add_on_the_gpu_is_numpy_add_at():
    import cupy
    from trainer_cli.ndarray.ndarray import _scatter_add
    rng = numpy.random.default_rng(13)
    keys = rng.integers(-30, 30, size=2000)
    values = rng.standard_normal((2000, 3)).astype(numpy.float32)
    target = rng.standard_normal((30, 3)).astype(numpy.float32)
    want = target.copy()
    numpy.add.at(want, keys, values)
    got = cupy.asarray(target)
    _scatter_add(got, cupy.asarray(keys), cupy.asarray(values))
    assert cupy.asnumpy(got).tobytes() == want.tobytes()


# ------------------------------------------------------------------------------ optimizers
CASES = [
    ("sgd", {"momentum": 0.9, "wd": 0.01, "rescale_grad": 0.5}, True),
    ("sgd", {"momentum": 0.0, "wd": 0.01, "clip_gradient": 0.3}, True),
    ("sgd", {"momentum": 0.9, "wd": 0.01}, False),
    ("sgd", {"momentum": 0.0, "wd": 0.05}, False),
    ("adam", {"wd": 0.01, "rescale_grad": 0.25}, True),
    ("adam", {"wd": 0.01, "clip_gradient": 0.2}, False),
    ("lars", {"momentum": 0.9, "wd": 0.01}, True),
    ("adagrad", {"rescale_grad": 0.5}, None),
    ("groupadagrad", {}, None),
    ("nag", {"wd": 0.01}, None),
    ("ftrl", {"wd": 0.01}, None),
    ("rmsprop", {"wd": 0.01}, None),
    ("adadelta", {}, None),
    ("signum", {"wd_lh": 0.01}, None),
]


def _train(ctx, name, params, lazy, w0, steps, rsp_weight=False):
    kwargs = dict(params, learning_rate=0.05)
    if lazy is not None:
        kwargs["lazy_update"] = lazy
    updater = opt.get_updater(opt.create(name, **kwargs))
    w = nd.array(w0, ctx=ctx)
    if rsp_weight:
        w = sparse.all_rows(w)
    for rows, values in steps:
        updater(0, sparse.row_sparse_array((values, rows), shape=w0.shape, ctx=ctx), w)
    return w, updater.states.get(0)


@pytest.mark.parametrize("name,params,lazy", CASES)
def test_every_optimizers_row_sparse_update_matches_the_cpu(name, params, lazy):
    shape = (50, 4)
    w0 = _rand(shape, 6)
    steps = [(_rows(50, 7, 10 + k), _rand((7, 4), 20 + k)) for k in range(3)]
    steps.insert(1, (numpy.zeros(0, numpy.int64), numpy.zeros((0, 4), numpy.float32)))
    want, want_state = _train(cpu(0), name, params, lazy, w0, steps)
    got, got_state = _train(gpu(0), name, params, lazy, w0, steps)
    assert on_device(got)
    close(got.asnumpy(), want.asnumpy(), name)
    for g, c in zip(got_state if isinstance(got_state, tuple) else (got_state,),
                    want_state if isinstance(want_state, tuple) else (want_state,)):
        assert (g is None) == (c is None)
        if g is not None:
            assert on_device(g) and g.stype == c.stype
            close(g.asnumpy(), c.asnumpy(), name + " state")
    if lazy or (lazy is None and name in ("adagrad", "groupadagrad", "nag")):
        touched = numpy.unique(numpy.concatenate([r for r, _ in steps]))
        absent = numpy.setdiff1d(numpy.arange(50), touched)
        assert got.asnumpy()[absent].tobytes() == w0[absent].tobytes()


@pytest.mark.parametrize("name,params", [("sgd", {"momentum": 0.9}), ("adam", {}),
                                         ("ftrl", {})])
def test_row_sparse_weights_update_on_the_gpu(name, params):
    shape = (20, 3)
    w0 = _rand(shape, 7)
    steps = [(_rows(20, 5, 30 + k), _rand((5, 3), 40 + k)) for k in range(3)]
    want, _ = _train(cpu(0), name, params, None, w0, steps, rsp_weight=True)
    got, state = _train(gpu(0), name, params, None, w0, steps, rsp_weight=True)
    assert got.stype == "row_sparse" and on_device(got)
    close(got.asnumpy(), want.asnumpy(), name)


@pytest.mark.parametrize("name,kernel,states", [("sgd_lazy", "SGD_ROWS_KERNEL", 0),
                                                 ("sgd_mom", "SGD_MOM_ROWS_KERNEL", 1),
                                                 ("adam", "ADAM_ROWS_KERNEL", 2)])
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_lazy_row_kernels_run_on_the_gpu_and_give_the_numpy_bodys_bits(name, kernel, states,
                                                                       dtype):
    """The lazy rules' CUDA row kernels (one launch over the present rows) against the same rules'
    NumPy body run by CuPy (gather, dense body, scatter), clipping and decay on: same bits, the
    kernel taken (not the body), and an id outside the table refused before anything changes."""
    import cupy
    from trainer_cli.optimizer import adam as adam_rule, kernels, sgd as sgd_rule
    row_kernel = getattr(adam_rule if name == "adam" else sgd_rule, kernel)
    rng = numpy.random.default_rng(9)
    table, width = (300, 17)
    rows = cupy.asarray(numpy.sort(rng.choice(table, 40, replace=False)).astype(numpy.int64))
    g = cupy.asarray(rng.standard_normal((40, width)).astype(dtype))
    w0 = cupy.asarray(rng.standard_normal((table, width)).astype(dtype))
    s0 = [cupy.asarray(numpy.abs(rng.standard_normal((table, width))).astype(dtype))
          for _ in range(states)]
    p = dict(lr=0.1, wd=1e-3, momentum=0.9, rescale=0.37, clip=0.5)
    if name == "adam":
        scalars = adam_rule._scalars(p["lr"], p["wd"], 0.9, 0.999, 1e-8, p["rescale"], p["clip"])
    else:
        scalars = sgd_rule._scalars(numpy.dtype(dtype), **p)
    w, s = w0.copy(), [a.copy() for a in s0]
    assert row_kernel.run(w, rows, g, s, scalars)
    assert numpy.dtype(dtype).char in row_kernel._cuda_kernels
    want, want_s = w0.copy(), [a.copy() for a in s0]
    if name == "adam":
        adam_rule._adam_rows_numpy(want, rows, g, *want_s, p["lr"], p["wd"], 0.9, 0.999, 1e-8,
                                   p["rescale"], p["clip"])
    else:
        sgd_rule._sgd_rows_numpy(want, rows, g, want_s[0] if states else None, p["lr"],
                                 p["wd"], p["momentum"], p["rescale"], p["clip"])
    for x, y in zip([w] + s, [want] + want_s):
        assert x.get().tobytes() == y.get().tobytes()
    bad = rows.copy()
    bad[-1] = table
    before = [w.get()] + [a.get() for a in s]
    with pytest.raises(ValueError, match="row ids"):
        row_kernel.run(w, bad, g, s, scalars)
    assert [a.get().tobytes() for a in [w] + s] == [a.tobytes() for a in before]
    assert kernels.rows_in_range(rows, table)


def test_golden_mxnet_sparse_updates_on_the_gpu():
    from test_optim_sparse import load, rsp
    for name in ("rsp_sgd_lazy_01.json", "rsp_adam_std_01.json", "rsp_ftrl_01.json"):
        case = load(name)
        spec, result = case["spec"], case["result"]
        updater = opt.get_updater(opt.create(spec["optimizer"], **spec["optimizer_params"]))
        weights = [nd.array(numpy.asarray(w, numpy.float32), ctx=gpu(0)) for w in spec["weights"]]
        for step, grads in enumerate(spec["grads"]):
            for i, grad in enumerate(grads):
                g = rsp(grad, weights[i].shape).as_in_context(gpu(0))
                updater(i, g, weights[i])
                numpy.testing.assert_allclose(weights[i].asnumpy(), result["weights"][step][i],
                                              rtol=1e-5, atol=1e-6, err_msg=name)


# ------------------------------------------------------------------------------ kvstore, Trainer
@pytest.mark.parametrize("store", ["local", "device"])
def test_kvstore_push_and_row_sparse_pull_on_the_gpu(store):
    kv = kvstore.create(store)
    kv.init(0, nd.zeros((6, 2), ctx=gpu(0)))
    grads = [sparse.row_sparse_array((numpy.full((len(rows), 2), k, numpy.float32), rows),
                                     shape=(6, 2), ctx=ctx)
             for k, (rows, ctx) in enumerate([([0, 3], gpu(0)), ([3, 5], gpu(0)),
                                              ([1], cpu(0))], start=1)]
    kv.push(0, grads)
    out = sparse.zeros("row_sparse", (6, 2), ctx=gpu(0))
    kv.row_sparse_pull(0, out, row_ids=nd.array([5, 3, 2], dtype="int64", ctx=gpu(0)))
    assert on_device(out)
    assert out.indices.asnumpy().tolist() == [2, 3, 5]
    assert out.data.asnumpy().tolist() == [[0, 0], [3, 3], [2, 2]]
    kv.pull(0, out, ignore_sparse=False)
    assert out.indices.asnumpy().tolist() == [0, 1, 3, 5]


def _embedding_run(ctxs, update_on_kvstore, optim):
    emb = gluon.nn.Embedding(1000, 8, sparse_grad=True)
    emb.initialize(init=initializer.Uniform(0.1), ctx=ctxs)
    emb.weight.set_data(nd.array(_rand((1000, 8), 8)))
    trainer = gluon.Trainer(emb.collect_params(), optim[0], dict(optim[1], learning_rate=0.1),
                            update_on_kvstore=update_on_kvstore)
    rng = numpy.random.default_rng(9)
    for _ in range(4):
        for ctx in ctxs:
            x = nd.array(rng.integers(0, 1000, size=(4, 16)), ctx=ctx)
            with autograd.record():
                y = (emb(x) * nd.arange(8, ctx=ctx).reshape((1, 1, -1))).sum()
            y.backward()
        trainer.step(64)
    return [w.asnumpy() for w in emb.weight.list_data()], emb


@pytest.mark.parametrize("update_on_kvstore", [None, True])
@pytest.mark.parametrize("optim", [("sgd", {"momentum": 0.9}), ("adam", {})])
def test_trainer_with_sparse_embedding_on_the_gpu_matches_the_cpu(update_on_kvstore, optim):
    want, _ = _embedding_run([cpu(0)], update_on_kvstore, optim)
    got, emb = _embedding_run([gpu(0)], update_on_kvstore, optim)
    assert emb.weight.grad().stype == "row_sparse" and on_device(emb.weight.grad())
    close(got[0], want[0])


def test_sparse_step_on_the_gpu_allocates_no_table_sized_array():
    import cupy
    from cupy.cuda import memory_hook

    class Largest(memory_hook.MemoryHook):
        name = "largest"
        biggest = 0

        def malloc_preprocess(self, device_id, size, mem_size):
            self.biggest = max(self.biggest, size)

    vocab, dim = 200_000, 16
    emb = gluon.nn.Embedding(vocab, dim, sparse_grad=True)
    emb.initialize(init=initializer.Zero(), ctx=gpu(0))
    trainer = gluon.Trainer(emb.collect_params(), "adam", {"learning_rate": 0.1})
    ids = nd.array(numpy.arange(0, vocab, vocab // 32).reshape(4, 8), ctx=gpu(0))

    def step():
        with autograd.record():
            y = emb(ids).sum()
        y.backward()
        trainer.step(8)

    step()                      # creates the states
    cupy.cuda.Device().synchronize()
    hook = Largest()
    with hook:
        step()
        cupy.cuda.Device().synchronize()
    assert hook.biggest < vocab * dim * 4 // 20, hook.biggest


# ------------------------------------------------------------------------------ the runner
@pytest.mark.parametrize("config, metric, bound", [("mf_synthetic.yaml", "val_rmse", 0.3),
                                                   ("sparse_linear.yaml", "val_accuracy", 0.7)])
def test_shipped_sparse_configs_train_on_the_gpu_and_resume(tmp_path, config, metric, bound):
    from run_helpers import CONFIGS, final_arrays
    from trainer_cli.run import resume_run, start_run
    result = start_run(CONFIGS / config, ["context=gpu", "epochs=3"], run_root=tmp_path)
    assert result.status == "finished"
    value = result.summary["metrics"][metric]
    assert value < bound if metric.endswith("rmse") else value > bound
    params, states = final_arrays(result.summary["run_dir"])
    assert params and states
    more = resume_run(result.summary["run_dir"], overrides=["epochs=4"])
    assert more.status == "finished" and more.summary["epochs"] == 4


@pytest.mark.parametrize("config, extra", [
    ("mf_synthetic.yaml", ["data.train.num_samples=6000", "data.batch_size=128", "epochs=2"]),
    ("mf_synthetic.yaml", ["data.train.num_samples=6000", "data.batch_size=128", "epochs=2",
                           "model.args.sparse_weights=true"]),
    ("gpu.yaml", ["epochs=3"]),
])
def test_a_stopped_gpu_run_resumes_to_the_bits_of_one_never_stopped(tmp_path, config, extra):
    """Exact resume on the GPU: the updates, the row-by-index gradients (no atomic adds) and
    the reductions repeat bit for bit, so a run stopped and resumed ends where one that never
    stopped ends."""
    if config == "gpu.yaml":
        pytest.importorskip("sklearn")
    from run_helpers import CONFIGS, StopAt, assert_bitwise_equal, final_arrays, metric_rows
    from trainer_cli.run import resume_run, start_run
    overrides = ["context=gpu"] + extra
    ref = start_run(CONFIGS / config, overrides, run_root=tmp_path / "ref")
    cut = start_run(CONFIGS / config, overrides, run_root=tmp_path / "cut", reporter=StopAt(30))
    assert cut.status == "interrupted"
    done = resume_run(cut.summary["run_dir"])
    assert done.status == "finished" and done.summary["steps"] == ref.summary["steps"]
    for got, want in zip(final_arrays(cut.summary["run_dir"]), final_arrays(ref.summary["run_dir"])):
        assert_bitwise_equal(got, want)
    assert metric_rows(cut.summary["run_dir"]) == metric_rows(ref.summary["run_dir"])
