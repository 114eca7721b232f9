"""Throughput of the gradient-compression codecs (trainer_cli.kvstore.compression).

    python benchmarks/bench_compression.py            # 10M float32 values, CPU, one thread
    python benchmarks/bench_compression.py --json     # the same, as JSON
    python benchmarks/bench_compression.py --gpu      # CuPy instead of NumPy (needs a GPU)

Reports the median over --repeats runs of each operation, in millions of values per second:
2bit quantize+pack (error feedback included), 2bit unpack, 1bit quantize+pack, 1bit unpack.
Output buffers are reused across runs, as a KVStore would; the residual is reset between runs,
outside the timed region.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

# One thread: set before numpy loads its BLAS (the codecs themselves use no threads).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy  # noqa: E402

from trainer_cli.kvstore.compression import (  # noqa: E402
    dequantize_1bit,
    dequantize_2bit,
    quantize_1bit,
    quantize_2bit,
)

from _worker import check_round_trip  # noqa: E402

TARGET_M_PER_S = 500.0


def _pin_to_one_core():
    if hasattr(os, "sched_setaffinity"):
        try:
            cpu = min(os.sched_getaffinity(0))
            os.sched_setaffinity(0, {cpu})
            return cpu
        except OSError:
            pass
    return None


def _timer(xp):
    if xp is numpy:
        return time.perf_counter
    def synced():
        xp.cuda.get_current_stream().synchronize()
        return time.perf_counter()
    return synced


def _median_seconds(fn, reset, repeats, clock):
    fn()  # warm-up: tables, allocator, kernel compilation
    times = []
    for _ in range(repeats):
        reset()
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times), times


def run(n: int, repeats: int, threshold: float, use_gpu: bool, seed: int):
    if use_gpu:
        import cupy as xp
    else:
        xp = numpy
    rng = numpy.random.default_rng(seed)
    grad_host = (rng.standard_normal(n) * 0.5).astype(numpy.float32)
    grad = xp.asarray(grad_host)
    residual = xp.zeros(n, dtype=xp.float32)
    decoded = xp.empty(n, dtype=xp.float32)
    # Each codec's round trip is checked before anything is timed.
    checks = {"2bit": check_round_trip(quantize_2bit, dequantize_2bit, grad, threshold,
                                       (-threshold, 0.0, threshold)),
              "1bit": check_round_trip(quantize_1bit, dequantize_1bit, grad, threshold,
                                       (-1.0, 1.0))}
    packed2 = quantize_2bit(grad, residual, threshold)
    packed1 = quantize_1bit(grad, residual, threshold)
    clock = _timer(xp)

    def reset_residual():
        residual.fill(0)

    def nothing():
        pass

    cases = [
        ("2bit quantize+pack", lambda: quantize_2bit(grad, residual, threshold, out=packed2),
         reset_residual, packed2.nbytes),
        ("2bit unpack", lambda: dequantize_2bit(packed2, n, threshold, out=decoded),
         nothing, packed2.nbytes),
        ("1bit quantize+pack", lambda: quantize_1bit(grad, residual, threshold, out=packed1),
         reset_residual, packed1.nbytes),
        ("1bit unpack", lambda: dequantize_1bit(packed1, n, threshold, out=decoded),
         nothing, packed1.nbytes),
    ]
    results = []
    for name, fn, reset, wire_bytes in cases:
        median, times = _median_seconds(fn, reset, repeats, clock)
        rate = n / median / 1e6
        results.append({
            "name": name,
            "median_ms": median * 1e3,
            "min_ms": min(times) * 1e3,
            "m_values_per_s": rate,
            "wire_bytes": int(wire_bytes),
            "wire_fraction_of_float32": wire_bytes / (4 * n),
            "meets_target": rate >= TARGET_M_PER_S,
            "check": checks[name.split()[0]],
        })
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000_000, help="values per gradient")
    parser.add_argument("--repeats", type=int, default=9, help="timed runs per operation")
    parser.add_argument("--threshold", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--gpu", action="store_true", help="run on CuPy (GPU 0)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)

    cpu = None if args.gpu else _pin_to_one_core()
    results = run(args.n, args.repeats, args.threshold, args.gpu, args.seed)
    report = {
        "n": args.n,
        "repeats": args.repeats,
        "threshold": args.threshold,
        "backend": "cupy" if args.gpu else "numpy",
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "machine": platform.processor() or platform.machine(),
        "pinned_cpu": cpu,
        "target_m_values_per_s": TARGET_M_PER_S,
        "results": results,
    }
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    where = report["backend"] + (f", pinned to CPU {cpu}" if cpu is not None else "")
    print(f"{args.n:,} float32 values, median of {args.repeats} runs ({where})")
    print(f"{'operation':<20} {'M values/s':>11} {'median ms':>10} {'wire':>12}")
    for row in results:
        wire = f"1/{round(1 / row['wire_fraction_of_float32'])} of f32"
        mark = "" if row["meets_target"] else f"  (< {TARGET_M_PER_S:.0f} target)"
        print(f"{row['name']:<20} {row['m_values_per_s']:>11.0f} {row['median_ms']:>10.2f} "
              f"{wire:>12}{mark}")
    # check_round_trip raised on a failed check, so both codecs passed.
    print("checked before timing: each codec's decoded values plus its residual give the "
          "gradient back (max relative error %s)"
          % ", ".join("%s %.1e" % (row["name"].split()[0], row["check"]["max_rel_error"])
                      for row in results[::2]))
    return 0


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
