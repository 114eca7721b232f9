"""The runner with image data (a folder of PNGs, transforms, worker processes), model-zoo
networks and text for an LSTM language model: the shipped configs run as a user runs them,
resumes are bitwise (random flips and the carried LSTM state included), and the new config
keys fail with positions."""
import json
import shutil
import sys
import textwrap
import time

import numpy
import pytest

from run_helpers import (CONFIGS, REPO, StopAt, assert_bitwise_equal, final_arrays, metric_rows,
                         no_fsync, only_run_dir, run_trainer, served_ahead)
from trainer_cli.config import ConfigError, load_config
from trainer_cli.run import layout, resume_run, session, start_run
from trainer_cli.run.data import DataError
from trainer_cli.run.layout import RunDirError
from trainer_cli.run.trained import evaluate_run

pytest.importorskip("PIL")   # the vision extra; the image tests need it, the text ones do not


@pytest.fixture(scope="module")
def shapes_project(tmp_path_factory):
    """A folder as a user has it after ``python configs/data/make_shapes.py``: the configs next
    to data/shapes/{train,val}."""
    folder = tmp_path_factory.mktemp("shapes")
    sys.path.insert(0, str(CONFIGS / "data"))
    try:
        import make_shapes
    finally:
        sys.path.pop(0)
    make_shapes.main(folder / "data" / "shapes")
    for name in ("image_folder.yaml", "image_record.yaml", "zoo_shapes.yaml"):
        shutil.copy(CONFIGS / name, folder / name)
    return folder


