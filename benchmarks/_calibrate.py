"""What a ratio depends on besides the code measured: the machine, each side's builds and
environment, and a one-op calibration of each side, so that a peer running slow shows.

Every benchmark records, for each side (ours, NumPy, PyTorch, MXNet, Lightning), the dict that
``describe()`` returns in the process that runs that side, and prints ``summary_lines()`` beside
its ratios. The calibration is the dispatch time of ``a + b`` on two 1-element arrays (``nd``,
NumPy, ``torch.Tensor``): a few microseconds of pure per-call overhead that no model changes.
When a ratio does not reproduce on another machine, compare these first: a peer whose add costs
twice what it costs elsewhere while ours costs the same is a slow peer (its build, its threads,
its environment), not a fast us.

A peer runs in a process of its own, started with ``peer_env()``: the parent's environment less
every thread, allocator and library-tuning variable (trainer_cli sets ``OPENBLAS_THREAD_TIMEOUT``
in the process that imports it, and a child inherits it), plus the thread counts the benchmark
sets deliberately, the same for both sides. ``describe()`` lists what of ours a process has
loaded, so a peer's record shows that it loaded nothing.

Standard library only at import (it also runs under MXNet's interpreter and its old NumPy).
"""
from __future__ import annotations

import os
import platform
import statistics
import sys
import sysconfig
import time

# Variables that change how a numerical library runs (its threads, how long idle threads spin,
# the allocator, the kernels it picks). A peer's process gets none of the parent's.
TUNING_PREFIXES = ("OMP_", "MKL_", "OPENBLAS_", "GOTO", "KMP_", "GOMP_", "NUMBA_", "MALLOC_",
                   "VECLIB_", "NUMEXPR_", "TORCH_", "ATEN_", "DNNL_", "ONEDNN_", "TRAINER_",
                   "MXNET_", "LRU_CACHE_", "PYTORCH_")
TUNING_NAMES = ("LD_PRELOAD",)
# The thread variables a benchmark sets, to one count, for every side alike.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")
CPU_FLAGS = ("avx2", "avx512f", "fma")
OURS = ("trainer_cli", "numba", "llvmlite")


def _is_tuning(name):
    return name.startswith(TUNING_PREFIXES) or name in TUNING_NAMES


def tuning_env(env=None):
    """The tuning variables set in ``env`` (default: this process's environment)."""
    env = os.environ if env is None else env
    return {k: v for k, v in sorted(env.items()) if _is_tuning(k)}


def peer_env(threads=None, base=None, extra=None):
    """A controlled environment for a side's process: ``base`` (default ``os.environ``) less every
    tuning variable, with THREAD_VARS set to ``threads`` when given, then ``extra``."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if not _is_tuning(k)}
    if threads is not None:
        for var in THREAD_VARS:
            env[var] = str(threads)
    env.update(extra or {})
    return env


def parse_cpuinfo(text):
    """Model name, the flags of CPU_FLAGS present, and the logical CPU count from /proc/cpuinfo."""
    model, flags, count = None, set(), 0
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "processor":
            count += 1
        elif key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = set(value.split())
    return {"model": model, "flags": {f: f in flags for f in CPU_FLAGS},
            "logical_cpus": count or None}


def cpu(path="/proc/cpuinfo"):
    try:
        with open(path) as f:
            info = parse_cpuinfo(f.read(1 << 20))
    except OSError:
        info = {"model": None, "flags": {}, "logical_cpus": None}
    info["model"] = info["model"] or platform.processor() or platform.machine()
    info["usable_cpus"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return info


def _dist_version(name):
    """An installed distribution's version without importing it (numba is ours: a peer's process
    must not load it)."""
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:
        return None


def numpy_build(np):
    out = {"version": np.__version__}
    try:            # NumPy >= 1.25: the build's BLAS as a dict
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        out["blas"] = "%s %s" % (blas.get("name"), blas.get("version"))
    except Exception:
        pass
    return out


def parse_torch_config(text):
    """BLAS, OpenMP, MKL-DNN/oneDNN and CPU capability lines of ``torch.__config__.show()``."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip().lstrip("- ").strip()
        if line.startswith("OpenMP"):
            out["openmp"] = line
        elif "MKL-DNN" in line or "oneDNN" in line:
            out["mkldnn"] = line.split(" (Git Hash")[0]
        elif "Math Kernel Library" in line:
            out["mkl"] = line.split(" for ")[0]
        elif line.startswith("CPU capability usage"):
            out["capability_usage"] = line.split(":", 1)[1].strip()
        elif line.startswith("Build settings"):
            for item in line.split(":", 1)[1].split(", "):
                key, _, value = item.partition("=")
                if key.strip() in ("BLAS_INFO", "USE_OPENMP", "USE_MKLDNN", "BUILD_TYPE"):
                    out[key.strip().lower()] = value.strip()
    return out


