"""Helpers shared by the tests of ``trainer run`` / ``trainer resume`` (tests/test_run_*.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from trainer_cli.run import layout
from trainer_cli.run.progress import Reporter

REPO = Path(__file__).resolve().parents[1]
CONFIGS = REPO / "configs"

# A small, quick classifier config; tests override pieces of it with -o.
SMALL = """\
model:
  name: mlp
  args: {hidden: [16], classes: 3}
  init: xavier
data:
  train: {type: synthetic, task: classification, num_samples: 120, num_features: 6,
          num_classes: 3, seed: 5}
  split: {val_fraction: 0.25}
  batch_size: 16
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: adam, params: {learning_rate: 0.01}}
seed: 11
epochs: 3
log_every: 2
checkpoint: {every_steps: 4, every_epoch: true, keep_last: 2}
"""


def write_config(folder, text=SMALL, name="small.yaml") -> Path:
    path = Path(folder) / name
    path.write_text(text)
    return path


def no_fsync(monkeypatch):
    """fsync only matters for power loss; in-process tests skip its cost (subprocess tests keep it)."""
    monkeypatch.setattr(os, "fsync", lambda fd: None)


class StopAt(Reporter):
    """Sends this process SIGINT when the run reaches ``step``: the real Ctrl-C path, on cue."""

    def __init__(self, step):
        self.step = step

    def progress(self, step, *args):
        if step == self.step:
            os.kill(os.getpid(), signal.SIGINT)


def latest_dir(run_dir) -> Path:
    return layout.checkpoint_dir(run_dir, layout.read_latest(run_dir))


def checkpoint_files(run_dir) -> dict:
    """``{step: {file name: bytes}}`` of every checkpoint's params and states, each checkpoint
    verified first (sizes and SHA-256 in its meta.json match the files)."""
    out = {}
    for step, path in layout.list_checkpoints(run_dir):
        layout.verify_checkpoint(path)
        out[step] = {name: (path / name).read_bytes()
                     for name in (layout.PARAMS_FILE, layout.STATES_FILE)}
    return out


def load_npz(path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def final_arrays(run_dir):
    """``(params, trainer states)`` of the run's latest checkpoint."""
    folder = latest_dir(run_dir)
    return load_npz(folder / layout.PARAMS_FILE), load_npz(folder / layout.STATES_FILE)


def assert_bitwise_equal(a: dict, b: dict):
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert a[key].tobytes() == b[key].tobytes(), "%s differs" % key


def metric_rows(run_dir) -> list:
    rows = []
    for line in (Path(run_dir) / layout.METRICS_FILE).read_text().splitlines():
        row = json.loads(line)
        row.pop("time")
        rows.append(row)
    return rows


def only_run_dir(root) -> Path:
    found = [p for p in Path(root).iterdir() if p.is_dir()]
    assert len(found) == 1, found
    return found[0]


def trainer_cmd(*args) -> list:
    return [sys.executable, "-m", "trainer_cli.cli", *map(str, args)]


def run_trainer(*args, timeout=120, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(trainer_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          cwd=kwargs.pop("cwd", REPO), **kwargs)


def logged_step(root) -> int:
    """The last step in the metrics.jsonl of the run under ``root`` (0 before any), read while it
    is being written."""
    for path in Path(root).glob("*/" + layout.METRICS_FILE):
        lines = path.read_text(errors="replace").splitlines()
        for line in reversed(lines):
            try:
                return json.loads(line)["step"]
            except (ValueError, KeyError):
                continue
    return 0


def have_mpi() -> bool:
    """Whether the dist extra (mpi4py and mpich's mpiexec beside this python) is installed."""
    try:
        from trainer_cli import dist_launch

        dist_launch.find_mpiexec()
        dist_launch._check_mpi4py()
    except Exception:  # noqa: BLE001 - any missing piece means: skip
        return False
    return True


def communicate_or_fail(proc, seconds, what) -> tuple:
    """``proc.communicate()`` with ``seconds`` as a hang guard (not a speed test): a process still
    running then is killed and the test fails, naming ``what`` it was waiting for."""
    try:
        return proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail("the job did not end within %d s of %s:\n%s" % (seconds, what, err[-3000:]))
