"""Exact resume, in process: a run stopped by SIGINT and resumed ends with parameters, trainer
states and metrics rows equal to those of a run that never stopped."""
from pathlib import Path

import pytest

from run_helpers import (StopAt, assert_bitwise_equal, final_arrays, metric_rows, no_fsync,
                         write_config)
from trainer_cli.run import layout, resume_run, start_run

# SMALL: 90 training samples in batches of 16 -> 6 steps per epoch, 18 in all.
CASES = {
    "adam-cosine-mid-epoch": (9, ["lr_scheduler={type: cosine, params: {max_update: 18, warmup_steps: 3}}"]),
    "sgd-momentum-factor-epoch-boundary": (6, [
        "optimizer={name: sgd, params: {learning_rate: 0.1, momentum: 0.9, wd: 0.001}}",
        "lr_scheduler={type: factor, params: {step: 4, factor: 0.5}}"]),
    "nadam": (5, ["optimizer={name: nadam, params: {learning_rate: 0.01}}"]),
    "rmsprop-centered": (7, ["optimizer={name: rmsprop, params: {learning_rate: 0.01, centered: true}}",
                             "lr_scheduler={type: poly, params: {max_update: 18, pwr: 2}}"]),
    "accumulation-rollover-dropout-clip": (4, [
        "grad_accumulation=3", "data.last_batch=rollover", "data.batch_size=7",
        "model.args.dropout=0.3", "grad_clip=0.05", "epochs=4"]),
    "two-devices-2bit-compression": (8, [
        "context=[cpu:0, cpu:1]", "kvstore=device", "compression={type: 2bit, threshold: 0.05}",
        "optimizer={name: sgd, params: {learning_rate: 0.5, momentum: 0.5}}"]),
    "float64-nan-skip-early-stopping": (5, [
        "model.dtype=float64", "nan_policy=skip", "validate_every=3",
        "early_stopping={metric: val_loss, patience: 2, min_delta: 0.5}", "epochs=6"]),
}


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


@pytest.mark.parametrize("case", list(CASES))
def test_resume_is_bitwise_exact(tmp_path, case):
    stop, overrides = CASES[case]
    config = write_config(tmp_path)
    ref = start_run(config, overrides, run_root=tmp_path / "ref")
    assert ref.status in ("finished", "early_stopped")
    cut = start_run(config, overrides, run_root=tmp_path / "cut", reporter=StopAt(stop))
    assert cut.status == "interrupted" and cut.exit_code == 130
    assert cut.summary["steps"] == stop
    run_dir = cut.summary["run_dir"]
    assert layout.read_latest(run_dir) == stop  # the interrupt saved a checkpoint
    done = resume_run(run_dir)
    assert done.status == ref.status and done.summary["steps"] == ref.summary["steps"]
    for got, want in zip(final_arrays(run_dir), final_arrays(ref.summary["run_dir"])):
        assert_bitwise_equal(got, want)
    assert metric_rows(run_dir) == metric_rows(ref.summary["run_dir"])
    assert done.summary["metrics"] == ref.summary["metrics"]


def test_interrupted_twice_and_resumed_from_an_older_checkpoint(tmp_path):
    config = write_config(tmp_path)
    ref = start_run(config, run_root=tmp_path / "ref")
    cut = start_run(config, run_root=tmp_path / "cut", reporter=StopAt(3))
    run_dir = cut.summary["run_dir"]
    assert resume_run(run_dir, reporter=StopAt(10)).status == "interrupted"
    assert resume_run(run_dir).status == "finished"
    assert_bitwise_equal(final_arrays(run_dir)[0], final_arrays(ref.summary["run_dir"])[0])
    # Going back to an older checkpoint replays the same run; the newer ones are set aside.
    kept = [s for s, _ in layout.list_checkpoints(run_dir)]
    assert kept == [16, 18]  # keep_last: 2
    again = resume_run(run_dir, from_step=16)
    assert again.summary["steps"] == 18
    assert_bitwise_equal(final_arrays(run_dir)[0], final_arrays(ref.summary["run_dir"])[0])
    assert metric_rows(run_dir) == metric_rows(ref.summary["run_dir"])
    aside = [p for p in (tmp_path / "cut").glob("*/checkpoints/abandoned-*/step-*")]
    assert [p.name for p in aside] == ["step-18"]
    for folder in aside:
        layout.verify_checkpoint(folder)


def test_resume_of_a_finished_run_changes_nothing(tmp_path):
    config = write_config(tmp_path)
    ref = start_run(config, run_root=tmp_path / "ref")
    before = final_arrays(ref.summary["run_dir"])[0]
    again = resume_run(ref.summary["run_dir"])
    assert again.status == "finished" and again.summary["steps"] == 18
    assert_bitwise_equal(final_arrays(ref.summary["run_dir"])[0], before)
    log = (Path(ref.summary["run_dir"]) / "train.log").read_text()
    assert log.count("nothing to train (-o epochs=N or -o steps=N extends it)") == 1
