"""``trainer inspect``: states files and run directories, and every damaged file named with
exit 2, nothing executed or unpickled."""
import json
import pickle

import numpy as np
import pytest

from report_helpers import invoke, invoke_json, make_run_dir, make_trainer, train_steps, write_config
from trainer_cli.optimizer.state_file import load_states_file


@pytest.fixture
def states_file(tmp_path):
    net, trainer = make_trainer("adam", {"learning_rate": 0.05},
                                {"type": "factor", "params": {"step": 2, "factor": 0.5}})
    list(train_steps(net, trainer, 5))
    path = tmp_path / "trainer.states"
    trainer.save_states(str(path))
    return path, net, trainer


@pytest.fixture
def run_dir(tmp_path):
    config = write_config(tmp_path, "optimizer: {name: adam, learning_rate: 0.05}\nsteps: 6\n")
    return make_run_dir(tmp_path, config)[0]


def test_states_file_report(states_file):
    path, net, trainer = states_file
    result, report = invoke_json("inspect", path)
    assert result.exit_code == 0, result.stderr
    assert report["optimizer"] == "adam" and report["num_update"] == 5
    assert report["learning_rate"] == trainer.learning_rate == 0.05 * 0.5 ** 2
    assert report["hyperparams"]["beta1"] == 0.9
    by_device, _ = load_states_file(path)
    params = report["devices"][0]["params"]
    assert len(params) == 2  # weight and bias, each with Adam's (mean, var)
    for entry in params:
        mean, var = by_device[0][entry["index"]]
        assert [s["shape"] for s in entry["states"]] == [list(mean.shape), list(var.shape)]
        assert entry["states"][0]["norm"] == pytest.approx(float(np.linalg.norm(mean.asnumpy())))
        assert entry["states"][1]["norm"] == pytest.approx(float(np.linalg.norm(var.asnumpy())))
    human = invoke("inspect", path).stdout
    for text in ("adam", "5 (num_update)", "0.0125", "beta1=0.9", "states on device 0", "2x3"):
        assert text in human


def _truncated(data):
    return data[: len(data) // 2]


def _flipped(data):
    data = bytearray(data)
    data[len(data) // 2] ^= 0xFF
    return bytes(data)


class _Boom:
    def __reduce__(self):
        import os

        return (os.mkdir, ("PWNED",))


@pytest.mark.parametrize("damage", ["truncated", "flipped", "garbage", "params", "pickle", "npy",
                                    "empty"])
def test_bad_states_file_is_exit_2_naming_it(states_file, tmp_path, monkeypatch, damage):
    path, net, _ = states_file
    monkeypatch.chdir(tmp_path)
    data = path.read_bytes()
    bad = tmp_path / ("bad-%s.states" % damage)
    if damage == "params":
        net.save_parameters(str(bad))        # an .npz, but not ours
    elif damage == "npy":
        np.save(open(bad, "wb"), np.arange(3))
    else:
        bad.write_bytes({"truncated": _truncated(data), "flipped": _flipped(data),
                         "garbage": b"\x00not a states file" * 20, "empty": b"",
                         "pickle": pickle.dumps(_Boom())}[damage])
    for args in ((), ("--json",)):
        result = invoke("inspect", bad, *args)
        assert result.exit_code == 2, (damage, result.stdout, result.stderr)
        assert bad.name in result.stderr and "Traceback" not in result.stderr
        if args:
            assert bad.name in json.loads(result.stdout)["error"]
    assert not (tmp_path / "PWNED").exists()


def test_run_dir_report(run_dir):
    result, report = invoke_json("inspect", run_dir)
    assert result.exit_code == 0, result.stderr
    assert report["kind"] == "run_dir" and report["latest"] == 6
    assert [(c["step"], c["epoch"], c["batch_in_epoch"], c["intact"])
            for c in report["checkpoints"]] == [(3, 0, 3, True), (6, 1, 2, True)]
    assert report["checkpoints"][0]["time"] == "2024-01-01T00:00:03Z"
    assert report["optimizer"] == "adam" and report["num_update"] == 6
    assert report["metrics"]["rows"] == 6 and report["metrics"]["skipped_lines"] == 1
    assert report["metrics"]["last"][-1]["step"] == 6
    assert {p["name"] for p in report["parameters"]} == {"weight", "bias"}
    assert report["errors"] == []
    human = invoke("inspect", run_dir).stdout
    for text in ("checkpoints", "step-3", "step-6", "intact", "◀ latest", "last metrics", "1 +2 batches",
                 "6 (num_update)", "train_loss"):
        assert text in human


def test_checkpoint_folder_directly(run_dir):
    result, report = invoke_json("inspect", run_dir / "checkpoints" / "step-3")
    assert result.exit_code == 0
    assert report["kind"] == "checkpoint" and report["num_update"] == 3


@pytest.mark.parametrize("target, how", [
    ("step-6/trainer.states", "flip"), ("step-6/params.npz", "truncate"),
    ("step-6/meta.json", "garbage"), ("step-3/trainer.states", "delete"),
])
def test_damaged_checkpoint_is_reported_and_exit_2_naming_the_file(run_dir, target, how):
    path = run_dir / "checkpoints" / target
    if how == "flip":
        path.write_bytes(_flipped(path.read_bytes()))
    elif how == "truncate":
        path.write_bytes(_truncated(path.read_bytes()))
    elif how == "garbage":
        path.write_text("{not json")
    else:
        path.unlink()
    result, report = invoke_json("inspect", run_dir)
    assert result.exit_code == 2
    assert target in result.stderr and "Traceback" not in result.stderr
    damaged = [c["name"] for c in report["checkpoints"] if not c["intact"]]
    assert damaged == [target.split("/")[0]]
    if target.startswith("step-6"):
        assert report["resume_from"] == 3 and report["num_update"] == 3
        assert "--from step-3" in result.stderr
    human = invoke("inspect", run_dir)
    assert human.exit_code == 2 and "DAMAGED" in human.stdout


def test_bad_latest_pointer_and_non_run_dirs(run_dir, tmp_path):
    (run_dir / "checkpoints" / "latest").write_text("garbage\x00")
    result = invoke("inspect", run_dir)
    assert result.exit_code == 2 and "latest" in result.stderr
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "empty", tmp_path / "missing"):
        result = invoke("inspect", target)
        assert result.exit_code == 2 and target.name in result.stderr