@pytest.fixture
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def _run(config, tmp_path, *overrides):
    args = ["run", config, "--run-dir", tmp_path, "--json"]
    for o in overrides:
        args += ["-o", o]
    proc = run_trainer(*args, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_image_folder_config_runs_and_learns(shapes_project, tmp_path):
    summary = _run(shapes_project / "image_folder.yaml", tmp_path)
    assert summary["status"] == "finished"
    assert summary["metrics"]["val_accuracy"] >= 0.9      # the config says 0.93


def test_record_files_train_as_the_folders_do(shapes_project, tmp_path, _fast_disk):
    """The same images packed in .rec files (make_shapes.py packs them as im2rec does): the run
    is the image folder's run, bit for bit, and reading the records from two worker processes
    changes nothing."""
    folder = start_run(shapes_project / "image_folder.yaml", ["epochs=2"],
                       run_root=tmp_path / "folder")
    for workers in (0, 2):
        records = start_run(shapes_project / "image_record.yaml",
                            ["epochs=2", "data.num_workers=%d" % workers],
                            run_root=tmp_path / ("records%d" % workers))
        assert records.status == "finished"
        for got, want in zip(final_arrays(records.summary["run_dir"]),
                             final_arrays(folder.summary["run_dir"])):
            assert_bitwise_equal(got, want)
        assert metric_rows(records.summary["run_dir"]) == metric_rows(folder.summary["run_dir"])
    result = evaluate_run(records.summary["run_dir"])
    assert result["metrics"]["accuracy"] == folder.summary["metrics"]["val_accuracy"]


def test_record_file_problems_are_clear(shapes_project, tmp_path):
    shutil.copy(shapes_project / "data" / "shapes" / "val.rec", tmp_path / "lone.rec")
    got = _problems(tmp_path, """        model: mlp
        data: {train: {type: image_record, path: lone.rec}, val: {type: image_record, path: no.rec}}
        loss: softmax_cross_entropy
        epochs: 1
        """)
    assert "data.train.path: the record file 'lone.rec' has no index beside it" in got
    assert "data.val.path: record file 'no.rec' not found" in got
    (tmp_path / "lone.idx").write_text("0\t0\n1\t999999\n")
    (tmp_path / "c.yaml").write_text("model: mlp\ndata: {train: {type: image_record, path: "
                                     "lone.rec}}\nloss: softmax_cross_entropy\nepochs: 1\n")
    with pytest.raises(DataError, match="lone.rec: the index .* points past the end"):
        start_run(tmp_path / "c.yaml", run_root=tmp_path / "runs")


def test_zoo_config_runs_a_model_zoo_network(shapes_project, tmp_path):
    summary = _run(shapes_project / "zoo_shapes.yaml", tmp_path, "steps=3")
    assert summary["status"] == "finished" and summary["steps"] == 3
    run_dir = only_run_dir(tmp_path)
    params = final_arrays(run_dir)[0]
    # MXNet's MobileNet parameter names, the classifier sized by args.classes.
    assert params["output.weight"].shape == (3, 256)
    record = json.loads((run_dir / "model.json").read_text())
    assert record["name"] == "zoo:mobilenet0.25" and record["builtin"]


def _assert_resume_bitwise(config, tmp_path, stop, overrides=(), cut_overrides=(),
                           before_resume=lambda run_dir: None):
    ref = start_run(config, list(overrides), run_root=tmp_path / "ref")
    assert ref.status == "finished"
    cut = start_run(config, list(overrides) + list(cut_overrides), run_root=tmp_path / "cut",
                    reporter=StopAt(stop))
    assert cut.status == "interrupted" and layout.read_latest(cut.summary["run_dir"]) == stop
    run_dir = cut.summary["run_dir"]
    before_resume(run_dir)
    done = resume_run(run_dir)
    assert done.status == "finished"
    for got, want in zip(final_arrays(run_dir), final_arrays(ref.summary["run_dir"])):
        assert_bitwise_equal(got, want)
    assert metric_rows(run_dir) == metric_rows(ref.summary["run_dir"])
    return done


def test_image_folder_resume_is_bitwise_and_workers_change_nothing(shapes_project, tmp_path,
                                                                   _fast_disk):
    # Stopped mid-epoch 2; the interrupted part made by two worker processes, the reference
    # and the resumed part in this process: the flips are keyed by (seed, epoch, sample).
    _assert_resume_bitwise(shapes_project / "image_folder.yaml", tmp_path, 11,
                           overrides=["epochs=2"], cut_overrides=["data.num_workers=2"])


def test_char_lm_resume_carries_the_lstm_state_bitwise(tmp_path, _fast_disk):
    # 13 batches an epoch: step 5 is mid-epoch, where the checkpoint must hold the LSTM state.
    def holds_the_state(run_dir):
        meta = json.loads((layout.checkpoint_dir(run_dir, 5) / layout.META_FILE).read_text())
        carried = meta["loop"]["carried"]["0"]
        assert [e["shape"] for e in carried] == [[1, 16, 64], [1, 16, 64]]   # h and c

    done = _assert_resume_bitwise(CONFIGS / "char_lm.yaml", tmp_path, 5, overrides=["epochs=2"],
                                  before_resume=holds_the_state)
    # Perplexity is exp of the mean per-token cross-entropy, which the loss is. (The config
    # run whole, as shipped, is in test_run_subprocess.py.)
    metrics = done.summary["metrics"]
    assert metrics["val_perplexity"] == pytest.approx(numpy.exp(metrics["val_loss"]), rel=1e-5)
    # trainer evaluate rebuilds the vocabulary and the streams, and carries the state as the
    # run's validation did: the same numbers.
    again = evaluate_run(done.summary["run_dir"])["metrics"]
    assert (again["loss"], again["perplexity"]) == (metrics["val_loss"], metrics["val_perplexity"])


def test_char_lm_resumes_bitwise_from_a_state_the_writer_process_saved(tmp_path, _fast_disk,
                                                                       monkeypatch):
    # The writer process gets the carried state as arrays and encodes it into meta.json itself.
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)
    handed = []

    class Counted(session.SaveProcess):
        def start(self, run_dir, step, *args, **kwargs):
            handed.append(step)
            return super().start(run_dir, step, *args, **kwargs)

    monkeypatch.setattr(session, "SaveProcess", Counted)
    ref = start_run(CONFIGS / "char_lm.yaml", ["epochs=2", "checkpoint.keep_last=10"],
                    run_root=tmp_path / "ref")
    assert ref.status == "finished" and 10 in handed   # step 10: mid-epoch (13 batches each)
    run_dir = tmp_path / "again"
    shutil.copytree(ref.summary["run_dir"], run_dir)
    meta = json.loads((layout.checkpoint_dir(run_dir, 10) / layout.META_FILE).read_text())
    assert [e["shape"] for e in meta["loop"]["carried"]["0"]] == [[1, 16, 64], [1, 16, 64]]
    assert resume_run(run_dir, from_step=10).status == "finished"
    for got, want in zip(final_arrays(run_dir), final_arrays(ref.summary["run_dir"])):
        assert_bitwise_equal(got, want)
    assert metric_rows(run_dir) == metric_rows(ref.summary["run_dir"])


