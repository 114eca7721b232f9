"""Every performance target of issue 6, side by side with PyTorch and MXNet 1.9.1, in one run.

    python benchmarks/run_all.py                 # full run, 1 and 2 threads, table
    python benchmarks/run_all.py --quick         # smoke run: fewer, shorter repeats
    python benchmarks/run_all.py --json          # the same results as JSON
    python benchmarks/run_all.py --markdown      # a README section (benchmarks/RESULTS.md)
    python benchmarks/run_all.py --load r.json --markdown   # re-print a run saved with --json
    python benchmarks/run_all.py --mxnet-python /path/to/venv/bin/python --threads 1

Peers are optional and never dependencies. PyTorch is used when it imports in this interpreter
(``pip install torch==2.13.0``). MXNet runs in a subprocess under its own interpreter, because it
needs NumPy < 1.24: ``--mxnet-python``, else ``$MXNET_PYTHON``, else ``/tmp/mxvenv/bin/python`` when
it exists (``python -m venv /tmp/mxvenv && /tmp/mxvenv/bin/pip install mxnet==1.9.1 'numpy<1.24'``).
A peer that is missing gets a note instead of its columns.

Each implementation runs in its own process per thread count, started from this environment less
every thread, allocator and tuning variable (``_calibrate.peer_env``: nothing of the shell's or of
ours reaches a peer), with the OMP/MKL/OPENBLAS thread variables (ours: and NUMBA's) set to that
count before NumPy loads (and ``torch.set_num_threads``, and threadpoolctl when installed). Each
records its machine, builds, environment and a one-op calibration (``_calibrate``), printed under
the table and kept in the JSON, so that a peer running slow shows.
The processes stay up for the run and take turns case by case (``--rounds`` times, in rotating
order), so that load from elsewhere on the machine falls on every implementation alike. Figures are
medians; ratios are ours over the peer's where higher is better (steps/s) and the peer's over ours
where lower is better (time), so above 1 means we are ahead. ``--clock cpu`` reports process CPU
time instead of wall time (steadier on a shared machine; the JSON holds both).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import _calibrate  # noqa: E402  (benchmarks/ is not a package)

WORKER = os.path.join(HERE, "_worker.py")
DEFAULT_MXNET_PYTHON = "/tmp/mxvenv/bin/python"

# name, label, unit, higher is better, {peer: minimum ratio}, absolute target (op, value) or None
CASES = [
    ("perceptron", "perceptron full step (Dense(1), 8x4, L2, sgd)", "steps/s", True,
     {"torch": 4.0, "mxnet": 10.0}, None),
    ("mlp_sgd_b64", "MLP 784-256-256-10, batch 64, SGD momentum", "steps/s", True,
     {"torch": 1.5}, None),
    ("mlp_adam_b512", "MLP 784-256-256-10, batch 512, Adam", "steps/s", True,
     {"torch": 1.1}, None),
    ("opt_adam_10m", "Adam step, 10M float32 in 200 tensors", "ms", False,
     {"torch": 1.0}, None),
    ("opt_sgd_mom_10m", "SGD-momentum step, 10M float32 in 200 tensors", "ms", False,
     {"torch": 1.0}, None),
    ("op_overhead", "per-op overhead in record(), 8x4 multiply, over NumPy", "us", False,
     {}, ("<=", 3.0)),
    ("lenet_b64", "LeNet (conv32-pool-conv64-pool-fc128-fc10), batch 64 of 1x28x28, SGD momentum",
     "steps/s", True, {"torch": 1.2, "mxnet": 1.0}, None),
    ("cifar_conv4_b32", "4x (Conv64 3x3 + BatchNorm + ReLU) + global pool, batch 32 of 3x32x32, "
     "SGD momentum", "steps/s", True, {"torch": 1.0}, None),
    ("resnet18_cifar_b32", "ResNet-18 CIFAR variant (model zoo BasicBlockV1), batch 32 of 3x32x32, "
     "SGD momentum", "steps/s", True, {"torch": 1.0, "mxnet": 1.0}, None),
    ("resnet18_224_predict_b1", "resnet18_v1 inference, batch 1 of 3x224x224", "steps/s", True,
     {"torch": 1.0}, None),
    ("resnet18_224_predict_b16", "resnet18_v1 inference, batch 16 of 3x224x224", "steps/s", True,
     {"torch": 1.0}, None),
    ("book_alexnet_b32", "d2l AlexNet (imperative blocks), batch 32 of 1x224x224, SGD", "steps/s",
     True, {"mxnet": 1.0}, None),
    ("book_googlenet_b32", "d2l GoogLeNet (imperative Inception blocks), batch 32 of 1x96x96, SGD",
     "steps/s", True, {"mxnet": 1.0}, None),
    ("book_resnet_b32", "d2l ResNet-18 (imperative Residual blocks), batch 32 of 1x96x96, SGD",
     "steps/s", True, {"mxnet": 1.0}, None),
    ("mobilenet0_5_b8", "model zoo mobilenet0_5 (depthwise-separable), batch 8 of 3x160x160, "
     "SGD momentum", "steps/s", True, {}, None),
]
PEERS = ("torch", "mxnet")
ONE_THREAD_CASES = ("compression", "memory", "cli_help")
PEAK_CASES = {"peak_mlp": "peak RSS of a process running the MLP b64 SGD-momentum step",
              "peak_lenet": "peak RSS of a process running the LeNet b64 step"}


# ----------------------------------------------------------------------------- running workers
def _env(threads, extra=None, impl="ours"):
    """A worker's environment: this one's less every thread/allocator/tuning variable
    (``_calibrate.peer_env``), the thread variables set to ``threads`` for every side alike; ours
    also gets NUMBA_NUM_THREADS and this checkout on PYTHONPATH, a peer neither."""
    env = _calibrate.peer_env(threads, extra=extra)
    if impl in ("ours", "ours_numpy"):
        env["NUMBA_NUM_THREADS"] = str(threads)
        env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    else:
        env.pop("PYTHONPATH", None)
    return env


def run_worker(python, impl, threads, cases, quick, extra_env=None, timeout=1800):
    cmd = [python, WORKER, impl, "--threads", str(threads), "--cases", ",".join(cases)]
    if quick:
        cmd.append("--quick")
    try:
        proc = subprocess.run(cmd, env=_env(threads, extra_env, impl), capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"unavailable": "%s: %s" % (type(exc).__name__, exc)}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return {"unavailable": "worker failed (exit %d): %s" % (proc.returncode, " | ".join(tail))}
    return json.loads(lines[-1])


NUMPY_FALLBACK_CASES = ("opt_adam_10m", "opt_sgd_mom_10m")


class Served:
    """A worker process kept alive for a run, measuring the cases it is sent one at a time."""

    def __init__(self, python, impl, threads, quick, extra_env=None):
        cmd = [python, WORKER, impl, "--threads", str(threads), "--serve"]
        if quick:
            cmd.append("--quick")
        self.proc = None
        try:
            self.proc = subprocess.Popen(cmd, env=_env(threads, extra_env, impl), cwd=ROOT, text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE)
            self.header = self._read() or {"unavailable": self._failure()}
        except OSError as exc:
            self.header = {"unavailable": "%s: %s" % (type(exc).__name__, exc)}
        if "unavailable" in self.header:
            self.close()

    def _read(self):
        while True:
            line = self.proc.stdout.readline()
            if not line:
                return None
            if line.startswith("{"):
                return json.loads(line)

    def _failure(self):
        self.proc.wait(timeout=60)
        tail = self.proc.stderr.read().strip().splitlines()[-3:]
        return "worker failed (exit %s): %s" % (self.proc.returncode, " | ".join(tail))

    def ask(self, case):
        if self.proc is None or self.proc.poll() is not None:
            return {"case": case, "error": "worker not running"}
        self.proc.stdin.write(case + "\n")
        self.proc.stdin.flush()
        return self._read() or {"case": case, "error": self._failure()}

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None


def torch_available(python):
    proc = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def find_mxnet_python(arg):
    for candidate in (arg, os.environ.get("MXNET_PYTHON"), DEFAULT_MXNET_PYTHON):
        if candidate and os.path.exists(candidate):
            return candidate
    return None


def time_command(cmd, repeats, env=None):
    """Median wall seconds of a short command, or None when it fails."""
    times = []
    subprocess.run(cmd, capture_output=True, env=env)      # warm the file cache
    for _ in range(repeats):
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, env=env)
        elapsed = time.perf_counter() - start
        if proc.returncode != 0:
            return None
        times.append(elapsed)
    return statistics.median(times)


def cli_help(quick, mxnet_python, torch_version):
    """``trainer --help`` wall time (the CLI may not exist yet), with interpreter start-up and the
    peers' import times for scale."""
    repeats = 5 if quick else 11
    env = _env(1)
    py = sys.executable
    out = {"unit": "s", "python_startup_s": time_command([py, "-c", "pass"], repeats, env)}
    attempts = [
        ("trainer --help", [py, "-c", "import sys; sys.argv = ['trainer', '--help']\n"
                                      "from trainer_cli.cli import main\n"
                                      "try:\n    main()\nexcept SystemExit as e:\n"
                                      "    sys.exit(e.code or 0)"]),
        ("python -c 'import trainer_cli.cli'", [py, "-c", "import trainer_cli.cli"]),
    ]
    for label, cmd in attempts:
        seconds = time_command(cmd, repeats, env)
        if seconds is not None:
            out.update(value=seconds, measured=label)
            break
    else:
        out.update(value=None, note="trainer_cli.cli does not import yet; skipped")
    if torch_version:
        out["torch_import_s"] = time_command([py, "-c", "import torch"], repeats, env)
    if mxnet_python:
        out["mxnet_import_s"] = time_command([mxnet_python, "-c", "import mxnet"], repeats, env)
    return out


