"""Data checked against the model before a step runs: class labels against the width the model
actually outputs (whatever its arguments), NaN/Inf features in every set (dense, CSR, and
memory-mapped files as batches read them), and CSR columns against ``num_features``. Each is
exit 2 naming the file, the row or the key, never exit 0 with accuracy 0 or a null val_loss."""
import numpy as np
import pytest
import scipy.sparse
from click.testing import CliRunner

from run_helpers import no_fsync, write_config
from trainer_cli.cli import main
from trainer_cli.run import data as data_mod

BASE = """\
model: {name: MODEL}
data:
  train: TRAIN
  VAL
  batch_size: 8
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: adam, params: {learning_rate: 0.01}}
seed: 1
epochs: 1
"""
MLP = "mlp, args: {hidden: [8]}"                   # classes left at the builder's default
SPARSE = "sparse_linear, args: {num_features: 10, outputs: 2}"


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def _run(tmp_path, model, train, val="split: 0.25"):
    text = BASE.replace("MODEL", model).replace("TRAIN", train).replace("VAL", val)
    result = CliRunner().invoke(main, ["run", str(write_config(tmp_path, text, "c.yaml")),
                                       "--run-dir", str(tmp_path / "runs"), "-q"])
    assert "Traceback" not in result.output
    return result


def _dense(tmp_path, name, rows=40, features=6, labels=None, nan_at=None):
    rng = np.random.default_rng(0)
    x = rng.random((rows, features), np.float32)
    if nan_at is not None:
        x[nan_at] = np.nan if nan_at[1] % 2 == 0 else np.inf
    y = rng.integers(0, 2, rows).astype(np.float32) if labels is None else labels
    np.savez(tmp_path / name, x=x, y=y)
    return str(tmp_path / name)


def _csr(tmp_path, name, rows=40, columns=10, inf_entry=None, labels=None):
    m = scipy.sparse.random(rows, columns, density=0.3, format="csr", random_state=3,
                            dtype=np.float32)
    if inf_entry is not None:
        m.data[inf_entry] = np.inf
    scipy.sparse.save_npz(tmp_path / name, m)
    y = (np.arange(rows) % 2).astype(np.float32) if labels is None else labels
    np.save(tmp_path / (name + ".labels.npy"), y)
    return m, "{type: csr, path: %s, label_path: %s.labels.npy}" % (name, name)


def test_labels_beyond_the_default_classes_of_the_mlp(tmp_path):
    labels = np.zeros(40, np.float32)
    labels[7] = 52
    path = _dense(tmp_path, "d.npz", labels=labels)
    result = _run(tmp_path, MLP, "d.npz")
    assert result.exit_code == 2, result.output
    assert "%s: row 7 (counting from 0): label 52.0 is not a class index (expected 0 .. 9: the " \
        "model outputs 10 class scores)" % path in result.output, result.output


def test_labels_beyond_the_outputs_of_sparse_linear_name_the_label_file(tmp_path):
    labels = (np.arange(40) % 2).astype(np.float32)
    labels[39] = 5
    _, spec = _csr(tmp_path, "x.npz", labels=labels)
    result = _run(tmp_path, SPARSE, spec)
    assert result.exit_code == 2, result.output
    assert "x.npz.labels.npy: row 39 (counting from 0): label 5.0 is not a class index " \
        "(expected 0 .. 1: the model outputs 2 class scores)" in result.output, result.output


def test_labels_within_the_model_output_train(tmp_path):
    _dense(tmp_path, "d.npz", labels=(np.arange(40) % 10).astype(np.float32))
    assert _run(tmp_path, MLP, "d.npz").exit_code == 0


@pytest.mark.parametrize("where", ["train", "val"])
def test_nan_or_inf_dense_features_are_refused_at_load_naming_file_and_row(tmp_path, where):
    clean = _dense(tmp_path, "clean.npz")
    bad = _dense(tmp_path, "bad.npz", nan_at=(13, 4))
    train, val = ("bad.npz", "val: clean.npz") if where == "train" else ("clean.npz", "val: bad.npz")
    result = _run(tmp_path, MLP, train, val)
    assert result.exit_code == 2, result.output
    assert "%s: row 13 (counting from 0): feature 4 is nan" % bad in result.output, result.output
    assert clean not in result.output


def test_inf_in_a_csr_validation_set_is_refused_naming_file_and_row(tmp_path):
    _, train = _csr(tmp_path, "x.npz")
    m, val = _csr(tmp_path, "v.npz", inf_entry=5)
    row = int(np.searchsorted(m.indptr, 5, side="right")) - 1
    result = _run(tmp_path, SPARSE, train, "val: " + val)
    assert result.exit_code == 2, result.output
    assert "v.npz: row %d (counting from 0): feature %d is inf" % (row, m.indices[5]) \
        in result.output, result.output


def test_nan_in_mapped_features_is_named_when_a_batch_reads_it(tmp_path, monkeypatch):
    monkeypatch.setattr(data_mod, "MAP_BYTES", 1)  # map every .npy
    x = np.random.default_rng(0).random((40, 6)).astype(np.float32)
    x[33, 1] = np.nan
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", (np.arange(40) % 2).astype(np.float32))
    arrays = data_mod.load_dataset(type("Spec", (), {"type": "npy", "path": str(tmp_path / "x.npy"),
                                                     "label_path": str(tmp_path / "y.npy")}))
    assert data_mod.is_mapped(arrays.x)
    part = arrays.take(np.arange(30, 40))
    assert part.features(np.array([0, 1])).shape == (2, 6)  # rows 30, 31: fine
    with pytest.raises(data_mod.DataError, match=r"x.npy: row 33 \(counting from 0\): feature 1 is nan"):
        part.features(np.array([2, 3, 4]))
    result = _run(tmp_path, MLP, "{type: npy, path: x.npy, label_path: y.npy}")
    assert result.exit_code == 2 and "x.npy: row 33 (counting from 0): feature 1 is nan" \
        in result.output, result.output


def test_csr_columns_differing_from_num_features_name_the_file_and_the_key(tmp_path):
    _, spec = _csr(tmp_path, "x.npz", columns=50)
    result = _run(tmp_path, SPARSE, spec)
    assert result.exit_code == 2, result.output
    assert "x.npz: 50 feature columns, but model.args.num_features is 10" in result.output
    _, train = _csr(tmp_path, "t.npz")
    result = _run(tmp_path, SPARSE, train, "val: " + spec)
    assert result.exit_code == 2, result.output
    assert "x.npz: validation features of shape [50] per sample, but the training set's" \
        in result.output, result.output
