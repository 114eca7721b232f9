"""Child interpreters (the checkpoint writer, a --workers job's ranks) run this installation's
code, not a ``trainer_cli`` folder that happens to sit in the working directory."""
import subprocess
import sys

import numpy as np

from trainer_cli._own_python import module_argv
from trainer_cli.run import layout
from trainer_cli.run.save_process import SaveProcess


def _plant(folder):
    """A ``trainer_cli`` package in ``folder`` that leaves a file behind when imported."""
    marker = folder / "imported"
    (folder / "trainer_cli").mkdir()
    (folder / "trainer_cli" / "__init__.py").write_text("open(%r, 'w').close()\n" % str(marker))
    return marker


def test_the_cli_in_a_child_is_this_installations_whatever_the_folder_holds(tmp_path):
    marker = _plant(tmp_path)
    # What `python -m` does from there: the planted package is the one imported.
    subprocess.run([sys.executable, "-m", "trainer_cli.cli", "--version"], cwd=tmp_path,
                   capture_output=True, timeout=120)
    assert marker.exists()
    marker.unlink()
    done = subprocess.run(module_argv("trainer_cli.cli") + ["--version"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "trainer" in done.stdout, done.stderr
    assert not marker.exists()


def test_the_checkpoint_writer_ignores_a_planted_package(tmp_path, monkeypatch):
    marker = _plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    (run_dir / layout.CHECKPOINTS).mkdir(parents=True)
    files = {layout.PARAMS_FILE: {"w": np.ones(3, np.float32)},
             layout.STATES_FILE: {"0.mean": np.zeros(3, np.float32)}}
    writer = SaveProcess()
    try:
        writer.start(run_dir, 1, files, {"epoch": 0}, keep_last=2)
        path = writer.wait()
    finally:
        writer.close()
    layout.verify_checkpoint(path)
    assert not marker.exists()