# ----------------------------------------------------------------------------- collecting
def collect(args):
    threads_list = args.threads
    torch_version = None if args.no_torch else torch_available(sys.executable)
    mxnet_python = None if args.no_mxnet else find_mxnet_python(args.mxnet_python)
    notes = []
    if not torch_version:
        notes.append("PyTorch columns skipped: --no-torch, or torch is not installed in this "
                     "interpreter (pip install torch==2.13.0).")
    if not mxnet_python:
        notes.append("MXNet columns skipped: --no-mxnet, or no MXNet interpreter found "
                     "(--mxnet-python, $MXNET_PYTHON or /tmp/mxvenv).")
    step_cases = [c[0] for c in CASES if not args.cases or c[0] in args.cases]
    jobs = [("ours", sys.executable, None)]
    if torch_version:
        jobs.append(("torch", sys.executable, None))
    if mxnet_python:
        jobs.append(("mxnet", mxnet_python, None))
    if any(case in NUMPY_FALLBACK_CASES for case in step_cases):
        jobs.append(("ours_numpy", sys.executable, {"TRAINER_NO_NUMBA": "1"}))
    load_before = _loadavg()
    results = {}        # name -> threads -> case -> [result per round]
    headers = {}        # name -> threads -> the worker's first line (version or unavailable)
    for threads in threads_list:
        workers = {}
        try:
            for name, python, extra in jobs:
                impl = "ours" if name == "ours_numpy" else name
                worker = Served(python, impl, threads, args.quick, extra)
                workers[name] = worker
                headers.setdefault(name, {})[threads] = worker.header
            # Case by case, each implementation in turn and the turn order rotating by round:
            # load from elsewhere on the machine then falls on every implementation alike.
            for case in step_cases:
                names = [n for n in workers if n != "ours_numpy" or case in NUMPY_FALLBACK_CASES]
                for r in range(args.rounds):
                    order = names[r % len(names):] + names[:r % len(names)]
                    for name in order:
                        say(args, "%s, %d thread(s), round %d/%d: %s"
                            % (case, threads, r + 1, args.rounds, name))
                        answer = workers[name].ask(case)
                        results.setdefault(name, {}).setdefault(threads, {}) \
                            .setdefault(case, []).append(answer)
        finally:
            for worker in workers.values():
                worker.close()
    raw = {"ours": {}, "torch": {}, "mxnet": {}, "ours_numpy": {}}
    for name, by_threads in headers.items():
        for threads, header in by_threads.items():
            raw[name][threads] = _merge_rounds(header, results.get(name, {}).get(threads, {}))
    if args.cases:
        single = {"compression": None, "memory": {}, "cli_help": {}}
        report = build_report(args, raw, single, torch_version, mxnet_python, list(notes))
        report["load_average"] = {"before": load_before, "after": _loadavg()}
        report["sides"] = sides(raw)
        report["measured"] = {"raw": raw, "single": single, "torch_version": torch_version,
                              "mxnet_python": mxnet_python, "notes": notes}
        return report
    say(args, "compression and memory ...")
    single = {
        "compression": run_worker(sys.executable, "ours", 1, ["compression"], args.quick),
        "memory": {"ours": run_worker(sys.executable, "ours", 1, ["memory"], args.quick)},
    }
    if torch_version:
        single["memory"]["torch"] = run_worker(sys.executable, "torch", 1, ["memory"], args.quick)
    if mxnet_python:
        single["memory"]["mxnet"] = run_worker(mxnet_python, "mxnet", 1, ["memory"], args.quick)
    # Peak RSS, each model in a fresh process per implementation (VmHWM never goes down).
    for case in PEAK_CASES:
        single[case] = {"ours": run_worker(sys.executable, "ours", 1, [case], args.quick)}
        if torch_version:
            single[case]["torch"] = run_worker(sys.executable, "torch", 1, [case], args.quick)
        if mxnet_python:
            single[case]["mxnet"] = run_worker(mxnet_python, "mxnet", 1, [case], args.quick)
    say(args, "trainer --help ...")
    single["cli_help"] = cli_help(args.quick, mxnet_python, torch_version)
    report = build_report(args, raw, single, torch_version, mxnet_python, list(notes))
    report["load_average"] = {"before": load_before, "after": _loadavg()}
    report["sides"] = sides(raw)
    # What the rows were built from, so that --load can rebuild them on the other clock.
    report["measured"] = {"raw": raw, "single": single, "torch_version": torch_version,
                          "mxnet_python": mxnet_python, "notes": notes}
    return report


