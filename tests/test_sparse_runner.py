"""Sparse training through the runner: configs/mf_synthetic.yaml (matrix factorization with
Embedding(sparse_grad=True) tables on seeded synthetic ratings) trains, its tables get
row_sparse gradients, and a run stopped and resumed equals one that never stopped."""
import json

import numpy as np
import pytest

from run_helpers import (CONFIGS, StopAt, assert_bitwise_equal, final_arrays, have_mpi,
                         metric_rows, no_fsync, run_trainer)
from trainer_cli.config import load_config
from trainer_cli.run import data as data_mod, resume_run, start_run
from trainer_cli.run.build import build

CONFIG = CONFIGS / "mf_synthetic.yaml"
# A smaller copy of the shipped problem keeps these tests quick.
SMALL = ["data.train.num_samples=6000", "data.batch_size=128", "epochs=2"]


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def test_the_shipped_config_learns_the_ratings(tmp_path):
    result = start_run(CONFIG, ["epochs=3"], run_root=tmp_path)
    assert result.status == "finished"
    # Predicting 0 scores an RMSE of about 1 (the ratings' spread); the noise floor is 0.1.
    assert result.summary["metrics"]["val_rmse"] < 0.3


def test_the_tables_get_row_sparse_gradients_of_the_batch_rows(tmp_path):
    config = load_config(CONFIG, SMALL)
    parts = build(config, CONFIG)
    for table in ("users", "items", "user_bias", "item_bias"):
        assert getattr(parts.net, table).weight.grad_stype == "row_sparse"
    x = parts.train.features(np.arange(5))
    from trainer_cli import autograd, nd
    with autograd.record():
        loss = parts.loss(parts.net(nd.array(x)), nd.array(parts.train.y[:5]))
    loss.backward()
    grad = parts.net.users.weight.grad()
    assert grad.stype == "row_sparse"
    assert grad.indices.asnumpy().tolist() == sorted(set(x[:, 0].astype(int).tolist()))


def test_ratings_data_are_seeded_ids_and_ratings():
    config = load_config(CONFIG, SMALL)
    a = data_mod.load_dataset(config.data.train)
    b = data_mod.load_dataset(config.data.train)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
    assert a.x.shape == (6000, 2) and a.x[:, 0].max() < 1000 and a.x[:, 1].max() < 500
    assert np.array_equal(a.x, np.round(a.x)) and 0.5 < a.y.std() < 2.0


def test_a_stopped_sparse_run_resumes_bitwise(tmp_path):
    ref = start_run(CONFIG, SMALL, run_root=tmp_path / "ref")
    cut = start_run(CONFIG, SMALL, run_root=tmp_path / "cut", reporter=StopAt(30))
    assert cut.status == "interrupted" and cut.summary["steps"] == 30
    done = resume_run(cut.summary["run_dir"])
    assert done.status == "finished" and done.summary["steps"] == ref.summary["steps"]
    for got, want in zip(final_arrays(cut.summary["run_dir"]), final_arrays(ref.summary["run_dir"])):
        assert_bitwise_equal(got, want)
    assert metric_rows(cut.summary["run_dir"]) == metric_rows(ref.summary["run_dir"])


SPARSE_WEIGHTS = SMALL + ["model.args.sparse_weights=true"]


def test_row_sparse_weights_train_like_dense_tables_and_resume_bitwise(tmp_path):
    """SparseEmbedding tables (row_sparse weights in the kvstore, updated there) give the dense
    tables' numbers (lazy Adam either way), checkpoint whole, and resume exactly."""
    dense = start_run(CONFIG, SMALL, run_root=tmp_path / "dense")
    ref = start_run(CONFIG, SPARSE_WEIGHTS, run_root=tmp_path / "ref")
    assert ref.summary["metrics"] == dense.summary["metrics"]
    # The weights as saved (a row_sparse weight is written whole) are the dense run's, bitwise.
    assert_bitwise_equal(final_arrays(ref.summary["run_dir"])[0],
                         final_arrays(dense.summary["run_dir"])[0])
    cut = start_run(CONFIG, SPARSE_WEIGHTS, run_root=tmp_path / "cut", reporter=StopAt(30))
    assert cut.status == "interrupted"
    done = resume_run(cut.summary["run_dir"])
    assert done.status == "finished"
    for got, want in zip(final_arrays(cut.summary["run_dir"]), final_arrays(ref.summary["run_dir"])):
        assert_bitwise_equal(got, want)
    assert metric_rows(cut.summary["run_dir"]) == metric_rows(ref.summary["run_dir"])


