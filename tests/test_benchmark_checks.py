"""The benchmarks check their work before timing it (benchmarks/_worker.py, check_step): a step
must change the weights and keep them finite, and an optimizer-only step must equal the
reference rule; the rows of results.json carry what the check found."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _worker  # noqa: E402


def _numpy_step(update):
    w = [np.linspace(-1, 1, 12, dtype=np.float32), np.full(5, 0.5, np.float32)]
    g = [np.linspace(2, -2, 12, dtype=np.float32), np.arange(5, dtype=np.float32)]

    def step():
        for wi, gi in zip(w, g):
            update(wi, gi)
    return _worker._with_weights(step, lambda: [x.copy() for x in w],
                                 lambda: [x.copy() for x in g], rule="mxnet")


def _sgd(wi, gi):
    wi -= np.float32(0.01) * gi


def test_a_step_that_does_nothing_or_overflows_is_refused():
    with pytest.raises(_worker.CheckFailed, match="changes_weights"):
        _worker.check_step(_numpy_step(lambda w, g: None), lambda: None)

    def to_nan(w, g):
        w[0] = np.nan
    with pytest.raises(_worker.CheckFailed, match="finite"):
        _worker.check_step(_numpy_step(to_nan), lambda: None)


def test_an_optimizer_step_is_held_to_the_reference_rule():
    params = {"learning_rate": 0.01, "momentum": 0.9}
    check = _worker.check_step(_numpy_step(_sgd), lambda: None, optimizer=("sgd", params))
    assert check["matches_reference"] and check["max_rel_error"] < 1e-6

    def twice_the_rate(wi, gi):
        wi -= np.float32(0.02) * gi
    with pytest.raises(_worker.CheckFailed, match="matches_reference"):
        _worker.check_step(_numpy_step(twice_the_rate), lambda: None, optimizer=("sgd", params))


@pytest.mark.parametrize("name,params", [("sgd", {"learning_rate": 0.01, "momentum": 0.9}),
                                         ("adam", {"learning_rate": 0.001})])
def test_our_optimizer_rows_pass_their_check(name, params):
    lib = _worker.Gluon("ours")
    step = lib.optimizer_step(name, params, n_params=4000, n_tensors=4)
    check = _worker.check_step(step, lib.sync, optimizer=(name, params))
    assert check["changes_weights"] and check["finite"] and check["matches_reference"]


def test_the_perceptron_step_passes_its_check():
    lib = _worker.Gluon("ours")
    check = _worker.check_step(lib.perceptron_step(), lib.sync)
    assert check == {"changes_weights": True, "finite": True}


@pytest.mark.parametrize("name", ["alexnet", "googlenet", "resnet"])
def test_the_book_networks_train_and_pass_their_check(name):
    """The book chapters' cases (benchmarks/_book_nets.py) build as the book writes them and
    take a step that changes the weights and keeps them finite, here on a batch of two."""
    lib = _worker.Gluon("ours")
    check = _worker.check_step(lib.book_step(name, 2), lib.sync)
    assert check == {"changes_weights": True, "finite": True}


def test_the_mobilenet_step_trains_and_passes_its_check():
    """run_all's MobileNet case (the model zoo's mobilenet0_5: depthwise and 1x1 convolutions)
    takes a step that changes the weights and keeps them finite, here on a batch of two."""
    lib = _worker.Gluon("ours")
    check = _worker.check_step(lib.mobilenet_step(2), lib.sync)
    assert check == {"changes_weights": True, "finite": True}


def test_a_script_loop_that_does_nothing_is_refused():
    w = np.ones(3, np.float32)
    with pytest.raises(_worker.CheckFailed, match="changes_weights"):
        _worker.check_loop("no-op", lambda: None, lambda: [w.copy()])

    def step():
        w[:] -= 0.5
    assert _worker.check_loop("halving", step, lambda: [w.copy()]) == {
        "changes_weights": True, "finite": True}


def test_a_codec_is_checked_by_its_round_trip():
    from trainer_cli.kvstore.compression import dequantize_2bit, quantize_2bit
    grad = np.linspace(-1.5, 1.5, 101, dtype=np.float32)
    levels = (-0.5, 0.0, 0.5)
    check = _worker.check_round_trip(quantize_2bit, dequantize_2bit, grad, 0.5, levels)
    assert check["round_trip"] and check["levels_only"] and check["sends_something"]

    def keeps_no_residual(g, residual, threshold):
        packed = quantize_2bit(g, residual, threshold)
        residual[:] = 0
        return packed
    with pytest.raises(_worker.CheckFailed, match="round_trip"):
        _worker.check_round_trip(keeps_no_residual, dequantize_2bit, grad, 0.5, levels)
    with pytest.raises(_worker.CheckFailed, match="sends_something"):
        _worker.check_round_trip(quantize_2bit, lambda p, n, t: np.zeros(n, np.float32), grad,
                                 0.5, levels)


def test_the_compression_rows_carry_their_check():
    import bench_compression
    rows = bench_compression.run(4096, 1, 0.5, False, 0)
    assert [row["check"]["round_trip"] for row in rows] == [True] * 4


def test_the_sparse_benchmark_checks_its_step_in_the_worker_process():
    import bench_sparse
    got, why = bench_sparse.measure(sys.executable, "ours", "sgd", 5000, 5)
    assert why is None and got["check"] == {"changes_weights": True, "finite": True}


def test_an_inference_step_is_checked_for_finite_input_dependent_repeatable_outputs():
    outputs = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert _worker.check_predict(lambda: outputs.copy()) == {
        "finite": True, "depends_on_input": True, "repeatable": True}
    with pytest.raises(_worker.CheckFailed, match="depends_on_input"):
        _worker.check_predict(lambda: np.ones((2, 3), np.float32))
    with pytest.raises(_worker.CheckFailed, match="finite"):
        _worker.check_predict(lambda: np.where(outputs > 2, np.float32(np.inf), outputs))
    calls = []

    def drifting():     # a "prediction" that updates state each call, as training mode would
        calls.append(1)
        return outputs * len(calls)
    with pytest.raises(_worker.CheckFailed, match="repeatable"):
        _worker.check_predict(drifting)



def test_every_layer_case_runs_on_our_side(capsys):
    """benchmarks/bench_layers.py's cases (benchmarks/_layer_cases.py): each builds, passes its
    finiteness check and is timed; PyTorch's side runs the same shapes where it is installed."""
    import json
    import _layer_cases
    _layer_cases.main(["ours", "1", "1", "1"])
    times = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert set(times) == set(_layer_cases.CASES)
    assert all(len(v) == 1 and v[0] > 0 for v in times.values())
