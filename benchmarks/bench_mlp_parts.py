"""Where the MLP's training step goes, ours and PyTorch's: the whole step, its matrix products
alone, its optimizer update alone, and a memory-bandwidth reference for the update.

    python benchmarks/bench_mlp_parts.py [--rounds 3]

The step is ``run_all.py``'s ``mlp_sgd_b64`` (MLP 784-256-256-10, batch 64, softmax
cross-entropy, SGD with momentum 0.9, 268,650 float32 parameters). Each side runs in a clean
process of its own (``_calibrate.peer_env``, one thread), the sides taking turns for
``--rounds`` rounds; every figure is the median process-CPU time of a call, in microseconds.

- ``step``: forward, loss, backward, update, as ``run_all.py`` times it.
- ``gemms``: the step's eight matrix products alone, of the same shapes and layouts (forward
  ``x @ W.T`` for the three layers; backward ``dY.T @ x`` for the three weight gradients and
  ``dY @ W`` for the two hidden inputs), by NumPy's BLAS for ours and ``torch.mm`` for PyTorch.
- ``update``: the optimizer's step alone (``Trainer.step`` with the gradients marked fresh;
  ``optimizer.step()``).
- ``copy``: ``numpy.copyto`` / ``Tensor.copy_`` of 2.7 MB, which moves the bytes the update
  moves (it reads weights, gradients and momenta and writes weights and momenta: 5.4 MB).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH, SIZES = 64, (784, 256, 256, 10)
PARAMS = sum(a * b + b for a, b in zip(SIZES, SIZES[1:]))


def _per_call(fn, seconds=0.3, repeats=7):
    """Median process-CPU seconds of one call of ``fn`` over ``repeats`` batches."""
    for _ in range(20):
        fn()
    n, start = 0, time.process_time()
    while time.process_time() - start < seconds / repeats or n < 3:
        fn()
        n += 1
    times = []
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(n):
            fn()
        times.append((time.process_time() - start) / n)
    return statistics.median(times)


def _gemm_operands(xp_rand):
    """The eight products' operands: (a, b) pairs whose product the step computes."""
    x = xp_rand(BATCH, SIZES[0])
    ws = [xp_rand(o, i) for i, o in zip(SIZES, SIZES[1:])]
    hs = [x] + [xp_rand(BATCH, o) for o in SIZES[1:]]       # each layer's input, then output
    pairs = [(hs[k], ws[k].T) for k in range(3)]              # forward
    pairs += [(hs[k + 1].T, hs[k]) for k in range(3)]         # weight gradients
    pairs += [(hs[k + 1], ws[k]) for k in (1, 2)]             # hidden inputs' gradients
    return pairs


def _ours():
    import numpy as np
    from trainer_cli import autograd, gluon, nd
    rng = np.random.RandomState(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(256, activation="relu", in_units=784),
            gluon.nn.Dense(256, activation="relu", in_units=256), gluon.nn.Dense(10, in_units=256))
    net.initialize()
    net.hybridize()
    X = nd.array(rng.uniform(size=(BATCH, 784)).astype(np.float32))
    y = nd.array(rng.randint(0, 10, size=BATCH).astype(np.float32))
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})

    def step():
        with autograd.record():
            out = loss(net(X), y)
        out.backward()
        trainer.step(BATCH)
    step()
    datas = [p.data() for p in net.collect_params().values()]

    def update():
        for d in datas:
            d._fresh_grad = True        # as backward leaves them (a benchmark may poke this)
        trainer.step(BATCH)
    pairs = _gemm_operands(lambda *s: rng.uniform(size=s).astype(np.float32))

    def gemms():
        for a, b in pairs:
            np.matmul(a, b)
    src, dst = np.ones(PARAMS * 5 // 2, np.float32), np.empty(PARAMS * 5 // 2, np.float32)
    return {"step": step, "gemms": gemms, "update": update,
            "copy": lambda: np.copyto(dst, src)}


def _torch():
    import torch
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    criterion = torch.nn.CrossEntropyLoss()
    X, y = torch.rand(BATCH, 784), torch.randint(0, 10, (BATCH,))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

    def step():
        opt.zero_grad()
        criterion(net(X), y).backward()
        opt.step()
    step()
    pairs = _gemm_operands(lambda *s: torch.rand(*s))

    def gemms():
        for a, b in pairs:
            torch.mm(a, b)
    src, dst = torch.ones(PARAMS * 5 // 2), torch.empty(PARAMS * 5 // 2)
    return {"step": step, "gemms": gemms, "update": opt.step, "copy": lambda: dst.copy_(src)}


def _side(name):
    parts = (_ours if name == "ours" else _torch)()
    return {k: _per_call(fn) * 1e6 for k, fn in parts.items()}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--side", choices=("ours", "torch"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(_side(args.side)))
        return
    sys.path.insert(0, HERE)
    import _calibrate
    env = _calibrate.peer_env(threads=1)
    results = {"ours": [], "torch": []}
    for _ in range(args.rounds):
        for side in results:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--side", side],
                                 env=env, capture_output=True, text=True, timeout=300, check=True)
            results[side].append(json.loads(out.stdout))
    print("MLP 784-256-256-10, batch 64, SGD momentum; 1 thread; median process-CPU us per call "
          "(min-max over %d rounds)" % args.rounds)
    parts = ("step", "gemms", "update", "copy")
    print("%-8s" % "" + "".join("%22s" % p for p in parts))
    medians = {}
    for side, rounds in results.items():
        cells = []
        for p in parts:
            values = [r[p] for r in rounds]
            medians[side, p] = statistics.median(values)
            cells.append("%8.0f (%4.0f-%4.0f)" % (medians[side, p], min(values), max(values)))
        print("%-8s" % side + "".join("%22s" % c for c in cells))
    for side in results:
        step, gemms, update, copy = (medians[side, p] for p in parts)
        print("%s: GEMMs %.0f%% of the step, update %.0f%% (%.1f GB/s moved; the copy %.1f GB/s), "
              "the rest %.0f us" % (side, 100 * gemms / step, 100 * update / step,
                                    PARAMS * 4 * 5 / update / 1e3, PARAMS * 4 * 5 / copy / 1e3,
                                    step - gemms - update))
    ours, torch = medians["ours", "step"], medians["torch", "step"]
    print("step ratio (PyTorch / ours): %.2fx; PyTorch's step over our GEMMs alone: %.2fx"
          % (torch / ours, torch / medians["ours", "gemms"]))


if __name__ == "__main__":
    main()
