"""Issue 17's thread benchmark: ``configs/mlp_digits.yaml`` beside a competing CPU-bound process,
with the default thread choice (``threads: auto``) and with each fixed count.

    python benchmarks/bench_threads.py                 # 2 interleaved rounds, 1 competitor
    python benchmarks/bench_threads.py --rounds 3 --competitors 2 --json

Each run is a fresh ``trainer run`` process (as a user starts it) with ``-o threads=...``; the
figure is its training time (``elapsed_s`` of the JSON summary, without interpreter start-up), the
median over rounds, the settings taking turns within each round. The target: the default within
10% of the best fixed setting. Needs scikit-learn (the digits) and threadpoolctl.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIG = os.path.join(ROOT, "configs", "mlp_digits.yaml")


def _train(setting, run_root):
    cmd = [sys.executable, "-c", "from trainer_cli.cli import main; main()", "run", CONFIG,
           "-o", "threads=%s" % setting, "--run-dir", run_root, "--json"]
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "TRAINER_NUM_THREADS"):
        env.pop(var, None)          # the run's own choice, as a user's shell would leave it
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit("trainer run failed: %s" % proc.stderr.strip()[-500:])
    summary = json.loads(proc.stdout)
    chosen = None
    log = os.path.join(summary["run_dir"], "train.log")
    with open(log, encoding="utf-8") as f:
        for line in f:
            if "threads: " in line:
                chosen = line.split("threads: ", 1)[1].strip()
                break
    return {"elapsed_s": summary["elapsed_s"], "wall_s": wall, "threads": chosen,
            "val_accuracy": summary["metrics"].get("val_accuracy")}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--competitors", type=int, default=1,
                        help="CPU-bound processes running beside the training (default 1)")
    parser.add_argument("--settings", nargs="+", default=["auto", "1", "2"])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.competitors)]
    results = {s: [] for s in args.settings}
    load_before = os.getloadavg()
    try:
        time.sleep(2)
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(args.rounds):
                order = args.settings[r % len(args.settings):] + args.settings[:r % len(args.settings)]
                for setting in order:
                    results[setting].append(_train(setting, os.path.join(tmp, "r%d" % r)))
                    print("round %d, threads=%s: %.1f s" % (r + 1, setting,
                                                           results[setting][-1]["elapsed_s"]),
                          file=sys.stderr, flush=True)
    finally:
        for proc in busy:
            proc.kill()
            proc.wait()
    medians = {s: statistics.median(x["elapsed_s"] for x in v) for s, v in results.items()}
    fixed = {s: m for s, m in medians.items() if s != "auto"}
    best = min(fixed, key=fixed.get) if fixed else None
    ratio = medians["auto"] / fixed[best] if best and "auto" in medians else None
    report = {"command": " ".join(["python", "benchmarks/bench_threads.py"] + sys.argv[1:]),
              "cores": len(os.sched_getaffinity(0)), "competitors": args.competitors,
              "load_average_before": [round(x, 2) for x in load_before],
              "median_elapsed_s": medians, "best_fixed": best, "auto_over_best": ratio,
              "met": None if ratio is None else ratio <= 1.10, "runs": results}
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print("| threads | training time (median of %d), s | chosen |" % args.rounds)
        print("|---|---|---|")
        for s in args.settings:
            print("| %s | %.1f | %s |" % (s, medians[s], results[s][0]["threads"]))
        if ratio is not None:
            print("\nauto / best fixed (%s): %.2f (target <= 1.10: %s)"
                  % (best, ratio, "met" if ratio <= 1.10 else "NOT met"))
    return 0


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
