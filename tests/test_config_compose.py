"""Config composition: include, ${env:...}, ${key} references, positions through includes, and
``trainer validate --explain``."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from trainer_cli.cli import main
from trainer_cli.config import ConfigError, load_config, validate_config_text

BASE = """\
model: {name: mlp, args: {hidden: [16], classes: 3}}
data:
  train: {type: synthetic, task: classification, num_samples: 120, num_features: 6,
          num_classes: 3, seed: 5}
  batch_size: 16
loss: softmax_cross_entropy
optimizer: {name: adam, params: {learning_rate: 0.01, wd: 0.001}}
epochs: 2
"""


def _write(folder, name, text):
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _errors(path, *overrides):
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides)
    return str(info.value)


def test_include_merges_key_by_key_and_later_files_win(tmp_path):
    _write(tmp_path, "shared/base.yaml", BASE)
    _write(tmp_path, "shared/fast.yaml", "optimizer: {params: {learning_rate: 0.1}}\nepochs: 4\n")
    cfg = _write(tmp_path, "exp.yaml", "include: [shared/base.yaml, shared/fast.yaml]\nepochs: 6\n")
    config = load_config(cfg)
    assert config.optimizer.params == {"learning_rate": 0.1, "wd": 0.001}  # merged, not replaced
    assert config.epochs == 6                                              # the including file wins
    assert config.data.batch_size == 16 and config.name == "exp"
    # The run directory gets the composed config, which loads back without any include.
    again = validate_config_text(config.resolved_yaml())
    assert again.optimizer.params == config.optimizer.params and again.epochs == 6


def test_nested_includes_are_relative_to_the_including_file(tmp_path):
    _write(tmp_path, "a/base.yaml", BASE)
    _write(tmp_path, "a/mid.yaml", "include: base.yaml\ndata: {batch_size: 8}\n")
    cfg = _write(tmp_path, "top.yaml", "include: a/mid.yaml\n")
    assert load_config(cfg).data.batch_size == 8


def test_env_and_key_references(tmp_path, monkeypatch):
    _write(tmp_path, "base.yaml", BASE)
    cfg = _write(tmp_path, "exp.yaml", """\
include: base.yaml
name: "exp-${env:TAG,dev}"
optimizer: {name: adam, params: {learning_rate: "${env:LR,0.05}"}}
checkpoint: {every_steps: "${data.batch_size}"}
metrics: ["$${literal}"]
""")
    monkeypatch.delenv("TAG", raising=False)
    monkeypatch.delenv("LR", raising=False)
    errors = _errors(cfg)  # the metric name is a literal "${literal}", an unknown metric
    assert "${literal}" in errors
    cfg.write_text(cfg.read_text().replace('metrics: ["$${literal}"]\n', ""))
    config = load_config(cfg)
    assert config.name == "exp-dev" and config.optimizer.params["learning_rate"] == 0.05
    assert config.checkpoint.every_steps == 16  # a whole-string reference keeps the int type
    monkeypatch.setenv("LR", "0.2")
    monkeypatch.setenv("TAG", "a1")
    config = load_config(cfg)
    assert config.optimizer.params["learning_rate"] == 0.2 and config.name == "exp-a1"


def test_errors_name_the_file_and_line_where_the_value_was_written(tmp_path, monkeypatch):
    monkeypatch.delenv("NOPE_X", raising=False)
    _write(tmp_path, "base.yaml", BASE.replace("batch_size: 16", "batch_size: sixteen"))
    cfg = _write(tmp_path, "exp.yaml", """\
include: [base.yaml, missing.yaml]
optimizer: {name: adam, params: {learning_rate: "${env:NOPE_X}"}}
checkpoint: {every_steps: "${data.nope}"}
""")
    errors = _errors(cfg)
    assert "base.yaml:5:15: data.batch_size: expected an integer" in errors
    assert "exp.yaml:1:10: include: cannot include missing.yaml: config file not found" in errors
    assert "exp.yaml:2:49: optimizer.params.learning_rate: environment variable NOPE_X is not set" in errors
    assert "exp.yaml:3:27: checkpoint.every_steps: ${data.nope}: no such key" in errors
    # Each failed reference is reported once, not again as a bad value.
    assert errors.count("optimizer.params.learning_rate") == 1


def test_cycles_self_references_and_bad_include_values(tmp_path):
    _write(tmp_path, "a.yaml", "include: b.yaml\n")
    _write(tmp_path, "b.yaml", "include: a.yaml\n")
    assert "include cycle" in _errors(tmp_path / "a.yaml")
    cfg = _write(tmp_path, "self.yaml", BASE + "seed: '${seed}'\n")
    assert "refers to itself" in _errors(cfg)
    cfg = _write(tmp_path, "num.yaml", BASE + "include: 3\n")
    assert "expected a file name or a list of file names" in _errors(cfg)


def test_a_run_directory_config_is_never_composed(tmp_path, monkeypatch):
    # Resume reads config.yaml as text: an include or ${env:...} there is not followed.
    monkeypatch.setenv("SECRET_LR", "0.3")
    text = BASE.replace("learning_rate: 0.01", "learning_rate: '${env:SECRET_LR}'")
    with pytest.raises(ConfigError) as info:
        validate_config_text(text + "include: /etc/passwd\n", filename="config.yaml")
    message = str(info.value)
    assert "include: unknown key" in message and "expected a number > 0, got '${env:SECRET_LR}'" in message


def test_validate_explain(tmp_path, monkeypatch):
    _write(tmp_path, "base.yaml", BASE)
    cfg = _write(tmp_path, "exp.yaml", "include: base.yaml\n"
                 "optimizer: {name: adam, params: {learning_rate: '${env:LR,0.05}'}}\n")
    monkeypatch.setenv("LR", "0.2")
    runner = CliRunner()
    out = runner.invoke(main, ["validate", str(cfg), "--explain", "optimizer.params.learning_rate"])
    assert out.exit_code == 0, out.output
    assert out.output.splitlines() == [
        "optimizer.params.learning_rate: ${env:LR,0.05}",  # a value from the environment is never shown
        "  from %s:2:49" % cfg,
        "  via replaces the value written at %s:7:49" % (tmp_path / "base.yaml"),
        "  via ${env:LR} (set in the environment)",
    ]
    found = json.loads(runner.invoke(main, ["validate", str(cfg), "--explain", "data.batch_size",
                                            "--json"]).output)
    assert found == {"key": "data.batch_size", "value": 16, "source": "%s:5:15" % (tmp_path / "base.yaml"),
                     "via": []}
    found = json.loads(runner.invoke(main, ["validate", str(cfg), "-o", "epochs=3", "--explain",
                                            "epochs", "--json"]).output)
    assert found["source"] == "override -o epochs=3" and found["value"] == 3
    found = json.loads(runner.invoke(main, ["validate", str(cfg), "--explain", "checkpoint.keep_last",
                                            "--json"]).output)
    assert found["source"].startswith("default")
    bad = runner.invoke(main, ["validate", str(cfg), "--explain", "optimiser"])
    assert bad.exit_code == 2 and "did you mean 'optimizer'" in bad.output
