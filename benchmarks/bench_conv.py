"""Where a convolutional step's time goes: the step with the numba kernels against the NumPy
path, and its GEMMs alone, on one thread, in process CPU time (steadier than wall time on a
machine shared with other work), with the kernel (system) time and page faults per step that
glibc's defaults would cost (``trainer_cli._malloc``; run with ``TRAINER_MALLOC_TUNE=0`` to see
them).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_conv.py            # LeNet b64
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_conv.py --case cifar_step --steps 3
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def _best_cpu_ms(fn, repeats):
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best * 1e3


GEMMS = {
    # (M, K, N) of forward W @ cols, weight gradient G @ cols.T, column gradient W.T @ G
    "lenet_step": {"conv1 (32x9 @ 9x43264)": (32, 9, 43264),
                   "conv2 (64x288 @ 288x7744)": (64, 288, 7744)},
    "cifar_step": {"conv 64->64 (64x576 @ 576x32768)": (64, 576, 32768)},
}


def gemms(case, repeats):
    import numpy as np
    rng = np.random.default_rng(0)
    out = {}
    for name, (m, k, n) in GEMMS[case].items():
        w = rng.random((m, k), np.float32)
        cols = rng.random((k, n), np.float32)
        g = rng.random((m, n), np.float32)
        out[name] = [_best_cpu_ms(lambda: w @ cols, repeats),
                     _best_cpu_ms(lambda: g @ cols.T, repeats),
                     _best_cpu_ms(lambda: w.T @ g, repeats)]
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="lenet_step", choices=sorted(GEMMS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed batch")
    args = parser.parse_args(argv)
    from _worker import Gluon
    from trainer_cli import _jit, _malloc

    lib = Gluon("ours")
    steps = {}
    for mode in ("kernels", "numpy"):
        _jit._numba = None if mode == "kernels" else False
        steps[mode] = getattr(lib, args.case)()
        for _ in range(3):
            steps[mode]()
    times = {mode: [] for mode in steps}
    usage = {mode: [0.0, 0] for mode in steps}      # system seconds, minor page faults
    for _ in range(args.rounds):            # interleaved: load falls on both alike
        for mode, step in steps.items():
            _jit._numba = None if mode == "kernels" else False
            before = resource.getrusage(resource.RUSAGE_SELF)
            start = time.process_time()
            for _ in range(args.steps):
                step()
            times[mode].append((time.process_time() - start) / args.steps * 1e3)
            after = resource.getrusage(resource.RUSAGE_SELF)
            usage[mode][0] += after.ru_stime - before.ru_stime
            usage[mode][1] += after.ru_minflt - before.ru_minflt
    _jit._numba = None
    print("%s, process CPU ms per step (min / median of %d rounds of %d steps), and of it the "
          "system time and minor page faults per step (malloc thresholds %s):"
          % (args.case, args.rounds, args.steps, "set" if _malloc.tune() else "glibc's"))
    total = args.rounds * args.steps
    for mode, values in times.items():
        values.sort()
        print("  %-8s %.2f / %.2f   system %.2f ms, %d faults"
              % (mode, values[0], values[len(values) // 2], usage[mode][0] / total * 1e3,
                 usage[mode][1] // total))
    print("GEMMs alone, process CPU ms (forward, weight gradient, column gradient):")
    for name, ms in gemms(args.case, 3 if args.case == "cifar_step" else 10).items():
        print("  %s: %.2f, %.2f, %.2f" % ((name,) + tuple(ms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