def rebuild(saved, args):
    """The report of a run saved with --json, its rows built on ``args.clock``."""
    measured = saved.get("measured")
    if not measured:
        return saved
    raw = {impl: {int(k): v for k, v in by_threads.items()}
           for impl, by_threads in measured["raw"].items()}
    args.threads, args.quick = saved["threads"], saved["quick"]
    args.rounds = saved.get("rounds", 1)
    args.cases = saved.get("cases")
    report = build_report(args, raw, measured["single"], measured["torch_version"],
                          measured["mxnet_python"], list(measured["notes"]))
    report["command"] = saved["command"]
    report["machine"] = saved["machine"]
    report["load_average"] = saved.get("load_average")
    report["measured"] = measured
    report["sides"] = saved.get("sides") or sides(raw)
    return report


def sides(raw):
    """Each worker's record (``_calibrate.describe``: machine, builds, environment, thread pools,
    one-op calibration), by implementation and thread count."""
    return {name: {threads: out["side"] for threads, out in by_threads.items()
                   if out and out.get("side")}
            for name, by_threads in raw.items() if by_threads}


def calibration_lines(report):
    """The machine and every side's builds and calibration, printed under the ratios."""
    records = [dict(rec, side="%s, %s thread(s)" % (name, threads))
               for name, by_threads in (report.get("sides") or {}).items()
               for threads, rec in by_threads.items()]
    return _calibrate.summary_lines(records)