def test_a_checkpoint_with_a_damaged_carried_state_is_refused(tmp_path, _fast_disk):
    cut = start_run(CONFIGS / "char_lm.yaml", ["epochs=1"], run_root=tmp_path, reporter=StopAt(4))
    run_dir = cut.summary["run_dir"]
    folder = layout.checkpoint_dir(run_dir, 4)
    meta_path = folder / layout.META_FILE
    meta = json.loads(meta_path.read_text())
    meta["loop"]["carried"]["0"][0]["shape"] = [1, 16, 65]
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(RunDirError, match=r"meta.json: loop.carried: expected arrays whose data"):
        resume_run(run_dir, from_step=4)


# ---------------------------------------------------------------------------- config errors

def _problems(folder, text):
    path = folder / "c.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    return "\n".join(str(issue) for issue in info.value.issues)


def test_zoo_names_and_args_are_checked(tmp_path):
    got = _problems(tmp_path, """\
        model: {name: zoo:resnet18_v3, args: {classes: 3}}
        data: {train: {type: synthetic}}
        loss: softmax_cross_entropy
        epochs: 1
        """)
    assert "c.yaml:1" in got and "model.name" in got and "resnet18_v1" in got   # did you mean
    got = _problems(tmp_path, """\
        model: {name: zoo:resnet18_v1, args: {clases: 3}}
        data: {train: {type: synthetic}}
        loss: softmax_cross_entropy
        epochs: 1
        """)
    assert "model.args.clases" in got and "does not take" in got
    got = _problems(tmp_path, """\
        model: {name: zoo:resnet18_v1, args: {pretrained: true, root: %s}}
        data: {train: {type: synthetic}}
        loss: softmax_cross_entropy
        """ % tmp_path)
    assert "model.args.pretrained" in got and "resnet18_v1-a0666292.params" in got


def test_image_and_text_keys_are_checked_with_positions(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "t.txt").write_text("some text")
    got = _problems(tmp_path, """\
        model: mlp
        data:
          train:
            type: image_folder
            path: images
            transforms: [to_tensr, {name: resize}, {name: normalize, mean: fast}, {name: cast, sizes: 3}]
          val: {type: cifar10, fine_label: true, part: dev}
          num_workers: -1
        loss: softmax_cross_entropy
        epochs: 1
        """)
    assert "c.yaml:6:18: data.train.transforms.0: unknown transform 'to_tensr'; did you mean " \
           "'to_tensor'?" in got
    assert "c.yaml:6:28: data.train.transforms.1: resize needs the parameter 'size'" in got
    assert "c.yaml:6:68: data.train.transforms.2.mean: expected a number or a list" in got
    assert "c.yaml:6:88: data.train.transforms.3.sizes: unknown transform parameter" in got
    assert "c.yaml:7:48: data.val.part: unknown value 'dev'" in got
    assert "c.yaml:8:16: data.num_workers: expected an integer >= 0" in got
    got = _problems(tmp_path, """\
        model: mlp
        data: {train: {type: mnist, fine_label: true, root: images}}
        loss: softmax_cross_entropy
        epochs: 1
        """)
    assert "data.train.fine_label: applies only to type: cifar100" in got
    got = _problems(tmp_path, """\
        model: rnn_lm
        data:
          train: {type: text, path: t.txt, level: byte, bptt: 0}
          val: {type: image_folder, path: nowhere}
          shuffle: true
          num_workers: 2
        loss: softmax_cross_entropy
        epochs: 1
        """)
    assert "data.train.level" in got and "data.train.bptt" in got
    assert "data.val.path" in got and "not found" in got
    got = _problems(tmp_path, """\
        model: rnn_lm
        data:
          train: {type: text, path: t.txt}
          shuffle: true
          num_workers: 2
        loss: softmax_cross_entropy
        epochs: 1
        """)
    assert "data.shuffle" in got and "shuffle must be false" in got
    assert "data.num_workers" in got and "image data" in got


