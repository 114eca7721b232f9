"""The GPU benchmark: the training steps on CuPy beside PyTorch (eager) on the same GPU.

    python benchmarks/bench_gpu.py [--quick] [--rounds N] [--json]
    python benchmarks/bench_gpu.py --dry-run     # no device needed: each side's process starts,
                                                 # loads its libraries, records itself, stops

Cases: the MLP 784-256-256-10 steps (batch 64 SGD-momentum, batch 512 Adam) and the Adam step over
100M float32 parameters in 200 tensors, that last one also as a fraction of the device's copy
bandwidth (bytes the step must move, 28 per parameter, over the rate a device-to-device copy
reaches).

Each side (ours, PyTorch) runs in a process of its own, started with ``_calibrate.peer_env``
(nothing of this shell's thread, allocator or tuning variables, nor of ours, reaches it; the
thread variables set to ``--threads`` for both), ``--rounds`` times in alternating order; a
figure is the median over the rounds, a ratio the median of each round's own ratio. Every process
records its machine, builds and a one-op calibration on the CPU and on the GPU (the launch cost of
``a + b`` on two 1-element device arrays), printed under the table, so that a side running slow
shows. Each step is checked before it is timed (``_worker.check_step``). PyTorch's columns need a
CUDA build of torch; without a GPU visible to a side, that side says so and measures nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _calibrate  # noqa: E402  (benchmarks/ is not a package)

N_PARAMS, N_TENSORS = 100_000_000, 200
ADAM_BYTES_PER_PARAM = 28       # reads w, g, m, v and writes w, m, v: seven float32 arrays
ADAM = ("adam", {"learning_rate": 1e-3})
MLP_CASES = ("mlp_sgd_b64", "mlp_adam_b512")
SIDES = ("ours", "torch")
# ours over PyTorch eager; the Adam row is PyTorch's time over ours (higher is better for both)
TARGETS = {"mlp_sgd_b64": 1.5, "mlp_adam_b512": 1.5, "adam_100m": 1.0}


# ----------------------------------------------------------------------------- one side's process
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


def _ours_adam(ctx):
    from _worker import _with_weights
    from trainer_cli import nd, optimizer
    size = N_PARAMS // N_TENSORS
    weights = [nd.random.normal(shape=(size,), ctx=ctx) for _ in range(N_TENSORS)]
    grads = [nd.random.normal(shape=(size,), ctx=ctx) for _ in range(N_TENSORS)]
    updater = optimizer.get_updater(optimizer.create("adam", learning_rate=1e-3))
    indices = list(range(N_TENSORS))
    return _with_weights(lambda: updater(indices, grads, weights),
                         lambda: [w.asnumpy() for w in weights],
                         lambda: [g.asnumpy() for g in grads], rule="mxnet")


def _torch_adam(torch):
    from _worker import _torch_arrays, _with_weights
    size = N_PARAMS // N_TENSORS
    ps = [torch.nn.Parameter(torch.randn(size, device="cuda")) for _ in range(N_TENSORS)]
    for p in ps:
        p.grad = torch.randn(size, device="cuda")
    return _with_weights(torch.optim.Adam(ps, lr=1e-3, fused=True).step,
                         lambda: _torch_arrays(ps), lambda: _torch_arrays(p.grad for p in ps),
                         rule="torch")


def _load_side(side, threads):
    """The side's library (``_worker``'s Gluon or Torch), its record, whether it sees a GPU, and
    the GPU's device, sync and 1-element arrays for the launch calibration (when it does)."""
    from _worker import Gluon, Torch
    if side == "torch":
        lib = Torch(threads)
        torch = lib.torch
        record = _calibrate.describe(side, torch=torch)
        record["extra"] = {"torch.version.cuda": torch.version.cuda}
        if not torch.cuda.is_available():
            return lib, record, None
        device = {"name": torch.cuda.get_device_name(0), "sync": torch.cuda.synchronize,
                  "pair": (torch.ones(1, device="cuda"), torch.ones(1, device="cuda")),
                  "where": "cuda"}
        return lib, record, device
    import trainer_cli
    lib = Gluon("trainer_cli")
    record = _calibrate.describe(side, nd=lib.nd)
    record["extra"] = {"trainer_cli": lib.version}
    if not trainer_cli.num_gpus():
        return lib, record, None
    import cupy
    record["extra"]["cupy"] = cupy.__version__
    ctx = trainer_cli.gpu(0)
    device = {"name": cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(),
              "sync": cupy.cuda.Device().synchronize,
              "pair": (lib.nd.ones((1,), ctx=ctx), lib.nd.ones((1,), ctx=ctx)), "where": ctx}
    return lib, record, device