def _loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _merge_rounds(header, by_case):
    """One worker report from several rounds: each figure is the median over the rounds."""
    if "unavailable" in header:
        return header
    merged = {k: v for k, v in header.items() if k not in ("results", "errors")}
    merged["results"], merged["errors"] = {}, {}
    for case, answers in by_case.items():
        results = [a["result"] for a in answers if "result" in a]
        errors = [a.get("error", "no answer") for a in answers if "result" not in a]
        if errors:
            merged["errors"][case] = errors[0]
        if not results:
            continue
        first = dict(results[0])
        if "value" in first:
            first["rounds"] = [x["value"] for x in results]
            for key in ("value", "cpu_value", "op_us", "numpy_us", "cpu_op_us", "cpu_numpy_us"):
                if key in first:
                    first[key] = statistics.median(x[key] for x in results)
        merged["results"][case] = first
    return merged


_CLOCK = "value"        # or "cpu_value" (--clock cpu)


def _value(worker_out, case):
    if not worker_out or "unavailable" in worker_out:
        return None
    result = worker_out.get("results", {}).get(case)
    return None if result is None else result.get(_CLOCK, result.get("value"))


def _check(worker_out, case):
    """What the worker's check of the case's step found before timing it (_worker.check_step)."""
    if not worker_out or "unavailable" in worker_out:
        return None
    return (worker_out.get("results", {}).get(case) or {}).get("check")


