"""A run records its model source; a resume imports only that file (or a built-in model), unless
the user passes --trust-model-file (issue 13 item 2)."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from run_helpers import SMALL, only_run_dir, write_config
from trainer_cli.cli import main
from trainer_cli.run.model_record import RECORD_FILE

NET = """\
from trainer_cli.gluon import nn


def build(classes=3):
    net = nn.Sequential()
    net.add(nn.Dense(classes))
    return net
"""


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _file_run(tmp_path):
    model = tmp_path / "net.py"
    model.write_text(NET)
    cfg = write_config(tmp_path, SMALL.replace("name: mlp\n  args: {hidden: [16], classes: 3}",
                                               "name: %s:build\n  args: {classes: 3}" % model))
    result = invoke("run", cfg, "--run-dir", tmp_path / "runs", "-q", "-o", "epochs=1")
    assert result.exit_code == 0, result.output
    return model, only_run_dir(tmp_path / "runs")


def test_a_run_records_its_model_source(tmp_path):
    model, run_dir = _file_run(tmp_path)
    record = json.loads((run_dir / RECORD_FILE).read_text())
    assert record["file"] == str(model.resolve()) and record["builtin"] is False
    assert len(record["sha256"]) == 64
    cfg = write_config(tmp_path, SMALL, "builtin.yaml")
    assert invoke("run", cfg, "--run-dir", tmp_path / "b", "-q", "-o", "epochs=1").exit_code == 0
    assert json.loads((only_run_dir(tmp_path / "b") / RECORD_FILE).read_text())["builtin"] is True


def test_resume_refuses_a_changed_or_unrecorded_model_file_unless_trusted(tmp_path):
    model, run_dir = _file_run(tmp_path)
    assert invoke("resume", run_dir, "-o", "epochs=2", "-q").exit_code == 0  # the recorded file
    # The file changes (a run directory naming code it did not come with looks the same).
    marker = tmp_path / "executed"
    model.write_text(NET + "\nopen(%r, 'w').close()\n" % str(marker))
    refused = invoke("resume", run_dir, "-o", "epochs=3")
    assert refused.exit_code == 2 and str(model.resolve()) in refused.output
    assert "--trust-model-file" in refused.output and not marker.exists()
    (run_dir / RECORD_FILE).unlink()
    refused = invoke("resume", run_dir, "-o", "epochs=3")
    assert refused.exit_code == 2 and "no record of the model" in refused.output
    assert not marker.exists()
    trusted = invoke("resume", run_dir, "-o", "epochs=3", "--trust-model-file", "-q")
    assert trusted.exit_code == 0, trusted.output
    assert marker.exists()
    # The user vouched for it: the record now names it, and the next resume needs no flag.
    assert invoke("resume", run_dir, "-o", "epochs=4", "-q").exit_code == 0


def test_a_damaged_record_is_refused_naming_it(tmp_path):
    _, run_dir = _file_run(tmp_path)
    for damage in ("{not json", "[" * 50000):     # the second nests past the parser's limit
        (run_dir / RECORD_FILE).write_text(damage)
        refused = invoke("resume", run_dir, "-o", "epochs=2")
        assert refused.exit_code == 2, (refused.output, refused.exception)
        assert RECORD_FILE in refused.output and "damaged" in refused.output
