"""Helpers shared by the tests of ``trainer run`` / ``trainer resume`` (tests/test_run_*.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import required

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


def served_ahead(monkeypatch, training=True) -> list:
    """Record, for every batch a run's training loop (``training=False``: an evaluation) takes
    from its read-ahead, whether a read made ahead served it (1) or it was read then (0)."""
    from trainer_cli.run import prefetch

    served, real_get = [], prefetch.Prefetcher.get

    def get(self, rows):
        before = self.hits
        out = real_get(self, rows)
        if (getattr(self._read, "__name__", None) == "_worker_features") == training:
            served.append(self.hits - before)
        return out

    monkeypatch.setattr(prefetch.Prefetcher, "get", get)
    return served


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
        # Wall-clock figures: a run's rows are otherwise the same bits every time.
        for key in ("time", "data_wait_s", "step_s"):
            row.pop(key, None)
        rows.append(row)
    return rows


def only_run_dir(root) -> Path:
    found = [p for p in Path(root).iterdir() if p.is_dir()]
    assert len(found) == 1, found
    return found[0]


def one_epoch_run(root) -> Path:
    """The run directory of a finished one-epoch run of SMALL under ``root/runs``, made in this
    process without fsyncs: a real run for the tests that tamper with one."""
    from click.testing import CliRunner

    from trainer_cli.cli import main
    mp = pytest.MonkeyPatch()
    no_fsync(mp)
    try:
        result = CliRunner().invoke(main, ["run", str(write_config(root)), "--run-dir",
                                           str(Path(root) / "runs"), "-q", "-o", "epochs=1"])
    finally:
        mp.undo()
    assert result.exit_code == 0, result.output
    return only_run_dir(Path(root) / "runs")


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
    """Whether the dist extra (mpi4py and mpich's mpiexec beside this python) is installed (an
    error instead of False where TRAINER_REQUIRE_MPI is set: see required.py)."""
    return required.have_mpi()


def communicate_or_fail(proc, seconds, what) -> tuple:
    """``proc.communicate()`` with ``seconds`` as a hang guard (not a speed test): a process still
    running then is killed and the test fails, naming ``what`` it was waiting for."""
    try:
        return proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail("the job did not end within %d s of %s:\n%s" % (seconds, what, err[-3000:]))


# --------------------------------------------------------------------------------------------
# A run slow enough for a signal to land while it trains, and the processes of a job

# A linear classifier whose forward can be slowed or stuck on cue (environment variables), so
# that a signal reliably lands while it trains, and a rank can stop answering at a known step.
SLOW_MODEL = '''\
import os, signal, time
from trainer_cli.gluon import nn


class Net(nn.HybridBlock):
    def __init__(self):
        super().__init__()
        self.body = nn.Dense(3)
        self.calls = 0

    def hybrid_forward(self, F, x):
        self.calls += 1
        slow = os.environ.get("TEST_SLOW_FILE")
        if slow and os.path.exists(slow):
            # Held inside this forward (for up to a minute) after saying so, so that a test's
            # signals land in a step that cannot end by itself, however loaded the machine.
            open(slow + ".entered", "w").close()
            end = time.monotonic() + 60
            while time.monotonic() < end:
                time.sleep(0.01)
        else:
            time.sleep(0.001)
        stuck = os.environ.get("TEST_STUCK")          # "how:rank:call:marker file"
        if stuck:
            how, rank, call, mark = stuck.split(":", 3)
            if self.calls == int(call) and os.environ.get("PMI_RANK") == rank:
                open(mark, "w").close()
                if how == "stop":
                    os.kill(os.getpid(), signal.SIGSTOP)
                else:
                    time.sleep(3600)
        return self.body(x)


def build():
    return Net()
'''

SLOW_CONFIG = """\
model: {name: slow.py:build, init: xavier}
data:
  train: {type: synthetic, task: classification, num_samples: 64, num_features: 5,
          num_classes: 3, seed: 4}
  batch_size: 16
loss: softmax_cross_entropy
optimizer: {name: sgd, params: {learning_rate: 0.05, momentum: 0.9}}
kvstore: %s
seed: 3
steps: 600
log_every: 1
checkpoint: {every_steps: 300, every_epoch: false, keep_last: 3}
"""


def slow_run_folder(tmp_path, kvstore="local"):
    """``tmp_path`` with ``slow.py`` and ``run.yaml`` (SLOW_CONFIG on ``kvstore``) in it."""
    (tmp_path / "slow.py").write_text(SLOW_MODEL)
    (tmp_path / "run.yaml").write_text(SLOW_CONFIG % kvstore)
    return tmp_path


def _parents() -> dict:
    """pid -> parent pid, for every process."""
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/%s/stat" % name) as f:
                    parents[int(name)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    return parents


def descendants(pid) -> set:
    """Every process below ``pid``."""
    parents = _parents()
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parents.items() if pp == p and c not in found]
        found.update(kids)
        todo += kids
    return found


def _alive(pid) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def assert_all_gone(pids, within=20.0):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if _alive(p)]
    for p in left:
        os.kill(p, signal.SIGKILL)
    assert not left, "processes of the job left running: %s" % left
