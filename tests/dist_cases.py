"""Programs the dist tests run as MPI ranks (``mpiexec -n 2 python dist_cases.py CASE OUTDIR``).

Also imported by ``test_dist.py`` for the single-process references, so that both sides build the
same model and data from the same functions.
"""
import os
import sys
import time

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from trainer_cli import autograd, cpu, gluon, kvstore, nd  # noqa: E402

IN, HIDDEN, STEPS, LOCAL_BATCH = 6, 16, 12, 8

# name -> (optimizer, optimizer_params, compression_params, update_on_kvstore)
SYNC_CONFIGS = {
    "sgd": ("sgd", {"learning_rate": 0.05, "momentum": 0.9, "wd": 1e-3}, None, None),
    "adam": ("adam", {"learning_rate": 0.01}, None, None),
    "sgd_2bit": ("sgd", {"learning_rate": 0.05, "momentum": 0.9},
                 {"type": "2bit", "threshold": 0.02}, None),
    "sgd_local_update": ("sgd", {"learning_rate": 0.05, "momentum": 0.9}, None, False),
    "adam_2bit_local_update": ("adam", {"learning_rate": 0.01},
                               {"type": "2bit", "threshold": 0.02}, False),
}


def data(num_workers=2, steps=STEPS, local_batch=LOCAL_BATCH, seed=7):
    """x, y for every step and worker: ``x[step][worker]`` is that worker's shard of the batch."""
    rng = numpy.random.RandomState(seed)
    true_w = rng.randn(IN, 1).astype(numpy.float32)
    xs, ys = [], []
    for _ in range(steps):
        x = rng.randn(num_workers, local_batch, IN).astype(numpy.float32)
        noise = rng.randn(num_workers, local_batch, 1).astype(numpy.float32)
        y = numpy.tanh(x @ true_w) + 0.1 * noise
        xs.append(x)
        ys.append(y.astype(numpy.float32))
    return xs, ys


def model(ctx, seed=3):
    """A 2-layer MLP with weights drawn from ``seed`` (so every process can build the same one)."""
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(HIDDEN, activation="tanh", in_units=IN),
            gluon.nn.Dense(1, in_units=HIDDEN))
    net.initialize(ctx=ctx)
    rng = numpy.random.RandomState(seed)
    for p in net.collect_params().values():
        p.set_data(nd.array(0.5 * rng.randn(*p.shape).astype(numpy.float32)))
    return net


def weights(net):
    """``{"p0": ..., "p1": ...}`` in creation order (the names' counters differ between models)."""
    params = net.collect_params().values()
    return {"p%d" % i: p.list_data()[0].asnumpy() for i, p in enumerate(params)}


def train(net, trainer, ctxs, xs, ys, batch_size, shard=None, fail=None, fail_step=None):
    loss_fn = gluon.loss.L2Loss()
    for step, (x, y) in enumerate(zip(xs, ys)):
        if fail is not None and step == fail_step:
            fail()
        if shard is None:   # one process: the union of the shards, one shard per context
            xparts = [nd.array(x[i], ctx=c) for i, c in enumerate(ctxs)]
            yparts = [nd.array(y[i], ctx=c) for i, c in enumerate(ctxs)]
        else:
            xparts = [nd.array(x[shard], ctx=ctxs[0])]
            yparts = [nd.array(y[shard], ctx=ctxs[0])]
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xparts, yparts)]
        for loss in losses:
            loss.backward()
        trainer.step(batch_size)


def reference_sync(name):
    """One process, contexts cpu(0) and cpu(1), kvstore 'device', on the union of the shards."""
    opt, params, comp, uok = SYNC_CONFIGS[name]
    ctxs = [cpu(0), cpu(1)]
    net = model(ctxs)
    trainer = gluon.Trainer(net.collect_params(), opt, dict(params), kvstore="device",
                            compression_params=comp, update_on_kvstore=uok)
    xs, ys = data()
    train(net, trainer, ctxs, xs, ys, batch_size=2 * LOCAL_BATCH)
    return weights(net)


def full_loss(net, xs, ys):
    loss_fn = gluon.loss.L2Loss()
    x = numpy.concatenate([a.reshape(-1, IN) for a in xs])
    y = numpy.concatenate([b.reshape(-1, 1) for b in ys])
    return float(loss_fn(net(nd.array(x)), nd.array(y)).mean().asscalar())