def _ratio(ours, peer, higher_is_better):
    if ours is None or peer is None or ours <= 0 or peer <= 0:
        return None
    return ours / peer if higher_is_better else peer / ours


def build_report(args, raw, single, torch_version, mxnet_python, notes):
    rows = []
    versions = {}
    for impl in ("ours", "torch", "mxnet"):
        for out in raw[impl].values():
            if out and out.get("version"):
                versions[impl] = out["version"]
            if out and "unavailable" in out:
                notes.append("%s: %s" % (impl, out["unavailable"]))
            for case, err in (out or {}).get("errors", {}).items():
                notes.append("%s %s failed: %s" % (impl, case, err.strip().splitlines()[-1]))
    for name, label, unit, higher, mins, absolute in CASES:
        if getattr(args, "cases", None) and name not in args.cases:
            continue
        for threads in args.threads:
            ours = _value(raw["ours"].get(threads), name)
            row = {"case": name, "label": label, "unit": unit, "threads": threads,
                   "higher_is_better": higher, "ours": ours}
            checks = []
            for peer in PEERS:
                value = _value(raw[peer].get(threads), name)
                row[peer] = value
                row["ratio_" + peer] = _ratio(ours, value, higher)
                if peer in mins and row["ratio_" + peer] is not None:
                    checks.append(row["ratio_" + peer] >= mins[peer])
            row["target"] = "; ".join(["%s >= %gx" % (p, m) for p, m in mins.items()]
                                      + (["%s %g %s" % (absolute[0], absolute[1], unit)]
                                         if absolute else []))
            if absolute and ours is not None:
                checks.append(ours <= absolute[1] if absolute[0] == "<=" else ours >= absolute[1])
            row["meets_target"] = all(checks) if checks else None
            step_checks = {impl: _check(raw[impl].get(threads), name) for impl in ("ours",) + PEERS}
            if any(step_checks.values()):
                row["step_checks"] = step_checks
            if name == "op_overhead":
                prefix = "cpu_" if _CLOCK == "cpu_value" else ""
                for impl in ("ours",) + PEERS:
                    result = (raw[impl].get(threads) or {}).get("results", {}).get(name)
                    if result:
                        row["%s_op_us" % impl] = result.get(prefix + "op_us")
                row["numpy_us"] = ((raw["ours"].get(threads) or {}).get("results", {})
                                   .get(name, {}).get(prefix + "numpy_us"))
            rows.append(row)
            if name.startswith("opt_"):
                fallback = _value(raw["ours_numpy"].get(threads), name)
                fused = ((raw["ours"].get(threads) or {}).get("results", {}).get(name, {})
                         .get("fused_kernels"))
                if fused and fallback is not None:
                    rows.append({"case": name + "_numpy", "label": label + " [NumPy fallback]",
                                 "unit": unit, "threads": threads, "higher_is_better": higher,
                                 "ours": fallback, "torch": row["torch"], "mxnet": row["mxnet"],
                                 "ratio_torch": _ratio(fallback, row["torch"], higher),
                                 "ratio_mxnet": _ratio(fallback, row["mxnet"], higher),
                                 "target": "(reference)", "meets_target": None})
                elif not fused:
                    notes.append("numba is not installed: the optimizer rows are the NumPy path.")
    if getattr(args, "cases", None):
        return _report(args, rows, notes, versions, torch_version, mxnet_python)
    comp = single["compression"]
    comp_results = (comp or {}).get("results", {}).get("compression") or {}
    for op in ("2bit quantize+pack", "2bit unpack"):
        value = comp_results.get(op, {}).get("value")
        rows.append({"case": "compression_" + op.split()[1].replace("+", "_"),
                     "label": op + " (1 thread)", "unit": "M values/s", "threads": 1,
                     "higher_is_better": True, "ours": value, "torch": None, "mxnet": None,
                     "ratio_torch": None, "ratio_mxnet": None, "target": ">= 500 M values/s",
                     "meets_target": None if value is None else value >= 500,
                     "step_checks": {"ours": comp_results.get(op, {}).get("check")}})
    mem = {impl: (out or {}).get("results", {}).get("memory")
           for impl, out in single["memory"].items()}
    ours_mem = mem.get("ours") or {}
    rows.append({"case": "memory_growth", "label": "peak RSS growth, MLP b64 steps 100 -> 1000",
                 "unit": "MiB", "threads": 1, "higher_is_better": False,
                 "ours": ours_mem.get("value"),
                 "torch": (mem.get("torch") or {}).get("value"),
                 "mxnet": (mem.get("mxnet") or {}).get("value"),
                 "ratio_torch": None, "ratio_mxnet": None, "target": "flat (< 1 MiB)",
                 "meets_target": None if ours_mem.get("value") is None
                 else ours_mem["value"] < 1.0, "detail": mem})
    for case, label in PEAK_CASES.items():
        peaks = {impl: ((out or {}).get("results", {}).get(case) or {})
                 for impl, out in (single.get(case) or {}).items()}
        ours, torch = (peaks.get("ours") or {}).get("value"), (peaks.get("torch") or {}).get("value")
        rows.append({"case": case, "label": label, "unit": "MiB", "threads": 1,
                     "higher_is_better": False, "ours": ours, "torch": torch,
                     "mxnet": (peaks.get("mxnet") or {}).get("value"),
                     "ratio_torch": _ratio(ours, torch, False),
                     "ratio_mxnet": _ratio(ours, (peaks.get("mxnet") or {}).get("value"), False),
                     "target": "<= PyTorch's", "meets_target": None if ours is None or torch is None
                     else ours <= torch, "detail": peaks})
    helps = single["cli_help"]
    rows.append({"case": "cli_help", "label": helps.get("measured", "trainer --help"),
                 "unit": "s", "threads": 1, "higher_is_better": False, "ours": helps.get("value"),
                 "torch": helps.get("torch_import_s"), "mxnet": helps.get("mxnet_import_s"),
                 "ratio_torch": None, "ratio_mxnet": None, "target": "< 0.25 s",
                 "meets_target": None if helps.get("value") is None else helps["value"] < 0.25,
                 "detail": helps})
    if helps.get("note"):
        notes.append("trainer --help: " + helps["note"])
    return _report(args, rows, notes, versions, torch_version, mxnet_python)


