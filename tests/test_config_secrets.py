"""Values from ``${env:...}`` are secrets: every file of a run directory and every screen that
shows the config (validate, --explain, config.yaml, report.html, TensorBoard events, errors)
holds the reference, never the value; the run uses the value, and resume reads the variable
again, saying so when it is unset or holds something else."""
import json
from pathlib import Path

from click.testing import CliRunner

from run_helpers import SMALL, no_fsync, only_run_dir, write_config
from trainer_cli.cli import main
from trainer_cli.config import load_config

TOKEN = "tok-3f9c1e77ab52d0e48c6b1a2f"
MODEL = """\
from trainer_cli.gluon import nn

SEEN = []


def build(token: str = "", classes: int = 3):
    SEEN.append(token)
    net = nn.HybridSequential()
    net.add(nn.Dense(8, activation="relu"), nn.Dense(classes))
    return net
"""
CONFIG = SMALL.replace("""model:
  name: mlp
  args: {hidden: [16], classes: 3}""", """model:
  name: tokmodel.py:build
  args: {token: "${env:API_TOKEN}", classes: 3}""").replace(
    "name: adam, params: {learning_rate: 0.01}",
    "name: adam, params: {learning_rate: '${env:LR,0.01}'}") + \
    "logging: {tensorboard: true}\nname: tok\n"


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _every_file(folder: Path):
    return [p for p in folder.rglob("*") if p.is_file()]


def test_an_env_token_reaches_no_file_and_no_screen(tmp_path, monkeypatch):
    no_fsync(monkeypatch)
    monkeypatch.setenv("API_TOKEN", TOKEN)
    monkeypatch.delenv("LR", raising=False)
    (tmp_path / "tokmodel.py").write_text(MODEL)
    cfg = write_config(tmp_path, CONFIG, "tok.yaml")
    config = load_config(cfg)
    assert config.model.args["token"] == TOKEN              # the run uses the value
    shown = [invoke("validate", cfg), invoke("validate", cfg, "--json"),
             invoke("validate", cfg, "--explain", "model.args.token"),
             invoke("validate", cfg, "--explain", "model.args.token", "--json")]
    for result in shown:
        assert result.exit_code == 0, result.output
        assert TOKEN not in result.output and "${env:API_TOKEN}" in result.output, result.output
    run = invoke("run", cfg, "--run-dir", tmp_path / "runs", "-o", "epochs=1")
    assert run.exit_code == 0, run.output
    assert TOKEN not in run.output
    run_dir = only_run_dir(tmp_path / "runs")
    assert invoke("report", run_dir).exit_code == 0
    files = _every_file(run_dir)
    names = {p.relative_to(run_dir).parts[0] for p in files}
    assert {"config.yaml", "report.html", "tensorboard", "env.json", "train.log"} <= names, names
    leaked = [p for p in files if TOKEN.encode() in p.read_bytes()]
    assert leaked == [], leaked
    assert "token: ${env:API_TOKEN}" in (run_dir / "config.yaml").read_text()
    assert "learning_rate: ${env:LR,0.01}" in (run_dir / "config.yaml").read_text()

    # Resume reads the variable again: the same value is said nothing about ...
    extend = invoke("resume", run_dir, "-o", "epochs=2")
    assert extend.exit_code == 0, extend.output
    assert TOKEN not in extend.output and "environment variable" not in extend.output
    assert "token: ${env:API_TOKEN}" in (run_dir / "config.yaml").read_text()  # rewritten, still
    # ... another value is said, and so is a variable no longer set.
    monkeypatch.setenv("API_TOKEN", TOKEN + "x")
    monkeypatch.setenv("LR", "0.02")
    changed = invoke("resume", run_dir, "-o", "epochs=3")
    assert changed.exit_code == 0, changed.output
    log = (run_dir / "train.log").read_text()
    assert "environment variable API_TOKEN holds another value than when the run started" in log
    assert "environment variable LR is set now, but was not when the run started" in log
    monkeypatch.delenv("API_TOKEN")
    gone = invoke("resume", run_dir, "-o", "epochs=4")
    assert gone.exit_code == 2, gone.output
    assert "config.yaml" in gone.output and "environment variable API_TOKEN is not set" in gone.output
    leaked = [p for p in _every_file(run_dir) if TOKEN.encode() in p.read_bytes()]
    assert leaked == [], leaked


def test_a_bad_env_value_is_reported_by_its_reference(tmp_path, monkeypatch):
    monkeypatch.setenv("EPOCHS_SECRET", "hunter2-secret-value")
    cfg = write_config(tmp_path, SMALL.replace("epochs: 3", "epochs: '${env:EPOCHS_SECRET}'"))
    result = invoke("validate", cfg)
    assert result.exit_code == 2 and "small.yaml:14:9: epochs:" in result.output, result.output
    assert "hunter2" not in result.output and "${env:EPOCHS_SECRET}" in result.output, result.output


