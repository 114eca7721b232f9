"""Where the time of the sparse embedding step goes (``bench_sparse.py``'s SGD case: a 1M x 64
table, 1,000 distinct ids a batch, lazy SGD): each phase timed on its own over many steps, by
this process's CPU time, one BLAS thread.

    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python benchmarks/profile_sparse_step.py [--steps N]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import numpy as np

from trainer_cli import autograd, gluon, nd


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--vocab", type=int, default=1_000_000)
    args = parser.parse_args(argv)
    dim, rows = 64, 1000
    rng = np.random.default_rng(0)
    batches = [rng.choice(args.vocab, size=rows, replace=False) for _ in range(8)]
    coef = rng.standard_normal((rows, dim)).astype(np.float32)
    emb = gluon.nn.Embedding(args.vocab, dim, sparse_grad=True)
    emb.initialize()
    trainer = gluon.Trainer(emb.collect_params(), "sgd", {"learning_rate": 0.01})
    ids = [nd.array(b.astype(np.float32)) for b in batches]
    c = nd.array(coef)
    phases = {"record+lookup": [], "multiply": [], "sum": [], "exit record": [],
              "backward": [], "trainer.step": []}
    clock = time.process_time_ns

    def step(i, timed):
        t0 = clock()
        rec = autograd.record()
        rec.__enter__()
        e = emb(ids[i % 8])
        t1 = clock()
        m = e * c
        t2 = clock()
        y = m.sum()
        t3 = clock()
        rec.__exit__(None, None, None)
        t4 = clock()
        y.backward()
        t5 = clock()
        trainer.step(1)
        t6 = clock()
        if timed:
            for name, (a, b) in zip(phases, [(t0, t1), (t1, t2), (t2, t3), (t3, t4), (t4, t5),
                                             (t5, t6)]):
                phases[name].append((b - a) / 1e3)

    for i in range(50):
        step(i, False)
    start = clock()
    for i in range(args.steps):
        step(i, True)
    total = (clock() - start) / 1e3 / args.steps
    result = {"cpu": platform.processor() or platform.machine(), "numpy": np.__version__,
              "steps": args.steps, "step_us_including_timers": round(total, 1),
              "phases_median_us": {k: round(statistics.median(v), 1) for k, v in phases.items()},
              "phases_mean_us": {k: round(statistics.fmean(v), 1) for k, v in phases.items()}}
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
