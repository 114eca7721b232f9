"""The run's thread count: chosen from the cores, the ranks on the host and the load, or fixed
by the config; applied to BLAS (threadpoolctl) and the update split, undone after; in train.log."""
import os

import pytest

from trainer_cli.config import load_config
from trainer_cli.run import threads
from trainer_cli.run.session import start_run

threadpoolctl = pytest.importorskip("threadpoolctl")


def test_auto_leaves_out_busy_cores_and_never_goes_below_one():
    assert threads.plan("auto", cores=2, load=0.1).count == 2
    assert threads.plan("auto", cores=2, load=1.2).count == 1       # one core taken elsewhere
    assert threads.plan("auto", cores=2, load=8.0).count == 1
    assert threads.plan("auto", cores=16, load=3.6).count == 12
    assert "load average 8.00" in threads.plan("auto", cores=2, load=8.0).how


def test_auto_keeps_one_thread_for_small_layers():
    """A GEMM of a million multiply-adds gains nothing from a second thread (see
    threads.SMALL_LAYER_WORK); from 4M on it does."""
    small = threads.plan("auto", cores=2, load=0.1, layer_work=1 << 20)
    assert small.count == 1 and "small layers: 1048576 multiply-adds" in small.how
    assert threads.plan("auto", cores=2, load=0.1, layer_work=1 << 22).count == 2
    assert threads.plan("auto", cores=2, load=0.1, layer_work=None).count == 2   # not known
    assert threads.plan(2, cores=2, load=0.1, layer_work=1 << 10).count == 2     # the config's


def test_layer_work_is_the_samples_times_the_largest_known_parameter():
    from trainer_cli import gluon
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(16, in_units=8), gluon.nn.Dense(4, in_units=16))
    net.initialize()
    assert threads.layer_work(list(net.collect_params().values()), 32) == 32 * 16 * 8
    deferred = gluon.nn.Dense(5)               # its size is not known before a batch
    deferred.initialize()
    net.add(deferred)
    assert threads.layer_work(list(net.collect_params().values()), 32) is None


def test_mpi_ranks_share_the_cores():
    assert threads.plan("auto", ranks=4, cores=16, load=0.0).count == 4
    assert threads.plan("auto", ranks=3, cores=2, load=0.0).count == 1
    assert "3 rank(s)" in threads.plan("auto", ranks=3, cores=2, load=0.0).how


def test_a_count_from_the_config_wins():
    plan = threads.plan(3, cores=2, load=9.0)
    assert plan.count == 3 and "config" in plan.how


def test_local_ranks_come_from_the_launcher(monkeypatch):
    for name in threads._LOCAL_RANK_VARS:
        monkeypatch.delenv(name, raising=False)
    assert threads.local_ranks(4) == 4
    monkeypatch.setenv("MPI_LOCALNRANKS", "2")
    assert threads.local_ranks(4) == 2


def test_apply_limits_blas_and_the_update_split_then_restores(monkeypatch):
    import numpy  # noqa: F401  (loads NumPy's BLAS)
    from trainer_cli.optimizer import kernels as _fused

    monkeypatch.delenv("TRAINER_NUM_THREADS", raising=False)
    before = [p["num_threads"] for p in threadpoolctl.threadpool_info() if p["user_api"] == "blas"]
    restore = threads.apply(threads.ThreadPlan(1, "test"))
    try:
        assert _fused.num_threads() == 1
        assert all(p["num_threads"] == 1 for p in threadpoolctl.threadpool_info()
                   if p["user_api"] == "blas")
    finally:
        restore()
    assert "TRAINER_NUM_THREADS" not in os.environ
    assert [p["num_threads"] for p in threadpoolctl.threadpool_info()
            if p["user_api"] == "blas"] == before


def test_config_key_and_train_log(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        "model: {name: mlp, args: {hidden: [8], classes: 2}}\n"
        "data:\n  train: {type: synthetic, task: classification, num_samples: 40,"
        " num_features: 4, num_classes: 2}\n  batch_size: 10\n"
        "loss: softmax_cross_entropy\nepochs: 1\nthreads: 1\n")
    assert load_config(str(config)).threads == 1
    assert load_config(str(config), ["threads=auto"]).threads == "auto"
    result = start_run(str(config), run_root=tmp_path / "runs", handle_signals=False)
    log = (tmp_path / "runs").glob("*/train.log")
    assert "threads: 1 (set by the config's threads)" in next(log).read_text()
    assert result.status == "finished"


def test_auto_keeps_the_count_a_checkpoint_was_made_with():
    kept = threads.plan("auto", cores=2, load=8.0, layer_work=1 << 30, recorded=2)
    assert kept.count == 2 and "as the checkpoint was made" in kept.how
    assert threads.plan(3, cores=2, load=0.1, recorded=2).count == 3     # the config's wins
    assert threads.recorded({"threads": 2}) == 2
    for wrong in ({}, {"threads": None}, {"threads": True}, {"threads": 0}, {"threads": -1},
                  {"threads": "2"}, {"threads": 2.0}, {"threads": 1 << 40}, None, []):
        assert threads.recorded(wrong) is None


def _recording_blas_limits(monkeypatch):
    seen = []
    real = threads.apply

    def apply(thread_plan):
        seen.append((thread_plan.count, thread_plan.how))
        return real(thread_plan)
    monkeypatch.setattr(threads, "apply", apply)
    return seen


def test_resume_evaluate_and_predict_run_on_the_checkpoints_count(tmp_path, monkeypatch):
    # Some BLAS kernels round a product differently on another thread count: what follows a
    # checkpoint uses its count, whatever the load says then.
    import json
    from pathlib import Path

    import numpy as np
    from trainer_cli.run import layout, resume_run
    from trainer_cli.run.predict import predict_file
    from trainer_cli.run.trained import evaluate_run

    config = tmp_path / "c.yaml"
    config.write_text(
        "model: {name: mlp, args: {hidden: [8], classes: 2}}\n"
        "data:\n  train: {type: synthetic, task: classification, num_samples: 40,"
        " num_features: 4, num_classes: 2}\n  batch_size: 10\n  split: 0.25\n"
        "loss: softmax_cross_entropy\nepochs: 2\ncheckpoint: {every_steps: 3, keep_last: 9}\n")
    monkeypatch.setattr(threads, "_load_average", lambda: 0.0)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads, "SMALL_LAYER_WORK", 0)        # auto: 2 threads here
    result = start_run(str(config), run_root=tmp_path / "runs", handle_signals=False)
    run_dir = Path(result.summary["run_dir"])
    meta = json.loads((layout.checkpoint_dir(run_dir, 3) / layout.META_FILE).read_text())
    assert meta["threads"] == 2
    monkeypatch.setattr(threads, "_load_average", lambda: 5.0)  # auto alone would pick 1 now
    seen = _recording_blas_limits(monkeypatch)
    resume_run(run_dir, 3, handle_signals=False)
    assert seen[-1] == (2, "2 (auto: as the checkpoint was made)")
    evaluate_run(run_dir)
    assert seen[-1][0] == 2
    np.save(tmp_path / "x.npy", np.ones((3, 4), np.float32))
    predict_file(run_dir, tmp_path / "x.npy", tmp_path / "out.npy")
    assert seen[-1][0] == 2 and len(seen) == 3
