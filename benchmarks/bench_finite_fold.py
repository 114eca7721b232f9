"""What the runner's NaN/Inf check of an update costs, with the check folded into Adam's kernels
and without (the separate pass over weights, both moments and gradients after the update).

    python benchmarks/bench_finite_fold.py                      # configs/mlp_digits.yaml's model
    python benchmarks/bench_finite_fold.py --config mlp_synthetic --turn 400

Two measurements, each in this process, by its CPU time, the sides taking turns (the order
reversed every other round), medians and minima over ``--rounds``:

* the update alone: the config's model's parameters and gradients through an Updater of the
  config's optimizer, ``update`` then ``updated_finite(with_grads=True)`` as the runner asks it,
  folded (Adam's checking loop) and not (the separate pass), and the update without any check;
* the runner's own loop (``TrainingLoop`` with a run directory, checkpoints, metrics, logging
  and validation off: the plain step), ``--turn`` steps a turn, folded and not.

Before timing, the folded and the separate-pass updates are run from the same arrays and must
give the same bits (weights and states), and both must answer True.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _unfolded(kernels):
    """``Kernel.run_groups`` that never runs a checking loop: the check is the separate pass."""
    folded = kernels.Kernel.run_groups

    def run_groups(self, split, rows_of, step=None):
        return folded(self, split, rows_of)
    return folded, run_groups


def _turns(sides, rounds, run):
    times = {name: [] for name in sides}
    for r in range(rounds):
        for name in (list(sides) if r % 2 == 0 else list(sides)[::-1]):
            times[name].append(run(name))
    return times


def update_costs(parts, rounds, repeats=20):
    """us per update (and check) of the model of ``parts``: folded, separate pass, no check."""
    import numpy

    from trainer_cli import nd
    from trainer_cli.optimizer import Updater, kernels
    from trainer_cli.run.build import build_optimizer

    rng = numpy.random.default_rng(0)
    params = [p for p in parts.net.collect_params().values() if p.grad_req != "null"]
    weights = [p.data().asnumpy() for p in params]
    grads = [(rng.standard_normal(w.shape) * 0.01).astype(w.dtype) for w in weights]
    folded, unfolded = _unfolded(kernels)

    def updater():
        u = Updater(build_optimizer(parts.config))
        ws = [nd.array(w, dtype=w.dtype) for w in weights]
        gs = [nd.array(g, dtype=g.dtype) for g in grads]
        idx = list(range(len(ws)))
        u(idx, gs, ws)
        assert u.updated_finite(with_grads=True) is True    # from here on a watched step
        return u, idx, gs, ws

    # The numbers first: both ways from the same arrays, the same bits.
    results = []
    for run_groups in (folded, unfolded):
        kernels.Kernel.run_groups = run_groups
        u, idx, gs, ws = updater()
        for _ in range(3):
            u(idx, gs, ws)
            assert u.updated_finite(with_grads=True) is True
        results.append([w.asnumpy() for w in ws] + [
            leaf.asnumpy() for i in sorted(u.states) for leaf in
            (u.states[i] if isinstance(u.states[i], tuple) else [u.states[i]]) if leaf is not None])
    kernels.Kernel.run_groups = folded
    same = all(a.tobytes() == b.tobytes() for a, b in zip(*results))
    if not same:
        raise SystemExit("the folded check changed a number: not timed")

    u, idx, gs, ws = updater()

    def run(name):
        kernels.Kernel.run_groups = unfolded if name == "separate pass" else folded
        check = name != "no check"
        start = time.process_time()
        for _ in range(repeats):
            u(idx, gs, ws)
            if check:
                u.updated_finite(with_grads=True)
        return (time.process_time() - start) / repeats * 1e6
    try:
        times = _turns(("folded", "separate pass", "no check"), rounds, run)
    finally:
        kernels.Kernel.run_groups = folded
    return times, sum(w.size for w in weights)


def loop_costs(parts, config_path, rounds, turn):
    """us per plain step of the runner's loop, folded and with the separate pass."""
    from trainer_cli.optimizer import kernels
    from trainer_cli.run import threads
    from trainer_cli.run.loop import TrainingLoop
    from trainer_cli.run.progress import Reporter
    from trainer_cli.run.rundir import create_run_dir
    from trainer_cli.run.session import _Recorder
    from trainer_cli.run.state import LoopState

    config = parts.config
    folded, unfolded = _unfolded(kernels)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = create_run_dir(tmp, config.name, config.resolved_yaml())
        recorder = _Recorder(run_dir, parts, Reporter())
        recorder.start_writer(expected_saves=1 << 20)
        loop = TrainingLoop(parts, LoopState(), recorder)
        restore = threads.apply(threads.plan(config.threads, layer_work=threads.layer_work(
            loop.params, config.data.batch_size)))
        # The plain step: nothing but the step and its checks.
        loop.train_acc.metrics = {}
        config.log_every = 1 << 40
        object.__setattr__(config.checkpoint, "every_steps", None)
        object.__setattr__(config.checkpoint, "every_epoch", False)
        loop._saves_best = False
        parts.val = None

        def steps(n):
            for _ in range(n):
                loop._advance(parts.order, 1)

        def run(name):
            kernels.Kernel.run_groups = unfolded if name == "separate pass" else folded
            steps(5)
            start = time.process_time()
            steps(turn)
            return (time.process_time() - start) / turn * 1e6
        try:
            steps(50)
            return _turns(("folded", "separate pass"), rounds, run)
        finally:
            kernels.Kernel.run_groups = folded
            restore()
            recorder.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="mlp_digits",
                        help="a name in configs/ or a config file (default mlp_digits)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--turn", type=int, default=100, help="runner steps a turn (default 100)")
    args = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    from trainer_cli import _jit, random as _random
    from trainer_cli.config import load_config
    from trainer_cli.run.build import build

    path = args.config if os.path.isfile(args.config) else os.path.join(
        ROOT, "configs", args.config + ".yaml")
    overrides = ["threads=1", "epochs=1000000"]
    _jit.warm_up()
    config = load_config(path, overrides)
    _random.seed(config.seed)
    updates, size = update_costs(build(config, path), args.rounds)
    config = load_config(path, overrides)
    _random.seed(config.seed)
    steps = loop_costs(build(config, path), path, args.rounds, args.turn)
    print("%s (%d parameters, %s; one thread, process CPU time, load average %.1f)"
          % (os.path.relpath(path, ROOT), size, config.optimizer.name, os.getloadavg()[0]))
    print("update + check, us (median / min): " + "; ".join(
        "%s %.1f / %.1f" % (k, statistics.median(v), min(v)) for k, v in updates.items()))
    print("runner's plain step, us (median / min): " + "; ".join(
        "%s %.1f / %.1f" % (k, statistics.median(v), min(v)) for k, v in steps.items())
          + "; separate pass / folded, median of paired turns %.3f" % statistics.median(
              [a / b for a, b in zip(steps["separate pass"], steps["folded"])]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
