"""Where a GPU training step's time goes: the sparse embedding step of ``bench_sparse.py --gpu``
(1M x 64 table, 1,000 distinct ids a batch, lazy SGD and lazy Adam) and the MLP steps of
``bench_gpu.py`` (784-256-256-10, hybridized), on CuPy.

    python benchmarks/profile_gpu_step.py [--steps N] [--json FILE]

For each step: its rate with and without a wait at each phase's end (forward, backward,
``trainer.step``: the waits show which phase the device or the host holds up), each phase's
median time so measured, the calls a step makes that wait for the device (``synchronize``,
transfers to the host), and the Python functions that take the host's time (cProfile over
unsynchronized steps, by own time). Run on a GPU machine; it measures nothing without one.

Then experiments, not features: whether one MLP step can be captured into a CUDA graph (CuPy's
stream capture, allocations from a pool kept for the graph) and replayed with the bits of the step
run op by op, and at what rate; and whether a matrix product through CuPy's low-level cuBLAS
binding can be captured (CuPy's own ``matmul`` refuses capture). Each prints what fails where
capture is refused.
"""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def _sparse_step(optimizer, ctx):
    import numpy as np
    from trainer_cli import gluon, nd
    vocab, dim, rows = 1_000_000, 64, 1000
    rng = np.random.default_rng(0)
    batches = [rng.choice(vocab, size=rows, replace=False) for _ in range(8)]
    emb = gluon.nn.Embedding(vocab, dim, sparse_grad=True)
    emb.initialize(ctx=ctx)
    rate = 0.01 if optimizer == "sgd" else 0.001
    trainer = gluon.Trainer(emb.collect_params(), optimizer, {"learning_rate": rate})
    ids = [nd.array(b.astype(np.float32), ctx=ctx) for b in batches]
    c = nd.array(rng.standard_normal((rows, dim)).astype(np.float32), ctx=ctx)

    def forward(i):
        return (emb(ids[i % 8]) * c).sum()
    return forward, trainer, 1


def _mlp_step(batch, optimizer, params, ctx):
    import numpy as np
    from trainer_cli import gluon, nd
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(256, activation="relu", in_units=784),
            gluon.nn.Dense(256, activation="relu", in_units=256),
            gluon.nn.Dense(10, in_units=256))
    net.initialize(ctx=ctx)
    net.hybridize()
    rng = np.random.RandomState(0)
    X = nd.array(rng.uniform(size=(batch, 784)).astype(np.float32), ctx=ctx)
    y = nd.array(rng.randint(0, 10, size=batch).astype(np.float32), ctx=ctx)
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), optimizer, params)

    def forward(i):
        return loss(net(X), y)
    forward.net = net
    return forward, trainer, batch


# CuPy's methods that wait for the device: a transfer to the host, a wait, or a result whose
# size only the device knows (``nonzero`` reads its count). cProfile records a C method as
# ``<method 'NAME' of 'TYPE' objects>``.
_WAITS = re.compile(r"<method '(get|synchronize|item|tolist|__bool__|__int__|__float__|"
                    r"__index__|nonzero)' of '(cupy|cupy_backends)[.\w]*' objects>$")


def _device_waits(stats, steps):
    """``{method: calls a step}`` of CuPy's methods that wait for the device, from cProfile's
    records (CuPy's Cython functions are seen only where they are methods)."""
    found = {}
    for (_, _, name), (_, calls, *_rest) in stats.stats.items():
        match = _WAITS.match(name)
        if match:
            found[match.group(1)] = found.get(match.group(1), 0) + calls / steps
    return found


def _profile(name, forward, trainer, batch, steps):
    import cupy
    from trainer_cli import autograd
    sync = cupy.cuda.Device().synchronize

    def step(i, phases=None):
        t0 = time.perf_counter()
        with autograd.record():
            out = forward(i)
        if phases is not None:
            sync()
        t1 = time.perf_counter()
        out.backward()
        if phases is not None:
            sync()
        t2 = time.perf_counter()
        trainer.step(batch)
        if phases is not None:
            sync()
            t3 = time.perf_counter()
            for key, (a, b) in zip(("forward", "backward", "trainer.step"),
                                   ((t0, t1), (t1, t2), (t2, t3))):
                phases[key].append((b - a) * 1e6)

    for i in range(30):
        step(i)
    sync()
    start = time.perf_counter()
    for i in range(steps):
        step(i)
    sync()
    plain = steps / (time.perf_counter() - start)
    phases = {"forward": [], "backward": [], "trainer.step": []}
    start = time.perf_counter()
    for i in range(steps):
        step(i, phases)
    waited = steps / (time.perf_counter() - start)
    profiler = cProfile.Profile()
    profiler.enable()
    for i in range(steps):
        step(i)
    sync()
    profiler.disable()
    text = io.StringIO()
    stats = pstats.Stats(profiler, stream=text)
    waits = _device_waits(stats, steps)
    stats.sort_stats("tottime").print_stats(22)
    result = {"steps_per_s": plain, "steps_per_s_waiting_each_phase": waited,
              "phase_median_us": {k: statistics.median(v) for k, v in phases.items()},
              "device_waits_per_step": waits}
    print("== %s: %.0f steps/s (%.0f waiting at each phase's end); median us: %s; calls a "
          "step that wait for the device: %s" % (name, plain, waited, ", ".join(
              "%s %.0f" % kv for kv in result["phase_median_us"].items()),
              ", ".join("%s %.2f" % kv for kv in sorted(waits.items())) or "none seen"))
    lines = text.getvalue().splitlines()
    start = next((k for k, line in enumerate(lines) if "ncalls" in line), 0)
    print("\n".join(lines[start:start + 24]))
    return result