def test_text_shorter_than_one_window_is_a_clear_error(tmp_path):
    (tmp_path / "t.txt").write_text("tiny")
    (tmp_path / "c.yaml").write_text("model: rnn_lm\ndata: {train: {type: text, path: t.txt, "
                                     "bptt: 5}, batch_size: 4}\nloss: softmax_cross_entropy\nepochs: 1\n")
    with pytest.raises(DataError, match=r"t.txt: 4 tokens make no window .*need at least 21 tokens"):
        start_run(tmp_path / "c.yaml", run_root=tmp_path / "runs")


def _write_idx(path, array, magic):
    import gzip
    import struct

    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.astype(numpy.uint8).tobytes())


def test_mnist_files_train_through_the_runner(tmp_path, _fast_disk):
    # MNIST's own file layout, 40 images of two kinds (dark, bright) in a folder given as root;
    # the test part is the validation set.
    rng = numpy.random.default_rng(0)
    for prefix in ("train", "t10k"):
        labels = numpy.arange(40) % 2
        images = rng.integers(0, 30, size=(40, 28, 28)) + 200 * labels[:, None, None]
        _write_idx(tmp_path / ("%s-images-idx3-ubyte.gz" % prefix), images, 0x803)
        _write_idx(tmp_path / ("%s-labels-idx1-ubyte.gz" % prefix), labels, 0x801)
    (tmp_path / "c.yaml").write_text(textwrap.dedent("""\
        model: {name: mlp, args: {hidden: [8], classes: 2}, init: xavier}
        data:
          train: {type: mnist, root: .}
          val: {type: mnist, root: ., part: test}
          batch_size: 10
        loss: softmax_cross_entropy
        metrics: [accuracy]
        optimizer: {name: adam, learning_rate: 0.01}
        epochs: 6
        """))
    result = start_run(tmp_path / "c.yaml", run_root=tmp_path / "runs")
    assert result.status == "finished" and result.summary["metrics"]["val_accuracy"] == 1.0
    missing = _problems(tmp_path, "model: mlp\ndata: {train: {type: cifar10, root: nowhere}}\n"
                                  "loss: l2\nepochs: 1\n")
    assert "data.train.root" in missing and "not found" in missing


def test_images_are_made_a_step_ahead_on_a_thread_with_the_same_bits(shapes_project, tmp_path,
                                                                     _fast_disk, monkeypatch):
    # num_workers 0: every batch but an epoch's first is made on the read-ahead thread while
    # the step before it computes, and the run is the bits of one that makes each in place.
    from trainer_cli.run import prefetch

    served = served_ahead(monkeypatch)
    ahead = start_run(shapes_project / "image_folder.yaml", ["epochs=2"], run_root=tmp_path / "a")
    assert ahead.status == "finished"
    steps = ahead.summary["steps"]
    assert len(served) == steps and sum(served) == steps - 2     # each epoch's first read now

    monkeypatch.setattr(prefetch.Prefetcher, "ahead", lambda self, rows: None)
    in_place = start_run(shapes_project / "image_folder.yaml", ["epochs=2"],
                         run_root=tmp_path / "b")
    assert sum(served[steps:]) == 0
    for got, want in zip(final_arrays(ahead.summary["run_dir"]),
                         final_arrays(in_place.summary["run_dir"])):
        assert_bitwise_equal(got, want)
    assert metric_rows(ahead.summary["run_dir"]) == metric_rows(in_place.summary["run_dir"])