# --------------------------------------------------------------------------------------------
# Cases (run under mpiexec)


def case_sync(out):
    """Each SYNC_CONFIG trained on this rank's shard with dist_sync; weights saved per rank."""
    for name, (opt, params, comp, uok) in SYNC_CONFIGS.items():
        kv = kvstore.create("dist_sync")
        rank = kv.rank
        net = model([cpu(0)])
        trainer = gluon.Trainer(net.collect_params(), opt, dict(params), kvstore=kv,
                                compression_params=comp, update_on_kvstore=uok)
        xs, ys = data(kv.num_workers)
        train(net, trainer, [cpu(0)], xs, ys, batch_size=LOCAL_BATCH * kv.num_workers, shard=rank)
        numpy.savez(os.path.join(out, "%s-rank%d.npz" % (name, rank)), **weights(net))
    store_semantics(out)


def store_semantics(out):
    """The store API directly: init from rank 0, push/pull/pushpull sums, keys, states files."""
    kv = kvstore.create("dist_device_sync")
    r, n = kv.rank, kv.num_workers
    assert kv.type == "dist_device_sync" and n == 2 and kv.is_capable("optimizer")
    results = {}
    # init/broadcast: rank 0's value wins
    kv.init(3, nd.array(numpy.full((2, 3), 10.0 + r, dtype=numpy.float32)))
    got = nd.zeros((2, 3))
    kv.pull(3, out=got)
    results["init"] = got.asnumpy()
    outs = [nd.zeros((4,), ctx=cpu(0)), nd.zeros((4,), ctx=cpu(1))]
    kv.broadcast(4, nd.array(numpy.arange(4, dtype=numpy.float32) * (r + 1)), out=outs)
    results["broadcast"] = numpy.stack([o.asnumpy() for o in outs])
    # push without an updater: the stored value becomes the sum over all devices of all workers
    kv.push(3, [nd.array(numpy.full((2, 3), r + 1.0, dtype=numpy.float32)),
                nd.array(numpy.full((2, 3), 0.5, dtype=numpy.float32), ctx=cpu(1))])
    kv.pull(3, out=got)
    results["push_sum"] = got.asnumpy()
    # pushpull in place, list of keys, float64 values
    a = nd.array(numpy.full((3,), r + 1.0))
    kv.init(5, nd.zeros((3,), dtype="float64"))
    vals = [a.astype("float64")]
    kv.pushpull([5], [vals])
    results["pushpull_inplace"] = vals[0].asnumpy()
    # a big key (several Allreduce pieces) and an odd-sized one
    big = numpy.arange(700_001, dtype=numpy.float32) * (r + 1)
    kv.init(6, nd.zeros(big.shape))
    outb = nd.zeros(big.shape)
    kv.pushpull(6, nd.array(big), out=outb)
    results["big"] = outb.asnumpy()[[0, 1, 262_144, 700_000]]
    # str keys belong to another store (a store takes one kind of key)
    ks = kvstore.create("dist_sync")
    ks.init("w", nd.ones((2,)))
    ks.pushpull("w", nd.array([1.0 + r, 2.0]))
    outw = nd.zeros((2,))
    ks.pull("w", out=outw)
    results["str_key"] = outw.asnumpy()
    # compression through pushpull: rank r pushes 0.3*(r+1), threshold 0.5
    kc = kvstore.create("dist_sync")
    kc.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kc.init(0, nd.zeros((5,)))
    seq = []
    for _ in range(3):
        g = nd.array(numpy.full((5,), 0.3 * (r + 1), dtype=numpy.float32))
        kc.pushpull(0, g)
        seq.append(g.asnumpy())
    results["compressed"] = numpy.stack(seq)
    results["compressed_bytes"] = numpy.array([kc.wire_bytes])
    wire_residuals(kc, out)
    # several keys in one call (small ones share Allreduces) == one call per key
    import trainer_cli.optimizer as opt
    shapes = [(3,), (50, 20), (4,), (300_000,), (7, 7), (2,)]
    fused, single = kvstore.create("dist_sync"), kvstore.create("dist_sync")
    rng = numpy.random.RandomState(100 + r)
    for kv_ in (fused, single):
        kv_.set_optimizer(opt.create("sgd", learning_rate=0.1, momentum=0.9))
        kv_.init(list(range(len(shapes))), [nd.ones(sh) for sh in shapes])
    outs_f = [nd.zeros(sh) for sh in shapes]
    outs_s = [nd.zeros(sh) for sh in shapes]
    for _ in range(3):
        grads = [rng.randn(*sh).astype(numpy.float32) for sh in shapes]
        fused.pushpull(list(range(len(shapes))), [nd.array(g) for g in grads], out=outs_f)
        for i, g in enumerate(grads):
            single.pushpull(i, nd.array(g), out=outs_s[i])
    results["fused_equal"] = numpy.array(
        [numpy.array_equal(a.asnumpy(), b.asnumpy()) for a, b in zip(outs_f, outs_s)])
    # optimizer states: rank 0 writes, every rank reads
    ko = kvstore.create("dist_sync")
    ko.set_optimizer(opt.create("adam", learning_rate=0.1))
    ko.init(0, nd.ones((3,)))
    ko.push(0, nd.array(numpy.full((3,), 1.0 + r, dtype=numpy.float32)))
    path = os.path.join(out, "states.bin")
    ko.save_optimizer_states(path)
    ko.barrier()
    written = os.path.exists(path)
    ko.load_optimizer_states(path)
    ko.push(0, nd.array(numpy.full((3,), 1.0, dtype=numpy.float32)))
    w = nd.zeros((3,))
    ko.pull(0, out=w)
    results["states"] = numpy.concatenate([w.asnumpy(), [float(written)]])
    numpy.savez(os.path.join(out, "semantics-rank%d.npz" % r), **results)


