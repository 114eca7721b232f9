"""``trainer lr``: the schedule it prints is the one a run's Trainer follows, step by step.

Definition checked here (``report.schedule.LR_DEFINITION``): ``lr[k-1]`` is what
``trainer.learning_rate`` reports right after the k-th ``trainer.step``, i.e. the optimizer's
rate once its update count is k, which is the rate that step applied.

The Trainer compared against is built as the run builds it (``run.build.build_optimizer``) and
takes real steps (Updater, per-device counts, kvstore); ``trainer lr`` only counts updates.
"""
import json

import pytest

from report_helpers import invoke, invoke_json, make_trainer, train_steps, write_config
from trainer_cli import cpu
from trainer_cli.config import load_config
from trainer_cli.report.dataset_size import planned_steps
from trainer_cli.run.build import build_optimizer

CASES = {
    # optimizer learning_rate replaces the scheduler's base_lr (MXNet)
    "sgd-factor": ("sgd", {"learning_rate": 0.1, "momentum": 0.9},
                   {"type": "factor", "params": {"step": 5, "factor": 0.5, "base_lr": 0.3}}),
    # no learning_rate: Adam's own default (0.001) still overrides the scheduler's base_lr
    "adam-multifactor-warmup": ("adam", {}, {"type": "multifactor", "params": {
        "step": [6, 12], "factor": 0.1, "base_lr": 0.5, "warmup_steps": 4, "warmup_begin_lr": 0.01}}),
    "nag-poly": ("nag", {"learning_rate": 0.2}, {"type": "poly", "params": {
        "max_update": 15, "pwr": 2, "final_lr": 0.001, "base_lr": 0.2}}),
    # no base_lr: the run starts the decay from the optimizer's learning_rate
    "sgd-cosine-from-learning-rate": ("sgd", {"learning_rate": 0.3}, {"type": "cosine", "params": {
        "max_update": 20, "warmup_steps": 3}}),
    "rmsprop-cosine-warmup": ("rmsprop", {"learning_rate": 0.01}, {"type": "cosine", "params": {
        "max_update": 18, "warmup_steps": 5, "base_lr": 0.04, "warmup_mode": "constant",
        "warmup_begin_lr": 0.002}}),
    "ftrl-constant": ("ftrl", {}, None),
    "lbsgd-factor": ("lbsgd", {"learning_rate": 0.1, "batch_scale": 2},
                     {"type": "factor", "params": {"step": 3, "factor": 0.5}}),
    "sgd-begin-num-update": ("sgd", {"learning_rate": 0.1, "begin_num_update": 7},
                             {"type": "factor", "params": {"step": 4, "factor": 0.9}}),
}
STEPS = 24
pytestmark = pytest.mark.filterwarnings("ignore:learning rate from")


def _config(tmp_path, name, params, sched):
    body = {"optimizer": {"name": name, "params": params}, "steps": STEPS}
    if sched is not None:
        body["lr_scheduler"] = sched
    # JSON is YAML: one flow mapping per section
    return write_config(tmp_path, "".join("%s: %s\n" % (k, json.dumps(v)) for k, v in body.items()))


@pytest.mark.parametrize("case", sorted(CASES))
def test_lr_json_equals_what_a_trainer_reports_after_each_step(tmp_path, case):
    name, params, sched = CASES[case]
    path = _config(tmp_path, name, params, sched)
    result, report = invoke_json("lr", path)
    assert result.exit_code == 0, result.stderr
    assert report["steps"] == STEPS and len(report["lr"]) == STEPS
    net, trainer = make_trainer(build_optimizer(load_config(path)))
    seen = list(train_steps(net, trainer, STEPS))
    assert report["lr"] == seen  # exact: the same code computes both
    assert len(set(seen)) > (1 if sched else 0)  # a schedule that moves, where there is one
    assert report["optimizer"] == name


def test_lr_matches_a_trainer_on_two_devices_with_a_kvstore(tmp_path):
    name, params, sched = CASES["sgd-factor"]
    path = _config(tmp_path, name, params, sched)
    _, report = invoke_json("lr", path, "--steps", 12)
    ctxs = (cpu(0), cpu(1))
    net, trainer = make_trainer(build_optimizer(load_config(path)), contexts=ctxs)
    assert report["lr"] == list(train_steps(net, trainer, 12, contexts=ctxs))


def test_known_values_and_mxnet_interplay(tmp_path):
    """Values worked out by hand: FactorScheduler halves after every 5 updates, and the
    optimizer's learning_rate 0.1 replaces the scheduler's base_lr 0.3 (MXNet)."""
    _, report = invoke_json("lr", _config(tmp_path, *CASES["sgd-factor"]), "--steps", 12)
    assert report["lr"] == [0.1] * 5 + [0.05] * 5 + [0.025] * 2
    _, report = invoke_json("lr", _config(tmp_path, *CASES["sgd-cosine-from-learning-rate"]))
    assert report["lr"][2] == 0.3 and report["lr"][19:] == [0.0] * 5  # warmup end, then held
    assert report["lr"][0] == pytest.approx(0.1)  # linear warmup from 0: 0.3 * 1/3


