"""A wheel (not the editable checkout) carries the built-in models: built with ``pip wheel``,
installed outside the checkout, it lists them and runs a shipped config."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_wheel_ships_the_builtin_models_and_runs_a_shipped_config(tmp_path):
    wheels = tmp_path / "wheels"
    # pip's isolated build environment brings the setuptools that pyproject.toml asks for.
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                            str(wheels), str(REPO)], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    wheel = next(wheels.glob("trainer_cli-*.whl"))
    site = tmp_path / "site"
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q",
                                "--target", str(site), str(wheel)], capture_output=True, text=True,
                               timeout=600)
    assert installed.returncode == 0, installed.stderr
    # Outside the checkout, with the wheel's package first on the path (the test environment
    # supplies the dependencies): nothing may come from the repository.
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(REPO / "configs" / "mlp_synthetic.yaml", work / "config.yaml")
    env = dict(os.environ, PYTHONPATH=str(site))
    where = subprocess.run([sys.executable, "-c", "import trainer_cli; print(trainer_cli.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert where.stdout.strip().startswith(str(site)), where.stdout + where.stderr
    listed = subprocess.run([sys.executable, "-m", "trainer_cli.cli", "list", "--json"], cwd=work,
                            env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr
    models = {m["name"]: m for m in json.loads(listed.stdout)["models"]}
    assert {"mlp", "cnn", "perceptron", "linear_regression"} <= set(models)
    run = subprocess.run([sys.executable, "-m", "trainer_cli.cli", "run", "config.yaml", "-o",
                          "epochs=2", "--json", "-q"], cwd=work, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    summary = json.loads(run.stdout)
    assert summary["status"] == "finished" and (work / summary["run_dir"] / "config.yaml").is_file()
