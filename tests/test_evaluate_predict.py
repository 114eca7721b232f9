"""``trainer evaluate`` and ``trainer predict``: a trained run used as a user would, on real
files; outputs checked against the network computed here from the checkpoint's weights."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest

from trainer_cli import nd
from trainer_cli._outpath import OutputRefused
from trainer_cli.config import ConfigError
from trainer_cli.run import layout, start_run
from trainer_cli.run.data import DataError, load_data
from trainer_cli.run.errors import input_error_types
from trainer_cli.run.model import create
from trainer_cli.run.predict import predict_file
from trainer_cli.run.session import read_run_config
from trainer_cli.run.trained import evaluate_run

from run_helpers import CONFIGS, SMALL, metric_rows, no_fsync, run_trainer, write_config


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("evaluate")
    text = SMALL.replace("checkpoint: {every_steps: 4, every_epoch: true, keep_last: 2}",
                         "checkpoint: {every_steps: 3, keep_last: 1, keep_best: val_loss}")
    config = write_config(tmp, text + "validate_every: 3\n")
    result = start_run(config, run_root=tmp / "runs", handle_signals=False)
    assert result.status == "finished"
    return Path(result.summary["run_dir"])


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def _val_row(run_dir, step):
    return next(r for r in metric_rows(run_dir) if r["kind"] == "val" and r["step"] == step)


def _val_split(run_dir):
    config = read_run_config(run_dir)
    return load_data(config.data)[1]


def _forward(run_dir, step, x):
    """The network's outputs for ``x`` computed here: the model's builder and the weights."""
    net = create("mlp", hidden=[16], classes=3)
    net.load_parameters(str(layout.checkpoint_dir(run_dir, step) / layout.PARAMS_FILE))
    return net(nd.array(x)).asnumpy()


def test_evaluate_gives_the_runs_own_validation_numbers(run_dir, tmp_path):
    final = layout.read_latest(run_dir)
    done = run_trainer("evaluate", run_dir, "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    row = _val_row(run_dir, final)
    assert report["step"] == final and report["data"] == "the validation split"
    # The same weights on the same samples in the same passes: the logged values, exactly.
    assert report["metrics"] == {"loss": row["val_loss"], "accuracy": row["val_accuracy"]}

    best = layout.read_best(run_dir)
    assert best is not None
    at_best = evaluate_run(run_dir, "best")
    assert at_best["step"] == best
    assert at_best["metrics"]["loss"] == _val_row(run_dir, best)["val_loss"]

    # Another data set through -o data.val=FILE: here the validation split saved as a file.
    val = _val_split(run_dir)
    np.savez(tmp_path / "test.npz", x=val.x, y=val.y)
    other = evaluate_run(run_dir, None, ["data.val=%s" % (tmp_path / "test.npz")])
    assert other["data"] == "data.val" and other["metrics"] == report["metrics"]

    on_train = evaluate_run(run_dir, None, (), on="train")
    assert on_train["samples"] == 90 and on_train["data"] == "the training split"

    with pytest.raises(ConfigError, match=r"data\.\* \(the data set\) and context only"):
        evaluate_run(run_dir, None, ["optimizer.name=sgd"])


def test_predict_writes_outputs_classes_and_probabilities(run_dir, tmp_path):
    final = layout.read_latest(run_dir)
    x = _val_split(run_dir).x
    np.save(tmp_path / "x.npy", x)
    done = run_trainer("predict", run_dir, "--input", tmp_path / "x.npy",
                       "--output", tmp_path / "p.npz")
    assert done.returncode == 0, done.stderr
    with np.load(tmp_path / "p.npz", allow_pickle=False) as z:
        out, cls, prob = z["output"], z["class"], z["probability"]
    expected = _forward(run_dir, final, x)
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-7)
    assert cls.dtype == np.int64 and np.array_equal(cls, expected.argmax(axis=1))
    soft = np.exp(expected - expected.max(axis=1, keepdims=True))
    soft /= soft.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(prob, soft.max(axis=1), rtol=1e-6)

    # CSV in (with a header line), CSV out; batches of 7, each reported.
    with open(tmp_path / "x.csv", "w") as f:
        f.write(",".join("f%d" % i for i in range(x.shape[1])) + "\n")
        for row in x:
            f.write(",".join(repr(float(v)) for v in row) + "\n")
    seen = []
    result = predict_file(run_dir, tmp_path / "x.csv", tmp_path / "p.csv", batch_size=7,
                          progress=lambda done, total: seen.append((done, total)))
    assert seen == [(min(k, 30), 30) for k in range(7, 36, 7)] and result["samples"] == 30
    with open(tmp_path / "p.csv") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["output_0", "output_1", "output_2", "class", "probability"]
    table = np.array(rows[1:], dtype=np.float64)
    np.testing.assert_allclose(table[:, :3], out, rtol=1e-6, atol=1e-7)
    assert np.array_equal(table[:, 3], cls)

    # .npy out: the outputs alone; --from best picks the best checkpoint's weights.
    best = layout.read_best(run_dir)
    predict_file(run_dir, tmp_path / "x.npy", tmp_path / "b.npy", which="best")
    np.testing.assert_allclose(np.load(tmp_path / "b.npy"), _forward(run_dir, best, x),
                               rtol=1e-6, atol=1e-7)


def test_predict_reads_a_mapped_input_a_pass_ahead_with_the_same_outputs(run_dir, tmp_path,
                                                                         monkeypatch):
    from run_helpers import served_ahead
    from trainer_cli.run import data as data_mod

    x = _val_split(run_dir).x
    np.save(tmp_path / "x.npy", x)
    predict_file(run_dir, tmp_path / "x.npy", tmp_path / "in_memory.npy", batch_size=7)
    served = served_ahead(monkeypatch, training=False)
    monkeypatch.setattr(data_mod, "MAP_BYTES", 1)
    seen = []
    predict_file(run_dir, tmp_path / "x.npy", tmp_path / "mapped.npy", batch_size=7,
                 progress=lambda done, total: seen.append(done))
    assert served == [1] * 5 and seen == [7, 14, 21, 28, 30]     # 30 samples in passes of 7
    assert np.load(tmp_path / "mapped.npy").tobytes() == \
        np.load(tmp_path / "in_memory.npy").tobytes()


def test_predict_checks_its_input_and_output_like_training_data(run_dir, tmp_path):
    x = _val_split(run_dir).x.copy()
    x[4, 2] = np.inf
    np.save(tmp_path / "inf.npy", x)
    with pytest.raises(DataError, match="sample 4 .* NaN or Inf"):
        predict_file(run_dir, tmp_path / "inf.npy", tmp_path / "o.npz", batch_size=3)
    assert not (tmp_path / "o.npz").exists() and os.listdir(tmp_path) == ["inf.npy"]
    np.save(tmp_path / "narrow.npy", x[:, :4])
    with pytest.raises(DataError, match=r"shape \[4\], but the model was trained on .*\[6\]"):
        predict_file(run_dir, tmp_path / "narrow.npy", tmp_path / "o.npz")
    np.save(tmp_path / "text.npy", np.array([["a"] * 6]))
    with pytest.raises(DataError, match="must be numbers"):
        predict_file(run_dir, tmp_path / "text.npy", tmp_path / "o.npz")
    with pytest.raises(DataError, match="suffix"):
        predict_file(run_dir, tmp_path / "narrow.npy", tmp_path / "o.txt")
    os.mkfifo(tmp_path / "fifo.npz")
    with pytest.raises(OutputRefused, match="FIFO"):
        predict_file(run_dir, tmp_path / "narrow.npy", tmp_path / "fifo.npz")
    assert issubclass(DataError, input_error_types())       # the CLI exits 2 on them


def test_predict_reads_csr_samples(tmp_path):
    result = start_run(CONFIGS / "sparse_linear.yaml", ["steps=2", "data.split=0.5"],
                       run_root=tmp_path / "runs", handle_signals=False)
    run_dir = Path(result.summary["run_dir"])
    csr = CONFIGS / "data" / "sparse_text.npz"
    predict_file(run_dir, csr, tmp_path / "p.npz", batch_size=100)
    with np.load(tmp_path / "p.npz") as z:
        out, cls = z["output"], z["class"]
    with np.load(csr) as z:
        data, indices, indptr, shape = z["data"], z["indices"], z["indptr"], tuple(z["shape"])
    net = create("sparse_linear", num_features=2000, outputs=2)
    net.initialize()
    net.load_parameters(str(layout.checkpoint_dir(run_dir, 2) / layout.PARAMS_FILE))
    rows = slice(0, 50)
    end = indptr[50]
    batch = nd.sparse.csr_matrix((data[:end], indices[:end], indptr[:51]), shape=(50, shape[1]))
    np.testing.assert_allclose(out[rows], net(batch).asnumpy(), rtol=1e-5, atol=1e-6)
    assert len(out) == shape[0] and np.array_equal(cls, out.argmax(axis=1))


def test_predict_refuses_hostile_inputs_without_hanging_or_guessing(run_dir, tmp_path, monkeypatch):
    import signal

    def expired(signum, frame):
        raise AssertionError("predict still reading after 10 s")
    old = signal.signal(signal.SIGALRM, expired)
    signal.alarm(10)
    try:
        # A FIFO or a device named .csv is refused, not read until memory runs out.
        os.mkfifo(tmp_path / "fifo.csv")
        os.symlink("/dev/zero", tmp_path / "zero.csv")
        for name, kind in (("fifo.csv", "FIFO"), ("zero.csv", "character device")):
            with pytest.raises(DataError, match="%s: cannot read .*%s" % (name, kind)):
                predict_file(run_dir, tmp_path / name, tmp_path / "o.npz")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    # A float64 beyond float32's range would reach the network as Inf: refused by its row.
    x = _val_split(run_dir).x[:4].astype(np.float64)
    x[2, 1] = 1e39
    np.save(tmp_path / "wide.npy", x)
    with pytest.raises(DataError, match=r"wide.npy: sample 2 .*beyond float32's range"):
        predict_file(run_dir, tmp_path / "wide.npy", tmp_path / "o.npz")
    # One endless CSV line is refused by its number before it is split into cells.
    monkeypatch.setattr("trainer_cli.run.predict.CSV_LINE_LIMIT", 64)
    (tmp_path / "long.csv").write_text("1,2,3,4,5,6\n" + "1," * 40 + "1\n")
    with pytest.raises(DataError, match=r"long.csv:2: a line longer than"):
        predict_file(run_dir, tmp_path / "long.csv", tmp_path / "o.npz")
    assert not (tmp_path / "o.npz").exists()


def test_predict_csv_is_read_in_blocks_with_its_header(run_dir, tmp_path, monkeypatch):
    x = _val_split(run_dir).x[:7]
    monkeypatch.setattr("trainer_cli.run.predict._CSV_BLOCK", 10)   # several blocks
    with open(tmp_path / "x.csv", "w", encoding="utf-8-sig") as f:
        f.write("a,b,c,d,e,f\n\n" + "\n".join(",".join(repr(float(v)) for v in row) for row in x))
    predict_file(run_dir, tmp_path / "x.csv", tmp_path / "o.npy")
    np.testing.assert_allclose(np.load(tmp_path / "o.npy"),
                               _forward(run_dir, layout.read_latest(run_dir), x),
                               rtol=1e-6, atol=1e-7)


def test_predict_and_export_say_when_the_output_cannot_be_written(run_dir, tmp_path, monkeypatch):
    import errno
    import tempfile

    from trainer_cli.run.export import export_weights

    np.save(tmp_path / "x.npy", _val_split(run_dir).x[:4])

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "No space left on device")
    # A full disk: said of the output (not a SIGBUS from a memory-mapped write), nothing left.
    monkeypatch.setattr(os, "posix_fallocate", full, raising=False)
    with pytest.raises(OSError, match=r"cannot write .*o.npz: No space left"):
        predict_file(run_dir, tmp_path / "x.npy", tmp_path / "o.npz")
    assert sorted(os.listdir(tmp_path)) == ["x.npy"]
    # A folder that cannot take the file: a refused output (the CLI exits 2), not a traceback.
    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(tempfile, "mkdtemp", denied)
    with pytest.raises(OutputRefused, match=r"o.npz: predict output: cannot write there"):
        predict_file(run_dir, tmp_path / "x.npy", tmp_path / "o.npz")
    monkeypatch.setattr("trainer_cli.gluon.param_file.atomic_write", denied)
    with pytest.raises(OutputRefused, match=r"w.params: export: cannot write there"):
        export_weights(run_dir, tmp_path / "w")


def test_predict_and_export_while_the_run_removes_the_checkpoint_they_chose(run_dir, tmp_path,
                                                                            monkeypatch):
    import shutil

    import trainer_cli.gluon.param_file as param_file
    from trainer_cli.run.export import export_weights

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    np.save(tmp_path / "x.npy", _val_split(run_dir).x[:3])
    real = param_file.load_arrays
    newer = [layout.read_latest(copy) + 100]

    def racing(path):
        # The training lands a newer checkpoint and keep_last removes the one being read.
        folder = Path(path).parent
        if folder.name != layout.checkpoint_name(newer[0]):
            newer[0] += 1
            shutil.copytree(folder, layout.checkpoint_dir(copy, newer[0]))
            (copy / layout.CHECKPOINTS / layout.LATEST).write_text(
                layout.checkpoint_name(newer[0]) + "\n")
            shutil.rmtree(folder)
        return real(path)
    monkeypatch.setattr(param_file, "load_arrays", racing)
    done = predict_file(copy, tmp_path / "x.npy", tmp_path / "o.npy")
    assert done["step"] == newer[0] and len(np.load(tmp_path / "o.npy")) == 3
    assert export_weights(copy, tmp_path / "w")["step"] == newer[0]
    # A step named by the user is that step or an error, never another.
    step = newer[0]
    newer[0] += 1000       # what racing() reads next is removed
    with pytest.raises(layout.RunDirError, match="step-%d" % step):
        export_weights(copy, tmp_path / "w2", which=step)


def test_predict_refuses_samples_that_scaling_makes_infinite(run_dir, tmp_path, monkeypatch):
    from trainer_cli.run import scaling

    x = _val_split(run_dir).x[:5].copy()
    x[3, 0] = 1e30                      # finite, but over a std of 1e-10: beyond float32
    np.save(tmp_path / "x.npy", x)
    tiny = scaling.FeatureScaling(np.zeros(6), np.full(6, 1e-10))
    monkeypatch.setattr(scaling, "run_scaling", lambda *args: tiny)
    with pytest.raises(DataError, match=r"x.npy \(scaled as the run's feature_scaling.npz\): "
                                        r"sample 3 .*NaN or Inf"):
        predict_file(run_dir, tmp_path / "x.npy", tmp_path / "o.npz")


def test_outputs_never_replace_the_files_of_the_run_they_read(run_dir, tmp_path):
    import shutil

    from trainer_cli.run.export import export_weights

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    folder = layout.checkpoint_dir(copy, layout.read_latest(copy))
    before = (folder / layout.PARAMS_FILE).read_bytes()
    np.save(tmp_path / "x.npy", _val_split(run_dir).x[:3])
    for out in (folder / layout.PARAMS_FILE, copy / layout.METRICS_CSV,
                copy / layout.CHECKPOINTS / "new.npy"):
        with pytest.raises(OutputRefused, match="a file of the run directory"):
            predict_file(copy, tmp_path / "x.npy", out)
    with pytest.raises(OutputRefused, match="a file of the run directory"):
        export_weights(copy, folder / "params", fmt="npz")
    assert (folder / layout.PARAMS_FILE).read_bytes() == before
    # Beside the run's own files, a new name is the user's to write.
    predict_file(copy, tmp_path / "x.npy", copy / "predictions.npy")
    assert len(np.load(copy / "predictions.npy")) == 3


def test_resume_names_a_folder_in_place_of_the_best_pointer(run_dir, tmp_path):
    import shutil

    from trainer_cli.run import resume_run

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    pointer = copy / layout.CHECKPOINTS / layout.BEST
    pointer.unlink()
    (pointer / "x").mkdir(parents=True)
    with pytest.raises(layout.RunDirError) as info:
        resume_run(copy, overrides=["epochs=4"], handle_signals=False)
    message = str(info.value)
    # The pointer, not the temporary file renamed onto it; and the cure that applies.
    assert message.startswith("cannot write %s: Is a directory" % pointer), message
    assert "Remove the folder in its place" in message and ".tmp-" not in message


def _compiling(result):
    """A stand-in for the command's library call whose model compiles two kernels."""
    def call(*args, **kwargs):
        import numba     # no cache: each call compiles afresh, as a kernel new to the machine
        numba.njit(lambda x: x + 1)(1)
        numba.njit(lambda x: x * 2)(1.5)
        return result
    return call


def test_a_first_pass_that_compiles_kernels_says_so_once(run_dir, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from trainer_cli.cli import main
    from trainer_cli.run import predict, trained

    monkeypatch.setattr(trained, "evaluate_run", _compiling(
        {"notes": [], "checkpoint": "step-1", "data": "val", "described": "30 samples",
         "metrics": {"loss": 0.5}}))
    monkeypatch.setattr(predict, "predict_file", _compiling(
        {"notes": [], "output": "p.npy", "samples": 3, "classifier": False,
         "checkpoint": "step-1"}))
    notice = "note: compiling the CPU kernels"
    runner = CliRunner()
    for args in (["evaluate", str(run_dir)],
                 ["predict", str(run_dir), "-i", "x.npy", "-O", str(tmp_path / "p.npy")]):
        told = runner.invoke(main, args)
        assert told.exit_code == 0, told.output
        assert told.stderr.count(notice) == 1 and notice not in told.stdout
        quiet = runner.invoke(main, args + ["--json"])
        assert quiet.exit_code == 0, quiet.output
        assert notice not in quiet.stderr and json.loads(quiet.stdout)
