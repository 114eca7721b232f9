"""The GPU benchmark's host-side logic (benchmarks/bench_gpu.py), which runs without a device:
each side in a clean process of its own, and ratios paired round by round."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import bench_gpu  # noqa: E402


def _side(side, rates, adam_ms):
    return {"side": side, "record": {"side": side, "extra": {"device": "GPU X"}},
            "checks": {"mlp_sgd_b64": {"finite": True}},
            "results": dict(rates, adam_100m_ms=adam_ms)}


def test_ratios_pair_the_rounds_where_both_sides_measured(monkeypatch):
    # Round 2 of ours failed: its torch figures stay in torch's medians but pair with nothing.
    answers = {("ours", 0): _side("ours", {"mlp_sgd_b64": 300.0, "mlp_adam_b512": 200.0}, 10.0),
               ("torch", 0): _side("torch", {"mlp_sgd_b64": 100.0, "mlp_adam_b512": 100.0}, 20.0),
               ("ours", 1): {"side": "ours", "unavailable": "exit 1: CheckFailed"},
               ("torch", 1): _side("torch", {"mlp_sgd_b64": 1.0, "mlp_adam_b512": 1.0}, 1.0),
               ("ours", 2): _side("ours", {"mlp_sgd_b64": 400.0, "mlp_adam_b512": 100.0}, 10.0),
               ("torch", 2): _side("torch", {"mlp_sgd_b64": 200.0, "mlp_adam_b512": 100.0}, 15.0)}
    calls = []

    def fake(side, threads, quick, dry_run=False):
        calls.append(side)
        return answers[(side, sum(1 for c in calls if c == side) - 1)]
    monkeypatch.setattr(bench_gpu, "measure_side", fake)
    rep = bench_gpu.report(3, 1, True)
    assert calls == ["ours", "torch", "torch", "ours", "ours", "torch"]     # alternating order
    assert rep["paired_rounds"] == 2
    rows = {r["case"]: r for r in rep["cases"]}
    assert rows["mlp_sgd_b64"]["ratio"] == (3.0 + 2.0) / 2          # median of 300/100, 400/200
    assert rows["mlp_sgd_b64"]["torch"] == 100.0                    # median of 100, 1, 200
    assert rows["adam_100m"]["ratio"] == (2.0 + 1.5) / 2            # PyTorch's time over ours
    assert rep["notes"] == ["ours, round 2: exit 1: CheckFailed"]


def test_each_side_runs_in_a_controlled_process_of_its_own(monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.setenv("TRAINER_SOMETHING", "1")
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    # PyTorch's process gets no path to this checkout, ours gets it first.
    assert "PYTHONPATH" not in bench_gpu.side_env("torch", 2)
    assert bench_gpu.side_env("torch", 2)["OMP_NUM_THREADS"] == "2"
    assert bench_gpu.side_env("ours", 2)["PYTHONPATH"].startswith(bench_gpu.ROOT + ":")
    got = bench_gpu.measure_side("ours", 1, True, dry_run=True)
    assert got.get("dry_run") is True, got
    record = got["record"]
    assert record["pid"] != __import__("os").getpid()
    assert record["loaded_of_ours"] == ["trainer_cli"]
    assert record["env"]["OMP_NUM_THREADS"] == "1" and "TRAINER_SOMETHING" not in record["env"]
    assert record["calibration_us"]["nd"]["min_us"] > 0


def test_the_gpu_profile_counts_cupys_waiting_methods_only():
    """profile_gpu_step's reading of cProfile's records: CuPy's transfers and waits a step (as
    cProfile names C methods), never a dict's ``get`` or another type's ``synchronize``."""
    import profile_gpu_step

    class Stats:
        stats = {("~", 0, "<method 'get' of 'cupy._core.core._ndarray_base' objects>"):
                 (400, 400, 0.1, 0.1, {}),
                 ("~", 0, "<method 'nonzero' of 'cupy._core.core._ndarray_base' objects>"):
                 (200, 200, 0.1, 0.1, {}),
                 ("~", 0, "<method 'synchronize' of 'cupy.cuda.stream.Stream' objects>"):
                 (100, 100, 0.1, 0.1, {}),
                 ("~", 0, "<method 'get' of 'dict' objects>"): (9000, 9000, 0.1, 0.1, {}),
                 ("~", 0, "<method 'synchronize' of 'torch.cuda.Stream' objects>"):
                 (50, 50, 0.1, 0.1, {}),
                 ("x.py", 3, "get"): (70, 70, 0.1, 0.1, {})}
    assert profile_gpu_step._device_waits(Stats, 200) == {"get": 2.0, "nonzero": 1.0,
                                                           "synchronize": 0.5}