def wire_residuals(kc, out):
    """Checkpoint support: every rank's residuals gathered on rank 0, and taken back by a fresh
    store; ``kc`` has pushed 0.3 (r + 1) three times (2bit, threshold 0.5) on rank r."""
    from trainer_cli.kvstore import gather, mpi
    r = kc.rank
    every = kc.gather_wire_residuals()
    assert (every is None) == (r != 0)
    kd = kvstore.create("dist_sync")
    kd.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kd.init(0, nd.zeros((5,)))
    errors = []
    for bad in ({9: numpy.zeros(5, numpy.float32)}, {0: numpy.zeros(4, numpy.float32)}):
        try:
            kd.set_wire_residuals(bad)
        except (KeyError, ValueError) as exc:
            errors.append(type(exc).__name__)
    kd.set_wire_residuals({k: v.copy() for k, v in kc.wire_residuals().items()})
    g = nd.array(numpy.full((5,), 0.3 * (r + 1), dtype=numpy.float32))
    kd.pushpull(0, g)
    # Uneven sizes and several 1 MiB rounds, rank 1 sending more than rank 0.
    job = mpi.job()
    comm = job.dup(mpi.load_mpi().COMM_WORLD, "testing gather")
    rng = numpy.random.RandomState(r)
    mine = {"big": rng.randn(300_000 + 400_000 * r).astype(numpy.float32), 7: numpy.arange(r + 2),
            "empty": numpy.zeros((0, 3))}
    numpy.savez(os.path.join(out, "gather-sent-rank%d.npz" % r), big=mine["big"])
    got = gather.gather_arrays(comm, job, mine, 0, "a test gather")
    if r == 0:
        flat = {"rank%d_%s" % (i, name): arr for i, arrays in enumerate(got)
                for name, arr in arrays.items()}
        numpy.savez(os.path.join(out, "gathered.npz"), restored=g.asnumpy(),
                    errors=numpy.array(errors), residual0=every[0][0], residual1=every[1][0],
                    kinds=numpy.array([" ".join(sorted(map(repr, a))) for a in got]), **flat)


