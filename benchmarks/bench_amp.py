"""Mixed precision on the CPU: the MLP training step (784-256-256-10, batch 64, SGD momentum) in
float32 against float16 parameters with multi_precision and AMP's dynamic loss scaling.

    python benchmarks/bench_amp.py [--steps 200] [--rounds 3]

NumPy has no fast float16 kernels (no float16 BLAS: its matmul converts element by element), so
this measures what the README says: AMP on the CPU checks a float16 setup; it is not a speed-up.
"""
from __future__ import annotations

import argparse
import time

import numpy
from _worker import check_loop, gluon_weights

from trainer_cli import autograd, gluon, nd
from trainer_cli.contrib import amp


def _step_rate(dtype, use_amp, steps, rng):
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(256, activation="relu"), gluon.nn.Dense(256, activation="relu"),
            gluon.nn.Dense(10))
    net.initialize()
    net(nd.zeros((1, 784)))
    if dtype == "float16":
        net.cast("float16")
    params = {"learning_rate": 0.01, "momentum": 0.9, "multi_precision": dtype == "float16"}
    trainer = gluon.Trainer(net.collect_params(), "sgd", params)
    if use_amp:
        amp.init()
        amp.init_trainer(trainer)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    x = nd.array(rng.standard_normal((64, 784)), dtype=dtype)
    y = nd.array(rng.integers(0, 10, 64), dtype=dtype)

    def one():
        with autograd.record():
            loss = loss_fn(net(x), y)
            if use_amp:
                with amp.scale_loss(loss, trainer) as scaled:
                    pass
        (scaled if use_amp else loss).backward()
        trainer.step(64)

    for _ in range(10):
        one()
    # Checked after the warm-up, not before: AMP's first steps overflow at the initial loss scale
    # and are skipped by design (the weights stay as they are).
    check = check_loop("%s%s" % (dtype, " + AMP" if use_amp else ""), one, gluon_weights(net))
    start = time.perf_counter()
    for _ in range(steps):
        one()
    return steps / (time.perf_counter() - start), check


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    rng = numpy.random.default_rng(0)
    numpy.seterr(over="ignore", invalid="ignore")  # the first steps overflow by design (2^16)
    rates = {"float32": [], "float16 + AMP": []}
    checks = {}
    for _ in range(args.rounds):
        for name, dtype, use_amp in (("float32", "float32", False),
                                     ("float16 + AMP", "float16", True)):
            rate, checks[name] = _step_rate(dtype, use_amp, args.steps, rng)
            rates[name].append(rate)
    base = sorted(rates["float32"])[len(rates["float32"]) // 2]
    for name, values in rates.items():
        median = sorted(values)[len(values) // 2]
        print("%-14s %8.1f steps/s  (%.2fx float32; rounds: %s)"
              % (name, median, median / base, ", ".join("%.0f" % v for v in values)))
    # check_loop raised on a failed check, so what is left passed.
    print("checked before timing (a step changes the weights, keeps them finite): %s passed"
          % ", ".join(checks))


if __name__ == "__main__":
    import _calibrate   # the machine, builds and a one-op calibration, under the figures
    raise SystemExit(_calibrate.main_with_record(main))