def test_override_changes_the_schedule(tmp_path):
    path = _config(tmp_path, *CASES["sgd-factor"])
    _, base = invoke_json("lr", path, "--steps", 6)
    _, changed = invoke_json("lr", path, "--steps", 6, "-o", "optimizer.params.learning_rate=0.2")
    assert base["lr"][0] == 0.1 and changed["lr"][0] == 0.2


@pytest.mark.parametrize("body, expected", [
    ("epochs: 3\n", 12),                                            # ceil(100/32) = 4 per epoch
    ("epochs: 3\nsteps: 10\n", 10),                                 # whichever comes first
    ("epochs: 3\ndata: {train: {type: synthetic, num_samples: 100, num_features: 3}, "
     "batch_size: 32, last_batch: discard}\n", 9),
    ("epochs: 3\ndata: {train: {type: synthetic, num_samples: 100, num_features: 3}, "
     "batch_size: 32, last_batch: rollover}\n", 9),                 # 104//32, 108//32, 112//32
    ("epochs: 3\ngrad_accumulation: 3\n", 6),                      # ceil(4/3) per epoch
    ("epochs: 2\ndata: {train: {type: synthetic, num_samples: 100, num_features: 3}, "
     "split: 0.2, batch_size: 32}\n", 6),                           # 80 train samples
])
def test_default_steps_come_from_epochs_and_batches(tmp_path, body, expected):
    path = tmp_path / "c.yaml"
    base = "model: {name: mlp}\nloss: l2\n"
    if "data:" not in body:
        base += "data: {train: {type: synthetic, num_samples: 100, num_features: 3}, batch_size: 32}\n"
    path.write_text(base + body)
    assert planned_steps(load_config(path))["steps"] == expected
    _, report = invoke_json("lr", path)
    assert report["steps"] == expected == len(report["lr"])


def test_default_steps_read_npz_and_csv_sizes_from_headers(tmp_path):
    import numpy as np

    np.savez(tmp_path / "d.npz", x=np.zeros((70, 3), np.float32), y=np.zeros(70, np.int64))
    (tmp_path / "d.csv").write_text("a,b,label\n" + "1,2,0\n" * 45)
    for data, expected in (("d.npz", 3), ("d.csv", 2)):
        path = tmp_path / ("c-%s.yaml" % data[-3:])
        path.write_text("model: mlp\nloss: l2\nepochs: 1\ndata: {train: %s, batch_size: 32}\n" % data)
        assert planned_steps(load_config(path))["steps"] == expected


def test_run_dir_marks_the_latest_checkpoint(tmp_path):
    path = _config(tmp_path, *CASES["sgd-factor"])
    run = tmp_path / "run-20240101-000000"
    (run / "checkpoints" / "step-7").mkdir(parents=True)
    (run / "config.yaml").write_text(load_config(path).resolved_yaml())
    (run / "checkpoints" / "latest").write_text("step-7")
    _, report = invoke_json("lr", run)
    assert report["kind"] == "run_dir" and report["current_step"] == 7
    assert report["current_lr"] == report["lr"][6]
    out = invoke("lr", run).stdout
    assert "step 7 (latest checkpoint)" in out and "◀ latest checkpoint" in out


def test_human_output_has_a_compact_table_and_a_plot(tmp_path):
    path = _config(tmp_path, *CASES["sgd-factor"])
    result = invoke("lr", path, "--steps", 200)
    assert result.exit_code == 0
    out = result.stdout
    assert "learning rate by step" in out and "steps elided" in out and "lr unchanged" in out
    assert "┤" in out and "└" in out and "0.05" in out  # the plot, and the first decay
    assert len(out.splitlines()) < 80  # compact: not 200 rows


def test_bad_config_is_exit_2_and_json_error(tmp_path):
    path = write_config(tmp_path, "optimizer: {name: sgd, params: {learning_rate: fast}}\nsteps: 3\n")
    result, payload = invoke_json("lr", path)
    assert result.exit_code == 2
    assert payload["errors"][0]["line"] == 4 and "run.yaml:4:" in result.stderr
    missing = invoke("lr", tmp_path / "nope.yaml")
    assert missing.exit_code == 2 and "nope.yaml" in missing.stderr and "Traceback" not in missing.stderr


def test_lr_of_a_finished_run_equals_the_lr_it_logged(tmp_path):
    """End to end: ``trainer run``, then ``trainer lr RUN_DIR`` against metrics.jsonl's lr."""
    pytest.importorskip("trainer_cli.cli.run_cmd")
    path = _config(tmp_path, *CASES["rmsprop-cosine-warmup"])
    path.write_text(path.read_text().replace("steps: %d" % STEPS, "epochs: 3\nlog_every: 1"))
    result = invoke("run", path, "--run-dir", tmp_path / "runs")
    assert result.exit_code == 0, result.stderr
    (run,) = (tmp_path / "runs").iterdir()
    _, report = invoke_json("lr", run)
    assert report["steps"] == report["current_step"] == 12  # 3 epochs x ceil(100/32)
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    logged = {r["step"]: r["lr"] for r in logged if "lr" in r}
    assert len(logged) == 12 and all(report["lr"][k - 1] == lr for k, lr in logged.items())
