"""Where a convolutional step's time goes: the step with the numba kernels against the NumPy
path, and its GEMMs alone, on one thread, in process CPU time (steadier than wall time on a
machine shared with other work), with the kernel (system) time and page faults per step that
glibc's defaults would cost (``trainer_cli._malloc``; run with ``TRAINER_MALLOC_TUNE=0`` to see
them).

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_conv.py            # LeNet b64
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_conv.py --case cifar_step --steps 3
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_conv.py --layers   # Winograd vs im2col

``--layers`` times one 3x3 convolution layer's forward and backward pass, with bias, through
Winograd's F(2x2, 3x3) and through im2col (``trainer_cli.ndarray.winograd``), for the shapes its
choice of algorithm was measured on.
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
    # (M, K, N, stacked, calls) of forward W @ cols, weight gradient G @ cols.T, column gradient
    # W.T @ G: ``calls`` matmuls of ``stacked`` matrices each
    "lenet_step": {"conv1 (32x9 @ 9x43264)": (32, 9, 43264, 1, 1),
                   "conv2 by Winograd, per piece of 6-7 images (16 x 64x32 @ 32x230), x10":
                   (64, 32, 230, 16, 10)},
    "cifar_step": {"conv 64->64 by Winograd, per image (16 x 64x64 @ 64x256), x32":
                   (64, 64, 256, 16, 32)},
}


def gemms(case, repeats):
    import numpy as np
    rng = np.random.default_rng(0)
    out = {}
    for name, (m, k, n, stacked, calls) in GEMMS[case].items():
        w = rng.random((stacked, m, k), np.float32)
        cols = rng.random((stacked, k, n), np.float32)
        g = rng.random((stacked, m, n), np.float32)
        wt, colst = w.transpose(0, 2, 1), cols.transpose(0, 2, 1)
        out[name] = [_best_cpu_ms(lambda: [w @ cols for _ in range(calls)], repeats),
                     _best_cpu_ms(lambda: [g @ colst for _ in range(calls)], repeats),
                     _best_cpu_ms(lambda: [wt @ g for _ in range(calls)], repeats)]
    return out


LAYERS = [
    # batch, input channels, filters, height = width, padding
    (32, 16, 16, 32, 1), (32, 64, 64, 32, 1), (32, 32, 32, 16, 1), (32, 64, 64, 16, 1),
    (32, 64, 64, 8, 1), (32, 128, 128, 8, 1),
    (64, 32, 64, 13, 0), (64, 64, 64, 13, 0),            # 11x11 outputs (LeNet's conv2: the first)
    (32, 64, 64, 7, 1), (32, 128, 128, 7, 1), (32, 256, 256, 7, 1), (32, 128, 128, 15, 0),
    # at and below winograd.MIN_CHANNELS, and small odd sizes (tiles mostly spare)
    (32, 8, 8, 32, 1), (32, 8, 16, 16, 1), (64, 8, 8, 13, 0), (32, 3, 64, 32, 1),
    (64, 1, 32, 28, 0), (32, 16, 16, 7, 1), (32, 32, 32, 5, 1), (32, 64, 64, 5, 1),
    (32, 64, 64, 3, 1), (32, 256, 256, 3, 1), (32, 64, 64, 3, 0),   # 3x3 and 1x1 outputs
]


def layers(rounds):
    """{shape: (Winograd ms, im2col ms)}, the best of ``rounds`` interleaved rounds each."""
    import numpy as np
    from trainer_cli import autograd, nd
    from trainer_cli.ndarray import winograd

    rng = np.random.default_rng(0)
    out = {}
    for n, c, f, hw, pad in LAYERS:
        x, w, b = (nd.array(rng.random(shape, np.float32))
                   for shape in ((n, c, hw, hw), (f, c, 3, 3), (f,)))
        for a in (x, w, b):
            a.attach_grad()

        def step():
            with autograd.record():
                y = nd.Convolution(x, w, b, kernel=(3, 3), pad=(pad, pad), num_filter=f)
            y.backward()
        best = {}
        for _ in range(rounds):
            for name, floor in (("winograd", 1), ("im2col", 1 << 30)):
                winograd.MIN_CHANNELS, winograd.WASTE = floor, float("inf")
                winograd.MAX_FILTERS_PER_TILE = float("inf")
                best[name] = min(best.get(name, float("inf")), _best_cpu_ms(step, 1))
        out[(n, c, f, hw, pad)] = (best["winograd"], best["im2col"])
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", default="lenet_step", choices=sorted(GEMMS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed batch")
    parser.add_argument("--layers", action="store_true",
                        help="one layer's forward and backward: Winograd against im2col")
    args = parser.parse_args(argv)
    if args.layers:
        print("one 3x3 layer, forward + backward, process CPU ms (best of %d rounds):"
              % args.rounds)
        print("  batch  in  out  size pad   winograd  im2col  im2col/winograd")
        for (n, c, f, hw, pad), (ms_w, ms_i) in layers(args.rounds).items():
            print("  %5d %4d %4d %4d %3d %10.2f %7.2f %8.2fx" % (n, c, f, hw, pad, ms_w, ms_i,
                                                                 ms_i / ms_w))
        return 0
    from _worker import Gluon, report_check
    from trainer_cli import _jit, _malloc

    lib = Gluon("ours")
    steps, checks = {}, {}
    for mode in ("kernels", "numpy"):
        _jit._numba = None if mode == "kernels" else False
        steps[mode] = getattr(lib, args.case)()
        checks[mode] = report_check("%s (%s)" % (args.case, mode), steps[mode], lib.sync)
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
    # report_check raised on a failed check, so both passed.
    print("checked before timing (a step changes the weights, keeps them finite): %s passed"
          % ", ".join(checks))
    print("GEMMs alone, process CPU ms (forward, weight gradient, column gradient):")
    for name, ms in gemms(args.case, 3 if args.case == "cifar_step" else 10).items():
        print("  %s: %.2f, %.2f, %.2f" % ((name,) + tuple(ms)))
    return 0


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