def _graph_experiment(ctx, steps):
    """Capture one MLP step (batch 64, SGD-momentum) into a CUDA graph and replay it."""
    import cupy
    import numpy as np
    params = {"learning_rate": 0.01, "momentum": 0.9}
    from trainer_cli import autograd
    runs = {}
    for mode in ("eager", "graph"):
        forward, trainer, batch = _mlp_step(64, "sgd", params, ctx)
        net = forward.net

        def step():
            with autograd.record():
                out = forward(0)
            out.backward()
            trainer.step(batch)
        for _ in range(3):
            step()
        cupy.cuda.Device().synchronize()
        if mode == "eager":
            start = time.perf_counter()
            for _ in range(steps):
                step()
            cupy.cuda.Device().synchronize()
            rate = steps / (time.perf_counter() - start)
        else:
            pool = cupy.cuda.MemoryPool()
            stream = cupy.cuda.Stream(non_blocking=True)
            try:
                with cupy.cuda.using_allocator(pool.malloc), stream:
                    step()
                    stream.synchronize()
                    stream.begin_capture()
                    try:
                        step()
                    finally:
                        graph = stream.end_capture()
                graph.launch(stream)
                stream.synchronize()
                start = time.perf_counter()
                for _ in range(steps - 2):
                    graph.launch(stream)
                stream.synchronize()
                rate = (steps - 2) / (time.perf_counter() - start)
            except Exception as exc:        # the experiment reports what refused capture
                print("== CUDA graph of the MLP step: capture failed: %s: %s"
                      % (type(exc).__name__, exc))
                return {"error": "%s: %s" % (type(exc).__name__, exc)}
        runs[mode] = (rate, [p.data().asnumpy() for p in net.collect_params().values()])
    same = all(np.array_equal(a, b) for a, b in zip(runs["eager"][1], runs["graph"][1]))
    print("== CUDA graph of the MLP step (batch 64, SGD-momentum): eager %.0f steps/s, graph "
          "replay %.0f steps/s (%.2fx); weights after %d steps %s"
          % (runs["eager"][0], runs["graph"][0], runs["graph"][0] / runs["eager"][0], steps,
             "bitwise equal" if same else "DIFFER"))
    return {"eager_steps_per_s": runs["eager"][0], "graph_steps_per_s": runs["graph"][0],
            "bitwise_equal": same}


def _cublas_capture_trial():
    """A float32 product ``a @ b`` by ``cublasSgemm`` through CuPy's low-level binding, captured
    into a graph and replayed: its result against ``cupy.matmul``'s."""
    import cupy
    import numpy as np
    from cupy_backends.cuda.libs import cublas
    m, k, n = 64, 784, 256
    rng = np.random.default_rng(0)
    a = cupy.asarray(rng.standard_normal((m, k)).astype(np.float32))
    b = cupy.asarray(rng.standard_normal((k, n)).astype(np.float32))
    c = cupy.zeros((m, n), dtype=np.float32)
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    handle = cupy.cuda.device.get_cublas_handle()
    stream = cupy.cuda.Stream(non_blocking=True)
    try:
        with stream:
            cublas.setStream(handle, stream.ptr)
            stream.begin_capture()
            try:
                # Row-major c = a @ b is column-major c^T = b^T a^T.
                cublas.sgemm(handle, cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_N, n, m, k,
                             one.ctypes.data, b.data.ptr, n, a.data.ptr, k, zero.ctypes.data,
                             c.data.ptr, n)
            finally:
                graph = stream.end_capture()
            graph.launch(stream)
            stream.synchronize()
    except Exception as exc:
        print("== cuBLAS sgemm under capture (low-level binding): failed: %s: %s"
              % (type(exc).__name__, exc))
        return {"error": "%s: %s" % (type(exc).__name__, exc)}
    finally:
        cublas.setStream(handle, cupy.cuda.get_current_stream().ptr)
    same = bool((c == cupy.matmul(a, b)).all())
    print("== cuBLAS sgemm under capture (low-level binding): captured and replayed; result %s "
          "cupy.matmul's" % ("bitwise" if same else "NOT bitwise"))
    return {"captured": True, "bitwise_matmul": same}


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args(argv)
    import trainer_cli
    if not trainer_cli.num_gpus():
        print("no GPU visible to CuPy: nothing measured")
        return 0
    ctx = trainer_cli.gpu(0)
    out = {}
    cases = [("sparse lazy sgd", lambda: _sparse_step("sgd", ctx)),
             ("sparse lazy adam", lambda: _sparse_step("adam", ctx)),
             ("mlp b64 sgd-momentum", lambda: _mlp_step(64, "sgd", {"learning_rate": 0.01,
                                                                      "momentum": 0.9}, ctx)),
             ("mlp b512 adam", lambda: _mlp_step(512, "adam", {"learning_rate": 1e-3}, ctx))]
    for name, build in cases:
        try:
            out[name] = _profile(name, *build(), args.steps)
        except Exception as exc:
            print("== %s failed: %s: %s" % (name, type(exc).__name__, exc))
            out[name] = {"error": "%s: %s" % (type(exc).__name__, exc)}
    out["cuda graph"] = _graph_experiment(ctx, args.steps)
    try:
        out["cublas capture"] = _cublas_capture_trial()
    except Exception as exc:
        print("== cuBLAS capture trial failed: %s: %s" % (type(exc).__name__, exc))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