def test_inspect_shows_row_sparse_states_with_their_stored_rows(tmp_path):
    from trainer_cli.report.inspect_states import inspect_states_file
    from trainer_cli.run import layout
    from run_helpers import latest_dir
    run = start_run(CONFIG, SPARSE_WEIGHTS + ["epochs=1", "data.train.num_samples=600"],
                    run_root=tmp_path)
    report = inspect_states_file(latest_dir(run.summary["run_dir"]) / layout.STATES_FILE)
    leaves = [leaf for p in report["devices"][0]["params"] for leaf in p["states"]]
    assert leaves and all(leaf["stype"] == "row_sparse" for leaf in leaves)
    # MXNet's lazy kernels give a row_sparse state every row at its first update (zeros).
    users = [leaf for p in report["devices"][0]["params"] if p["index"] == 0 for leaf in p["states"]]
    assert [(leaf["shape"], leaf["rows_stored"]) for leaf in users] == [([1000, 8], 1000)] * 2


DIST = ["kvstore=dist_sync", "data.train.num_samples=3000", "data.batch_size=100", "epochs=2"]


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="dist extra not installed (pip install -e .[dist])")
@pytest.mark.parametrize("store", ["dist_sync", "dist_async", "dist_async-sparse_weights"])
def test_sparse_gradients_train_over_two_mpi_workers(tmp_path, store):
    """Embedding(sparse_grad=True) under dist_sync and dist_async (and row_sparse weights on
    dist_async's server): row_sparse gradients cross the workers as rows and values, the
    optimizer runs on the store (MXNet's rule), the run learns."""
    args = ["run", CONFIG, "--workers", 2, "--run-dir", tmp_path, "--json"]
    kvstore, _, weights = store.partition("-")
    for item in DIST + ["kvstore=" + kvstore] + (["model.args.sparse_weights=true"] if weights
                                                   else []):
        args += ["-o", item]
    proc = run_trainer(*args, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)
    assert summary["status"] == "finished" and summary["metrics"]["val_rmse"] < 1.0


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="dist extra not installed (pip install -e .[dist])")
def test_an_uneven_last_batch_is_refused_when_the_dist_store_runs_the_optimizer(tmp_path):
    args = ["run", CONFIG, "--workers", 2, "--run-dir", tmp_path]
    for item in DIST + ["data.batch_size=128"]:
        args += ["-o", item]
    proc = run_trainer(*args, timeout=300)
    assert proc.returncode != 0
    assert "data.last_batch" in proc.stderr and "discard or rollover" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("extra", [[], ["model.args.sparse_weights=true"]])
def test_kill_9_mid_run_then_resume_equals_an_uninterrupted_sparse_run(tmp_path, extra):
    """A sparse run killed with SIGKILL after some checkpoints (one may be being written in the
    background) resumes from `latest` to the same bits as a run never killed."""
    import signal
    import subprocess
    import time

    from run_helpers import REPO, logged_step, only_run_dir, trainer_cmd
    overrides = SMALL + ["epochs=4", "checkpoint.every_steps=10", "log_every=5"] + extra
    args = []
    for item in overrides:
        args += ["-o", item]
    ref = run_trainer("run", CONFIG, "--run-dir", tmp_path / "ref", "-q", *args, timeout=300)
    assert ref.returncode == 0, ref.stderr
    root = tmp_path / "cut"
    proc = subprocess.Popen(trainer_cmd("run", CONFIG, "--run-dir", root, "-q", *args), cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while logged_step(root) < 60 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert proc.poll() is None, "the run ended before the kill"
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGKILL
    run_dir = only_run_dir(root)
    done = run_trainer("resume", run_dir, "-q", timeout=300)
    assert done.returncode == 0, done.stderr
    for got, want in zip(final_arrays(run_dir), final_arrays(only_run_dir(tmp_path / "ref"))):
        assert_bitwise_equal(got, want)
