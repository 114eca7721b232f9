"""The best checkpoint: ``checkpoints/best``, kept through pruning, shown by inspect/runs/report,
``--from best``, and early stopping's ``restore_best`` (configs/regression.yaml uses it)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_cli.config import ConfigError, validate_config_text
from trainer_cli.report.history import load_history
from trainer_cli.report.html_report import render_report
from trainer_cli.report.runs_list import list_runs
from trainer_cli.run import layout, resume_run, start_run
from trainer_cli.run.state import LoopState

from run_helpers import CONFIGS, StopAt, assert_bitwise_equal, load_npz, metric_rows, no_fsync, run_trainer


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def _params(run_dir, step):
    return load_npz(layout.checkpoint_dir(run_dir, step) / layout.PARAMS_FILE)


def _best_validation(run_dir):
    rows = [r for r in metric_rows(run_dir) if r["kind"] == "val"]
    best = min(rows, key=lambda r: (r["val_mse"], r["step"]))
    return best["step"], best["val_mse"]


def test_regression_example_ends_with_its_best_weights_and_names_them(tmp_path):
    result = start_run(CONFIGS / "regression.yaml", run_root=tmp_path, handle_signals=False)
    run_dir = Path(result.summary["run_dir"])
    assert result.status == "early_stopped"
    best_step, best_value = _best_validation(run_dir)
    final = result.summary["steps"]
    assert best_step < final and best_step % 50 == 0     # validated every 50 steps

    # The best evaluation has a checkpoint of its own, which `best` names and pruning kept
    # (keep_last 3 keeps only the last three besides it).
    assert layout.read_best(run_dir) == best_step
    steps = [s for s, _ in layout.list_checkpoints(run_dir)]
    assert steps[0] == best_step and len(steps) == 4 and steps[-1] == final
    meta = layout.read_meta(layout.checkpoint_dir(run_dir, final))
    assert meta["best"] == {"metric": "val_mse", "mode": "min", "step": best_step,
                            "value": pytest.approx(best_value, rel=1e-6)}
    assert meta["restored_best"] == best_step and meta["finished"] is True

    # restore_best: the final parameters (the final checkpoint, what evaluate/predict/export
    # use by default) are the best checkpoint's, bitwise.
    assert_bitwise_equal(_params(run_dir, final), _params(run_dir, best_step))
    assert result.summary["restored_best"] == best_step
    assert result.summary["best_checkpoint"] == str(layout.checkpoint_dir(run_dir, best_step))
    assert result.summary["metrics"]["val_mse"] == pytest.approx(best_value, rel=1e-6)

    # Shown wherever a run is shown.
    assert list_runs(tmp_path)[0]["best_checkpoint"] == "step-%d" % best_step
    assert "(best: step-%d)" % best_step in render_report([load_history(run_dir)])
    done = run_trainer("inspect", run_dir, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["best"] == best_step

    # Resuming from the best replays the same run: same stop, same restored weights (read back
    # from the best checkpoint, since this session did not find them).
    again = resume_run(run_dir, "best", handle_signals=False)
    assert again.status == "early_stopped" and again.summary["steps"] == final
    assert layout.read_best(run_dir) == best_step
    assert_bitwise_equal(_params(run_dir, final), _params(run_dir, best_step))


def test_resume_from_before_the_best_moves_the_pointer_back(tmp_path):
    # keep_best without early stopping: the best by validation loss, every checkpoint kept.
    config = tmp_path / "c.yaml"
    config.write_text((CONFIGS / "regression.yaml").read_text().replace(
        "early_stopping: {metric: val_mse, patience: 4, restore_best: true}",
        "epochs: 10\ncheckpoint: {keep_last: 100, keep_best: val_loss}").replace(
        "epochs: 30\n", ""))
    result = start_run(config, run_root=tmp_path / "runs", handle_signals=False)
    run_dir = Path(result.summary["run_dir"])
    best = layout.read_best(run_dir)
    assert best == min((r["val_loss"], r["step"]) for r in metric_rows(run_dir)
                       if r["kind"] == "val")[1]
    assert result.summary["restored_best"] is None      # no restore_best: the last weights
    earlier = [s for s, _ in layout.list_checkpoints(run_dir) if s < best][-1]
    best_then = layout.read_meta(layout.checkpoint_dir(run_dir, earlier))["best"]["step"]
    assert best_then < best
    # Stopped one step after going back: `best` names the best as of that checkpoint (the later
    # one was set aside with the checkpoints after it).
    stopped = resume_run(run_dir, earlier, reporter=StopAt(earlier + 1))
    assert stopped.status == "interrupted"
    assert layout.read_best(run_dir) == best_then
    assert not layout.checkpoint_dir(run_dir, best).exists()
    resume_run(run_dir, handle_signals=False)
    assert layout.read_best(run_dir) == best    # found again at the same step


def test_restore_best_and_keep_best_must_agree_and_loop_state_is_checked():
    text = (CONFIGS / "regression.yaml").read_text()
    with pytest.raises(ConfigError, match="restore_best"):
        validate_config_text(text + "checkpoint: {keep_best: val_mae}\n")
    validate_config_text(text + "checkpoint: {keep_best: val_mse}\n")
    with pytest.raises(ValueError, match="loop.best"):
        LoopState.from_dict({"step": 3, "best": {"metric": "val_loss", "mode": "min",
                                                 "step": 9, "value": 1.0, "values": {}}})
    with pytest.raises(ValueError, match="loop.best"):
        LoopState.from_dict({"step": 3, "best": {"metric": "val_loss", "step": 1}})


def test_from_best_without_a_best_checkpoint_says_why(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text((CONFIGS / "regression.yaml").read_text().replace(
        "early_stopping: {metric: val_mse, patience: 4, restore_best: true}", "").replace(
        "epochs: 30", "steps: 20"))
    result = start_run(config, run_root=tmp_path / "runs", handle_signals=False)
    run_dir = Path(result.summary["run_dir"])
    assert layout.read_best(run_dir) is None
    with pytest.raises(layout.RunDirError, match="no best checkpoint: a run selects one only"):
        resume_run(run_dir, "best", handle_signals=False)


def test_checkpoint_names_are_ascii_digits_only(tmp_path):
    from click.testing import CliRunner

    from trainer_cli.cli import main

    # "step-١٨" (Arabic-Indic digits) is not step 18: int() would read it as one, and the
    # folder's real name would then differ from the one every reader builds from the step.
    folder = tmp_path / layout.CHECKPOINTS
    (folder / "step-\u0661\u0668").mkdir(parents=True)
    (folder / "step-7").mkdir()
    assert [step for step, _ in layout.list_checkpoints(tmp_path)] == [7]
    (folder / layout.BEST).write_text("step-\u0661\u0668\n", encoding="utf-8")
    with pytest.raises(layout.RunDirError, match="expected a checkpoint name like 'step-100'"):
        layout.read_best(tmp_path)
    done = CliRunner().invoke(main, ["evaluate", str(tmp_path), "--from", "step-\u0663"])
    assert done.exit_code == 2 and "expected best, latest or a checkpoint name" in done.output
