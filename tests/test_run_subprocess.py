"""``trainer run`` / ``resume`` as real processes: the shipped configs run and learn as shipped,
and a run killed at random moments (kill -9), or stopped by SIGINT/SIGTERM, resumes to the same
bits as a run that never stopped, leaving only checkpoints that verify."""
import json
import os
import random
import shutil
import signal
import subprocess
import time

import numpy
import pytest

from conftest import HAS_GPU
from run_helpers import (CONFIGS, REPO, assert_bitwise_equal, final_arrays, have_mpi, latest_dir,
                         load_npz, logged_step, metric_rows, only_run_dir, run_trainer,
                         trainer_cmd)
from trainer_cli.run import layout

pytestmark = pytest.mark.slow

# What "learns" means for each shipped CPU config (metric, bound, larger is better).
SHIPPED = {
    "perceptron": ("train_mse", 1e-6, False),
    "mlp_digits": ("val_accuracy", 0.95, True),
    "cnn_digits": ("val_accuracy", 0.95, True),
    "mlp_synthetic": ("val_accuracy", 0.9, True),
    "regression": ("val_mse", 0.05, False),
    "multi_device": ("val_accuracy", 0.85, True),
    "mf_synthetic": ("val_rmse", 0.2, False),
    "sparse_linear": ("val_accuracy", 0.75, True),
    "char_lm": ("val_perplexity", 5.0, False),
}
# Configs whose data a script makes first (configs/data/make_shapes.py): test_runner_images_text.py
# makes it and runs them.
MADE_DATA = {"image_folder", "image_record", "zoo_shapes"}


def test_every_shipped_cpu_config_is_covered():
    shipped = {p.stem for p in CONFIGS.glob("*.yaml")}
    assert set(SHIPPED) <= shipped
    assert shipped - set(SHIPPED) <= {"gpu", "dist"} | MADE_DATA


@pytest.mark.parametrize("name", list(SHIPPED))
def test_shipped_config_runs_and_learns(tmp_path, name):
    # As shipped, from the repository root; the digits MLP through the installed script.
    cmd = ["trainer"] if name == "mlp_digits" and shutil.which("trainer") else None
    args = ["run", "configs/%s.yaml" % name, "--run-dir", tmp_path, "--json"]
    if cmd:
        # The timeout only keeps a hang from stalling the suite: speed is the benchmarks' business.
        proc = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                              timeout=900, cwd=REPO)
    else:
        proc = run_trainer(*args, timeout=900)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    metric, bound, larger = SHIPPED[name]
    value = summary["metrics"][metric]
    assert (value >= bound) if larger else (value <= bound), (metric, value)
    run_dir = only_run_dir(tmp_path)
    assert summary["run_dir"] == str(run_dir) and summary["status"] in ("finished", "early_stopped")
    for _, folder in layout.list_checkpoints(run_dir):
        layout.verify_checkpoint(folder)
    if name == "mlp_digits":
        saves = (run_dir / "train.log").read_text().count("checkpoint step-")
        assert saves >= 5, saves


# A run of about 500 steps with a checkpoint every 10: long enough to be killed mid-way, often
# while a checkpoint is being written.
KILL_CONFIG = """\
model: {name: mlp, args: {hidden: [32], classes: 3, dropout: 0.2}, init: xavier}
data:
  train: {type: synthetic, task: classification, num_samples: 700, num_features: 8,
          num_classes: 3, seed: 2}
  split: 0.1
  batch_size: 10
  last_batch: rollover
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: adam, params: {learning_rate: 0.003}}
lr_scheduler: {type: cosine, params: {max_update: 500, warmup_steps: 50}}
grad_accumulation: 2
seed: 123
epochs: 16
log_every: 20
validate_every: 100
checkpoint: {every_steps: 10, every_epoch: true, keep_last: 3, keep_best: val_accuracy}
"""


@pytest.fixture(scope="module")
def kill_setup(tmp_path_factory):
    folder = tmp_path_factory.mktemp("kill")
    config = folder / "kill.yaml"
    config.write_text(KILL_CONFIG)
    start = time.monotonic()
    proc = run_trainer("run", config, "--run-dir", folder / "ref", "--json")
    assert proc.returncode == 0, proc.stderr
    return config, only_run_dir(folder / "ref"), time.monotonic() - start


