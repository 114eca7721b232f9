"""Recurrent nets: the word-language-model training step, ours against PyTorch and MXNet 1.9.1.

    python benchmarks/bench_rnn.py                          # LSTM and GRU, 1 thread, 3 rounds
    python benchmarks/bench_rnn.py --threads 2 --rounds 3
    python benchmarks/bench_rnn.py --cells lstm --where     # + where ours spends the step

The step is what gluon's ``word_language_model`` example trains: a batch of 32 sequences of 35
token ids -> ``Embedding(10000, 256)`` -> a 2-layer ``LSTM`` (or ``GRU``) of 256 hidden units,
its state carried from the previous batch (detached) -> ``Dense(10000)`` over every step's
output -> softmax cross-entropy -> backward -> the gradients' global norm clipped to 0.25 ->
SGD (lr 1). No dropout (MXNet's fused operator draws its masks from another stream than ours
and PyTorch's). Ours and MXNet 1.9.1 run the same Gluon code (``--mxnet-python``); PyTorch runs
``nn.Embedding``, ``nn.LSTM`` / ``nn.GRU``, ``nn.Linear``, ``F.cross_entropy``,
``clip_grad_norm_`` and ``optim.SGD``. Each side runs in a clean process of its own
(``_calibrate.peer_env``) with ``--threads`` BLAS/OpenMP threads; its step is checked before
timing (the weights change and stay finite). Each measurement is a few warm-up steps, then the
median of 3 timed batches of ``--steps`` steps; the rate counts the process's CPU time with
``--clock cpu`` (the default on one thread: descheduled time on a shared machine is not
counted) or the wall clock (the default with more threads, whose CPU time adds up). Cases are
measured ``--rounds`` times in an order alternating from round to round; a ratio is the median
of the rounds' own ratios (ours over the peer measured next to it).
Targets: ours >= 1.0x PyTorch and >= 1.0x MXNet, LSTM and GRU, 1 and 2 threads.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _calibrate  # noqa: E402  (benchmarks/ is not a package)

VOCAB, EMBED, HIDDEN, LAYERS, BPTT, BATCH, CLIP, LR = 10000, 256, 256, 2, 35, 32, 0.25, 1.0

WORKER = r'''
import json, sys, time
import numpy as np
framework, cell, steps, clock, here, where = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                              sys.argv[4], sys.argv[5], sys.argv[6] == "1")
threads = int(sys.argv[7])
V, E, H, L, T, N, CLIP, LR = %(shape)s
rng = np.random.default_rng(0)
batches = [rng.integers(0, V, size=(T + 1, N)) for _ in range(4)]
if framework == "torch":
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Embedding(V, E)
            self.rnn = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(E, H, L)
            self.decoder = torch.nn.Linear(H, V)
        def forward(self, x, hidden):
            out, hidden = self.rnn(self.encoder(x), hidden)
            return self.decoder(out.reshape(-1, H)), hidden
    model = Model()
    # The example's trainer.step(T * N) rescales the summed loss's gradient: folded into lr.
    opt = torch.optim.SGD(model.parameters(), lr=LR / (T * N))
    data = [(torch.from_numpy(b[:-1]), torch.from_numpy(b[1:]).reshape(-1)) for b in batches]
    zeros = torch.zeros(L, N, H)
    state = [(zeros, zeros) if cell == "lstm" else zeros]
    def step(i):
        x, y = data[i %% 4]
        hidden = state[0]
        hidden = tuple(h.detach() for h in hidden) if cell == "lstm" else hidden.detach()
        opt.zero_grad()
        out, hidden = model(x, hidden)
        F.cross_entropy(out, y, reduction="sum").backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP * T * N)
        opt.step()
        state[0] = hidden
    weights = lambda: [p.detach().numpy().copy() for p in model.parameters()]
    sync = lambda: None
else:
    if framework == "mxnet":
        import mxnet as mx
        from mxnet import autograd, gluon, nd
    else:
        import trainer_cli as mx
        from trainer_cli import autograd, gluon, nd
    mx.random.seed(0)
    class Model(gluon.Block):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.encoder = gluon.nn.Embedding(V, E)
                self.rnn = (gluon.rnn.LSTM if cell == "lstm" else gluon.rnn.GRU)(H, L, input_size=E)
                self.decoder = gluon.nn.Dense(V, in_units=H)
        def forward(self, x, hidden):
            out, hidden = self.rnn(self.encoder(x), hidden)
            return self.decoder(out.reshape((-1, H))), hidden
    model = Model()
    model.initialize(mx.init.Xavier())
    params = model.collect_params()
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": LR, "momentum": 0, "wd": 0})
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    data = [(nd.array(b[:-1].astype(np.float32)), nd.array(b[1:].reshape(-1).astype(np.float32)))
            for b in batches]
    state = [model.rnn.begin_state(batch_size=N)]
    grads = [p for p in params.values() if p.grad_req != "null"]
    def step(i):
        x, y = data[i %% 4]
        hidden = [h.detach() for h in state[0]]
        with autograd.record():
            out, hidden = model(x, hidden)
            l = loss(out, y)
        l.backward()
        gluon.utils.clip_global_norm([p.grad() for p in grads], CLIP * T * N)
        trainer.step(T * N)
        state[0] = hidden
    weights = lambda: [p.data().asnumpy() for p in grads]
    sync = nd.waitall
sys.path.insert(0, here)
import _worker
check = _worker.check_loop("%%s %%s" %% (framework, cell), lambda: step(0), weights, sync)
for i in range(3):
    step(i)
sync()
wall, cpu, k = [], [], 0
for _ in range(3):
    start, start_cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step(k)
        k += 1
    sync()
    wall.append(steps / (time.perf_counter() - start))
    cpu.append(steps / max(1e-9, time.process_time() - start_cpu))
out = {"wall": sorted(wall)[1], "cpu": sorted(cpu)[1], "check": check}
if where and framework == "ours":
    out["where_ms"] = where_ms(model, loss, data, state, step, threads)
print(json.dumps(out))
'''

# Ours only: the step split into its parts, each timed alone (process CPU ms, median of 5).
WHERE = r'''
def where_ms(model, loss, data, state, step, threads):
    import time
    from trainer_cli import _jit, autograd, nd
    x, y = data[0]
    hidden = [h.detach() for h in state[0]]
    emb = model.encoder(x)
    flat = nd.array(np.random.default_rng(1).standard_normal((T * N, H)).astype(np.float32))
    head = nd.ones((T, N, H))
    def timed(fn):
        fn()
        runs = []
        for _ in range(5):
            start = time.process_time()
            fn()
            runs.append(time.process_time() - start)
        return sorted(runs)[2] * 1e3
    def rnn_fwd_bwd():
        with autograd.record():
            out, _ = model.rnn(emb, hidden)
        out.backward(head)
    def rnn_fwd():
        model.rnn(emb, hidden)
    def decoder_loss():
        flat.attach_grad()
        with autograd.record():
            l = loss(model.decoder(flat), y)
        l.backward()
    from trainer_cli.ndarray import _rnn_kernels
    parts = {"whole step": lambda: step(0),
             "recurrent layers, forward": rnn_fwd,
             "recurrent layers, forward + backward": rnn_fwd_bwd,
             "Dense(10000) + softmax CE, forward + backward": decoder_loss}
    out = {k: timed(f) for k, f in parts.items()}
    saved = _jit._numba
    _jit._numba = False
    out["recurrent layers, forward + backward, NumPy gate bodies"] = timed(rnn_fwd_bwd)
    _jit._numba = saved
    return out
'''


def measure(python, framework, cell, steps, threads, clock, where):
    env = _calibrate.peer_env(threads)
    code = WORKER % {"shape": (VOCAB, EMBED, HIDDEN, LAYERS, BPTT, BATCH, CLIP, LR)}
    code = code.replace("sys.path.insert(0, here)", WHERE + "\nsys.path.insert(0, here)", 1)
    proc = subprocess.run([python, "-c", code, framework, cell, str(steps), clock, HERE,
                           "1" if where else "0", str(threads)],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    if proc.returncode != 0:
        return None, proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
    return json.loads(proc.stdout.strip().splitlines()[-1]), None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", default="lstm,gru", help="lstm, gru or both (comma-separated)")
    ap.add_argument("--steps", type=int, default=2, help="steps per timed batch (3 batches)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("cpu", "wall"), default=None,
                    help="process CPU time (default with one thread) or wall time")
    ap.add_argument("--peers", default="torch,mxnet")
    ap.add_argument("--mxnet-python",
                    default=os.environ.get("MXNET_PYTHON", "/tmp/mxvenv/bin/python"))
    ap.add_argument("--where", action="store_true",
                    help="also time the parts of our step (recurrent layers, Dense + loss)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    clock = args.clock or ("cpu" if args.threads == 1 else "wall")
    cells = [c for c in args.cells.split(",") if c]
    sides = {"ours": sys.executable}
    notes = []
    for peer in args.peers.split(","):
        if peer == "torch":
            sides["torch"] = sys.executable
        elif peer == "mxnet":
            if os.path.exists(args.mxnet_python):
                sides["mxnet"] = args.mxnet_python
            else:
                notes.append("MXNet: %s not found" % args.mxnet_python)
    load = os.getloadavg()[0]
    cases = [(side, cell) for cell in cells for side in sides]
    by_round, checks, where = {}, {}, {}
    for r in range(args.rounds):
        for side, cell in (cases if r % 2 == 0 else cases[::-1]):
            got, why = measure(sides[side], side, cell, args.steps, args.threads, clock,
                               args.where and r == 0)
            if got is None:
                notes.append("%s %s: %s" % (side, cell, why))
                continue
            by_round.setdefault((side, cell), {})[r] = got[clock]
            checks["%s/%s" % (side, cell)] = got["check"]
            if "where_ms" in got:
                where[cell] = got["where_ms"]
    report = {"clock": clock, "threads": args.threads, "rounds": args.rounds,
              "load_average": load, "steps_per_s": {}, "checks": checks, "notes": notes,
              "where_ms": where}
    for (side, cell), rates in by_round.items():
        report["steps_per_s"]["%s/%s" % (side, cell)] = statistics.median(rates.values())
    for cell in cells:
        ours = by_round.get(("ours", cell), {})
        for peer in sides:
            if peer == "ours":
                continue
            theirs = by_round.get((peer, cell), {})
            ratios = [ours[r] / theirs[r] for r in ours if r in theirs]
            if ratios:
                report["%s_vs_%s" % (cell, peer)] = statistics.median(ratios)
    report["sides"] = _calibrate.side_records(sides, args.threads)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print("word language model step (embedding %dx%d, %d-layer %s %d, seq %d, batch %d, "
          "Dense %d + softmax CE, clip, SGD); %d thread(s), load %.1f; median of %d rounds by %s "
          "time" % (VOCAB, EMBED, LAYERS, "/".join(cells), HIDDEN, BPTT, BATCH, VOCAB,
                    args.threads, load, args.rounds, "process CPU" if clock == "cpu" else "wall"))
    for cell in cells:
        line = "  %-4s" % cell
        for side in sides:
            rate = report["steps_per_s"].get("%s/%s" % (side, cell))
            line += "  %s %s" % (side, "%.2f steps/s" % rate if rate else "-")
        for peer in sides:
            ratio = report.get("%s_vs_%s" % (cell, peer))
            if ratio:
                line += "  | %.2fx %s (target >= 1.0x: %s)" % (
                    ratio, peer, "met" if ratio >= 1.0 else "NOT met")
        print(line)
    for cell, parts in where.items():
        print("  where ours spends a %s step (process CPU ms, each part timed alone):" % cell)
        for name, ms in parts.items():
            print("    %-55s %8.1f" % (name, ms))
    for line in _calibrate.summary_lines(report.get("sides")):
        print("  " + line)
    print("  checked before timing (one step changes the weights, keeps them finite): %s passed"
          % ", ".join(sorted(checks)))
    for note in notes:
        print("  note: " + note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