def test_epoch_rows_and_summary_tell_the_wait_for_data(shapes_project, tmp_path, _fast_disk,
                                                       monkeypatch):
    # Every image read made 2 ms slower, and made in place (no read-ahead): the training
    # thread makes the 120 training images itself, so the epoch's steps wait at least 0.24 s
    # for their data.
    from trainer_cli.run import images, prefetch

    monkeypatch.setattr(prefetch.Prefetcher, "ahead", lambda self, rows: None)

    read = images._Source.image

    def slow_read(self, position):
        time.sleep(0.002)
        return read(self, position)

    monkeypatch.setattr(images._Source, "image", slow_read)
    done = start_run(shapes_project / "image_folder.yaml", ["epochs=1"], run_root=tmp_path)
    assert done.status == "finished"
    rows = [json.loads(line) for line in
            (only_run_dir(tmp_path) / layout.METRICS_FILE).read_text().splitlines()]
    epoch = [r for r in rows if r["kind"] == "epoch"]
    assert len(epoch) == 1
    assert 0.002 * 120 <= epoch[0]["data_wait_s"] <= epoch[0]["step_s"]
    assert 0.002 * 120 <= done.summary["data_wait_s"] <= done.summary["step_s"]
    assert all("data_wait_s" not in r for r in rows if r["kind"] != "epoch")


def test_image_workers_leave_stops_to_the_run():
    # The workers are forked while the run is set up, under its stop handlers, which raise: a
    # worker that kept them died with a traceback when the run ended. Ctrl-C is the run's to
    # handle (ignored here); SIGTERM ends a worker by its default action, silently.
    import multiprocessing
    import os
    import signal
    import time

    from trainer_cli._pools import close_pool
    from trainer_cli.run import images

    def raising(signum, frame):
        raise KeyboardInterrupt("the run's stop handler")

    old = signal.signal(signal.SIGTERM, raising)
    try:
        pool = multiprocessing.get_context("fork").Pool(
            1, initializer=images._worker_init, initargs=(None, None, os.getpid()))
    finally:
        signal.signal(signal.SIGTERM, old)
    try:
        worker = pool._pool[0]
        assert pool.apply(os.getpid) == worker.pid
        os.kill(worker.pid, signal.SIGINT)
        assert pool.apply(os.getpid) == worker.pid          # still there, still working
        os.kill(worker.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while worker.exitcode is None and time.monotonic() < deadline:
            worker.join(0.05)   # the pool's own thread may reap it first
        assert worker.exitcode == -signal.SIGTERM           # not the raising handler's exit 1
    finally:
        assert close_pool(pool, timeout=10)


def test_record_labels_come_from_the_headers_alone(tmp_path):
    from trainer_cli import recordio
    from trainer_cli.gluon.data import RecordFileDataset
    from trainer_cli.run.images import _record_labels
    with recordio.MXIndexedRecordIO(str(tmp_path / "l.idx"), str(tmp_path / "l.rec"), "w") as w:
        w.write_idx(0, recordio.pack((0, 2.0, 0, 0), b"not an image: never decoded"))
        w.write_idx(1, recordio.pack((0, [1.0], 1, 0), b""))         # one label as an array
    assert _record_labels(RecordFileDataset(str(tmp_path / "l.rec"))).tolist() == [2.0, 1.0]
    with recordio.MXIndexedRecordIO(str(tmp_path / "m.idx"), str(tmp_path / "m.rec"), "w") as w:
        w.write_idx(0, recordio.pack((0, [1.0, 3.0], 0, 0), b""))
    with pytest.raises(DataError, match=r"m\.rec, record 0: 2 labels"):
        _record_labels(RecordFileDataset(str(tmp_path / "m.rec")))
