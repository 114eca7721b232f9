"""``trainer run`` / ``trainer resume`` in process (click's CliRunner): the run-directory
contract, --json, exit codes, interrupts, damaged checkpoints and NaN policies."""
import json
import re

import numpy as np
import pytest
import yaml
from click.testing import CliRunner

import run_helpers
from run_helpers import (CONFIGS, StopAt, assert_bitwise_equal, final_arrays, latest_dir,
                         load_npz, no_fsync, only_run_dir, write_config)
from trainer_cli.cli import main
from trainer_cli.config import load_config, resolved_dict
from trainer_cli.run import layout

STAMP = r"\d{8}-\d{6}"


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_perceptron_run_directory_contract(tmp_path):
    root = tmp_path / "runs"
    result = invoke("run", CONFIGS / "perceptron.yaml", "--run-dir", root)
    assert result.exit_code == 0, result.output
    run_dir = only_run_dir(root)
    assert re.fullmatch("perceptron-" + STAMP, run_dir.name)
    assert str(run_dir) in result.stdout and "finished: 50 steps" in result.stdout
    names = sorted(p.name for p in run_dir.iterdir())
    assert names == [".lock", "checkpoints", "config.yaml", "metrics.csv", "metrics.jsonl",
                     "model.json", "report.html", "train.log"]
    # The resolved config loads back to the same config, with the run's name and root.
    resolved = load_config(run_dir / "config.yaml")
    assert resolved_dict(resolved) == yaml.safe_load((run_dir / "config.yaml").read_text())
    assert resolved.name == "perceptron" and resolved.run_dir == str(root)
    # A finished run's final parameters are its latest checkpoint, loadable without pickle.
    folder = latest_dir(run_dir)
    assert folder.name == "step-50"
    params, states = load_npz(folder / "params.npz"), load_npz(folder / "trainer.states")
    assert params["weight"].shape == (1, 4) and "__header__" in states
    meta = layout.verify_checkpoint(folder)
    assert meta["finished"] and meta["epoch"] == 50 and meta["batch_in_epoch"] == 0
    assert meta["metrics"]["train_mse"] < 1e-6  # it learned the linear teacher
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if r["kind"] == "train"] == [10, 20, 30, 40, 50]
    assert (run_dir / "metrics.csv").read_text().splitlines()[0].startswith("kind,step,epoch,lr,train_loss")
    # A second run never reuses the folder; --name sets the prefix.
    assert invoke("run", CONFIGS / "perceptron.yaml", "--run-dir", root, "-q").exit_code == 0
    assert invoke("run", CONFIGS / "perceptron.yaml", "--run-dir", root, "--name", "tut", "-q").exit_code == 0
    made = sorted(p.name for p in root.iterdir())
    assert len(made) == 3 and len(set(made)) == 3
    assert sum(bool(re.fullmatch("tut-" + STAMP, n)) for n in made) == 1