def _report(args, rows, notes, versions, torch_version, mxnet_python):
    return {
        "command": " ".join(["python", "benchmarks/run_all.py"] + sys.argv[1:]),
        "machine": {"cpu": _cpu_name(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "versions": dict(versions, numpy=_numpy_version(), numba=_numba_version(),
                         torch=torch_version, mxnet=versions.get("mxnet")),
        "mxnet_python": mxnet_python,
        "quick": args.quick,
        "rounds": args.rounds,
        "cases": getattr(args, "cases", None),
        "clock": args.clock,
        "threads": args.threads,
        "rows": rows,
        "notes": notes,
    }


def _cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _numpy_version():
    import numpy
    return numpy.__version__


def _numba_version():
    try:
        import numba
    except ImportError:
        return None
    return numba.__version__


# ----------------------------------------------------------------------------- printing
def _fmt(value, unit):
    if value is None:
        return "-"
    if unit == "steps/s":
        return "%.0f" % value if value >= 10 else "%.2f" % value
    if unit in ("M values/s",):
        return "%.0f" % value
    if unit == "s":
        return "%.3f" % value
    return "%.2f" % value


def _fmt_ratio(value):
    return "-" if value is None else "%.2fx" % value


def markdown_table(report):
    head = ("| case | thr | unit | ours | PyTorch | ours vs PyTorch | MXNet | ours vs MXNet "
            "| target | met |")
    lines = [head, "|" + "---|" * 10]
    for r in report["rows"]:
        met = {True: "yes", False: "**no**", None: ""}[r.get("meets_target")]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["label"], r["threads"], r["unit"], _fmt(r["ours"], r["unit"]),
            _fmt(r.get("torch"), r["unit"]), _fmt_ratio(r.get("ratio_torch")),
            _fmt(r.get("mxnet"), r["unit"]), _fmt_ratio(r.get("ratio_mxnet")), r["target"], met))
    return "\n".join(lines)


