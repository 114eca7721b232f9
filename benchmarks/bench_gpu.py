"""Issue 6's GPU benchmark: the training steps on CuPy beside PyTorch on the same GPU.

    python benchmarks/bench_gpu.py [--quick] [--json]

Cases: the MLP 784-256-256-10 steps (batch 64 SGD-momentum, batch 512 Adam) and the Adam step over
100M float32 parameters in 200 tensors, that last one also as a fraction of the device's copy
bandwidth (bytes the step must move, 28 per parameter, over the rate a device-to-device copy
reaches). PyTorch's columns need a CUDA build of torch; without a GPU visible to CuPy the script
says so and measures nothing.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

from _worker import _torch_arrays, _with_weights, report_check

N_PARAMS, N_TENSORS = 100_000_000, 200
ADAM_BYTES_PER_PARAM = 28       # reads w, g, m, v and writes w, m, v: seven float32 arrays


def _median_seconds(fn, sync, repeats, warmup=3):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _rate(step, sync, seconds):
    """Median steps/s over five batches of about ``seconds`` each."""
    per_step = _median_seconds(step, sync, 5, warmup=10)
    batch = max(3, int(seconds / per_step))
    return statistics.median(batch / _median_seconds(lambda: [step() for _ in range(batch)],
                                                     sync, 1, warmup=0) for _ in range(5))


def ours_adam(ctx):
    from trainer_cli import nd, optimizer
    size = N_PARAMS // N_TENSORS
    weights = [nd.random.normal(shape=(size,), ctx=ctx) for _ in range(N_TENSORS)]
    grads = [nd.random.normal(shape=(size,), ctx=ctx) for _ in range(N_TENSORS)]
    updater = optimizer.get_updater(optimizer.create("adam", learning_rate=1e-3))
    indices = list(range(N_TENSORS))
    return _with_weights(lambda: updater(indices, grads, weights),
                         lambda: [w.asnumpy() for w in weights],
                         lambda: [g.asnumpy() for g in grads], rule="mxnet")


def torch_adam():
    import torch
    size = N_PARAMS // N_TENSORS
    ps = [torch.nn.Parameter(torch.randn(size, device="cuda")) for _ in range(N_TENSORS)]
    for p in ps:
        p.grad = torch.randn(size, device="cuda")
    return _with_weights(torch.optim.Adam(ps, lr=1e-3, fused=True).step,
                         lambda: _torch_arrays(ps), lambda: _torch_arrays(p.grad for p in ps),
                         rule="torch")


ADAM = ("adam", {"learning_rate": 1e-3})


def copy_bandwidth(cupy, sync):
    """Bytes per second a device-to-device copy of 1 GiB moves, counting reads and writes."""
    src = cupy.ones(1 << 28, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    seconds = _median_seconds(lambda: cupy.copyto(dst, src), sync, 10)
    return 2 * src.nbytes / seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter batches")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    import trainer_cli
    if not trainer_cli.num_gpus():
        print("no GPU visible to CuPy: nothing measured (install the 'gpu' extra on a GPU machine)")
        return 0
    import cupy
    ctx = trainer_cli.gpu(0)
    sync_ours = cupy.cuda.Device().synchronize
    try:
        import torch
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False
    sync_torch = torch.cuda.synchronize if has_torch else None
    seconds = 0.2 if args.quick else 1.0
    rows = []
    # The CPU benchmark's MLP steps (benchmarks/_worker.py), on the GPU.
    from _worker import MLP_CASES, Gluon, Torch
    ours_lib, torch_lib = Gluon("trainer_cli"), Torch() if has_torch else None
    for case in ("mlp_sgd_b64", "mlp_adam_b512"):
        batch, name, params = MLP_CASES[case]
        checks = {}
        step = ours_lib.mlp_step(batch, name, params, ctx=ctx)
        checks["ours"] = report_check("ours " + case, step, sync_ours)
        ours = _rate(step, sync_ours, seconds)
        peer = None
        if has_torch:
            step = torch_lib.mlp_step(batch, name, params, device="cuda")
            checks["torch"] = report_check("torch " + case, step, sync_torch)
            peer = _rate(step, sync_torch, seconds)
        rows.append({"case": "MLP 784-256-256-10, batch %d, %s" % (batch, name), "unit": "steps/s",
                     "ours": ours, "torch": peer,
                     "ratio": None if peer is None else ours / peer, "check": checks})
    step = ours_adam(ctx)
    checks = {"ours": report_check("ours adam 100M", step, sync_ours, ADAM)}
    ours = _median_seconds(step, sync_ours, 10)
    peer = None
    if has_torch:
        step = torch_adam()
        checks["torch"] = report_check("torch adam 100M", step, sync_torch, ADAM)
        peer = _median_seconds(step, sync_torch, 10)
    bandwidth = copy_bandwidth(cupy, sync_ours)
    rows.append({"case": "Adam step, 100M float32 in 200 tensors", "unit": "ms",
                 "ours": ours * 1e3, "torch": None if peer is None else peer * 1e3,
                 "ratio": None if peer is None else peer / ours,
                 "copy_bandwidth_fraction": ADAM_BYTES_PER_PARAM * N_PARAMS / ours / bandwidth,
                 "check": checks})
    report = {"device": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
              "copy_bandwidth_GBps": bandwidth / 1e9, "cases": rows}
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return 0
    print("%s, device copy %.0f GB/s (read + write)" % (report["device"], bandwidth / 1e9))
    print("| case | unit | ours | PyTorch | ours vs PyTorch | of copy bandwidth |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        fraction = r.get("copy_bandwidth_fraction")
        print("| %s | %s | %.2f | %s | %s | %s |" % (
            r["case"], r["unit"], r["ours"], "-" if r["torch"] is None else "%.2f" % r["torch"],
            "-" if r["ratio"] is None else "%.2fx" % r["ratio"],
            "-" if fraction is None else "%.0f%%" % (100 * fraction)))
    # report_check raised on a failed check, so every row printed passed it.
    print("Every step was checked before timing (it changes the weights and keeps them finite; "
          "an Adam row equals the reference rule's step): %s"
          % "; ".join("%s: %s" % (r["case"], ", ".join(r["check"])) for r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
