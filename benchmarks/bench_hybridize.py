"""What ``hybridize()``'s cached plan saves: the same network's training step (forward, loss,
backward, ``Trainer.step``) run imperatively and from its plan, taking turns in one process.

    python benchmarks/bench_hybridize.py                 # every case, 7 rounds
    python benchmarks/bench_hybridize.py --cases chain20 --rounds 9

Cases: ``chain20`` (20 x Dense(4, relu), batch 1: dispatch only), ``mlp_b64`` (the run_all MLP,
784-256-256-10, batch 64, SGD momentum), ``digits_cnn`` (the built-in cnn on 8x8 digits, batch
32), ``bn_cnn`` (3 x Conv16+BatchNorm+ReLU on 3x8x8, batch 8). Before timing, one step of a
hybridized twin must give bitwise the imperative step's weights. Times are this process's CPU
time per step (steadier than wall time on a shared machine), the median of the rounds; the
ratio is the imperative time over the plan's (above 1: the plan is faster).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

CASES = ("chain20", "mlp_b64", "digits_cnn", "bn_cnn")


def _net(case):
    from trainer_cli.gluon import nn
    net = nn.HybridSequential()
    if case == "chain20":
        net.add(*[nn.Dense(4, activation="relu", in_units=4) for _ in range(20)])
        return net, (1, 4), 50
    if case == "mlp_b64":
        net.add(nn.Dense(256, activation="relu", in_units=784),
                nn.Dense(256, activation="relu", in_units=256), nn.Dense(10, in_units=256))
        return net, (64, 784), 10
    if case == "digits_cnn":
        for c in (16, 32):
            net.add(nn.Conv2D(c, kernel_size=3, padding=1, activation="relu"),
                    nn.MaxPool2D(pool_size=2, strides=2))
        net.add(nn.Flatten(), nn.Dense(64, activation="relu"), nn.Dense(10))
        return net, (32, 1, 8, 8), 4
    for cin in (3, 16, 16):
        net.add(nn.Conv2D(16, 3, padding=1, use_bias=False, in_channels=cin),
                nn.BatchNorm(in_channels=16), nn.Activation("relu"))
    net.add(nn.GlobalAvgPool2D(), nn.Dense(10, in_units=16))
    return net, (8, 3, 8, 8), 4


def _setup(case, seed=0):
    """(net, step) of a fresh network of ``case`` with seeded weights and data."""
    import trainer_cli
    from trainer_cli import autograd, gluon, nd
    from trainer_cli.gluon.block import reset_name_counters
    reset_name_counters()
    trainer_cli.random.seed(seed)
    net, shape, _ = _net(case)
    net.initialize()
    rng = np.random.RandomState(seed)
    x = nd.array(rng.uniform(size=shape).astype(np.float32))
    y = nd.array(rng.randint(0, 4, size=shape[0]).astype(np.float32))
    with autograd.predict_mode():
        net(x)                                  # deferred shapes settled
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.01, "momentum": 0.9})

    def step():
        with autograd.record():
            out = loss(net(x), y)
        out.backward()
        trainer.step(shape[0])
    return net, step


def _weights(net):
    return [p.data().asnumpy() for p in net.collect_params().values()]


def check(case):
    """Two steps imperatively and two on a hybridized twin (the first records its graph
    imperatively, the second runs from the plan), from the same start: bitwise the same."""
    eager, estep = _setup(case)
    twin, tstep = _setup(case)
    twin.hybridize()
    for _ in range(2):
        estep()
        tstep()
    if twin._plan is None:
        raise SystemExit("%s: the network did not run from a plan" % case)
    if not all(np.array_equal(a, b) for a, b in zip(_weights(eager), _weights(twin))):
        raise SystemExit("%s: the plan's weights differ from the imperative step's" % case)


def measure(case, rounds):
    net, step = _setup(case)
    per = _net(case)[2]
    number = max(5, int(20000 / (per * 10)))
    times = {False: [], True: []}
    for r in range(rounds):
        for active in ((False, True) if r % 2 == 0 else (True, False)):
            net.hybridize(active)
            for _ in range(3):
                step()
            start = time.process_time()
            for _ in range(number):
                step()
            times[active].append((time.process_time() - start) / number * 1e6)
    eager, plan = statistics.median(times[False]), statistics.median(times[True])
    return eager, plan


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    print("load average %.2f %.2f %.2f" % os.getloadavg())
    for case in args.cases:
        check(case)
        eager, plan = measure(case, args.rounds)
        print("%-11s imperative %8.1f us  plan %8.1f us  %.2fx  (bitwise checked)"
              % (case, eager, plan, eager / plan))


if __name__ == "__main__":
    main()
