"""``trainer validate``, ``schema`` and ``list`` in-process, and every reporting command as a
real subprocess (the installed ``trainer`` script and ``python -m trainer_cli.cli``)."""
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from report_helpers import invoke, invoke_json, make_run_dir, write_config
from trainer_cli.config import load_config, resolved_dict


def test_validate_prints_the_resolved_config(tmp_path):
    path = write_config(tmp_path, "optimizer: {name: adam, learning_rate: 0.01}\nepochs: 2\n")
    result = invoke("validate", path)
    assert result.exit_code == 0, result.stderr
    assert yaml.safe_load(result.stdout) == resolved_dict(load_config(path))
    result, resolved = invoke_json("validate", path, "-o", "epochs=5", "-o", "optimizer.params.wd=0.1")
    assert result.exit_code == 0
    assert resolved["epochs"] == 5 and resolved["optimizer"] == {
        "name": "adam", "params": {"learning_rate": 0.01, "wd": 0.1}}
    assert resolved["data"]["batch_size"] == 32  # a default, filled in


def test_validate_reports_every_error_with_file_line_col(tmp_path):
    path = write_config(tmp_path, "optimizer: {name: adm}\nepochs: 0\nbatch_sise: 3\n")
    result = invoke("validate", path)
    assert result.exit_code == 2 and result.stdout == ""
    err = result.stderr
    assert "run.yaml:4:" in err and "run.yaml:5:" in err and "run.yaml:6:" in err
    assert "did you mean 'adam'" in err and "Traceback" not in err
    result, payload = invoke_json("validate", path)
    assert result.exit_code == 2
    assert [e["line"] for e in payload["errors"]] == [4, 5, 6]
    assert {e["key"] for e in payload["errors"]} >= {"optimizer.name", "epochs"}


def test_validate_bad_override_and_missing_file(tmp_path):
    path = write_config(tmp_path, "epochs: 1\n")
    result = invoke("validate", path, "-o", "epochs=three")
    assert result.exit_code == 2 and "epochs=three" in result.stderr
    result = invoke("validate", tmp_path / "missing.yaml")
    assert result.exit_code == 2 and "missing.yaml" in result.stderr


def test_schema_is_json_with_the_sections():
    result = invoke("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert {"model", "data", "optimizer", "lr_scheduler", "kvstore"} <= set(schema["properties"])
    assert json.loads(invoke("schema", "--json").stdout) == schema


def test_list_names_everything_a_config_can_use(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    # Listing reads model files; it must never run them.
    (models / "tiny.py").write_text('"""A tiny net."""\nimport os\nos.mkdir("RAN")\n'
                                    'def build(units=3, act="relu"):\n    pass\n')
    result, cat = invoke_json("list", "--models-dir", models)
    assert result.exit_code == 0
    opts = {o["name"]: o for o in cat["optimizers"]}
    assert opts["sgd"]["default_lr"] == 0.01 and opts["adam"]["default_lr"] == 0.001
    assert opts["ftrl"]["default_lr"] == 0.1 and "momentum" in opts["sgd"]["params"]
    assert {s["name"] for s in cat["schedulers"]} == {"factor", "multifactor", "poly", "cosine"}
    assert cat["models"] == [{"name": "tiny", "path": str(models / "tiny.py"),
                              "args": ["units", "act"], "doc": "A tiny net."}]
    assert not (tmp_path / "RAN").exists() and not os.path.exists("RAN")
    assert "l2" in cat["losses"] and "accuracy" in cat["metrics"] and "xavier" in cat["initializers"]
    assert cat["datasets"]["types"] == ["synthetic", "ratings", "npz", "npy", "csr", "libsvm", "csv", "sklearn",
                                          "image_folder", "image_record", "mnist", "fashion_mnist", "cifar10",
                                          "cifar100", "text"]
    assert cat["kvstore"] == ["local", "device", "dist_sync", "dist_device_sync", "dist_async",
                              "dist_device_async"]
    assert cat["compression"] == ["2bit", "1bit"]
    assert "zoo:resnet18_v1" in cat["zoo_models"] and "zoo:mobilenetv2_0.25" in cat["zoo_models"]
    assert "random_flip_left_right" in cat["transforms"] and "to_tensor" in cat["transforms"]
    human = invoke("list").stdout
    for text in ("optimizers", "default lr", "cosine", "mlp", "dist_device_async", "2bit"):
        assert text in human


# ----------------------------------------------------------------------------- subprocesses
@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("proj")
    config = write_config(root, "optimizer: {name: sgd, learning_rate: 0.1}\n"
                                "lr_scheduler: {type: factor, step: 2, factor: 0.5}\nsteps: 6\n")
    bad = write_config(root, "optimizer: {name: sgd, lerning_rate: 0.1}\nsteps: 6\n", "bad.yaml")
    run, _, _ = make_run_dir(root, config)
    return {"config": config, "bad": bad, "run": run}


def _start(*args, module=False):
    # The console script of the environment under test: beside this Python (a venv not on PATH).
    where = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    exe = [sys.executable, "-m", "trainer_cli.cli"] if module else [shutil.which("trainer", path=where)]
    assert exe[0], "the trainer console script is not installed"
    return subprocess.Popen(exe + [str(a) for a in args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_every_reporting_command_as_a_subprocess(project):
    checks = {  # (args, module) -> check of the parsed --json output
        (("validate", project["config"]), False): lambda d: d["steps"] == 6,
        (("schema",), False): lambda d: "model" in d["properties"],
        (("inspect", project["run"]), False):
            lambda d: (d["optimizer"], d["num_update"]) == ("adam", 6),
        (("list",), False): lambda d: "sgd" in [o["name"] for o in d["optimizers"]],
    }
    # Started together: each pays the interpreter's start-up, which is most of its time.
    procs = {key: _start(*key[0], "--json", module=key[1]) for key in checks}
    human = _start("lr", project["run"], module=True)
    bad = _start("validate", project["bad"])
    for key, proc in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, (key, err)
        assert checks[key](json.loads(out)), key
    out, err = human.communicate(timeout=60)
    assert human.returncode == 0 and "step 6 (latest checkpoint)" in out and "┤" in out, err
    assert "0.025" in out  # factor 0.5 every 2 steps from 0.1
    out, err = bad.communicate(timeout=60)
    assert bad.returncode == 2 and out == ""
    assert "bad.yaml:4:" in err and "learning_rate" in err and "Traceback" not in err