def torch_build(torch):
    out = {"version": torch.__version__, "threads": torch.get_num_threads(),
           "interop_threads": torch.get_num_interop_threads()}
    try:
        out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    except Exception:
        pass
    try:
        out.update(parse_torch_config(torch.__config__.show()))
    except Exception:
        pass
    return out


def import_torchvision():
    """``(torchvision, note)``: torchvision imported for a peer. The package index here holds
    only torchvision's CUDA build, whose C operators cannot load beside PyTorch's CPU build; its
    import then fails in the modules that register those operators' meta and autograd rules, and
    so does the import of Lightning and torchmetrics, which import torchvision when installed.
    Those two modules are replaced by empty ones, and torchvision's transforms and datasets
    (Python over Pillow and torch) load as with a CPU build; ``note`` says so, None otherwise.
    Raises ImportError when torchvision is not installed."""
    import types
    try:
        import torchvision
        return torchvision, None
    except RuntimeError:
        pass
    stubbed = ("torchvision._meta_registrations", "torchvision._autograd_registrations")
    for name in stubbed:
        sys.modules[name] = types.ModuleType(name)
    for name in [m for m in sys.modules if m.startswith("torchvision") and m not in stubbed]:
        del sys.modules[name]
    import torchvision
    return torchvision, "C operators not loaded (a CUDA build beside PyTorch's CPU build)"