def test_literal_dollar_braces_survive_the_run_directory(tmp_path, monkeypatch):
    # A literal ${ is written escaped, so that resume (which reads ${env:...}) reads it back.
    monkeypatch.setenv("TAG", "v1")
    text = SMALL + "name: 'exp-${env:TAG}'\n"
    text = text.replace("metrics: [accuracy]", "metrics: [accuracy]\nrun_dir: 'r$${x}'")
    cfg = write_config(tmp_path, text)
    config = load_config(cfg)
    assert config.run_dir == "r${x}" and config.name == "exp-v1"
    from trainer_cli.config import validate_config_text
    again = validate_config_text(config.resolved_yaml(), env_references=True)
    assert again.run_dir == "r${x}" and again.name == "exp-v1"
    # The name is written as its value: it names the run's folder, which shows it anyway ...
    assert "name: exp-v1" in config.resolved_yaml()
    # ... and a run directory's config.yaml may not read it from the environment.
    import pytest
    from trainer_cli.config import ConfigError
    with pytest.raises(ConfigError, match="cannot read name from the environment"):
        validate_config_text(SMALL + "name: '${env:TAG}'\n", filename="run/config.yaml",
                             env_references=True)
    assert json.loads(json.dumps(again.model_dump(mode="json")))["run_dir"] == "r${x}"


def test_inspect_shows_the_reference(tmp_path, monkeypatch):
    no_fsync(monkeypatch)
    monkeypatch.setenv("LR_SECRET", "0.0123")
    cfg = write_config(tmp_path, SMALL.replace("learning_rate: 0.01", "learning_rate: '${env:LR_SECRET}'"))
    assert invoke("run", cfg, "--run-dir", tmp_path / "runs", "-q", "-o", "epochs=1").exit_code == 0
    result = invoke("inspect", only_run_dir(tmp_path / "runs"), "--json")
    assert result.exit_code == 0, result.output
    # The config as the reference (the learning rate the optimizer trains with is state, which
    # its checkpoints and metrics hold).
    shown = json.loads(result.output)["config"]
    assert shown["optimizer_params"] == {"learning_rate": "${env:LR_SECRET}"}, shown


def test_a_damaged_or_missing_env_record_is_said_not_fatal(tmp_path):
    import os

    from trainer_cli.run.env_record import env_changes, write_env_record
    write_env_record(tmp_path, {"A": "x", "B": None})
    record = (tmp_path / "env.json").read_text()
    assert "x" not in json.loads(record)["variables"]["A"].values()
    assert env_changes(tmp_path, {"A": "x", "B": None}) == []
    assert env_changes(tmp_path, {"A": "y", "B": "z"}) == [
        "environment variable A holds another value than when the run started "
        "(config.yaml reads ${env:A})",
        "environment variable B is set now, but was not when the run started: its value "
        "replaces the default"]
    for damage in ('{"salt": 3, "variables": []}', "[" * 100000, None):
        (tmp_path / "env.json").unlink()
        if damage is None:
            os.mkfifo(tmp_path / "env.json")
        else:
            (tmp_path / "env.json").write_text(damage)
        said = env_changes(tmp_path, {"A": "x"})
        assert len(said) == 1 and "env.json: unreadable" in said[0], said
    (tmp_path / "env.json").unlink()
    assert "env.json: missing" in env_changes(tmp_path, {"A": "x"})[0]


def test_references_through_includes_and_shorthand_read_back_the_same(tmp_path, monkeypatch):
    from trainer_cli.config import validate_config_text
    monkeypatch.setenv("LRX", "0.0311")
    monkeypatch.delenv("DEVX", raising=False)
    write_config(tmp_path, "model: {name: mlp, args: {hidden: [16], classes: 3}}\n"
                 "optimizer: {name: adam, learning_rate: '${env:LRX}'}\n"
                 "loss: '${env:LOSSX,softmax_cross_entropy}'\n", "base.yaml")
    cfg = write_config(tmp_path, "include: base.yaml\ncontext: '${env:DEVX,cpu}'\nepochs: 2\n"
                       "data: {train: {type: synthetic, num_samples: 40, num_features: 6}, "
                       "batch_size: 8}\n", "top.yaml")
    config = load_config(cfg)
    text = config.resolved_yaml()
    assert "0.0311" not in text and "${env:LRX}" in text and "${env:DEVX,cpu}" in text
    again = validate_config_text(text, env_references=True)
    assert again.model_dump() == config.model_dump() and again.resolved_yaml() == text
