"""``data.normalize: standard``: fitted on the training split, saved with the run, applied to
validation, read back (checked) on resume and by the library function other commands use."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

from run_helpers import assert_bitwise_equal, final_arrays, metric_rows, run_trainer, write_config
from trainer_cli.run import resume_run, start_run
from trainer_cli.run.layout import RunDirError
from trainer_cli.run.scaling import SCALING_FILE, read_scaling

CONFIG = """\
model: {name: mlp, args: {hidden: [8], classes: 3}, init: xavier}
data:
  train: {type: npz, path: %s}
  split: {val_fraction: 0.25, shuffle: false}
  batch_size: 16
  normalize: %s
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: adam, params: {learning_rate: 0.01}}
epochs: 2
"""


def _data(tmp_path):
    rng = np.random.default_rng(3)
    # Features on scales a thousand times apart, far from zero: what unscaled CSVs look like.
    x = (rng.normal(size=(80, 4)) * [1.0, 10.0, 1000.0, 0.01] + [0.0, 50.0, 5000.0, -3.0])
    y = (x[:, 0] + x[:, 2] / 1000 > 5).astype(np.float32) + (x[:, 1] > 50)
    np.savez(tmp_path / "raw.npz", x=x.astype(np.float32), y=y.astype(np.float32))
    return x.astype(np.float32), y.astype(np.float32)


def _run(tmp_path, data_file, normalize, name, in_process=False):
    config = write_config(tmp_path, CONFIG % (data_file, normalize), name + ".yaml")
    if in_process:
        return Path(start_run(config, run_root=tmp_path / "runs").summary["run_dir"])
    done = run_trainer("run", config, "--run-dir", tmp_path / "runs", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["run_dir"])


def test_standard_scaling_is_fitted_on_the_training_split_and_applied_to_validation(tmp_path):
    x, y = _data(tmp_path)
    scaled_run = _run(tmp_path, "raw.npz", "standard", "scaled")
    train = x[:60].astype(np.float64)       # the first 75%: split without shuffling
    saved = read_scaling(scaled_run, (4,))
    np.testing.assert_allclose(saved.mean, train.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(saved.std, train.std(axis=0), rtol=1e-12)
    # The same run on features scaled beforehand with those statistics: the same bits, training
    # and validation rows alike (so validation was scaled with the training split's values).
    np.savez(tmp_path / "pre.npz", x=((x - saved.mean) / saved.std).astype(np.float32), y=y)
    by_hand = _run(tmp_path, "pre.npz", "none", "by_hand", in_process=True)
    for a, b in zip(final_arrays(scaled_run), final_arrays(by_hand)):
        assert_bitwise_equal(a, b)
    rows = [{k: v for k, v in r.items()} for r in metric_rows(scaled_run)]
    assert rows == metric_rows(by_hand) and any(r["kind"] == "val" for r in rows)
    assert not (by_hand / SCALING_FILE).exists()
    # evaluate and predict feed the trained model scaled inputs too: evaluate gives the run's
    # own last validation row, predict on the raw file the outputs of the pre-scaled twin.
    done = run_trainer("evaluate", scaled_run, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    last_val = [r for r in rows if r["kind"] == "val"][-1]
    assert json.loads(done.stdout)["metrics"] == {k[4:]: v for k, v in last_val.items()
                                                  if k.startswith("val_")}
    np.save(tmp_path / "raw_x.npy", x)
    np.save(tmp_path / "pre_x.npy", ((x - saved.mean) / saved.std).astype(np.float32))
    for run, given, out in ((scaled_run, "raw_x.npy", "a.npy"), (by_hand, "pre_x.npy", "b.npy")):
        done = run_trainer("predict", run, "-i", given, "-O", out, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert np.load(tmp_path / "a.npy").tobytes() == np.load(tmp_path / "b.npy").tobytes()


def test_resume_reads_the_saved_scaling_and_refuses_a_damaged_one(tmp_path):
    _data(tmp_path)
    run_dir = _run(tmp_path, "raw.npz", "standard", "scaled", in_process=True)
    path = run_dir / SCALING_FILE
    with np.load(path) as z:
        mean, std = z["mean"], z["std"]
    for bad, expected in [({"mean": mean, "std": std[:3]}, "one shape"),
                          ({"mean": mean, "std": -std}, "std > 0"),
                          ({"mean": mean[:2], "std": std[:2]}, "the data's are (4,)"),
                          ({"mean": mean}, "expected the arrays mean and std")]:
        np.savez(path, **bad)
        with pytest.raises(RunDirError, match=re.escape(expected)):
            read_scaling(run_dir, (4,))
    path.write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(RunDirError, match="damaged"):
        read_scaling(run_dir, (4,))
    # What a user sees when resuming such a run: exit 2 naming the file, nothing trained.
    done = run_trainer("resume", run_dir, "-o", "epochs=3", cwd=tmp_path)
    assert done.returncode == 2 and "%s: damaged" % path in done.stderr, done.stderr
    # The saved scaling, not a refit, is what a resume uses: other statistics make other
    # training features, which the checkpoint's data fingerprint tells.
    np.savez(path, mean=mean + 1.0, std=std)
    with pytest.raises(RunDirError, match="the training data differs"):
        resume_run(run_dir, overrides=["epochs=3"])
    np.savez(path, mean=mean, std=std)
    assert resume_run(run_dir, overrides=["epochs=3"]).summary["epochs"] == 3


def test_an_unknown_normalize_kind_is_refused_and_a_run_without_scaling_has_none(tmp_path):
    config = write_config(tmp_path, CONFIG % ("raw.npz", "minmax"), "bad.yaml")
    _data(tmp_path)
    done = run_trainer("validate", config, cwd=tmp_path)
    assert done.returncode == 2 and "data.normalize" in done.stderr and "standard" in done.stderr
    assert read_scaling(tmp_path) is None    # no file: the run has no scaling


def test_a_validation_row_that_scaling_takes_beyond_float32_is_refused_with_its_row(tmp_path):
    """Validation values far from a small training spread become Inf once scaled: a clear
    error naming the set, the row and the feature, before training starts."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(80, 4)).astype(np.float32)
    x[:, 3] = np.float32(1e-30) * (np.arange(80) % 2)     # a spread of 5e-31 ...
    x[70, 3] = np.float32(1e20)                              # ... and a validation row far off
    y = (rng.random(80) * 3).astype(np.int64).astype(np.float32)
    np.savez(tmp_path / "far.npz", x=x, y=y)
    config = write_config(tmp_path, CONFIG % ("far.npz", "standard"), "far.yaml")
    done = run_trainer("run", config, "--run-dir", tmp_path / "runs", cwd=tmp_path)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert re.search(r"the validation split of far\.npz: row 10 \(counting from 0\): feature 3, "
                     r"scaled by the training split's mean .* is beyond float32", done.stderr), \
        done.stderr