def case_async(out):
    """dist_async on this rank's shard; rank 0 reports the full-data loss before and after."""
    kv = kvstore.create("dist_async")
    r = kv.rank
    net = model([cpu(0)])
    xs, ys = data(kv.num_workers, steps=ASYNC_STEPS)
    before = full_loss(net, xs, ys)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.5},
                            kvstore=kv)
    train(net, trainer, [cpu(0)], xs, ys, batch_size=LOCAL_BATCH * kv.num_workers, shard=r)
    assert trainer._update_on_kvstore is True
    kv.barrier()
    params = net.collect_params()
    for i, name in enumerate(sorted(params.keys())):  # the Trainer's keys: sorted-name order
        kv.pull(i, out=params[name].list_data())
    after = full_loss(net, xs, ys)
    updates = trainer.optimizer.num_update
    # 2bit through the server, sgd lr 1: rank r pushes 0.6 (r + 1), then 0.7 (r + 1)... with its
    # own residual; the sum of the decoded pushes does not depend on their order.
    import trainer_cli.optimizer as opt
    kc = kvstore.create("dist_async")
    kc.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    kc.set_optimizer(opt.create("sgd", learning_rate=1.0))
    kc.init("w", nd.zeros((5,)))
    seq = []
    for step in range(2):
        kc.push("w", nd.array(numpy.full((5,), (0.6 + 0.1 * step) * (r + 1), dtype=numpy.float32)))
        kc.barrier()
        got = nd.zeros((5,))
        kc.pull("w", out=got)
        seq.append(got.asnumpy())
        kc.barrier()
    numpy.save(os.path.join(out, "async-2bit-rank%d.npy" % r), numpy.stack(seq))
    # The residuals gathered while rank 0's server runs, and put back on this store's keys.
    every = kc.gather_wire_residuals()
    if r == 0:
        kc.set_wire_residuals(every[0])
        numpy.save(os.path.join(out, "async-residuals.npy"), numpy.stack([every[0]["w"],
                                                                          every[1]["w"]]))
    if r == 0:
        numpy.savez(os.path.join(out, "async.npz"), before=before, after=after, updates=updates)


ASYNC_STEPS = 60


def reference_async_loss():
    """The same model and data in one process, one context, sgd on every batch."""
    net = model([cpu(0)])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05, "momentum": 0.5})
    xs, ys = data(2, steps=ASYNC_STEPS)
    xs1 = [x.reshape(1, -1, IN) for x in xs]
    ys1 = [y.reshape(1, -1, 1) for y in ys]
    train(net, trainer, [cpu(0)], xs1, ys1, batch_size=2 * LOCAL_BATCH)
    return full_loss(net, xs, ys)


def case_fail(out, mode):
    """Rank 1 fails at step 3 (raise, kill -9, exit, or stall past the timeout)."""
    kv = kvstore.create("dist_sync")

    def fail():
        if kv.rank != 1:
            return
        if mode == "raise":
            raise ValueError("boom on purpose")
        if mode == "kill":
            os.kill(os.getpid(), 9)
        if mode == "exit":
            sys.exit(0)
        if mode == "stall":
            time.sleep(30)

    net = model([cpu(0)])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.05}, kvstore=kv)
    xs, ys = data(2, steps=8)
    train(net, trainer, [cpu(0)], xs, ys, batch_size=16, shard=kv.rank, fail=fail, fail_step=3)
    open(os.path.join(out, "finished-rank%d" % kv.rank), "w").close()


def case_single(out):
    """One plain process (no mpiexec): every dist type works with one worker."""
    from trainer_cli.kvstore import mpi
    results = {}
    for name in ("dist_sync", "dist_sync_device", "dist_device_sync", "dist_async",
                 "dist_device_async"):
        kv = kvstore.create(name)
        assert kv.type == name and kv.rank == 0 and kv.num_workers == 1, name
        kv.init(0, nd.ones((3,)))
        kv.push(0, [nd.array([1.0, 2.0, 3.0]), nd.array([1.0, 1.0, 1.0], ctx=cpu(1))])
        got = nd.zeros((3,))
        kv.pull(0, out=got)
        results[name] = got.asnumpy()
        kv.barrier()
    # The Trainer makes a store for a dist type even with one context.
    net = model([cpu(0)])
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1},
                            kvstore="dist_sync")
    xs, ys = data(1, steps=2)
    train(net, trainer, [cpu(0)], xs, ys, batch_size=LOCAL_BATCH, shard=0)
    results["trainer_store"] = numpy.array([trainer._kvstore is not None,
                                            trainer._update_on_kvstore])
    results["timeout"] = numpy.array([mpi.timeout()])
    numpy.savez(os.path.join(out, "single.npz"), **results)


