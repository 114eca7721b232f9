"""Single layers, forward and backward, ours against PyTorch: the activations, normalizations,
convolution variants and array operations the Gluon programs use beyond the dense and 3x3
convolution nets of ``run_all.py``.

    python benchmarks/bench_layers.py                      # every case, 1 thread, 3 rounds
    python benchmarks/bench_layers.py --cases gelu layer_norm --rounds 5 --threads 2

Each case (``benchmarks/_layer_cases.py`` lists them with their shapes) is one pass of a layer or
operator on float32 data: ours as a Gluon layer or ``nd`` operator under ``autograd.record()``
with ``backward()``, PyTorch as the ``torch.nn`` module or function with ``backward`` of a head of
ones. Each side runs in a clean process of its own (``_calibrate.peer_env``, ``--threads``
BLAS/OpenMP threads), once per round, the sides alternating their order from round to round;
a side's figure for a round is the best of ``--repeats`` passes, by the process's CPU time on one
thread and the wall clock on more. A ratio is the median over the rounds of PyTorch's time over
ours measured next to it (above 1: ours is faster). No targets: the figures say which layers
lag.
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
import _layer_cases  # noqa: E402

SIDES = ("ours", "torch")


def measure(side, cases, repeats, threads):
    proc = subprocess.run([sys.executable, os.path.join(HERE, "_layer_cases.py"), side, "1",
                           str(repeats), str(threads)] + list(cases),
                          capture_output=True, text=True, env=_calibrate.peer_env(threads),
                          cwd=ROOT, timeout=1800)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        return None, lines[-1] if lines else "failed"
    return {k: v[0] for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}, None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", default=list(_layer_cases.CASES),
                    choices=list(_layer_cases.CASES))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5, help="passes a round; the best counts")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        raise SystemExit("bench_layers.py compares with PyTorch, which is not installed here "
                         "(pip install torch)") from None
    load = os.getloadavg()[0]
    by_round, notes = {side: [] for side in SIDES}, []
    for r in range(args.rounds):
        for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
            got, why = measure(side, args.cases, args.repeats, args.threads)
            if got is None:
                notes.append("%s, round %d: %s" % (side, r + 1, why))
            by_round[side].append(got)
    report = {"threads": args.threads, "rounds": args.rounds, "load_average": load,
              "clock": "cpu" if args.threads == 1 else "wall", "cases": {}, "notes": notes}
    for name in args.cases:
        pairs = [(o[name], t[name]) for o, t in zip(by_round["ours"], by_round["torch"])
                 if o is not None and t is not None]
        if not pairs:
            continue
        report["cases"][name] = {
            "what": _layer_cases.CASES[name][0],
            "ours_ms": statistics.median(o for o, _ in pairs),
            "torch_ms": statistics.median(t for _, t in pairs),
            "ours_vs_torch": statistics.median(t / o for o, t in pairs)}
    report["sides"] = _calibrate.side_records({side: sys.executable for side in SIDES},
                                              args.threads)
    if args.json:
        print(json.dumps(report, indent=1))
        return 0
    print("one layer's forward + backward pass, float32; %d thread(s), load %.1f; medians of %d "
          "rounds (each the best of %d passes) by %s time" % (
              args.threads, load, args.rounds, args.repeats,
              "process CPU" if args.threads == 1 else "wall"))
    print("| case | ours ms | PyTorch ms | ours vs PyTorch |")
    print("|---|---|---|---|")
    for c in report["cases"].values():
        print("| %s | %.2f | %.2f | %.2fx |" % (c["what"], c["ours_ms"], c["torch_ms"],
                                               c["ours_vs_torch"]))
    for line in _calibrate.summary_lines(report["sides"]):
        print(line)
    for note in notes:
        print("note: " + note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
