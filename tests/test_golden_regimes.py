"""MXNet 1.9.1 in the regimes where a formula's details show (tests/data/mxnet_regimes: the cases
in regimes.py, written against MXNet's API, replayed here with trainer_cli in its place).

Each regime is there because a small mistake in a formula survived the other golden cases: eps
outside AdaGrad's square root (dense and row_sparse), a Parameter's wd_mult ignored on the
Trainer's path, clip_global_norm's epsilon, the sign of zeros under lr=-0.0, float16 steps only
the float32 master copy keeps."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import trainer_cli
from trainer_cli import _jit
from trainer_cli.optimizer import kernels

HERE = Path(__file__).resolve().parent / "data" / "mxnet_regimes"
sys.path.insert(0, str(HERE))
import regimes  # noqa: E402

RECORDED = json.loads((HERE / "regimes.json").read_text())["regimes"]
ATOL, RTOL = 1e-7, 1e-5


def _close(got, want, what, atol=ATOL, rtol=RTOL):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, "%s: shape %s, MXNet %s" % (what, got.shape, want.shape)
    bad = ~(np.abs(got - want) <= atol + rtol * np.abs(want))
    assert not bad.any(), "%s: %s where MXNet has %s (at %s)" % (
        what, got[bad][:4], want[bad][:4], np.argwhere(bad)[:4].tolist())


@pytest.fixture(scope="module")
def replayed():
    """``get(regime, body)``: the regime run by trainer_cli, once per module, with the optimizer
    kernels (numba loops, fused multi-tensor steps) taking every tensor they can
    (``body="kernels"``) or none (``"numpy"``: numba off, the NumPy bodies), so that both are
    held to MXNet's numbers."""
    made = {}

    def get(regime, body="numpy"):
        if (regime, body) not in made:
            saved = kernels.MIN_SIZE, _jit._numba
            if body == "kernels":
                kernels.MIN_SIZE = 1
            else:
                _jit._numba = False
            try:
                made[regime, body] = regimes.REGIMES[regime](trainer_cli)
            finally:
                kernels.MIN_SIZE, _jit._numba = saved
        return made[regime, body]
    return get


def test_every_regime_was_recorded():
    assert sorted(RECORDED) == sorted(regimes.REGIMES)


@pytest.mark.parametrize("body", ["numpy", "kernels"])
@pytest.mark.parametrize("regime", ["small_gradients", "small_gradients_row_sparse",
                                    "trainer_multipliers", "float16_multi_precision"])
def test_trajectories_match_mxnet(regime, body, replayed):
    got, want = replayed(regime, body), RECORDED[regime]
    assert sorted(got) == sorted(want)
    for key, case in want.items():
        if "inputs" in case:
            assert got[key]["inputs"] == case["inputs"], "%s %s: the inputs drifted" % (regime, key)
        for step, (g, w) in enumerate(zip(got[key]["weights"], case["weights"])):
            _close(g, w, "%s %s step %d (%s)" % (regime, key, step + 1, body))


def test_clip_global_norm_matches_mxnet(replayed):
    """Relative tolerance alone: the arrays are as small as 1e-7, where epsilon shows."""
    got, want = replayed("clip_global_norm"), RECORDED["clip_global_norm"]
    for key, case in want.items():
        assert got[key]["inputs"] == case["inputs"]
        _close(got[key]["total_norm"], case["total_norm"], key + " total norm", atol=0)
        _close(got[key]["arrays"][0], case["arrays"][0], key + " array 0", atol=0)
        _close(got[key]["arrays"][1], case["arrays"][1], key + " array 1", atol=0)


@pytest.mark.parametrize("body", ["numpy", "kernels"])
def test_zero_rates_give_mxnet_values_and_signs_of_zero(body, replayed):
    got, want = replayed("zero_rates", body), RECORDED["zero_rates"]
    assert sorted(got) == sorted(want)
    for key, case in want.items():
        for step, (g, w) in enumerate(zip(got[key]["weights"], case["weights"])):
            g, w = np.asarray(g), np.asarray(w)
            np.testing.assert_array_equal(g, w, err_msg="%s step %d (%s)" % (key, step + 1, body))
            np.testing.assert_array_equal(np.signbit(g), np.signbit(w),
                                          err_msg="%s step %d (%s): signs of zero" % (key, step + 1, body))


def test_lr_scheduler_defaults_and_edges_match_mxnet(replayed):
    got, want = replayed("lr_scheduler_edges"), RECORDED["lr_scheduler_edges"]
    assert sorted(got) == sorted(want)
    for key, case in want.items():
        _close(got[key]["lr"], case["lr"], key, atol=0)



@pytest.mark.parametrize("body", ["numpy", "kernels"])
@pytest.mark.parametrize("regime", ["nonfinite_sgd", "single_tensor_sgd", "signum_signs"])
def test_sgd_forms_after_an_infinite_gradient_match_mxnet_bitwise(regime, body, replayed):
    """Bitwise, infinities and NaNs where MXNet has them (assert_array_equal holds NaN equal to
    NaN): SGD's decay term at wd=0 makes an infinite weight NaN at its next step; NAG without
    momentum and LBSGD scale by 1 - lr*wd, which rounds otherwise and keeps it infinite; Signum's
    sign of NaN is 0. Zero signs are compared too."""
    got, want = replayed(regime, body), RECORDED[regime]
    assert sorted(got) == sorted(want)
    for key, case in want.items():
        for step, (g, w) in enumerate(zip(got[key]["weights"], case["weights"])):
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w),
                                          err_msg="%s step %d (%s)" % (key, step + 1, body))
            g, w = np.asarray(g), np.asarray(w)
            number = ~np.isnan(w)       # a NaN's sign bit means nothing
            np.testing.assert_array_equal(np.signbit(g[number]), np.signbit(w[number]),
                                          err_msg="%s step %d (%s): signs" % (key, step + 1, body))