def detail_lines(report):
    """Absolute figures behind the rows whose ratio alone would mislead."""
    lines = []
    for row in report["rows"]:
        if row["case"] == "op_overhead" and row.get("ours_op_us") is not None:
            lines.append("per-op, %d thread(s): the op costs %.2f us here, %s in PyTorch, %s in "
                         "MXNet; the bare NumPy multiply %.2f us" % (
                             row["threads"], row["ours_op_us"],
                             "-" if row.get("torch_op_us") is None else "%.2f us" % row["torch_op_us"],
                             "-" if row.get("mxnet_op_us") is None else "%.2f us" % row["mxnet_op_us"],
                             row["numpy_us"]))
        if row["case"] == "cli_help":
            d = row["detail"]
            lines.append("%s: %s s, of which Python start-up alone %s s; the peer columns of that "
                         "row are `import torch` / `import mxnet`" % (
                             d.get("measured", "trainer --help"), _fmt(d.get("value"), "s"),
                             _fmt(d.get("python_startup_s"), "s")))
        if row["case"] == "memory_growth":
            for impl, d in (row.get("detail") or {}).items():
                if d:
                    lines.append("memory, %s: RSS %.1f MiB at step 100, %.1f MiB at step 1000 "
                                 "(peak %.1f -> %.1f MiB)" % (
                                     impl, d.get("rss_100_mib") or 0, d.get("rss_end_mib") or 0,
                                     d["peak_100_mib"], d["peak_end_mib"]))
        if row["case"] in PEAK_CASES:
            for impl, d in (row.get("detail") or {}).items():
                if d.get("value") is not None:
                    lines.append("%s, %s: peak %.1f MiB, of which %.1f MiB before the model was "
                                 "built (interpreter and library) and %.1f MiB over %d steps" % (
                                     row["case"], impl, d["value"], d["before_model_mib"],
                                     d["step_mib"], d["steps"]))
        if row["case"] == "memory_growth":
            ours = (row.get("detail") or {}).get("ours") or {}
            if ours.get("step_transient_bytes") is not None:
                lines.append("memory, ours: one MLP step allocates %.2f MiB transiently (the "
                             "activations and the gradients not written in place; parameters: "
                             "%.2f MiB) and keeps %d bytes"
                             % (ours["step_transient_bytes"] / 2**20, ours["param_bytes"] / 2**20,
                                ours["step_retained_bytes"]))
    return lines