def per_call_us(fn, number=2000, repeats=7):
    """Microseconds per call of a very short ``fn``: the minimum over ``repeats`` loops (the
    steadiest figure on a loaded machine: load only ever adds) and the median."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return {"min_us": min(samples), "median_us": statistics.median(samples)}


def calibrate(kind, module):
    """The one-op calibration: ``a + b`` on two 1-element arrays of ``module`` (``kind`` is
    ``numpy``, ``nd`` for trainer_cli's or MXNet's ``nd``, or ``torch``)."""
    if kind == "torch":
        a, b = module.ones(1), module.ones(1)
    elif kind == "nd":
        a, b = module.ones((1,)), module.ones((1,))
    else:
        a, b = module.ones(1, dtype=module.float32), module.ones(1, dtype=module.float32)
    return dict(per_call_us(lambda: a + b), op="a + b, 1-element float32, " + kind)


def _threadpools():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    return [{"api": p.get("internal_api"), "threads": p.get("num_threads"),
             "version": p.get("version"), "lib": os.path.basename(p.get("filepath", ""))}
            for p in threadpool_info()]


def loaded_of_ours(modules=None):
    """Which of OURS this process has imported (empty in a peer's process)."""
    modules = sys.modules if modules is None else modules
    return sorted({name.split(".")[0] for name in modules} & set(OURS))


def python_build(config_args=None, shared=None):
    """How this interpreter was compiled: ``"PGO, LTO, static"`` and the like. A build without
    profile-guided optimization (pyenv's default) runs Python-heavy steps, ours and a peer's,
    markedly slower than a distribution's."""
    if config_args is None:
        config_args = sysconfig.get_config_var("CONFIG_ARGS") or ""
    if shared is None:
        shared = bool(sysconfig.get_config_var("Py_ENABLE_SHARED"))
    return ", ".join(["PGO" if "--enable-optimizations" in config_args else "no PGO",
                      "LTO" if "--with-lto" in config_args else "no LTO",
                      "shared libpython" if shared else "static libpython"])


def describe(side, torch=None, nd=None, calibrate_numpy=True):
    """This process's record for ``side``: machine, builds, environment, thread pools and the
    calibration of NumPy and, when given, of ``nd`` and ``torch``."""
    out = {"side": side, "pid": os.getpid(), "cpu": cpu(),
           "python": "%s %s (%s)" % (platform.python_implementation(), platform.python_version(),
                                     platform.python_compiler()),
           "python_build": python_build(),
           "numba": _dist_version("numba"), "env": tuning_env(), "loaded_of_ours": None,
           "load_average": [round(v, 2) for v in os.getloadavg()],
           "calibration_us": {}}
    if "numpy" in sys.modules or calibrate_numpy:
        import numpy
        out["numpy"] = numpy_build(numpy)
        if calibrate_numpy:
            out["calibration_us"]["numpy"] = calibrate("numpy", numpy)
    if nd is not None:
        out["calibration_us"]["nd"] = calibrate("nd", nd)
    if torch is not None:
        out["torch"] = torch_build(torch)
        out["calibration_us"]["torch"] = calibrate("torch", torch)
    out["threadpools"] = _threadpools()
    out["loaded_of_ours"] = loaded_of_ours()
    return out


def summary_lines(records):
    """Human lines for a list of ``describe()`` records: the machine once, then a line per side."""
    if not records:
        return []
    first = records[0]["cpu"]
    flags = " ".join("%s%s" % ("" if on else "no ", f) for f, on in first["flags"].items())
    lines = ["machine: %s, %s logical CPUs (%s usable), %s; load average %s when the first "
             "side started" % (first["model"], first["logical_cpus"], first.get("usable_cpus"),
                              flags, " ".join("%.2f" % v for v in records[0]["load_average"]))]
    for rec in records:
        cal = rec["calibration_us"]
        numpy_us = (cal.get("numpy") or {}).get("min_us")
        cal = ", ".join("%s add %.2f us (min; median %.2f%s)" % (
            k, v["min_us"], v["median_us"], "" if k == "numpy" or not numpy_us
            else "; %.1fx this process's NumPy add" % (v["min_us"] / numpy_us))
            for k, v in cal.items())
        builds = [rec["python"].split(" (")[0]
                  + (" [%s]" % rec["python_build"] if rec.get("python_build") else "")]
        if rec.get("numpy"):
            builds.append("numpy %s%s" % (rec["numpy"]["version"],
                                          " [%s]" % rec["numpy"]["blas"]
                                          if rec["numpy"].get("blas") else ""))
        if rec.get("torch"):
            t = rec["torch"]
            builds.append("torch %s [%s, %s, %s, capability %s, %s/%s threads]" % (
                t["version"], "BLAS=" + str(t.get("blas_info")), t.get("openmp", "no OpenMP"),
                t.get("mkldnn", "no oneDNN"), t.get("cpu_capability"), t["threads"],
                t["interop_threads"]))
        if "trainer_cli" in rec["loaded_of_ours"]:
            builds.append("numba %s" % rec["numba"])
        if rec.get("extra"):
            builds.extend("%s %s" % kv for kv in sorted(rec["extra"].items()))
        pools = ", ".join("%s(%s)=%s" % (p["api"], p["lib"], p["threads"])
                          for p in rec.get("threadpools") or [])
        lines.append("  %s [pid %s]: %s; %s; env {%s}; pools {%s}; loaded of ours: %s" % (
            rec["side"], rec["pid"], cal or "no calibration", ", ".join(builds),
            " ".join("%s=%s" % kv for kv in rec["env"].items()), pools,
            ", ".join(rec["loaded_of_ours"]) or "nothing"))
    return lines


def side_records(sides, threads=None):
    """Each side's record (``describe``), taken in a process of its own started as a benchmark
    starts that side's (``peer_env(threads)``, the repository root as working directory);
    ``sides`` maps a side to its Python interpreter."""
    import json
    import subprocess
    here = os.path.dirname(os.path.abspath(__file__))
    records = []
    for side, python in sides.items():
        proc = subprocess.run([python, os.path.join(here, "_calibrate.py"), side],
                              env=peer_env(threads), capture_output=True, text=True,
                              cwd=os.path.dirname(here), timeout=300)
        if proc.returncode == 0 and proc.stdout.strip():
            records.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return records


def main_with_record(main, side="ours"):
    """Run a benchmark's ``main()``, then print this process's record (ours: trainer_cli's ``nd``
    calibrated) under its figures: on stdout, or on stderr when ``--json`` keeps stdout for the
    JSON; under MPI on rank 0 only. Returns ``main()``'s exit status."""
    status = main()
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
    if rank == "0":
        from trainer_cli import nd
        out = sys.stderr if "--json" in sys.argv else sys.stdout
        for line in summary_lines([describe(side, nd=nd)]):
            print(line, file=out)
    return status


if __name__ == "__main__":     # python benchmarks/_calibrate.py [side]: this process's record
    import json
    side = sys.argv[1] if len(sys.argv) > 1 else "numpy"
    kwargs = {}
    if side == "torch":
        import torch as _torch
        kwargs["torch"] = _torch
    elif side == "ours":
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from trainer_cli import nd as _nd
        kwargs["nd"] = _nd
    elif side == "mxnet":
        from mxnet import nd as _nd
        kwargs["nd"] = _nd
    print(json.dumps(describe(side, **kwargs)))
