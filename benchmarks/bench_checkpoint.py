"""Issue 17's checkpoint benchmark: a checkpoint of a 100M-parameter model with Adam states
(params.npz, trainer.states, meta.json with each file's SHA-256, fsyncs, the atomic rename and
``latest``) against writing the same arrays (weights, both Adam moments) with ``numpy.save`` into
the same folder, with and without an fsync of each file.

    python benchmarks/bench_checkpoint.py                 # 100M parameters, 3 interleaved rounds
    python benchmarks/bench_checkpoint.py --params 20 --rounds 5 --json

``trainer run`` saves a checkpoint this large in two parts (``run.checkpoint``). Training waits
while ``begin_checkpoint`` writes the arrays' bytes: the **pause**, the figure the target is
about. ``PendingCheckpoint.finish_steps`` then reads the files back for the CRCs and SHA-256,
fsyncs and moves ``latest``, on a background thread at the lowest CPU priority while training
goes on (``run.background``). **In steps** is what the checkpoint costs training all told: the
pause, plus how much longer the next ``--steps`` training steps and then a wait for the
background part (what the next checkpoint does first: it finishes what is left itself) take than
the same steps without a checkpoint. **One thread** is the whole save in the training thread, as
the last checkpoint of a run is made: compare it with ``numpy.save`` plus an fsync of each file.

Each timed write follows ``--steps`` training steps and a touch of as much fresh memory as the
write needs. On a VM whose balloon driver reports free memory to the host (this one), memory
freed seconds earlier faults in again at 1-3 s per GB on its next use, whoever uses it: without
the touch, a write after training steps takes 0.2 to 2.6 s at random, numpy.save's as much as
ours. ``--cold`` leaves the touch out.

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
import threading
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

    from _worker import check_loop, gluon_weights
    # The first step creates the Adam states; it is also the check before timing.
    check = check_loop("training step", step, gluon_weights(net))
    count = sum(p.data().size for p in net.collect_params().values())
    return net, trainer, count, step, check


def checkpoint_files(net, trainer):
    from trainer_cli.run import checkpoint

    return checkpoint.snapshot(net, trainer, {}, copy=False)


def one_thread(net, trainer, folder, step):
    from trainer_cli.run import checkpoint

    start = time.perf_counter()
    checkpoint.write_checkpoint(folder, step, checkpoint_files(net, trainer), {"bench": True})
    return time.perf_counter() - start


def beside_training(net, trainer, train_step, folder, step, steps):
    """As ``trainer run`` saves it: the pause, then ``steps`` training steps while the rest goes
    on in the background, then a wait for it as the next checkpoint's. Returns the pause, the
    time of the steps and the wait, the time until ``latest`` moved, and whether the background
    thread finished on its own (else the wait did the rest, at the training thread's
    priority)."""
    from trainer_cli.run import checkpoint
    from trainer_cli.run.background import BackgroundJob

    start = time.perf_counter()
    pending = checkpoint.begin_checkpoint(folder, step, checkpoint_files(net, trainer),
                                          {"bench": True})
    pause = time.perf_counter() - start
    ended = []

    def rest():
        yield from pending.finish_steps()
        ended.append((time.perf_counter(), threading.current_thread() is not main))

    main = threading.current_thread()
    job = BackgroundJob()
    job.start_steps(rest())
    began = time.perf_counter()
    bare_steps(train_step, steps)
    job.wait()      # as the next checkpoint would: what is left is done here
    return pause, time.perf_counter() - began, ended[0][0] - start, ended[0][1]


def bare_steps(train_step, steps):
    start = time.perf_counter()
    for _ in range(steps):
        train_step()
    return time.perf_counter() - start


def touch(nbytes):
    """Fault in ``nbytes`` of memory and free it: the write that follows reuses warm pages."""
    block = numpy.ones(nbytes, numpy.uint8)
    del block


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
    ap.add_argument("--steps", type=int, default=40, help="training steps around each write (40)")
    ap.add_argument("--cold", action="store_true", help="no touch of fresh memory before writes")
    ap.add_argument("--dir", default=None, help="where to write (default: a temp folder here)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    net, trainer, count, train_step, step_check = build(args.params)
    from trainer_cli.ndarray.interop import raw

    arrays = [raw(p.data()) for p in net.collect_params().values()]
    for updater in trainer._updaters:
        for state in updater.states.values():
            arrays.extend(raw(s) for s in (state if isinstance(state, (tuple, list)) else [state]))
    nbytes = sum(a.nbytes for a in arrays)
    root = tempfile.mkdtemp(prefix="bench-ckpt-", dir=args.dir or HERE)
    names = ["checkpoint", "one thread", "numpy.save", "numpy.save+fsync"]
    times = {k: [] for k in ["pause", "after", "durable", "steps"] + names[1:]}
    on_its_own = []

    def timed(name, step):
        run = os.path.join(root, "run")
        os.makedirs(os.path.join(run, "checkpoints"), exist_ok=True)
        times["steps"].append(bare_steps(train_step, args.steps))
        if not args.cold:
            touch(int(nbytes * 1.1))
        if name == "checkpoint":
            pause, after, durable, alone = beside_training(net, trainer, train_step, run, step,
                                                           args.steps)
            times["pause"].append(pause)
            times["after"].append(after)
            times["durable"].append(durable)
            on_its_own.append(alone)
        elif name == "one thread":
            times[name].append(one_thread(net, trainer, run, step))
        else:
            times[name].append(numpy_save(arrays, os.path.join(root, name),
                                          name.endswith("fsync")))
        shutil.rmtree(os.path.join(root, name if name.startswith("numpy") else "run"),
                      ignore_errors=True)

    # A first round uncounted (the first writes into fresh page-cache memory of a VM are slow,
    # whoever makes them), then rounds in turn-taking order.
    try:
        for r in range(args.rounds + 1):
            order = names if r % 2 else names[::-1]
            for name in order:
                timed(name, r + 1)
            if r == 0:
                for v in times.values():
                    v.clear()
                on_its_own.clear()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    cost = med["pause"] + med["after"] - med["steps"]
    result = {"parameters": count, "bytes": nbytes, "seconds": med, "cold": args.cold,
              "training_steps": args.steps, "cost_in_steps": cost,
              "background_finished_on_its_own": on_its_own,
              "ratio_pause_vs_numpy_save": med["pause"] / med["numpy.save"],
              "ratio_in_steps_vs_numpy_save": cost / med["numpy.save"],
              "ratio_one_thread_vs_numpy_save_fsync": med["one thread"] / med["numpy.save+fsync"],
              "ratio_one_thread_vs_numpy_save": med["one thread"] / med["numpy.save"],
              "load_average": os.getloadavg()[0], "step_check": step_check}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print("%d parameters + Adam states: %.2f GB%s" % (count, nbytes / 1e9,
                                                      " (cold memory)" if args.cold else ""))
    print("  the training step was checked before timing (it changes the weights, keeps them "
          "finite): %s" % json.dumps(step_check))
    for k in ("pause", "one thread", "numpy.save", "numpy.save+fsync"):
        print("  %-18s %6.2f s  (%.2f GB/s)" % (k, med[k], nbytes / med[k] / 1e9))
    print("  %-18s %6.2f s  (%d steps: %.2f s alone, %.2f s after the pause with the wait; "
          "latest moved %.2f s after the pause began; the background thread finished on its own "
          "in %d of %d)"
          % ("in steps", cost, args.steps, med["steps"], med["after"], med["durable"],
             sum(on_its_own), len(on_its_own)))
    print("pause / numpy.save: %.2fx (target <= 1.5x: %s); in steps / numpy.save: %.2fx; "
          "one thread / numpy.save+fsync: %.2fx; load average %.1f"
          % (result["ratio_pause_vs_numpy_save"],
             "met" if result["ratio_pause_vs_numpy_save"] <= 1.5 else "NOT met",
             result["ratio_in_steps_vs_numpy_save"],
             result["ratio_one_thread_vs_numpy_save_fsync"], result["load_average"]))


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
