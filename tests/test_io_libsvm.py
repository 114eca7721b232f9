"""``mx.io.LibSVMIter``: MXNet 1.9.1's csr batches, labels, padding, wrap-around and parts
(tests/data/mxnet_io/libsvm.json, recorded from the real MXNet by ``libsvm_cases.record``), and
the errors where MXNet reads out of bounds or crashes."""

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli.io.libsvm_iter import LibSVMError

RECORDED, libsvm_cases = replay.recording("mxnet_io", "libsvm.json", "libsvm_cases")


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return libsvm_cases.record(mx, str(tmp_path_factory.mktemp("libsvm")))


def test_every_recorded_case_is_here(ours):
    assert sorted(ours) == sorted(RECORDED)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_each_case_is_mxnets(ours, key):
    assert ours[key] == RECORDED[key]


def _write(tmp_path, text, name="f.libsvm"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_bad_lines_name_the_file_and_what_is_wrong(tmp_path):
    out_of_range = _write(tmp_path, "1 0:1 9:2\n")
    with pytest.raises(LibSVMError, match="feature index 9 outside the data shape's 4 columns"):
        mx.io.LibSVMIter(data_libsvm=out_of_range, data_shape=(4,), batch_size=1)
    not_a_pair = _write(tmp_path, "1 0:1\n2 x:1\n", "g.libsvm")      # MXNet: a segfault
    with pytest.raises(LibSVMError, match="g.libsvm.*expected 'label index:value"):
        mx.io.LibSVMIter(data_libsvm=not_a_pair, data_shape=(4,), batch_size=1)
    empty = _write(tmp_path, "\n", "e.libsvm")
    with pytest.raises(LibSVMError, match="holds no lines"):
        mx.io.LibSVMIter(data_libsvm=empty, data_shape=(4,), batch_size=1)
    data = _write(tmp_path, "1 0:1\n0 1:1\n1 2:1\n", "d.libsvm")
    short = _write(tmp_path, "1 0:1 1:1\n", "l.libsvm")
    with pytest.raises(LibSVMError, match="has 1 lines, fewer than the 3"):
        mx.io.LibSVMIter(data_libsvm=data, data_shape=(4,), batch_size=1, label_libsvm=short,
                         label_shape=(2,))
    with pytest.raises(ValueError, match="label_shape must be \\(1,\\)"):
        mx.io.LibSVMIter(data_libsvm=data, data_shape=(4,), batch_size=1, label_shape=(2,))
    with pytest.raises(ValueError, match="data_shape must be"):
        mx.io.LibSVMIter(data_libsvm=data, data_shape=(2, 2), batch_size=1)
    with pytest.raises(TypeError, match="shuffle"):
        mx.io.LibSVMIter(data_libsvm=data, data_shape=(4,), batch_size=1, shuffle=True)


def test_without_round_batch_the_last_batch_is_padded_with_empty_rows(tmp_path):
    # MXNet refuses round_batch=False for this iterator.
    data = _write(tmp_path, "1 0:1\n0 1:2\n1 2:3\n")
    it = mx.io.LibSVMIter(data_libsvm=data, data_shape=(4,), batch_size=2, round_batch=False)
    batches = list(it)
    assert [b.pad for b in batches] == [0, 1]
    last = batches[-1]
    assert last.data[0].stype == "csr"
    np.testing.assert_array_equal(last.data[0].asnumpy(), [[0, 0, 3, 0], [0, 0, 0, 0]])
    assert last.label[0].asnumpy().tolist() == [1, 0]
    it.reset()
    assert len(list(it)) == 2


def test_a_folder_of_files_reads_in_name_order(tmp_path):
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "b.libsvm").write_text("2 1:1\n")
    (folder / "a.libsvm").write_text("1 0:1\n")
    it = mx.io.LibSVMIter(data_libsvm=str(folder), data_shape=(2,), batch_size=2)
    batch = next(it)
    assert batch.label[0].asnumpy().tolist() == [1, 2]
    np.testing.assert_array_equal(batch.data[0].asnumpy(), np.eye(2))


def test_it_trains_a_sparse_linear_model_as_the_gluon_tutorial_does(tmp_path):
    rng = np.random.RandomState(0)
    lines = []
    for _ in range(40):
        cols = sorted(rng.choice(20, size=3, replace=False))
        label = float(sum(cols) % 2)
        lines.append("%s %s" % (label, " ".join("%d:1" % c for c in cols)))
    data = _write(tmp_path, "\n".join(lines) + "\n")
    it = mx.io.LibSVMIter(data_libsvm=data, data_shape=(20,), batch_size=8)
    net = mx.gluon.nn.Dense(1, in_units=20)
    net.initialize()
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    loss_fn = mx.gluon.loss.SigmoidBinaryCrossEntropyLoss()
    losses = []
    for _ in range(5):
        it.reset()
        total = 0.0
        for batch in it:
            with mx.autograd.record():
                loss = loss_fn(net(batch.data[0]), batch.label[0])
            loss.backward()
            trainer.step(8)
            total += float(loss.mean().asscalar())
        losses.append(total)
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
