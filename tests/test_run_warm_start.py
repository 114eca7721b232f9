"""Warm start and fine-tuning: ``model.init_from`` (a run's checkpoint, a run directory, an MXNet
``.params`` file, an ``.npz``), ``allow_missing`` / ``ignore_extra``, ``freeze`` and ``lr_mult``,
run as a user runs them, on real files."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from run_helpers import (SMALL, assert_bitwise_equal, final_arrays, load_npz, no_fsync,
                         run_trainer, write_config)
from trainer_cli.config import ConfigError
from trainer_cli.optimizer.state_file import load_states_file
from trainer_cli.run import layout, resume_run, start_run

MXNET_FILES = Path(__file__).parent / "data" / "mxnet_files"


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def _with_model(extra: str, text=SMALL) -> str:
    return text.replace("  init: xavier\n", "  init: xavier\n" + extra)


def _source_run(tmp_path, epochs=1):
    done = start_run(write_config(tmp_path, name="source.yaml"), ["epochs=%d" % epochs],
                     run_root=tmp_path / "src")
    return Path(done.summary["run_dir"])


def test_fine_tune_from_a_runs_best_checkpoint_with_a_frozen_layer(tmp_path):
    # "Best" by the highest validation loss: the first epoch's, not the latest checkpoint.
    done = start_run(write_config(tmp_path, name="source.yaml"),
                     ["epochs=2", "checkpoint.keep_best={metric: val_loss, mode: max}"],
                     run_root=tmp_path / "src")
    source = Path(done.summary["run_dir"])
    best = layout.read_best(source)
    assert best == 6 and layout.read_latest(source) == 12
    start = load_npz(layout.checkpoint_dir(source, best) / layout.PARAMS_FILE)
    config = write_config(tmp_path, _with_model(
        "  init_from: %s\n  freeze: ['0.*']\n" % (source / "checkpoints" / "best")), "ft.yaml")
    done = run_trainer("run", config, "--run-dir", tmp_path / "runs", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    params, states = final_arrays(run_dir)
    # The frozen layer is the source's to the bit; the head was trained from the source's head.
    for key in ("0.weight", "0.bias"):
        assert params[key].tobytes() == start[key].tobytes()
    assert not np.array_equal(params["1.weight"], start["1.weight"])
    log = (run_dir / layout.LOG_FILE).read_text()
    assert "weights from %s" % (source / "checkpoints" / "step-6" / "params.npz") in log
    assert "frozen: 2 of 4 parameters" in log
    assert "already initialized" not in log + done.stderr
    # Frozen parameters are not the optimizer's: Adam holds the states of the head's two only.
    by_device, _ = load_states_file(run_dir / "checkpoints" / "step-18" / layout.STATES_FILE)
    assert [sorted(states) for states in by_device.values()] == [[0, 1]]


def test_frozen_parameters_are_left_out_of_the_trainer(tmp_path):
    from trainer_cli.config import load_config
    from trainer_cli.run.build import build

    config = load_config(write_config(tmp_path, _with_model(
        "  freeze: ['0.*']\n  lr_mult: {'1.weight': 10}\n")))
    parts = build(config)
    trained = {p.name for p in parts.trainer._params}
    params = parts.net._collect_params_with_prefix()
    assert trained == {params["1.weight"].name, params["1.bias"].name}
    assert params["0.weight"].grad_req == "null" and params["0.bias"].grad_req == "null"
    assert params["1.weight"].lr_mult == 10.0 and params["1.bias"].lr_mult == 1.0


def test_lr_mult_scales_the_step_of_the_parameters_it_names(tmp_path):
    # Plain SGD, one step from the same start: the multiplied head moves exactly 10 times as far.
    base = ["optimizer={name: sgd, params: {learning_rate: 0.1}}", "steps=1",
            "checkpoint.every_epoch=false"]
    source = _source_run(tmp_path)
    init = "  init_from: %s\n" % source
    plain = start_run(write_config(tmp_path, _with_model(init), "a.yaml"), base,
                      run_root=tmp_path / "a")
    fast = start_run(write_config(tmp_path, _with_model(init + "  lr_mult: {'1.*': 10}\n"),
                                  "b.yaml"), base, run_root=tmp_path / "b")
    start, _ = final_arrays(source)
    one, _ = final_arrays(plain.summary["run_dir"])
    ten, _ = final_arrays(fast.summary["run_dir"])
    for key in ("1.weight", "1.bias"):
        np.testing.assert_allclose(ten[key] - start[key], 10 * (one[key] - start[key]),
                                   rtol=1e-4, atol=1e-6)
    for key in ("0.weight", "0.bias"):
        assert ten[key].tobytes() == one[key].tobytes()


def test_mxnet_params_file_with_allow_missing_and_ignore_extra(tmp_path):
    # A network whose first layers are those of the MXNet file's, with a new head.
    (tmp_path / "convnet.py").write_text(
        "from trainer_cli.gluon import nn\n\n"
        "def build():\n"
        "    net = nn.HybridSequential()\n"
        "    with net.name_scope():\n"
        "        net.add(nn.Conv2D(3, kernel_size=3, padding=1, in_channels=2))\n"
        "        net.add(nn.BatchNorm(in_channels=3))\n"
        "        net.add(nn.Activation('relu'))\n"
        "        net.add(nn.Flatten())\n"
        "        net.add(nn.Dense(5))\n"
        "    return net\n")
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "images.npz", x=rng.normal(size=(24, 2, 4, 4)).astype(np.float32),
             y=rng.integers(0, 5, size=24).astype(np.float32))
    text = ("model:\n  name: convnet.py:build\n  init_from: %s\n  freeze: ['0.*']\n"
            "data: {train: {type: npz, path: images.npz}, batch_size: 8}\n"
            "loss: softmax_cross_entropy\nsteps: 3\n" % (MXNET_FILES / "net.params"))
    config = write_config(tmp_path, text, "conv.yaml")
    refused = run_trainer("run", config, "--run-dir", tmp_path / "runs", cwd=tmp_path)
    # The file has a Dense at 3, the model has its head at 4: neither is silently skipped.
    assert refused.returncode == 2, refused.stderr
    assert "model.init_from" in refused.stderr and "model.allow_missing: true" in refused.stderr
    assert "Traceback" not in refused.stderr
    ok = run_trainer("run", config, "--run-dir", tmp_path / "runs", "--json",
                     "-o", "model.allow_missing=true", "-o", "model.ignore_extra=true",
                     cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    params, _ = final_arrays(json.loads(ok.stdout)["run_dir"])
    manifest = json.loads((MXNET_FILES / "manifest.json").read_text())["net.params"]
    loaded = dict(zip(manifest["names"], manifest["arrays"]))
    for key in ("0.weight", "0.bias"):   # MXNet's values, kept by the freeze
        want = np.array(loaded[key]["values"], dtype=np.float32).reshape(loaded[key]["shape"])
        assert params[key].tobytes() == want.tobytes()
    assert "already initialized" not in ok.stderr


def test_resuming_a_warm_started_run_never_reads_init_from_again(tmp_path):
    source = _source_run(tmp_path)
    weights = tmp_path / "weights.npz"
    shutil.copy(source / "checkpoints" / "step-6" / "params.npz", weights)
    config = write_config(tmp_path, _with_model("  init_from: weights.npz\n"), "ft.yaml")
    ref = start_run(config, run_root=tmp_path / "ref")
    resolved = (Path(ref.summary["run_dir"]) / layout.CONFIG_FILE).read_text()
    assert "init_from: %s" % weights in resolved   # resolved once, as an absolute path
    weights.unlink()     # the checkpoint is what a resume continues from
    again = resume_run(ref.summary["run_dir"], from_step=16)
    assert again.status == "finished" and again.summary["steps"] == 18
    got = final_arrays(ref.summary["run_dir"])
    other = start_run(write_config(tmp_path, _with_model(
        "  init_from: %s\n" % (source / "checkpoints" / "step-6")), "ft2.yaml"),
        run_root=tmp_path / "other")
    for a, b in zip(got, final_arrays(other.summary["run_dir"])):
        assert_bitwise_equal(a, b)


def test_bad_sources_and_patterns_are_refused_with_their_key(tmp_path):
    source = _source_run(tmp_path)
    damaged = tmp_path / "damaged"
    shutil.copytree(source, damaged)
    params = damaged / "checkpoints" / "step-6" / layout.PARAMS_FILE
    params.write_bytes(params.read_bytes()[:-8] + b"\0" * 8)
    cases = [
        ("  init_from: %s\n" % damaged, "damaged"),
        ("  init_from: %s\n" % (tmp_path / "nowhere"), "not found"),
        ("  init_from: %s\n" % tmp_path, "neither a checkpoint"),
        ("  freeze: ['features.*']\n", "model.freeze"),
        ("  lr_mult: {'2.*': 3}\n", "matches no parameter"),
        ("  freeze: ['0.*', '1.*']\n", "nothing to train"),
        ("  allow_missing: true\n", "init_from, which is not given"),
    ]
    for i, (extra, expected) in enumerate(cases):
        config = write_config(tmp_path, _with_model(extra), "bad%d.yaml" % i)
        with pytest.raises(ConfigError) as caught:
            start_run(config, run_root=tmp_path / "runs")
        assert expected in str(caught.value), (extra, str(caught.value))
    # A user sees it as one paragraph and exit 2.
    done = run_trainer("run", tmp_path / "bad0.yaml", "--run-dir", tmp_path / "runs", cwd=tmp_path)
    assert done.returncode == 2 and "damaged" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
