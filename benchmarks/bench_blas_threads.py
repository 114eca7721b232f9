"""Where a second BLAS thread starts to pay: the bare training step of
``configs/mlp_synthetic.yaml`` (or the model ``-o`` makes of it) on one and on two threads, taking
turns in one process, with the ``layer_work`` that ``threads: auto`` reads (the batch times the
largest parameter; below ``run.threads.SMALL_LAYER_WORK`` auto keeps one thread).

    python benchmarks/bench_blas_threads.py -o data.batch_size=128
    python benchmarks/bench_blas_threads.py -o 'model.args.hidden=[256,256]' -o data.batch_size=64

Prints the median step time on each count and the median of the rounds' own ratios (two
threads' time over one thread's: below 1 the second thread pays).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIG = os.path.join(ROOT, "configs", "mlp_synthetic.yaml")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=100, help="steps per timed stretch")
    args = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    import numpy

    from trainer_cli import _jit, autograd, nd
    from trainer_cli import random as _random
    from trainer_cli.config import load_config
    from trainer_cli.run import threads
    from trainer_cli.run.build import build

    _jit.warm_up()
    config = load_config(CONFIG, args.overrides)
    _random.seed(config.seed)
    parts = build(config, CONFIG)
    net, loss, trainer = parts.net, parts.loss, parts.trainer
    x, y = parts.train.x, parts.train.y
    batch = config.data.batch_size
    rng = numpy.random.RandomState(config.seed)

    def step():
        idx = rng.randint(0, len(x), batch)
        with autograd.record():
            out = loss(net(nd.array(x[idx])), nd.array(y[idx]))
        out.backward()
        trainer.step(batch)

    from _worker import check_loop, gluon_weights
    check = check_loop("training step", step, gluon_weights(net))
    for _ in range(50):
        step()
    times = {1: [], 2: []}
    for _ in range(args.rounds):
        for count in (1, 2):
            restore = threads.apply(threads.ThreadPlan(count, "benchmark"))
            try:
                for _ in range(10):
                    step()
                start = time.perf_counter()
                for _ in range(args.steps):
                    step()
                times[count].append((time.perf_counter() - start) / args.steps * 1e6)
            finally:
                restore()
    work = threads.layer_work(net.collect_params().values(), batch)
    ratio = statistics.median(b / a for a, b in zip(times[1], times[2]))
    print("layer_work %s (auto keeps one thread below %d); step %.1f us on 1 thread, %.1f us on "
          "2; 2 over 1: %.2f; load average %.1f"
          % (work, threads.SMALL_LAYER_WORK, statistics.median(times[1]),
             statistics.median(times[2]), ratio, os.getloadavg()[0]))
    print("checked before timing (a step changes the weights, keeps them finite): %s"
          % json.dumps(check))
    return 0


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
