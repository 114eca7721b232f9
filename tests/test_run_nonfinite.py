"""Issue 13 item 1: an update with finite gradients can still make the weights NaN/Inf (here
``learning_rate: 1e39`` once a warmup of three good steps ends). No such checkpoint is saved or
pointed at, the last finite one is never pruned, and ``nan_policy: skip`` undoes the update."""
import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

import run_helpers
from run_helpers import assert_bitwise_equal, final_arrays, latest_dir, no_fsync, only_run_dir, write_config
from trainer_cli.cli import main
from trainer_cli.run import layout

OVERFLOW = run_helpers.SMALL.replace(
    "optimizer: {name: adam, params: {learning_rate: 0.01}}",
    "optimizer: {name: sgd, params: {learning_rate: 1.0e+39, momentum: 0.9}}\n"
    "lr_scheduler: {type: factor, params: {step: 1000, factor: 1.0, warmup_steps: 4,\n"
    "               warmup_begin_lr: 0.01, warmup_mode: constant}}")
EVERY_STEP = ("-o", "checkpoint.every_steps=1", "-o", "checkpoint.keep_last=1",
              "-o", "checkpoint.every_epoch=false")


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _all_finite(arrays: dict) -> bool:
    return all(np.isfinite(v).all() for k, v in arrays.items() if v.dtype.kind == "f")


def test_an_overflowing_update_is_never_checkpointed_under_stop(tmp_path):
    path = write_config(tmp_path, OVERFLOW)
    result = invoke("run", path, "--run-dir", tmp_path / "runs", *EVERY_STEP)
    assert result.exit_code == 1, result.output
    assert "NaN/Inf" in result.output and "step 4" in result.output
    assert "encountered" not in result.output
    run_dir = only_run_dir(tmp_path / "runs")
    assert layout.read_latest(run_dir) == 3
    assert [s for s, _ in layout.list_checkpoints(run_dir)] == [3]  # the last finite one stays
    params, states = final_arrays(run_dir)
    assert _all_finite(params) and _all_finite(states)
    # ... and it resumes (and stops again at the same step, as the config asks)
    again = invoke("resume", run_dir)
    assert again.exit_code == 1 and "step 4" in again.output
    assert layout.read_latest(run_dir) == 3


def test_skip_undoes_an_overflowing_update(tmp_path):
    path = write_config(tmp_path, OVERFLOW)
    result = invoke("run", path, "--run-dir", tmp_path / "runs", "--json", "-o", "nan_policy=skip",
                    *EVERY_STEP)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["steps"] == 18 and summary["skipped_steps"] == 15
    run_dir = only_run_dir(tmp_path / "runs")
    params, states = final_arrays(run_dir)
    assert _all_finite(params) and _all_finite(states)
    # A line for each of the first ten skips, then only for the 100th, 1000th, ...
    log = (run_dir / "train.log").read_text()
    told = re.findall(r"update skipped \((\d+) skipped so far\)", log)
    assert told == [str(n) for n in range(1, 11)]
    # The run's own messages say it; NumPy's floating-point warnings would only repeat it.
    assert "encountered" not in log and "encountered" not in result.output, log
    # Every skipped step was undone: the weights and states are those after the 3 good steps.
    ref = invoke("run", path, "--run-dir", tmp_path / "ref", "-q", "-o", "epochs=null",
                 "-o", "steps=3")
    assert ref.exit_code == 0, ref.output
    ref_params, ref_states = final_arrays(only_run_dir(tmp_path / "ref"))
    assert_bitwise_equal(params, ref_params)
    ref_states.pop("__header__"), states.pop("__header__")
    assert_bitwise_equal(states, ref_states)


def test_a_nan_gradient_with_a_finite_loss_stops_the_run_at_its_step(tmp_path, monkeypatch):
    """Under stop the gradients are looked at after the update, with what it wrote: a NaN
    gradient behind a finite loss still names its step, and nothing after it is saved."""
    from trainer_cli.ndarray.interop import raw
    from trainer_cli.run import loop as _loop
    real = _loop.TrainingLoop._forward_backward

    def poisoned(self, idx):
        result = real(self, idx)
        if self.state.step == 4:                    # the fifth step's gradient
            assert self._grads_after
            raw(self.params[0].grad())[0, 0] = np.nan
        return result

    monkeypatch.setattr(_loop.TrainingLoop, "_forward_backward", poisoned)
    path = write_config(tmp_path, run_helpers.SMALL)
    result = invoke("run", path, "--run-dir", tmp_path / "runs", *EVERY_STEP)
    assert result.exit_code == 1, result.output
    assert "loss or gradient is NaN/Inf at step 5" in result.output
    run_dir = only_run_dir(tmp_path / "runs")
    assert layout.read_latest(run_dir) == 4
    params, states = final_arrays(run_dir)
    assert _all_finite(params) and _all_finite(states)


def test_the_undo_copy_is_kept_from_step_to_step_and_restores_the_last_capture():
    from trainer_cli import autograd, gluon, nd
    from trainer_cli.run.finite import StepUndo

    net = gluon.nn.Dense(3, in_units=4)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})
    x = nd.array(np.arange(8, dtype=np.float32).reshape(2, 4))

    def step():
        with autograd.record():
            loss = (net(x) ** 2).sum()
        loss.backward()
        trainer.step(2)

    params = list(net.collect_params().values())
    step()                                   # the Adam states exist from here on
    undo = StepUndo(params, trainer)
    saved = [s for _, s in undo.weights] + [s for _, _, states in undo.states
                                            for state in states.values() for s in state]
    step()
    undo.capture()                           # the same live arrays: copied into the same ones
    again = [s for _, s in undo.weights] + [s for _, _, states in undo.states
                                            for state in states.values() for s in state]
    assert all(a is b for a, b in zip(saved, again)) and len(saved) == len(again) == 6
    want = [p.data().asnumpy().copy() for p in params]
    want_states = {i: [s.asnumpy().copy() for s in state]
                   for i, state in trainer._updaters[0].states.items()}
    count = trainer.optimizer.num_update
    step()
    undo.restore()
    for p, w in zip(params, want):
        assert p.data().asnumpy().tobytes() == w.tobytes()
    for i, state in trainer._updaters[0].states.items():
        for s, w in zip(state, want_states[i]):
            assert s.asnumpy().tobytes() == w.tobytes()
    assert trainer.optimizer.num_update == count