def copy_bandwidth(cupy, sync):
    """Bytes per second a device-to-device copy of 1 GiB moves, counting reads and writes."""
    src = cupy.ones(1 << 28, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    seconds = _median_seconds(lambda: cupy.copyto(dst, src), sync, 10)
    return 2 * src.nbytes / seconds


def run_side(side, threads, quick, dry_run):
    """One side's figures as a dict (what its process prints as one JSON line)."""
    from _worker import MLP_CASES as SHAPES, report_check
    lib, record, device = _load_side(side, threads)
    out = {"side": side, "record": record, "results": {}, "checks": {}}
    if dry_run:
        out["dry_run"] = True
        out["sees_gpu"] = device is not None
        return out
    if device is None:
        out["unavailable"] = ("CuPy sees no GPU (install the 'gpu' extra on a GPU machine)"
                              if side == "ours" else "torch sees no CUDA device")
        return out
    sync = device["sync"]
    a, b = device["pair"]
    record["extra"]["device"] = device["name"]
    # What one op's launch costs this side's Python (not synchronized: the dispatch, not the GPU).
    record["calibration_us"]["gpu"] = dict(_calibrate.per_call_us(lambda: a + b),
                                           op="a + b, 1-element float32 on the GPU, unsynchronized")
    seconds = 0.2 if quick else 1.0
    for case in MLP_CASES:
        batch, name, params = SHAPES[case]
        if side == "torch":
            step = lib.mlp_step(batch, name, params, device="cuda")
        else:
            step = lib.mlp_step(batch, name, params, ctx=device["where"])
        out["checks"][case] = report_check("%s %s" % (side, case), step, sync)
        out["results"][case] = _rate(step, sync, seconds)
    step = _torch_adam(lib.torch) if side == "torch" else _ours_adam(device["where"])
    out["checks"]["adam_100m"] = report_check("%s adam 100M" % side, step, sync, ADAM)
    out["results"]["adam_100m_ms"] = _median_seconds(step, sync, 10) * 1e3
    del step
    if side == "ours":
        import cupy
        out["copy_bandwidth_GBps"] = copy_bandwidth(cupy, sync) / 1e9
    return out


# ----------------------------------------------------------------------------- the parent
def side_env(side, threads):
    """A side's environment: this one's less every tuning variable, the thread variables set to
    ``threads`` (both sides alike); ours gets this checkout on PYTHONPATH, PyTorch's none."""
    env = _calibrate.peer_env(threads)
    if side == "ours":
        env["NUMBA_NUM_THREADS"] = str(threads)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    else:
        env.pop("PYTHONPATH", None)
    return env


def measure_side(side, threads, quick, dry_run=False, python=None, timeout=300):
    """Start one side's process and return its dict, or ``{"side", "unavailable"}``."""
    cmd = [python or sys.executable, os.path.abspath(__file__), "--side", side,
           "--threads", str(threads)] + (["--quick"] if quick else []) + \
          (["--dry-run"] if dry_run else [])
    try:
        proc = subprocess.run(cmd, env=side_env(side, threads), cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"side": side, "unavailable": "%s: %s" % (type(exc).__name__, exc)}
    sys.stderr.write(proc.stderr)          # the checks' lines, and a failure's traceback
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"side": side, "unavailable": "exit %d: %s" % (proc.returncode, " | ".join(tail))}
    return json.loads(lines[-1])


def _paired(ours, peer, key, higher_better=True):
    """Median over the rounds holding both of ours/peer (peer/ours for a time)."""
    ratios = [(o[key] / p[key]) if higher_better else (p[key] / o[key])
              for o, p in zip(ours, peer) if key in o and key in p]
    return statistics.median(ratios) if ratios else None


def _median(runs, key):
    values = [r[key] for r in runs if key in r]
    return statistics.median(values) if values else None


