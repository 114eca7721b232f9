"""Issue 17's checkpoint benchmark: a checkpoint of a 100M-parameter model with Adam states
(params.npz, trainer.states, meta.json with each file's SHA-256, fsyncs, the atomic rename and
``latest``) against writing the same arrays (weights, both Adam moments) with ``numpy.save`` into
the same folder, with and without an fsync of each file.

    python benchmarks/bench_checkpoint.py                 # 100M parameters, 3 interleaved rounds
    python benchmarks/bench_checkpoint.py --params 20 --rounds 5 --json

A checkpoint this large is saved by ``trainer run`` in two parts (``run.checkpoint``): training
waits while ``begin_checkpoint`` writes the arrays' bytes (**pause**, the figure the target is
about), then ``PendingCheckpoint.finish`` computes the CRCs and SHA-256 from the files, fsyncs and
moves ``latest`` on a background thread while training goes on (**durable**: from the pause's
start until ``latest`` points at the checkpoint). **In steps** is what the checkpoint costs
training, all told: the wall time of the pause and the next ``--steps`` training steps (which run
beside the background part) less the same steps' time without a checkpoint.

The model is ten square Dense layers trained with Adam on batches of one row.
Figures are medians over rounds (after one uncounted round, the cases taking turns); the target
is the pause at most 1.5x ``numpy.save``. Needs about 5x the model's size in memory (weights,
gradients, two moments) plus the page cache's copy of the files.
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
    from trainer_cli import autograd, gluon, nd
    from trainer_cli.gluon import nn

    width = int(math.sqrt(million_params * 1e6 / 10))
    net = nn.HybridSequential()
    for _ in range(10):
        net.add(nn.Dense(width, in_units=width, use_bias=False))
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 1e-3})
    row = nd.ones((1, width))

    def step():
        with autograd.record():
            loss = net(row).sum()
        loss.backward()
        trainer.step(1)
        loss.asnumpy()

    step()     # creates the Adam states
    count = sum(p.data().size for p in net.collect_params().values())
    return net, trainer, count, step


def checkpoint_files(net, trainer):
    from trainer_cli.run import checkpoint

    return checkpoint.snapshot(net, trainer, {}, copy=False)


def ours(net, trainer, folder, step):
    """The pause and the time until ``latest`` moved, the two parts one after the other."""
    from trainer_cli.run import checkpoint

    os.makedirs(os.path.join(folder, "checkpoints"), exist_ok=True)
    start = time.perf_counter()
    pending = checkpoint.begin_checkpoint(folder, step, checkpoint_files(net, trainer),
                                          {"bench": True})
    pause = time.perf_counter() - start
    pending.finish()
    return pause, time.perf_counter() - start


def in_steps(net, trainer, train_step, folder, step, steps):
    """Wall time of a checkpoint's pause and ``steps`` training steps, the background part beside
    them (as ``trainer run`` does it); and whether that part ended before the steps did."""
    from trainer_cli.run import checkpoint
    from trainer_cli.run.background import BackgroundJob

    os.makedirs(os.path.join(folder, "checkpoints"), exist_ok=True)
    job = BackgroundJob()
    ended = []
    start = time.perf_counter()
    pending = checkpoint.begin_checkpoint(folder, step, checkpoint_files(net, trainer),
                                          {"bench": True})
    job.start(lambda: (pending.finish(), ended.append(time.perf_counter())))
    for _ in range(steps):
        train_step()
    seconds = time.perf_counter() - start
    job.wait()
    return seconds, ended[0] - start <= seconds


def bare_steps(train_step, steps):
    start = time.perf_counter()
    for _ in range(steps):
        train_step()
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
    ap.add_argument("--steps", type=int, default=8,
                    help="training steps timed after the pause (8)")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp folder here)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    net, trainer, count, train_step = build(args.params)
    from trainer_cli.ndarray.interop import raw

    arrays = [raw(p.data()) for p in net.collect_params().values()]
    for updater in trainer._updaters:
        for state in updater.states.values():
            arrays.extend(raw(s) for s in (state if isinstance(state, (tuple, list)) else [state]))
    nbytes = sum(a.nbytes for a in arrays)
    root = tempfile.mkdtemp(prefix="bench-ckpt-", dir=args.dir or HERE)
    times = {"pause": [], "durable": [], "numpy.save": [], "numpy.save+fsync": [],
             "steps": [], "pause+steps": []}
    finished_within = []

    def timed(name, step):
        run = os.path.join(root, "run")
        if name == "checkpoint":
            pause, durable = ours(net, trainer, run, step)
            times["pause"].append(pause)
            times["durable"].append(durable)
        elif name == "pause+steps":
            seconds, within = in_steps(net, trainer, train_step, run, step, args.steps)
            times[name].append(seconds)
            finished_within.append(within)
        elif name == "steps":
            times[name].append(bare_steps(train_step, args.steps))
        else:
            times[name].append(numpy_save(arrays, os.path.join(root, name),
                                          name.endswith("fsync")))
        shutil.rmtree(os.path.join(root, name if name.startswith("numpy") else "run"),
                      ignore_errors=True)

    # A first round uncounted (the first writes into fresh page-cache memory of a VM are slow,
    # whoever makes them), then rounds in turn-taking order.
    names = ["checkpoint", "numpy.save", "numpy.save+fsync", "steps", "pause+steps"]
    try:
        for r in range(args.rounds + 1):
            order = names if r % 2 else names[::-1]
            for name in order:
                timed(name, r + 1)
            if r == 0:
                for v in times.values():
                    v.clear()
                finished_within.clear()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    cost = med["pause+steps"] - med["steps"]
    result = {"parameters": count, "bytes": nbytes, "seconds": med,
              "training_steps": args.steps, "cost_in_steps": cost,
              "background_done_within_steps": all(finished_within),
              "ratio_pause_vs_numpy_save": med["pause"] / med["numpy.save"],
              "ratio_durable_vs_numpy_save_fsync": med["durable"] / med["numpy.save+fsync"],
              "ratio_cost_in_steps_vs_numpy_save": cost / med["numpy.save"],
              "load_average": os.getloadavg()[0]}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print("%d parameters + Adam states: %.2f GB" % (count, nbytes / 1e9))
    for k in ("pause", "durable", "numpy.save", "numpy.save+fsync"):
        print("  %-18s %6.2f s  (%.2f GB/s)" % (k, med[k], nbytes / med[k] / 1e9))
    print("  %-18s %6.2f s  (%d steps: %.2f s alone, %.2f s after a pause%s)"
          % ("in steps", cost, args.steps, med["steps"], med["pause+steps"],
             "" if result["background_done_within_steps"] else
             "; the background part outlasted the steps, raise --steps"))
    print("pause / numpy.save: %.2fx (target <= 1.5x: %s); durable / numpy.save+fsync: %.2fx; "
          "in steps / numpy.save: %.2fx; load average %.1f"
          % (result["ratio_pause_vs_numpy_save"],
             "met" if result["ratio_pause_vs_numpy_save"] <= 1.5 else "NOT met",
             result["ratio_durable_vs_numpy_save_fsync"],
             result["ratio_cost_in_steps_vs_numpy_save"], result["load_average"]))


if __name__ == "__main__":
    main()
