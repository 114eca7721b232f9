"""What moves PyTorch's cost of a tiny training step on this machine: the same perceptron step
(``nn.Linear(4, 1)``, 8x4 batch, MSE, SGD: run_all.py's peer) in a fresh process per variant of
its environment, with the one-op calibration (``a + b`` on 1-element tensors) beside it.

    python benchmarks/bench_peer_env.py                 # every variant, 3 interleaved rounds
    python benchmarks/bench_peer_env.py --rounds 5 --json

Each variant starts from ``_calibrate.peer_env(1)`` (nothing inherited, one thread everywhere,
``torch.set_num_threads(1)``) and changes one thing: the thread settings, a variable trainer_cli
sets in its own process (``OPENBLAS_THREAD_TIMEOUT``), trainer_cli and numba loaded in the same
process first, glibc's malloc thresholds as trainer_cli sets them, flush-to-zero of denormals,
the kernels' CPU capability (``ATEN_CPU_CAPABILITY``). Figures are the best of ``--rounds``
(a loaded machine only ever adds time) of the median over a few batches of steps, in us per step
on the process's CPU clock and the wall clock; rounds take turns over the variants, so load from
elsewhere falls on all of them alike. A variant that moves the step by more than the rounds'
spread is a candidate for a peer that runs slow elsewhere. The clean variant's step is also split
into its parts (forward and loss; with ``zero_grad`` and ``backward``; with ``SGD.step``), to
compare between machines.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _calibrate  # noqa: E402

# name -> (extra environment (None: removed), code run "before:" or "after:" torch is imported,
# torch.set_num_threads's argument or None)
VARIANTS = {
    "clean, 1 thread": ({}, "", 1),
    "torch's defaults (no thread variables, no set_num_threads)":
        ({k: None for k in _calibrate.THREAD_VARS}, "", None),
    "OMP/MKL variables only (no set_num_threads)": ({}, "", None),
    "2 threads (variables and set_num_threads)":
        ({k: "2" for k in _calibrate.THREAD_VARS}, "", 2),
    "+ OPENBLAS_THREAD_TIMEOUT=20 (as trainer_cli sets it)":
        ({"OPENBLAS_THREAD_TIMEOUT": "20"}, "", 1),
    "trainer_cli (and numba) loaded first, same process":
        ({"PYTHONPATH": ROOT}, "before:import trainer_cli; from trainer_cli import nd, gluon, _jit; "
                               "_jit.warm_up()", 1),
    "glibc malloc thresholds as trainer_cli sets them":
        ({}, "before:import ctypes; m = ctypes.CDLL(None).mallopt; m(-3, 32 << 20); m(-1, 1 << 30)", 1),
    "torch.set_flush_denormal(True)": ({}, "after:torch.set_flush_denormal(True)", 1),
    "ATEN_CPU_CAPABILITY=avx2": ({"ATEN_CPU_CAPABILITY": "avx2"}, "", 1),
    "ATEN_CPU_CAPABILITY=default": ({"ATEN_CPU_CAPABILITY": "default"}, "", 1),
    "KMP/OMP wait policy passive (OMP_WAIT_POLICY=PASSIVE)": ({"OMP_WAIT_POLICY": "PASSIVE"}, "", 1),
}

CHILD = r'''
import json, sys, time, statistics
pre, threads = sys.argv[1], sys.argv[2]
sys.path.insert(0, %(here)r)
if pre.startswith("before:"):
    exec(pre[len("before:"):])
import torch
if pre.startswith("after:"):
    exec(pre[len("after:"):])
if threads != "none":
    torch.set_num_threads(int(threads))
import _calibrate
torch.manual_seed(0)
net = torch.nn.Linear(4, 1)
X, y = torch.rand(8, 4), torch.rand(8, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
mse = torch.nn.functional.mse_loss
def step():
    opt.zero_grad()
    mse(net(X), y).backward()
    opt.step()
import _worker
check = _worker.check_loop("torch perceptron", step,
                           lambda: _worker._torch_arrays(net.parameters()))
for _ in range(300):
    step()
wall, cpu = [], []
for _ in range(7):
    w, c = time.perf_counter(), time.process_time()
    for _ in range(400):
        step()
    wall.append((time.perf_counter() - w) / 400 * 1e6)
    cpu.append((time.process_time() - c) / 400 * 1e6)
def part(fn, n=400):      # the step's parts on the CPU clock: best of 5 loops
    best = float("inf")
    for _ in range(5):
        c = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - c) / n * 1e6)
    return best
def forward():
    mse(net(X), y)
def backward():
    opt.zero_grad()
    mse(net(X), y).backward()
parts = {"forward_us": part(forward), "forward_backward_us": part(backward), "step_us": part(step)}
rec = _calibrate.describe("torch", torch=torch)
print(json.dumps({"wall_us": statistics.median(wall), "cpu_us": statistics.median(cpu), "parts": parts,
                  "add_us": rec["calibration_us"]["torch"]["min_us"],
                  "numpy_add_us": rec["calibration_us"]["numpy"]["min_us"],
                  "threads": rec["torch"]["threads"], "capability": rec["torch"].get("cpu_capability"),
                  "loaded_of_ours": rec["loaded_of_ours"], "env": rec["env"], "check": check}))
''' % {"here": HERE}


def run_variant(name, timeout=300):
    extra, pre, threads = VARIANTS[name]
    env = _calibrate.peer_env(1)
    for key, value in extra.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    proc = subprocess.run([sys.executable, "-c", CHILD, pre, str(threads).lower()], env=env,
                          capture_output=True, text=True, timeout=timeout, cwd="/")
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--only", nargs="+", metavar="N", type=int,
                    help="variant numbers to run (0 is the clean baseline, always run)")
    args = ap.parse_args(argv)
    names = list(VARIANTS)
    if args.only:
        names = [names[0]] + [names[i] for i in args.only if 0 < i < len(names)]
    load = os.getloadavg()
    got = {name: [] for name in names}
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            got[name].append(run_variant(name))
            print("round %d: %s: %s" % (r + 1, name, json.dumps(
                {k: v for k, v in got[name][-1].items() if k != "env"})), file=sys.stderr,
                flush=True)
    summary = {}
    for name, runs in got.items():
        ok = [x for x in runs if "error" not in x]
        if not ok:
            summary[name] = {"error": runs[0]["error"]}
            continue
        summary[name] = {"cpu_us": min(x["cpu_us"] for x in ok),
                         "cpu_us_spread": max(x["cpu_us"] for x in ok) - min(x["cpu_us"] for x in ok),
                         "wall_us": min(x["wall_us"] for x in ok),
                         "add_us": min(x["add_us"] for x in ok),
                         "numpy_add_us": min(x["numpy_add_us"] for x in ok),
                         "parts_us": {k: min(x["parts"][k] for x in ok) for k in ok[0]["parts"]},
                         "threads": ok[0]["threads"], "capability": ok[0]["capability"],
                         "loaded_of_ours": ok[0]["loaded_of_ours"], "env": ok[0]["env"]}
    report = {"command": " ".join(["python", "benchmarks/bench_peer_env.py"] + sys.argv[1:]),
              "load_average_before": [round(v, 2) for v in load],
              "load_average_after": [round(v, 2) for v in os.getloadavg()],
              "cpu": _calibrate.cpu(), "variants": summary, "runs": got}
    if args.json:
        json.dump(report, sys.stdout, indent=1)
        print()
        return 0
    base = summary[names[0]].get("cpu_us")
    print("%s; load average %s before, %s after" % (
        report["cpu"]["model"], report["load_average_before"], report["load_average_after"]))
    print("%-60s %9s %9s %7s %8s %9s %4s %s" % ("variant", "cpu us", "spread", "x base",
                                               "wall us", "add us", "thr", "capability"))
    for name, s in summary.items():
        if "error" in s:
            print("%-60s error: %s" % (name, s["error"]))
            continue
        print("%-60s %9.1f %9.1f %7.2f %8.1f %9.2f %4s %s" % (
            name[:60], s["cpu_us"], s["cpu_us_spread"], s["cpu_us"] / base, s["wall_us"],
            s["add_us"], s["threads"], s["capability"]))
    p = summary[names[0]].get("parts_us")
    if p:
        print("clean, 1 thread, the step's parts (CPU clock, best loop): forward + loss %.1f us, "
              "+ zero_grad and backward %.1f us, + SGD step %.1f us"
              % (p["forward_us"], p["forward_backward_us"], p["step_us"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