def report(rounds, threads, quick):
    """Run the sides ``rounds`` times, alternating their order; the figures as a dict."""
    runs = {side: {} for side in SIDES}        # side: {round: results}
    notes, records, checks, bandwidths = [], {}, {}, []
    for r in range(rounds):
        for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
            got = measure_side(side, threads, quick)
            if "unavailable" in got:
                notes.append("%s, round %d: %s" % (side, r + 1, got["unavailable"]))
                continue
            runs[side][r] = got["results"]
            records.setdefault(side, got["record"])
            checks.setdefault(side, got["checks"])
            if "copy_bandwidth_GBps" in got:
                bandwidths.append(got["copy_bandwidth_GBps"])
    # A ratio pairs the rounds where both sides measured (a side that failed one drops it).
    both = sorted(set(runs["ours"]) & set(runs["torch"]))
    ours, peer = [runs["ours"][r] for r in both], [runs["torch"][r] for r in both]
    mine, theirs = list(runs["ours"].values()), list(runs["torch"].values())
    rows = []
    for case in MLP_CASES:
        rows.append({"case": case, "unit": "steps/s", "ours": _median(mine, case),
                     "torch": _median(theirs, case), "ratio": _paired(ours, peer, case),
                     "target": TARGETS[case]})
    rows.append({"case": "adam_100m", "unit": "ms", "ours": _median(mine, "adam_100m_ms"),
                 "torch": _median(theirs, "adam_100m_ms"),
                 "ratio": _paired(ours, peer, "adam_100m_ms", higher_better=False),
                 "target": TARGETS["adam_100m"]})
    bandwidth = statistics.median(bandwidths) if bandwidths else None
    if bandwidth and rows[-1]["ours"]:
        rows[-1]["copy_bandwidth_fraction"] = (ADAM_BYTES_PER_PARAM * N_PARAMS
                                               / (rows[-1]["ours"] / 1e3) / (bandwidth * 1e9))
    device = (records.get("ours") or records.get("torch") or {}).get("extra", {}).get("device")
    return {"device": device, "copy_bandwidth_GBps": bandwidth, "rounds": rounds,
            "all_rounds": {side: {str(r): v for r, v in runs[side].items()} for side in SIDES},
            "paired_rounds": len(both), "threads": threads, "quick": quick, "clock": "wall",
            "cases": rows, "checks": checks, "sides": [records[s] for s in SIDES if s in records],
            "notes": notes}


LABELS = {"mlp_sgd_b64": "MLP 784-256-256-10, batch 64, SGD momentum",
          "mlp_adam_b512": "MLP 784-256-256-10, batch 512, Adam",
          "adam_100m": "Adam step, 100M float32 in 200 tensors"}


def print_report(rep, out=sys.stdout):
    print("%s; device copy %s GB/s (read + write); median of %d rounds (%d paired), wall clock, "
          "%d CPU thread(s)" % (rep["device"] or "no device",
                               "%.0f" % rep["copy_bandwidth_GBps"] if rep["copy_bandwidth_GBps"]
                               else "-", rep["rounds"], rep["paired_rounds"], rep["threads"]),
          file=out)
    print("| case | unit | ours | PyTorch eager | ours vs PyTorch | target | of copy bandwidth |",
          file=out)
    print("|---|---|---|---|---|---|---|", file=out)
    for r in rep["cases"]:
        fraction = r.get("copy_bandwidth_fraction")
        ratio = r["ratio"]
        print("| %s | %s | %s | %s | %s | >= %.1fx: %s | %s |" % (
            LABELS[r["case"]], r["unit"], "-" if r["ours"] is None else "%.2f" % r["ours"],
            "-" if r["torch"] is None else "%.2f" % r["torch"],
            "-" if ratio is None else "%.2fx" % ratio, r["target"],
            "-" if ratio is None else ("met" if ratio >= r["target"] else "NOT met"),
            "-" if fraction is None else "%.0f%%" % (100 * fraction)), file=out)
    for line in _calibrate.summary_lines(rep["sides"]):
        print(line, file=out)
    # A failed check ended its side's process before timing: such a side is in the notes.
    for side, checks in rep["checks"].items():
        print("checked before timing (%s): %s" % (side, "; ".join(
            "%s %s" % (case, json.dumps(c)) for case, c in checks.items())), file=out)
    for note in rep["notes"]:
        print("note: " + note, file=out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter batches")
    parser.add_argument("--rounds", type=int, default=3,
                        help="processes per side, in alternating order (default 3)")
    parser.add_argument("--threads", type=int, default=1,
                        help="the CPU thread variables of both sides' processes (default 1)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--dry-run", action="store_true",
                        help="start each side's process, load and record it, measure nothing")
    parser.add_argument("--side", choices=SIDES, help=argparse.SUPPRESS)   # a side's process
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.threads < 1:
        parser.error("--rounds and --threads must be at least 1")
    if args.side:
        print(json.dumps(run_side(args.side, args.threads, args.quick, args.dry_run)))
        return 0
    if args.dry_run:
        got = [measure_side(side, args.threads, args.quick, dry_run=True) for side in SIDES]
        failed = [g for g in got if "unavailable" in g]
        if args.json:
            print(json.dumps(got, indent=1))
        else:
            for line in _calibrate.summary_lines([g["record"] for g in got if "record" in g]):
                print(line)
            for g in got:
                print("%s: %s" % (g["side"], g.get("unavailable") or
                                  ("loads; sees a GPU" if g["sees_gpu"] else
                                   "loads; sees no GPU")))
        return 1 if failed else 0
    rep = report(args.rounds, args.threads, args.quick)
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print_report(rep)
    return 0 if rep["paired_rounds"] else 1


if __name__ == "__main__":
    sys.exit(main())