def case_hello(out, code):
    """Join the job, write a file per rank; rank 1 exits with ``code`` after everyone is done."""
    from trainer_cli.kvstore import mpi
    job = mpi.job()
    with open(os.path.join(out, "hello-rank%d" % job.rank), "w") as f:
        f.write("%d %d\n" % (job.rank, job.size))
    if job.rank == 1 and code:
        sys.exit(code)


SPARSE_SHAPE = (50, 3)
# Rows each rank pushes per step: overlapping, disjoint, one rank empty, a present row of zeros.
SPARSE_ROWS = [([1, 4, 7], [4, 9]), ([], [0, 49]), ([2, 3], [])]


def sparse_push(rank, step, ctx):
    from trainer_cli.ndarray import sparse
    rows = SPARSE_ROWS[step][rank]
    values = numpy.arange(len(rows) * 3, dtype=numpy.float32).reshape(-1, 3) + 10 * rank + step
    if rows and rank == 0:
        values[0] = 0.0
    return sparse.row_sparse_array((values, numpy.array(rows, dtype=numpy.int64)),
                                   shape=SPARSE_SHAPE, ctx=ctx)


def case_sparse(out):
    """row_sparse pushes across ranks: replace without an optimizer, lazy SGD with one, the
    row_sparse pull of the sum; and what each rank handed to MPI."""
    from trainer_cli import kvstore, nd, optimizer
    from trainer_cli.ndarray import sparse
    kv = kvstore.create("dist_sync")
    rank, ctx = kv.rank, cpu(0)
    results = {}
    kv.init("r", nd.zeros(SPARSE_SHAPE))
    before = kv.wire_bytes
    kv.push("r", sparse_push(rank, 0, ctx))
    results["push_bytes"] = numpy.array([kv.wire_bytes - before])
    got = sparse.zeros("row_sparse", SPARSE_SHAPE, ctx=ctx)
    kv.row_sparse_pull("r", out=got, row_ids=nd.array(numpy.arange(50), dtype="int64"))
    results["replace_rows"], results["replace_values"] = got.indices.asnumpy(), got.data.asnumpy()
    kv2 = kvstore.create("dist_sync")
    kv2.set_optimizer(optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01))
    kv2.init(0, nd.ones(SPARSE_SHAPE))
    w = nd.zeros(SPARSE_SHAPE)
    for step in range(3):
        kv2.push(0, sparse_push(rank, step, ctx))
    kv2.pull(0, out=w)
    results["sgd_weight"] = w.asnumpy()
    numpy.savez(os.path.join(out, "sparse-rank%d.npz" % rank), **results)


def reference_sparse():
    """One process: the same pushes as two devices of a local store."""
    from trainer_cli import cpu as _cpu, kvstore, nd, optimizer
    from trainer_cli.ndarray import sparse
    kv = kvstore.create("local")
    kv.init("r", nd.zeros(SPARSE_SHAPE))
    kv.push("r", [sparse_push(0, 0, _cpu(0)), sparse_push(1, 0, _cpu(1))])
    got = sparse.zeros("row_sparse", SPARSE_SHAPE)
    kv.row_sparse_pull("r", out=got, row_ids=nd.array(numpy.arange(50), dtype="int64"))
    kv2 = kvstore.create("local")
    kv2.set_optimizer(optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01))
    kv2.init(0, nd.ones(SPARSE_SHAPE))
    for step in range(3):
        kv2.push(0, [sparse_push(0, step, _cpu(0)), sparse_push(1, step, _cpu(1))])
    w = nd.zeros(SPARSE_SHAPE)
    kv2.pull(0, out=w)
    return {"replace_rows": got.indices.asnumpy(), "replace_values": got.data.asnumpy(),
            "sgd_weight": w.asnumpy()}


def _async_sparse_steps(kv, push, rank=None):
    """Three steps of pushes in a fixed order: rank 1's, then rank 0's (the server applies each
    as it comes; the barriers fix the order so that one process can replay it)."""
    for step in range(3):
        for who in (1, 0):
            if rank is None:
                kv.push(*push(who, step))
            else:
                if rank == who:
                    kv.push(*push(who, step))
                kv.barrier()


