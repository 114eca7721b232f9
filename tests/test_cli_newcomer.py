"""Small things a newcomer hits, as a user meets them: an option that should have been an
override, precision aliases, a GPU that is not there, a runs folder that does not exist, and
what the summary's time counts. (The CLI in process where a command fails before training; the
summary from a real process, whose start-up it times.)"""
import json
import re

import pytest

from report_helpers import invoke
from run_helpers import run_trainer, write_config
from trainer_cli.config import ConfigError, load_config


@pytest.mark.parametrize("args,hint", [
    (["--epochs", "3"], "did you mean `-o epochs=3`?"),
    (["--batch-size=4"], "did you mean `-o data.batch_size=4`?"),
    (["--keep_last", "2"], "did you mean `-o checkpoint.keep_last=2`?"),
])
def test_an_option_naming_a_config_key_suggests_the_override(tmp_path, args, hint):
    config = write_config(tmp_path)
    done = invoke("validate", config, *args)
    assert done.exit_code == 2 and hint in done.stderr, done.stderr


def test_run_and_resume_suggest_overrides_too_and_other_options_keep_clicks_error(tmp_path):
    config = write_config(tmp_path)
    done = invoke("run", config, "--steps", "5")
    assert done.exit_code == 2 and "did you mean `-o steps=5`?" in done.stderr
    done = invoke("resume", tmp_path / "nowhere", "--epochs", "9")
    assert done.exit_code == 2 and "did you mean `-o epochs=9`?" in done.stderr
    done = invoke("run", config, "--frobnicate")
    assert done.exit_code == 2 and "No such option" in done.stderr and "-o" not in done.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("alias,value", [("fp16", "float16"), ("half", "float16"),
                                         ("16", "float16"), ("fp32", "float32")])
def test_precision_aliases(tmp_path, alias, value):
    config = load_config(write_config(tmp_path), ["precision=%s" % alias])
    assert config.precision == value
    assert "precision: %s" % value in config.resolved_yaml()


def test_bfloat16_is_refused_with_its_reason(tmp_path):
    done = invoke("validate", write_config(tmp_path), "-o", "precision=bf16")
    assert done.exit_code == 2
    assert "precision: bf16 is not supported: NumPy has no bfloat16 type" in done.stderr


def test_a_gpu_that_is_not_there_is_bad_input(tmp_path):
    from trainer_cli.context import num_gpus

    if num_gpus() > 0:
        pytest.skip("this machine has a GPU")
    done = invoke("run", write_config(tmp_path), "-o", "context=gpu:0", "--run-dir",
                  tmp_path / "runs")
    assert done.exit_code == 2, done.stderr
    assert re.search(r"small\.yaml: context: gpu:0 asked for, but .*use context: cpu",
                     done.stderr), done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


def test_runs_on_a_folder_that_does_not_exist_fails(tmp_path):
    done = invoke("runs", tmp_path / "typo")
    assert done.exit_code == 2 and "typo: no such folder" in done.stderr
    (tmp_path / "file").write_text("x")
    done = invoke("runs", tmp_path / "file", "--json")
    assert done.exit_code == 2 and "not a folder" in done.stderr
    (tmp_path / "empty").mkdir()
    done = invoke("runs", tmp_path / "empty", "--json")
    assert done.exit_code == 0 and json.loads(done.stdout) == []


def test_the_summary_says_training_time_and_the_whole_commands(tmp_path):
    done = run_trainer("run", write_config(tmp_path), "-o", "epochs=1", "--run-dir",
                       tmp_path / "runs", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    match = re.search(r"finished: 6 steps, 1 epochs, ([\d.]+) s training \(([\d.]+) s in all, "
                      r"start-up included\)", done.stdout)
    assert match, done.stdout
    assert float(match.group(2)) >= float(match.group(1))


def test_unknown_precision_still_lists_the_choices(tmp_path):
    with pytest.raises(ConfigError, match="float32, float16"):
        load_config(write_config(tmp_path), ["precision=fp8"])