def print_report(report):
    m, v = report["machine"], report["versions"]
    print("%s, %s cores, Python %s; numpy %s, numba %s, torch %s, mxnet %s%s" % (
        m["cpu"], m["cores"], m["python"], v.get("numpy"), v.get("numba") or "-",
        v.get("torch") or "-", v.get("mxnet") or "-", " (quick)" if report["quick"] else ""))
    print()
    print(markdown_table(report))
    print()
    for line in calibration_lines(report):
        print(line)
    for line in detail_lines(report):
        print(line)
    for note in report["notes"]:
        print("note: " + note)


def markdown_section(report):
    m, v = report["machine"], report["versions"]
    lines = [
        "## Performance",
        "",
        "Produced by `%s` on %s (%s cores), Python %s, NumPy %s, numba %s, against PyTorch %s "
        "(eager; `fused=True` for the optimizer rows) and MXNet %s (imperative Gluon)."
        % (report["command"], m["cpu"], m["cores"], m["python"], v.get("numpy"),
           v.get("numba") or "not installed", v.get("torch") or "not installed",
           v.get("mxnet") or "not installed"),
        "Medians of several repeats (%d interleaved round(s)), timed on the %s clock; load "
        "average %s before, %s after; ratios above 1 mean trainer-cli is ahead."
        % (report["rounds"], "process CPU" if report.get("clock") == "cpu" else "wall",
           (report.get("load_average") or {}).get("before"),
           (report.get("load_average") or {}).get("after")),
        "",
        markdown_table(report),
        "",
    ]
    calibration = calibration_lines(report)
    if calibration:
        lines += ["Calibration (each side in its own process; `a + b` on 1-element arrays):", "",
                  "```"] + calibration + ["```", ""]
    lines += ["- " + line for line in detail_lines(report) + report["notes"]]
    return "\n".join(lines) + "\n"


def say(args, message):
    if not (args.json or args.markdown):
        print(message, file=sys.stderr, flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--markdown", action="store_true",
                        help="print a markdown section (command, versions, table, notes)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2],
                        help="thread counts to measure (default: 1 2)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="measure every case this many times per implementation, the "
                             "implementations taking turns, and report the median (default 3, "
                             "1 with --quick; more on a machine shared with other work)")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="wall time (default), or this process's CPU time: steadier on a "
                             "machine shared with other work, and equal to wall time on an idle "
                             "one for single-threaded runs")
    parser.add_argument("--mxnet-python", help="interpreter of a venv with mxnet==1.9.1")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    parser.add_argument("--no-mxnet", action="store_true", help="skip MXNet")
    parser.add_argument("--cases", nargs="+", metavar="CASE",
                        help="measure only these step cases (%s), without the one-off rows"
                             % ", ".join(c[0] for c in CASES))
    parser.add_argument("--load", metavar="JSON",
                        help="print a report saved with --json instead of measuring")
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    global _CLOCK
    _CLOCK = "cpu_value" if args.clock == "cpu" else "value"
    if args.load:
        with open(args.load) as f:
            report = rebuild(json.load(f), args)
    else:
        report = collect(args)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.markdown:
        sys.stdout.write(markdown_section(report))
    else:
        print_report(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
