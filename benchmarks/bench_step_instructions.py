"""The perceptron's training step in CPU instructions, by phase: a figure that load does not move.

    python benchmarks/bench_step_instructions.py [--steps 2000] [--whole-step-only]

Runs the step of ``run_all.py``'s perceptron case (hybridized Dense(1), batch 8, L2Loss,
``autograd.record``, ``backward``, ``gluon.Trainer`` SGD) under valgrind's callgrind, which counts
the instructions executed: once with a few steps and once with ``--steps`` more, so that the
difference divided by ``--steps`` is one step without the start-up. Phases: the forward with the
loss, up to the backward, and the whole step; the Trainer's step is the difference. On a shared
machine this tells two versions of the code apart where timings cannot (it says nothing of cache
misses or the peer; run_all.py gives the ratios). Needs ``valgrind`` on PATH; takes about a
minute per phase; ``--whole-step-only`` counts the whole step alone (a third of the time, for
telling two versions apart).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

_PHASES = ("forward+loss", "forward+loss+backward", "full step")


def _child(phase: str, steps: int) -> None:
    from trainer_cli import autograd, gluon, nd
    loss = gluon.loss.L2Loss()
    net = gluon.nn.Dense(1, in_units=4)
    net.initialize()
    net.hybridize()
    X = nd.random.uniform(shape=(8, 4))
    y = nd.random.uniform(shape=(8,))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    backward, update = phase != "forward+loss", phase == "full step"
    for _ in range(steps):
        with autograd.record():
            out = loss(net(X), y)
        if backward:
            out.backward()
        if update:
            trainer.step(8)


# Idle BLAS/OpenMP threads spin, and callgrind counts their instructions too: with them a count
# moved by 10% between two runs of the same code. One thread each, and a fixed hash seed (dict
# layouts), make the counts repeat to the instruction.
_COUNTED_ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                    MKL_NUM_THREADS="1", PYTHONHASHSEED="0")


def _instructions(phase: str, steps: int) -> int:
    with open(os.devnull, "w") as null:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + os.devnull, sys.executable,
             os.path.abspath(__file__), "--child", phase, "--steps", str(steps)],
            stdout=null, stderr=subprocess.PIPE, text=True, timeout=900, check=True,
            env=_COUNTED_ENV)
    found = re.search(r"Collected\s*:\s*(\d+)", done.stderr)
    if found is None:
        raise SystemExit("callgrind printed no instruction count:\n" + done.stderr[-2000:])
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--whole-step-only", action="store_true",
                        help="count the whole step alone, not its phases")
    parser.add_argument("--child", choices=_PHASES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.steps)
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not on PATH (apt-get install valgrind)")
    per_phase = {}
    for phase in _PHASES[-1:] if args.whole_step_only else _PHASES:
        warm = 300
        per_phase[phase] = (_instructions(phase, warm + args.steps)
                            - _instructions(phase, warm)) / args.steps
    print("perceptron step, instructions per step (callgrind, %d steps):" % args.steps)
    if args.whole_step_only:
        print("  %-15s %8.0f" % ("whole step", per_phase[_PHASES[-1]]))
        return
    forward, backward, full = (per_phase[p] for p in _PHASES)
    for name, value in (("forward + loss", forward), ("backward", backward - forward),
                        ("Trainer.step", full - backward), ("whole step", full)):
        print("  %-15s %8.0f  (%4.1f%%)" % (name, value, 100 * value / full))


if __name__ == "__main__":
    main()
