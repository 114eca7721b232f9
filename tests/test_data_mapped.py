"""Large .npy training data is memory-mapped: a run over a multi-GB file starts, splits off its
validation set, checkpoints and resumes without reading the file whole (issue 17 item 4).

The file is sparse (numpy's open_memmap only extends it), so it costs no disk and reading it
whole would still fault every page into the process: the bound on the process's peak RSS is
what tells."""
import os
import subprocess
import tempfile
import threading

import numpy as np
import pytest

from run_helpers import only_run_dir, trainer_cmd
from trainer_cli.run import data as data_mod
from trainer_cli.run.data import Arrays, DataError, is_mapped

ROWS, COLS = 500_000, 1024          # 2 GB of float32 features


def _peak_rss_mib(*args, cwd):
    """Run the CLI in a child process; its peak RSS in MiB (from wait4, for that child alone)."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(trainer_cmd(*args), cwd=cwd, stdout=out, stderr=subprocess.STDOUT)
        timer = threading.Timer(300, proc.kill)   # every wait ends
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        assert proc.returncode == 0, out.read().decode(errors="replace")[-2000:]
    return usage.ru_maxrss / 1024


@pytest.fixture
def big_data(tmp_path):
    x = np.lib.format.open_memmap(tmp_path / "x.npy", mode="w+", dtype=np.float32,
                                  shape=(ROWS, COLS))
    x[:1000] = np.random.default_rng(0).standard_normal((1000, COLS), dtype=np.float32)
    x.flush()
    del x
    np.save(tmp_path / "y.npy", (np.arange(ROWS) % 3).astype(np.float32))
    return tmp_path


def test_a_multi_gb_file_trains_and_resumes_without_being_read_whole(big_data):
    config = big_data / "big.yaml"
    config.write_text(
        "model: {name: mlp, args: {hidden: [8], classes: 3}}\n"
        "data:\n  train: {type: npy, path: x.npy, label_path: y.npy}\n"
        "  split: {val_fraction: 0.0002}\n  batch_size: 32\n"
        "loss: softmax_cross_entropy\noptimizer: {name: sgd, params: {learning_rate: 0.1}}\n"
        "steps: 20\nlog_every: 10\ncheckpoint: {every_steps: 10}\n")
    assert os.path.getsize(big_data / "x.npy") > 2e9
    # A first process measures what the interpreter and imports take by themselves.
    base = _peak_rss_mib("list", cwd=big_data)
    ran = _peak_rss_mib("run", config, "--run-dir", big_data / "runs", "-q", cwd=big_data)
    run_dir = only_run_dir(big_data / "runs")
    resumed = _peak_rss_mib("resume", run_dir, "-o", "steps=30", "-q", cwd=big_data)
    print("peak RSS MiB: list %.0f, run %.0f, resume %.0f" % (base, ran, resumed))
    # Reading the features whole would add 2000 MiB; batches read 30 x 32 rows of 4 KiB.
    assert ran - base < 400 and resumed - base < 400, (base, ran, resumed)
    assert "step 30" in (run_dir / "train.log").read_text()


def test_small_files_are_read_and_large_ones_mapped(tmp_path, monkeypatch):
    np.save(tmp_path / "a.npy", np.arange(12, dtype=np.float32).reshape(3, 4))
    small = data_mod._load_npy(tmp_path / "a.npy")
    assert not is_mapped(small) and small.tolist() == np.arange(12).reshape(3, 4).tolist()
    monkeypatch.setattr(data_mod, "MAP_BYTES", 16)
    big = data_mod._load_npy(tmp_path / "a.npy")
    assert is_mapped(big) and np.array_equal(big, small)
    fortran = np.asfortranarray(np.arange(12, dtype=np.float64).reshape(3, 4))
    np.save(tmp_path / "f.npy", fortran)
    assert np.array_equal(data_mod._load_npy(tmp_path / "f.npy"), fortran)


def test_a_header_claiming_more_than_the_file_holds_is_refused(tmp_path):
    np.save(tmp_path / "a.npy", np.zeros((10, 4), np.float32))
    raw = (tmp_path / "a.npy").read_bytes()
    (tmp_path / "cut.npy").write_bytes(raw[:-8])
    with pytest.raises(DataError, match="cut.npy.*claims 160 data bytes"):
        data_mod._load_npy(tmp_path / "cut.npy")
    os.mkfifo(tmp_path / "fifo.npy")
    with pytest.raises(DataError, match="fifo.npy"):
        data_mod._load_npy(tmp_path / "fifo.npy")


def test_a_split_of_mapped_features_keeps_row_numbers(tmp_path, monkeypatch):
    monkeypatch.setattr(data_mod, "MAP_BYTES", 1)
    x = np.arange(40, dtype=np.float32).reshape(10, 4)
    np.save(tmp_path / "x.npy", x)
    mapped = Arrays(data_mod._load_npy(tmp_path / "x.npy"), np.arange(10, dtype=np.float32))

    class Split:
        val_fraction, shuffle, seed = 0.3, True, 4

    train, val = data_mod.split_validation(mapped, Split)
    ref_train, ref_val = data_mod.split_validation(Arrays(x, np.arange(10, dtype=np.float32)), Split)
    assert train.x_rows is not None and val.x_rows is not None
    for got, ref in ((train, ref_train), (val, ref_val)):
        assert np.array_equal(got.features(slice(None)), ref.x)
        assert np.array_equal(got.features(np.array([1, 0])), ref.x[[1, 0]])
        assert np.array_equal(got.y, ref.y)


def test_mapped_data_is_read_ahead_and_trains_to_the_same_bits(tmp_path, monkeypatch):
    from run_helpers import assert_bitwise_equal, final_arrays, no_fsync, served_ahead
    from trainer_cli.run import start_run
    no_fsync(monkeypatch)
    rng = np.random.default_rng(4)
    np.save(tmp_path / "x.npy", rng.standard_normal((300, 6)).astype(np.float32))
    np.save(tmp_path / "y.npy", (np.arange(300) % 3).astype(np.float32))
    config = tmp_path / "c.yaml"
    config.write_text(
        "model: {name: mlp, args: {hidden: [8], classes: 3}}\n"
        "data:\n  train: {type: npy, path: x.npy, label_path: y.npy}\n"
        "  split: {val_fraction: 0.2}\n  batch_size: 32\n"
        "loss: softmax_cross_entropy\noptimizer: {name: adam, params: {learning_rate: 0.01}}\n"
        "epochs: 3\ncheckpoint: {every_epoch: true}\n")
    in_memory = start_run(config, run_root=tmp_path / "memory")
    served = served_ahead(monkeypatch)
    monkeypatch.setattr(data_mod, "MAP_BYTES", 1)
    mapped = start_run(config, run_root=tmp_path / "mapped")
    # 8 batches an epoch: all but each epoch's first were read while the step before computed.
    assert len(served) == 24 and sum(served) == 21
    for got, want in zip(final_arrays(mapped.summary["run_dir"]),
                         final_arrays(in_memory.summary["run_dir"])):
        assert_bitwise_equal(got, want)


def test_a_read_ahead_error_reaches_the_training_thread():
    from trainer_cli.run.prefetch import Prefetcher

    def read(rows):
        if rows[0] == 7:
            raise OSError("Input/output error")
        return rows * 2

    p = Prefetcher(read)
    try:
        first, second = np.array([1, 2]), np.array([7])
        p.ahead(first)
        assert p.get(first).tolist() == [2, 4]
        assert p.get(np.array([3])).tolist() == [6]        # not read ahead: read now
        p.ahead(second)
        with pytest.raises(OSError, match="Input/output"):
            p.get(second)
        assert p.hits == 2
    finally:
        p.close()


def test_the_next_batch_asked_for_keeps_the_one_asked_for_before():
    # The loop asks for step k+1's batch before it takes step k's: both reads are kept, in
    # order; a get drops the reads asked for before its own.
    from trainer_cli.run.prefetch import Prefetcher

    reads = []

    def read(rows):
        reads.append(int(rows[0]))
        return rows + 1

    p = Prefetcher(read)
    try:
        batches = [np.array([i]) for i in range(5)]
        p.ahead(batches[0])
        for k in range(4):
            p.ahead(batches[k + 1])
            assert p.get(batches[k]).tolist() == [k + 1]
        assert p.hits == 4
        p.ahead(batches[1])
        p.ahead(batches[2])
        assert p.get(batches[2]).tolist() == [3]           # the read of batches[1] dropped
        assert p.hits == 5 and not p._pending
        assert p.get(batches[4]).tolist() == [5]           # its read dropped: read now
    finally:
        p.close()


def test_mapped_features_that_scaling_takes_beyond_float32_are_refused_as_read(tmp_path,
                                                                              monkeypatch):
    """Mapped features are scaled as batches read them, and a value that scaling takes beyond
    float32 is refused there, with its row in the file (not its place in the batch)."""
    from trainer_cli.run.scaling import FeatureScaling, scale_arrays
    monkeypatch.setattr(data_mod, "MAP_BYTES", 1)
    x = np.zeros((10, 3), dtype=np.float32)
    x[7, 2] = 1e10
    np.save(tmp_path / "x.npy", x)
    mapped = Arrays(data_mod._load_npy(tmp_path / "x.npy"), np.zeros(10, np.float32))
    mapped.checked_as_read = "x.npy"
    tiny = FeatureScaling(np.zeros(3), np.array([1.0, 1.0, 1e-30]))
    scaled = scale_arrays(mapped, tiny, "x.npy")
    assert data_mod.is_mapped(scaled.x)         # not read whole to be checked
    assert np.array_equal(scaled.features(np.array([1, 2])), np.zeros((2, 3), np.float32))
    with pytest.raises(DataError, match=r"x\.npy: row 7 \(counting from 0\): feature 2, scaled"):
        scaled.features(np.array([3, 7, 0]))


def test_evaluating_mapped_rows_reads_each_pass_ahead_with_the_same_figures(tmp_path,
                                                                          monkeypatch):
    from run_helpers import served_ahead
    from trainer_cli import gluon, metric
    from trainer_cli.run.loop import evaluate_arrays, validation_pass

    rng = np.random.default_rng(6)
    rows = 3 * validation_pass(2, np.zeros((1, 5), np.float32)) + 1      # four passes
    np.save(tmp_path / "x.npy", rng.standard_normal((rows, 5)).astype(np.float32))
    y = (np.arange(rows) % 3).astype(np.float32)
    net = gluon.nn.Dense(3, in_units=5)
    net.initialize()
    loss = gluon.loss.SoftmaxCrossEntropyLoss()

    def evaluate(data):
        return evaluate_arrays(net, loss, {"accuracy": metric.create("accuracy")}, data, 2, None,
                               np.float32, "val_")

    served = served_ahead(monkeypatch, training=False)
    in_memory = evaluate(Arrays(np.load(tmp_path / "x.npy"), y))
    assert served == []                      # rows in memory: no read-ahead
    monkeypatch.setattr(data_mod, "MAP_BYTES", 1)
    mapped = Arrays(data_mod._load_npy(tmp_path / "x.npy"), y)
    assert is_mapped(mapped.x)
    assert evaluate(mapped) == in_memory
    assert served == [1, 1, 1, 1]              # every pass, the first too, read ahead
