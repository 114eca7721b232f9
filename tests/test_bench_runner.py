"""benchmarks/bench_runner.py compares like with like: its bare loop trains what ``trainer run``
trains, step for step (no timing here)."""
import importlib.util
import os
import sys

import numpy as np
import pytest

from trainer_cli import random as _random
from trainer_cli.config import load_config
from trainer_cli.run.build import build
from trainer_cli.run.loop import TrainingLoop
from trainer_cli.run.session import _NullRecorder
from trainer_cli.run.state import LoopState

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
_spec = importlib.util.spec_from_file_location(
    "bench_runner", os.path.join(ROOT, "benchmarks", "bench_runner.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _weights(parts):
    return [p.data().asnumpy() for p in parts.net.collect_params().values()]


def _parts(name, overrides=()):
    path = bench.config_path_of(name)
    config = load_config(path, ["threads=1", "epochs=100"] + list(overrides))
    _random.seed(config.seed)
    return build(config, path)


def test_the_bare_loop_takes_the_runners_steps_to_the_bit():
    # Into a second epoch: the runner's order of batches, epoch after epoch.
    steps = 53
    bare = _parts("mlp_synthetic")
    step = bench.bare_step(bare)
    for _ in range(steps):
        step()
    ran = _parts("mlp_synthetic")
    loop = TrainingLoop(ran, LoopState(), _NullRecorder(ran))
    for _ in range(steps):
        loop._advance(ran.order, 1)
    assert loop.state.step == steps and loop.state.epoch == 1
    for a, b in zip(_weights(bare), _weights(ran)):
        assert a.tobytes() == b.tobytes()


def test_the_bare_loop_of_a_language_model_carries_its_state_and_clips():
    """char_lm: the state carried from batch to batch and gradients clipped to grad_clip, as the
    runner does; the clip's factor is worked out in another order
    than the runner's, so the weights agree to float32 rounding."""
    steps, clip = 3, ["grad_clip=0.01"]   # small enough that every step clips
    bare = _parts("char_lm", clip)
    step = bench.bare_step(bare)
    for _ in range(steps):
        step()
    ran = _parts("char_lm", clip)
    loop = TrainingLoop(ran, LoopState(), _NullRecorder(ran))
    for _ in range(steps):
        loop._advance(ran.order, 1)
    unclipped = _parts("char_lm", ["grad_clip=null"])
    other_step = bench.bare_step(unclipped)
    for _ in range(steps):
        other_step()
    near = [np.allclose(a, b, rtol=1e-5, atol=1e-7)
            for a, b in zip(_weights(bare), _weights(ran))]
    assert all(near)
    assert not all(a.tobytes() == b.tobytes()
                   for a, b in zip(_weights(bare), _weights(unclipped)))


def test_the_bare_loops_validation_finds_what_the_runners_does():
    """The bare loop validating as configured computes the runner's validation: the same loss
    and metrics on the same weights (in other batches, so to float rounding)."""
    from trainer_cli.run.loop import evaluate_arrays
    for name in ("mlp_synthetic", "char_lm"):
        parts = _parts(name)
        step = bench.bare_step(parts, validate=True)
        for _ in range(3):
            step()
        ours = bench.bare_validation(parts)()
        theirs = evaluate_arrays(parts.net, parts.loss, parts.val_metrics, parts.val,
                                 parts.config.data.batch_size, parts.contexts[0],
                                 parts.config.model.dtype, "")
        assert set(ours) == set(theirs) and "loss" in ours and len(ours) >= 2
        for key, value in theirs.items():
            assert np.isclose(ours[key], value, rtol=1e-6), (name, key)


def test_the_bare_loop_validates_each_epoch_when_asked():
    parts = _parts("mlp_synthetic")
    calls = []
    validation = bench.bare_validation

    def counted(p):
        run = validation(p)
        return lambda: calls.append(run())
    bench.bare_validation = counted
    try:
        per_epoch = len(parts.order.batches(0))
        step = bench.bare_step(parts, validate=True)
        for _ in range(2 * per_epoch + 1):      # the first batch of the third epoch
            step()
    finally:
        bench.bare_validation = validation
    assert len(calls) == 2 and all(np.isfinite(v["loss"]) for v in calls)


def test_steadiness_says_how_far_the_rounds_moved():
    rates = {"bare": [5000.0, 4000.0, 4500.0], "as configured": [3500.0, 3200.0, 3150.0]}
    steady = bench.steadiness(rates, "as configured")
    assert steady["bare_moved"] == pytest.approx(0.25)
    assert steady["ratio_range"] == pytest.approx([0.70, 0.80])
    line = bench.steadiness_line(steady, "the bare loop", "the ratio")
    assert "moved by 25%" in line and "70.0-80.0%" in line
