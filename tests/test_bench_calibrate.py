"""benchmarks/_calibrate.py: what every benchmark records beside its ratios (no torch needed)."""
import importlib.util
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "_calibrate", os.path.join(ROOT, "benchmarks", "_calibrate.py"))
cal = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cal)

CPUINFO = """processor\t: 0
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw
processor\t: 1
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse2 avx avx2 fma avx512f avx512bw
"""

TORCH_CONFIG = """PyTorch built with:
  - GCC 13.3
  - Intel(R) oneAPI Math Kernel Library Version 2024.2-Product Build 20240605 for Intel(R) 64 architecture applications
  - Intel(R) MKL-DNN v3.12.0 (Git Hash 80afa71049cd)
  - OpenMP 201511 (a.k.a. OpenMP 4.5)
  - CPU capability usage: AVX512
  - Build settings: BLAS_INFO=mkl, BUILD_TYPE=Release, USE_MKLDNN=ON, USE_OPENMP=ON, USE_CUDA=0
"""


def test_cpuinfo_model_flags_and_count():
    info = cal.parse_cpuinfo(CPUINFO)
    assert info == {"model": "AMD EPYC 9R14", "logical_cpus": 2,
                    "flags": {"avx2": True, "avx512f": True, "fma": True}}
    no_avx512 = cal.parse_cpuinfo(CPUINFO.replace(" avx512f", ""))
    assert no_avx512["flags"] == {"avx2": True, "avx512f": False, "fma": True}


def test_torch_config_summary():
    got = cal.parse_torch_config(TORCH_CONFIG)
    assert got["blas_info"] == "mkl" and got["use_openmp"] == "ON" and got["use_mkldnn"] == "ON"
    assert got["mkldnn"] == "Intel(R) MKL-DNN v3.12.0"
    assert got["openmp"].startswith("OpenMP 201511")
    assert got["capability_usage"] == "AVX512"
    assert got["mkl"].startswith("Intel(R) oneAPI Math Kernel Library Version 2024.2")


def test_peer_env_drops_every_tuning_variable_and_sets_threads_alike():
    parent = {"PATH": "/bin", "HOME": "/h", "OPENBLAS_THREAD_TIMEOUT": "20",
              "OMP_NUM_THREADS": "7", "MALLOC_ARENA_MAX": "2", "KMP_BLOCKTIME": "0",
              "TRAINER_NO_NUMBA": "1", "LD_PRELOAD": "libjemalloc.so", "NUMBA_NUM_THREADS": "3"}
    env = cal.peer_env(1, base=parent)
    assert env["PATH"] == "/bin" and env["HOME"] == "/h"
    for gone in ("OPENBLAS_THREAD_TIMEOUT", "MALLOC_ARENA_MAX", "KMP_BLOCKTIME",
                 "TRAINER_NO_NUMBA", "LD_PRELOAD", "NUMBA_NUM_THREADS"):
        assert gone not in env
    assert {v: env[v] for v in cal.THREAD_VARS} == {v: "1" for v in cal.THREAD_VARS}
    assert cal.tuning_env(env) == {v: "1" for v in cal.THREAD_VARS}
    assert cal.peer_env(None, base=parent, extra={"X": "y"}) == {"PATH": "/bin", "HOME": "/h",
                                                                "X": "y"}


def test_loaded_of_ours():
    assert cal.loaded_of_ours({"numpy": 1, "torch.nn": 1}) == []
    assert cal.loaded_of_ours({"trainer_cli.gluon": 1, "numba.core": 1}) == ["numba",
                                                                            "trainer_cli"]


def test_calibration_and_record_of_a_clean_process():
    from trainer_cli import nd
    got = cal.calibrate("nd", nd)
    assert 0 < got["min_us"] <= got["median_us"]
    assert cal.calibrate("numpy", np)["min_us"] > 0
    # A child started with peer_env() inherits none of this process's tuning (trainer_cli set
    # OPENBLAS_THREAD_TIMEOUT here when it was imported before NumPy) and loads nothing of ours.
    code = ("import json, sys; sys.path.insert(0, %r); import _calibrate as c; "
            "print(json.dumps(c.describe('numpy')))" % os.path.join(ROOT, "benchmarks"))
    env = cal.peer_env(1, base=dict(os.environ, OPENBLAS_THREAD_TIMEOUT="20"))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True)
    import json
    rec = json.loads(out.stdout)
    assert rec["loaded_of_ours"] == []
    assert rec["env"] == {v: "1" for v in cal.THREAD_VARS}
    assert rec["calibration_us"]["numpy"]["min_us"] > 0
    lines = cal.summary_lines([rec])
    assert lines[0].startswith("machine: ") and "loaded of ours: nothing" in lines[1]


def test_summary_of_a_torch_side_and_the_runner_against_its_peers():
    rec = {"side": "torch bare", "pid": 1, "cpu": {"model": "X", "flags": {"avx2": True,
           "avx512f": False, "fma": True}, "logical_cpus": 2, "usable_cpus": 2},
           "python": "CPython 3.11.7 (GCC)", "python_build": "no PGO, no LTO, shared libpython",
           "numba": None, "env": {"OMP_NUM_THREADS": "1"},
           "load_average": [1.0, 1.0, 1.0], "loaded_of_ours": [], "threadpools": None,
           "numpy": {"version": "2.4.6"},
           "calibration_us": {"numpy": {"min_us": 0.5, "median_us": 0.6},
                              "torch": {"min_us": 2.0, "median_us": 2.5}},
           "torch": {"version": "2.13.0+cpu", "threads": 1, "interop_threads": 2,
                     "cpu_capability": "AVX2", "blas_info": "mkl", "openmp": "OpenMP 201511"}}
    machine, side = cal.summary_lines([rec])
    assert "avx2 no avx512f fma" in machine and "load average 1.00 1.00 1.00" in machine
    assert "torch add 2.00 us" in side and "4.0x this process's NumPy add" in side
    assert "capability AVX2, 1/2 threads" in side and "loaded of ours: nothing" in side
    assert "CPython 3.11.7 [no PGO, no LTO, shared libpython]" in side


def test_python_build_reads_the_interpreters_configure_arguments():
    assert cal.python_build("'--prefix=/x' '--enable-shared'", True) == \
        "no PGO, no LTO, shared libpython"
    assert cal.python_build("'--enable-optimizations' '--with-lto'", False) == \
        "PGO, LTO, static libpython"

    spec = importlib.util.spec_from_file_location(
        "bench_runner", os.path.join(ROOT, "benchmarks", "bench_runner.py"))
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    rates = {"as configured": [900.0, 1000.0, 800.0], "lightning": [100.0, 100.0, 200.0],
             "bare": [1000.0, 1200.0, 1000.0], "torch bare": [500.0, 400.0, 500.0]}
    runs = {"torch bare": [{"cpu_steps_per_s": 600.0}],
            "lightning": [{"cpu_steps_per_s": 120.0, "checkpoints_kept": ["a", "b"]}]}
    got = runner.peer_report(rates, runs, 0.85)
    assert got["runner_over_lightning"] == 9.0          # median of 9, 10, 4 (paired by round)
    assert got["lightning_over_torch_bare"] == 0.25     # median of 0.2, 0.25, 0.4
    assert got["bare_over_torch_bare"] == 2.0           # median of 2, 3, 2
    assert got["met_against_peers"] is True
    assert runner.peer_report(rates, runs, 0.79)["met_against_peers"] is False