def test_json_prints_only_json(tmp_path):
    result = invoke("run", CONFIGS / "perceptron.yaml", "--run-dir", tmp_path, "--json", "-o", "epochs=5")
    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert summary["status"] == "finished" and summary["steps"] == 5 and summary["epochs"] == 5
    assert summary["run_dir"] == str(only_run_dir(tmp_path))
    assert summary["checkpoint"].endswith("step-5") and "train_mse" in summary["metrics"]
    again = invoke("resume", summary["run_dir"], "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["steps"] == 5
    bad = invoke("run", CONFIGS / "perceptron.yaml", "--json", "-o", "epochs=zero")
    assert bad.exit_code == 2 and "epochs" in json.loads(bad.stdout)["error"]


def test_config_errors_exit_2_with_positions(tmp_path):
    path = write_config(tmp_path, run_helpers.SMALL.replace("epochs: 3", "epochs: 3\nbatch_sise: 4"))
    result = invoke("run", path, "--run-dir", tmp_path / "runs", "-o", "optimizer.params.learning_rate=fast")
    assert result.exit_code == 2 and result.stdout == ""
    assert "small.yaml:" in result.stderr and "batch_sise" in result.stderr
    assert "-o optimizer.params.learning_rate=fast" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()
    path = write_config(tmp_path)
    bad_name = invoke("run", path, "--name", "a/b", "--run-dir", tmp_path / "runs")
    assert bad_name.exit_code == 2 and "--name" in bad_name.stderr
    clip = invoke("run", path, "-o", "grad_clip=1", "-o", "context=[cpu:0, cpu:1]",
                  "-o", "kvstore={type: device, update_on_kvstore: true}")
    assert clip.exit_code == 2 and "grad_clip" in clip.stderr
    missing = invoke("resume", tmp_path / "nothing-here")
    assert missing.exit_code == 2 and "no such run directory" in missing.stderr
    workers = invoke("run", path, "--workers", 2)
    assert workers.exit_code == 2 and "dist_" in workers.stderr


def test_sigint_saves_a_checkpoint_and_exits_130(tmp_path, monkeypatch):
    path = write_config(tmp_path)
    monkeypatch.setattr("trainer_cli.run.progress.choose_reporter", lambda quiet, stream=None: StopAt(7))
    result = invoke("run", path, "--run-dir", tmp_path / "runs")
    assert result.exit_code == 130, result.output
    run_dir = only_run_dir(tmp_path / "runs")
    assert layout.read_latest(run_dir) == 7
    assert "interrupted: 7 steps" in result.stdout and "trainer resume %s" % run_dir in result.stdout
    assert "SIGINT" in (run_dir / "train.log").read_text()
    monkeypatch.undo()
    no_fsync(monkeypatch)
    assert invoke("resume", run_dir, "-q").exit_code == 0
    ref = invoke("run", path, "--run-dir", tmp_path / "ref", "-q")
    assert ref.exit_code == 0
    assert_bitwise_equal(final_arrays(run_dir)[0], final_arrays(only_run_dir(tmp_path / "ref"))[0])


def _corrupt_params(folder):
    path = folder / "params.npz"
    path.write_bytes(path.read_bytes()[:100])


def _corrupt_states(folder):
    path = folder / "trainer.states"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _corrupt_meta(folder):
    (folder / "meta.json").write_text("{not json")


def _delete_states(folder):
    (folder / "trainer.states").unlink()


@pytest.mark.parametrize("damage,named", [
    (_corrupt_params, "params.npz"), (_corrupt_states, "trainer.states"),
    (_corrupt_meta, "meta.json"), (_delete_states, "trainer.states")])
def test_damaged_latest_checkpoint_exits_2_naming_file_and_fallback(tmp_path, damage, named):
    path = write_config(tmp_path)
    assert invoke("run", path, "--run-dir", tmp_path, "-q").exit_code == 0
    run_dir = only_run_dir(tmp_path)
    steps = [s for s, _ in layout.list_checkpoints(run_dir)]
    assert steps == [16, 18]
    damage(latest_dir(run_dir))
    result = invoke("resume", run_dir)
    assert result.exit_code == 2
    assert named in result.stderr and "step-18" in result.stderr
    assert "--from step-16" in result.stderr and "Traceback" not in result.stderr
    ok = invoke("resume", run_dir, "--from", "step-16", "-q")
    assert ok.exit_code == 0
    layout.verify_checkpoint(latest_dir(run_dir))


def test_damaged_pointer_exits_2(tmp_path):
    path = write_config(tmp_path)
    assert invoke("run", path, "--run-dir", tmp_path, "-q").exit_code == 0
    run_dir = only_run_dir(tmp_path)
    (run_dir / "checkpoints" / "latest").write_text("step-99\n")
    result = invoke("resume", run_dir)
    assert result.exit_code == 2 and "step-99" in result.stderr and "--from step-18" in result.stderr
    (run_dir / "checkpoints" / "latest").write_bytes(b"\xff\xfe garbage")
    result = invoke("resume", run_dir)
    assert result.exit_code == 2 and "latest" in result.stderr and "--from step-18" in result.stderr
    assert invoke("resume", run_dir, "--from", "nope").exit_code == 2


def _nan_data(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = x[:, 0].copy()
    # One poisoned sample, finite in the file (which is checked at load) but beyond what a
    # squared error holds in float32: the batch holding it has an infinite loss.
    y[40] = 3e38
    np.savez(tmp_path / "nan.npz", x=x, y=y)
    text = run_helpers.SMALL.replace(
        "train: {type: synthetic, task: classification, num_samples: 120, num_features: 6,\n"
        "          num_classes: 3, seed: 5}", "train: nan.npz")
    text = text.replace("classes: 3", "classes: 1").replace("softmax_cross_entropy", "l2")
    return write_config(tmp_path, text.replace("metrics: [accuracy]", "metrics: [mae]"), "nan.yaml")


def test_nan_policy_stop_fails_and_keeps_the_last_good_checkpoint(tmp_path):
    path = _nan_data(tmp_path)
    result = invoke("run", path, "--run-dir", tmp_path / "runs", "-o", "data.split=null",
                    "-o", "data.shuffle=false", "-o", "checkpoint.every_steps=1")
    assert result.exit_code == 1
    assert "NaN/Inf at step 3" in result.stderr and "nan_policy" in result.stderr
    run_dir = only_run_dir(tmp_path / "runs")
    assert layout.read_latest(run_dir) == 2
    layout.verify_checkpoint(latest_dir(run_dir))


def test_nan_policy_skip_skips_and_counts(tmp_path):
    path = _nan_data(tmp_path)
    result = invoke("run", path, "--run-dir", tmp_path / "runs", "--json", "-o", "data.split=null",
                    "-o", "data.shuffle=false", "-o", "nan_policy=skip")
    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert summary["skipped_steps"] == 3 and summary["steps"] == 12  # one bad batch per epoch
    params, _ = final_arrays(summary["run_dir"])
    assert all(np.isfinite(v).all() for v in params.values())
    assert "update skipped" in (only_run_dir(tmp_path / "runs") / "train.log").read_text()


def test_resume_never_executes_files_from_the_run_directory(tmp_path, monkeypatch):
    path = write_config(tmp_path)
    assert invoke("run", path, "--run-dir", tmp_path / "runs", "-q", "-o", "epochs=1").exit_code == 0
    run_dir = only_run_dir(tmp_path / "runs")
    marker = tmp_path / "executed"
    trap = "open(%r, 'w').write('x')\nfrom trainer_cli.gluon import nn\nbuild = lambda **k: nn.Dense(3)\n" % str(marker)
    (run_dir / "models").mkdir()
    (run_dir / "models" / "mlp.py").write_text(trap)
    (run_dir / "evil.py").write_text(trap)
    monkeypatch.chdir(run_dir)  # the working folder's models/ is searched: not this one
    assert invoke("resume", run_dir, "-q").exit_code == 0
    config = (run_dir / "config.yaml").read_text()
    (run_dir / "config.yaml").write_text(config.replace("name: mlp", "name: %s:build" % (run_dir / "evil.py")))
    result = invoke("resume", run_dir)
    assert result.exit_code == 2 and "never executed" in result.stderr
    assert not marker.exists()
