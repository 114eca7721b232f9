"""Issue 17's checkpoint benchmark: a checkpoint of a 100M-parameter model with Adam states
(``run.checkpoint.save_checkpoint``: params.npz, trainer.states, meta.json with each file's
SHA-256, fsyncs, the atomic rename and ``latest``) against writing the same arrays (weights, both
Adam moments) with ``numpy.save`` into the same folder, with and without an fsync of each file.

    python benchmarks/bench_checkpoint.py                 # 100M parameters, 3 interleaved rounds
    python benchmarks/bench_checkpoint.py --params 20 --rounds 5 --json

The model is ten square Dense layers; one Adam step creates the states.
Figures are medians over rounds (after one uncounted round, the three taking turns); the target is the checkpoint at most 1.5x ``numpy.save``.
Needs about 4x the model's size in memory (weights, gradients, two moments).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


def build(million_params):
    from trainer_cli import gluon, nd
    from trainer_cli.gluon import nn

    width = int(math.sqrt(million_params * 1e6 / 10))
    net = nn.HybridSequential()
    for _ in range(10):
        net.add(nn.Dense(width, in_units=width, use_bias=False))
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3})
    from trainer_cli import autograd

    with autograd.record():
        loss = net(nd.ones((1, width))).sum()
    loss.backward()
    trainer.step(1)     # creates the Adam states
    count = sum(p.data().size for p in net.collect_params().values())
    return net, trainer, count, nd


def ours(net, trainer, folder, step):
    from trainer_cli.run import checkpoint

    os.makedirs(os.path.join(folder, "checkpoints"), exist_ok=True)
    start = time.perf_counter()
    checkpoint.save_checkpoint(folder, step, net, trainer, {}, {"bench": True})
    return time.perf_counter() - start


def numpy_save(arrays, folder, fsync):
    os.makedirs(folder, exist_ok=True)
    start = time.perf_counter()
    for i, a in enumerate(arrays):
        path = os.path.join(folder, "a%d.npy" % i)
        with open(path, "wb") as f:
            numpy.save(f, a)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
    return time.perf_counter() - start


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", type=float, default=100, help="millions of parameters (100)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where to write (default: a temp folder here)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    net, trainer, count, nd = build(args.params)
    from trainer_cli.ndarray.interop import raw

    arrays = [raw(p.data()) for p in net.collect_params().values()]
    for updater in trainer._updaters:
        for state in updater.states.values():
            arrays.extend(raw(s) for s in (state if isinstance(state, (tuple, list)) else [state]))
    nbytes = sum(a.nbytes for a in arrays)
    root = tempfile.mkdtemp(prefix="bench-ckpt-", dir=args.dir or HERE)
    times = {"checkpoint": [], "numpy.save": [], "numpy.save+fsync": []}
    def timed(name, step):
        if name == "checkpoint":
            seconds = ours(net, trainer, os.path.join(root, "run"), step)
            shutil.rmtree(os.path.join(root, "run", "checkpoints", "step-%d" % step))
        else:
            seconds = numpy_save(arrays, os.path.join(root, name), name.endswith("fsync"))
            shutil.rmtree(os.path.join(root, name))
        return seconds

    # A first round uncounted (the first writes into fresh page-cache memory of a VM are slow,
    # whoever makes them), then rounds in turn-taking order.
    names = list(times)
    try:
        for r in range(args.rounds + 1):
            order = names if r % 2 else names[::-1]
            for name in order:
                seconds = timed(name, r + 1)
                if r:
                    times[name].append(seconds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {"parameters": count, "bytes": nbytes, "seconds": med,
              "ratio_vs_numpy_save": med["checkpoint"] / med["numpy.save"],
              "ratio_vs_numpy_save_fsync": med["checkpoint"] / med["numpy.save+fsync"],
              "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print("%d parameters + Adam states: %.2f GB" % (count, nbytes / 1e9))
    for k, v in med.items():
        print("  %-18s %6.2f s  (%.2f GB/s)" % (k, v, nbytes / v / 1e9))
    print("checkpoint / numpy.save: %.2fx, / numpy.save+fsync: %.2fx (target <= 1.5x: %s); "
          "load average %.1f" % (result["ratio_vs_numpy_save"], result["ratio_vs_numpy_save_fsync"],
                                 "met" if result["ratio_vs_numpy_save"] <= 1.5 else "NOT met",
                                 result["load_average"]))


if __name__ == "__main__":
    main()