def _async_sparse_run(make, rank, ctx, barrier):
    """What case_async_sparse records, on a dist_async store (``rank``) or a local one."""
    from trainer_cli import nd, optimizer
    from trainer_cli.ndarray import sparse
    results = {}
    kv = make()
    kv.init("r", nd.zeros(SPARSE_SHAPE))
    before = getattr(kv, "wire_bytes", 0)
    for who in (1, 0):
        if rank is None or rank == who:
            kv.push("r", sparse_push(who, 0, ctx))
        barrier(kv)
        if who == 1:
            results["push_bytes"] = numpy.array([getattr(kv, "wire_bytes", 0) - before])
    got = sparse.zeros("row_sparse", SPARSE_SHAPE, ctx=ctx)
    kv.row_sparse_pull("r", out=got, row_ids=nd.array([9, 4, 1, 0, 4], dtype="int64"))
    results["replace_rows"], results["replace_values"] = got.indices.asnumpy(), got.data.asnumpy()
    whole = sparse.zeros("row_sparse", SPARSE_SHAPE, ctx=ctx)
    kv.pull("r", out=whole, ignore_sparse=False)
    results["replace_whole_rows"] = whole.indices.asnumpy()
    dense = nd.ones(SPARSE_SHAPE, ctx=ctx)
    kv.pull("r", out=dense)
    results["replace_dense"] = dense.asnumpy()

    kv2 = make()
    kv2.set_optimizer(optimizer.create("sgd", learning_rate=0.1, momentum=0.9, wd=0.01))
    kv2.init(0, nd.ones(SPARSE_SHAPE))
    _async_sparse_steps(kv2, lambda who, step: (0, sparse_push(who, step, ctx)), rank)
    w = nd.zeros(SPARSE_SHAPE, ctx=ctx)
    kv2.pull(0, out=w)
    results["sgd_weight"] = w.asnumpy()

    kv3 = make()
    kv3.set_optimizer(optimizer.create("adam", learning_rate=0.1, wd=0.01))
    kv3.init("t", sparse.all_rows(nd.ones(SPARSE_SHAPE, ctx=ctx)))
    _async_sparse_steps(kv3, lambda who, step: ("t", sparse_push(who, step, ctx)), rank)
    rows = sparse.zeros("row_sparse", SPARSE_SHAPE, ctx=ctx)
    kv3.row_sparse_pull("t", out=rows, row_ids=nd.array([49, 0, 1, 2, 4, 9], dtype="int64"))
    results["adam_rows"], results["adam_values"] = rows.indices.asnumpy(), rows.data.asnumpy()
    return results


def case_async_sparse(out):
    """row_sparse pushes and pulls through dist_async's parameter server, in a fixed order."""
    from trainer_cli import kvstore
    stores = [kvstore.create("dist_async") for _ in range(4)]      # collective: made up front
    rank = stores[0].rank
    compressed = stores.pop()
    stores = iter(stores)
    results = _async_sparse_run(lambda: next(stores), rank, cpu(0), lambda store: store.barrier())
    # Compression and row_sparse values: refused before anything is sent, as on the other stores.
    from trainer_cli import nd
    compressed.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    compressed.init("c", nd.zeros(SPARSE_SHAPE))
    try:
        compressed.push("c", sparse_push(rank, 0, cpu(0)))
        results["compression_refused"] = numpy.array([0])
    except ValueError as exc:
        results["compression_refused"] = numpy.array(["compression" in str(exc)], dtype=int)
    numpy.savez(os.path.join(out, "async-sparse-rank%d.npz" % rank), **results)


def reference_async_sparse():
    """One process, a local store: the same pushes in the same order."""
    from trainer_cli import kvstore
    return _async_sparse_run(lambda: kvstore.create("local"), None, cpu(0), lambda store: None)


def main(argv):
    case, out = argv[1], argv[2]
    if case == "single":
        case_single(out)
    elif case == "hello":
        case_hello(out, int(argv[3]) if len(argv) > 3 else 0)
    elif case == "sync":
        case_sync(out)
    elif case == "async":
        case_async(out)
    elif case == "sparse":
        case_sparse(out)
    elif case == "async-sparse":
        case_async_sparse(out)
    elif case.startswith("fail-"):
        case_fail(out, case[5:])
    else:
        raise SystemExit("unknown case %r" % case)


if __name__ == "__main__":
    main(sys.argv)