def test_signum_momentum_state_rounds_as_mxnet_bitwise(replayed):
    """The momentum state, not only the weights: its rounding shows in the weights only once a
    sign flips, many steps later."""
    got, want = replayed("signum_momentum_rounding"), RECORDED["signum_momentum_rounding"]
    assert sorted(got) == sorted(want)
    for key, case in want.items():
        assert got[key]["inputs"] == case["inputs"], key
        for what in ("weights", "states"):
            for step, (g, w) in enumerate(zip(got[key][what], case[what])):
                np.testing.assert_array_equal(np.asarray(g), np.asarray(w),
                                              err_msg="%s %s step %d" % (key, what, step + 1))


# Norm-based rates: their float32 reductions round in another order than MXNet's multi_sum_sq
# (docs/compat.md); every other optimizer's weights and states are MXNet's bits.
_NORM_BASED = ("lamb", "lars")


@pytest.mark.parametrize("body", ["numpy", "kernels"])
def test_every_optimizers_states_match_mxnet_under_a_rounding_rescale(body, replayed):
    got, want = replayed("states_rescaled", body), RECORDED["states_rescaled"]
    assert sorted(got) == sorted(want)
    for key, case in want.items():
        assert got[key]["inputs"] == case["inputs"], key
        for step in range(len(case["weights"])):
            pairs = [("weight", got[key]["weights"][step], case["weights"][step])]
            assert len(got[key]["states"][step]) == len(case["states"][step]), key
            pairs += [("state %d" % i, g, w) for i, (g, w) in
                      enumerate(zip(got[key]["states"][step], case["states"][step]))]
            for what, g, w in pairs:
                where = "%s %s step %d (%s)" % (key, what, step + 1, body)
                if key.startswith(_NORM_BASED):
                    _close(g, w, where, atol=1e-7, rtol=1e-5)
                else:
                    np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=where)


# What a dtype's sweep compares within a tolerance instead of bitwise: float16 rounds LAMB's and
# LARS's differently ordered norms at its spacing; for float64 they carry float32 parameters and
# other reductions, and Nadam's arithmetic on NDArrays in MXNet is one ulp apart at an element.
_SWEEP_TOLERANCES = {"states_float16": {_NORM_BASED: (1e-3, 1e-3)},
                     "states_float64": {_NORM_BASED: (1e-9, 1e-6), ("nadam",): (0, 4e-16)}}


@pytest.mark.parametrize("body", ["numpy", "kernels"])
@pytest.mark.parametrize("regime", sorted(_SWEEP_TOLERANCES))
def test_every_optimizer_on_float16_and_float64_weights_matches_mxnet(regime, body, replayed):
    """float16 with and without multi_precision; float64, where MXNet's C++ rules hold their
    parameters as float32 fields widened for the arithmetic (lr=0.01 is 0.009999999776482582
    there) and the rules MXNet writes in Python use doubles."""
    got, want = replayed(regime, body), RECORDED[regime]
    assert sorted(got) == sorted(want)
    for key, case in want.items():
        if "error" in case:
            continue    # MXNet fails there; what runs here instead is checked below
        assert got[key]["state_dtypes"] == case["state_dtypes"], key
        tol = next((t for names, t in _SWEEP_TOLERANCES[regime].items()
                    if key.startswith(names)), None)
        for step in range(len(case["weights"])):
            pairs = [("weight", got[key]["weights"][step], case["weights"][step])]
            pairs += [("state %d" % i, g, w) for i, (g, w) in
                      enumerate(zip(got[key]["states"][step], case["states"][step]))]
            for what, g, w in pairs:
                where = "%s %s step %d (%s)" % (key, what, step + 1, body)
                if tol is not None:
                    _close(g, w, where, atol=tol[0], rtol=tol[1])
                else:
                    np.testing.assert_array_equal(np.asarray(g), np.asarray(w), err_msg=where)


def test_float16_weights_where_mxnet_fails_keep_float32_states():
    """Without multi_precision, MXNet 1.9.1's AdaGrad, AdaDelta, Ftrl and RMSProp make float32
    states beside a float16 weight and then fail in their update operator. Here they run with
    those float32 states (docs/compat.md); the first step, taken from the same float16 weight,
    equals MXNet's own first step with multi_precision=True."""
    want = RECORDED["states_float16"]
    failing = sorted(k for k, case in want.items() if "error" in case)
    assert failing == ["adadelta_multi_precision=False", "adagrad_multi_precision=False",
                       "ftrl_multi_precision=False", "rmsprop_centered=True_multi_precision=False",
                       "rmsprop_multi_precision=False"]
    got = regimes.states_float16(trainer_cli)
    for key in failing:
        assert set(got[key]["state_dtypes"]) == {"float32"}, key
        with_mp = want[key.replace("multi_precision=False", "multi_precision=True")]
        np.testing.assert_array_equal(got[key]["weights"][0], with_mp["weights"][0], err_msg=key)
