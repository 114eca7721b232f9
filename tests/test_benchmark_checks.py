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