def _start(args):
    return subprocess.Popen(trainer_cmd(*args), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _assert_same_as_reference(run_dir, ref_dir):
    for got, want in zip(final_arrays(run_dir), final_arrays(ref_dir)):
        assert_bitwise_equal(got, want)
    assert metric_rows(run_dir) == metric_rows(ref_dir)


def _assert_all_checkpoints_verify(run_dir):
    folders = [p for p in (run_dir / layout.CHECKPOINTS).rglob("step-*") if p.is_dir()]
    assert folders
    for folder in folders:
        layout.verify_checkpoint(folder)
        load_npz(folder / layout.PARAMS_FILE)
        load_npz(folder / layout.STATES_FILE)
    leftovers = [p.name for p in (run_dir / layout.CHECKPOINTS).iterdir() if p.name.startswith(".")]
    assert not leftovers


def test_kill_9_at_random_moments_then_resume_is_bitwise_exact(kill_setup, tmp_path):
    config, ref_dir, _ = kill_setup
    seed = int(os.environ.get("KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    # One kill at a random time after start (often before the first checkpoint), then three at
    # random points of training progress, each a few milliseconds after a logged step so that
    # some land inside checkpoint writes. Progress, not wall time, so a fast or slow disk
    # cannot make the run finish first.
    plan = [None] + sorted(rng.sample(range(40, 480, 20), 3))
    root = tmp_path / "runs"
    run_dir = None
    for target in plan + ["finish"]:
        args = ["run", config, "--run-dir", root, "-q"] if run_dir is None else ["resume", run_dir, "-q"]
        proc = _start(args)
        if target is None:
            # A random moment, but never past step 30: a fast machine may finish the run in
            # about a second, and the kill must land while it trains.
            deadline = time.monotonic() + rng.uniform(0.2, 1.2)
            while time.monotonic() < deadline and logged_step(root) < 30 and proc.poll() is None:
                time.sleep(0.005)
        elif target != "finish":
            deadline = time.monotonic() + 60
            while logged_step(root) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.03))
        if target != "finish":
            assert proc.poll() is None, "the run ended before kill at %s (seed %d)" % (target, seed)
            proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
        if target == "finish":
            assert proc.returncode == 0, (seed, err)
            break
        assert proc.returncode == -signal.SIGKILL, (seed, proc.returncode, err)
        found = [p for p in root.iterdir() if p.is_dir()] if root.exists() else []
        if found and not (found[0] / layout.CONFIG_FILE).exists():
            shutil.rmtree(found[0])  # killed between mkdir and writing config.yaml
            found = []
        run_dir = found[0] if found else None
    run_dir = only_run_dir(root)
    _assert_same_as_reference(run_dir, ref_dir)
    _assert_all_checkpoints_verify(run_dir)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_signal_saves_a_checkpoint_exits_130_or_143_and_resumes_exactly(kill_setup, tmp_path,
                                                                        sig):
    config, ref_dir, ref_seconds = kill_setup
    proc = _start(["run", config, "--run-dir", tmp_path, "--json"])
    # Wait until training is under way (the first checkpoint exists), then interrupt.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(tmp_path.glob("*/checkpoints/latest")):
        time.sleep(0.05)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
    summary = json.loads(out)
    assert summary["status"] == "interrupted"
    run_dir = only_run_dir(tmp_path)
    step = layout.read_latest(run_dir)
    assert summary["steps"] == step and summary["checkpoint"] == str(latest_dir(run_dir))
    assert layout.verify_checkpoint(latest_dir(run_dir))["finished"] is False
    if sig == signal.SIGINT:
        proc = run_trainer("resume", run_dir, "-q")
        assert proc.returncode == 0, proc.stderr
        _assert_same_as_reference(run_dir, ref_dir)


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
def test_dist_config_with_two_workers_and_exact_resume(tmp_path):
    proc = run_trainer("run", "configs/dist.yaml", "--workers", 2, "--run-dir", tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # rank 0's summary only
    assert summary["metrics"]["val_accuracy"] >= 0.9
    run_dir = only_run_dir(tmp_path)
    final = final_arrays(run_dir)
    # Every rank loads step-100 and the job replays the rest to the same bits.
    proc = run_trainer("resume", run_dir, "--from", "step-100", "--workers", 2, "-q")
    assert proc.returncode == 0, proc.stderr
    for got, want in zip(final_arrays(run_dir), final):
        assert_bitwise_equal(got, want)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no GPU visible to CuPy")
def test_gpu_config_runs_and_learns(tmp_path):
    proc = run_trainer("run", "configs/gpu.yaml", "-o", "epochs=5", "--run-dir", tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["metrics"]["val_accuracy"] >= 0.9
    params, states = final_arrays(only_run_dir(tmp_path))  # saved from the GPU as plain arrays
    assert params and states


# Two ranks, each quantizing its own half of every batch with its own error-feedback residual
# per parameter; thresholds small enough that the residuals carry real gradient mass from one
# step to the next (and across the checkpoint that the resume starts from).
DIST_COMPRESSED = """\
model: {name: mlp, args: {hidden: [8], classes: 3}, init: xavier}
data:
  train: {type: synthetic, task: classification, num_samples: 96, num_features: 5,
          num_classes: 3, seed: 4}
  batch_size: 16
loss: softmax_cross_entropy
optimizer: {name: sgd, params: {learning_rate: 0.1, momentum: 0.9}}
kvstore: dist_sync
compression: {type: %s, threshold: %s}
seed: 3
epochs: 2
log_every: 3
checkpoint: {every_steps: 4, every_epoch: false, keep_last: 10}
"""
COMPRESSIONS = {"2bit": 0.05, "1bit": 0.0}


@pytest.fixture(scope="module")
def compressed_dist_runs(tmp_path_factory):
    """``get(kind)``: a finished 2-rank run with that compression (12 steps, checkpoints every
    4), made once per module; tests resume copies of it."""
    made = {}

    def get(kind):
        if kind not in made:
            folder = tmp_path_factory.mktemp("dist-" + kind)
            config = folder / "dist.yaml"
            config.write_text(DIST_COMPRESSED % (kind, COMPRESSIONS[kind]))
            # Under a plain mpiexec (the resumes go through --workers, whose launcher costs
            # half a second more).
            from trainer_cli import dist_launch

            cmd = [dist_launch.find_mpiexec(), "-n", "2"] + trainer_cmd(
                "run", config, "--run-dir", folder / "runs", "-q")
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=REPO)
            assert proc.returncode == 0, proc.stderr
            made[kind] = only_run_dir(folder / "runs")
        return made[kind]
    return get


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
@pytest.mark.parametrize("kind", list(COMPRESSIONS))
def test_compressed_dist_run_resumes_bitwise(compressed_dist_runs, tmp_path, kind):
    done = compressed_dist_runs(kind)
    # Rank 0 wrote every rank's residuals into the checkpoint, under the manifest.
    saved = layout.checkpoint_dir(done, 4)
    assert layout.KVSTORE_FILE in layout.verify_checkpoint(saved)["files"]
    residuals = load_npz(saved / layout.KVSTORE_FILE)
    assert sorted(residuals) == sorted("r%d_w%d" % (k, r) for k in range(4) for r in (0, 1))
    for k in range(4):
        assert residuals["r%d_w0" % k].any() and residuals["r%d_w1" % k].any()
        assert not numpy.array_equal(residuals["r%d_w0" % k], residuals["r%d_w1" % k])
    # Every rank takes its own back and the job replays steps 5-12 to the same bits.
    run_dir = tmp_path / done.name
    shutil.copytree(done, run_dir)
    proc = run_trainer("resume", run_dir, "--from", "step-4", "--workers", 2, "-q")
    assert proc.returncode == 0, proc.stderr
    _assert_same_as_reference(run_dir, done)
    assert_bitwise_equal(load_npz(latest_dir(run_dir) / layout.KVSTORE_FILE),
                         load_npz(latest_dir(done) / layout.KVSTORE_FILE))


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
def test_compressed_dist_checkpoint_resumed_by_another_number_of_ranks(compressed_dist_runs,
                                                                       tmp_path):
    done = compressed_dist_runs("2bit")
    run_dir = tmp_path / done.name
    shutil.copytree(done, run_dir)
    # One plain process: a dist store with one worker, for which the saved residuals mean nothing.
    proc = run_trainer("resume", run_dir, "--from", "step-4")
    assert proc.returncode == 0, proc.stderr
    note = ("%s holds the gradient-compression residuals of 2 ranks, but this job has 1"
            % (layout.checkpoint_dir(run_dir, 4) / layout.KVSTORE_FILE))
    assert note in proc.stderr and note in (run_dir / layout.LOG_FILE).read_text()
    assert layout.read_latest(run_dir) == 12
    # Its own checkpoints hold its one rank's residuals.
    final = load_npz(latest_dir(run_dir) / layout.KVSTORE_FILE)
    assert sorted(final) == ["r%d_w0" % k for k in range(4)]


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
def test_dist_async_trains_through_the_runner(tmp_path):
    # The runner reads the Trainer's mode before the first step, which creates the store; the
    # batch-size check of a dist store that runs the optimizer must still wait for a real step.
    proc = run_trainer("run", "configs/dist.yaml", "-o", "kvstore=dist_async", "-o", "epochs=1",
                       "--workers", 2, "--run-dir", tmp_path, "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["status"] == "finished"
