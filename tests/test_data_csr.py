"""CSR features for `data:` (type: csr): SciPy's save_npz layout read without SciPy or pickle,
checked part by part, batched as CSRNDArrays; the shipped sparse_linear config trains on it and
resumes exactly. (SciPy, which scikit-learn brings into the test extra, writes the reference
files.)"""
import numpy as np
import pytest
import scipy.sparse

from run_helpers import (CONFIGS, StopAt, assert_bitwise_equal, final_arrays, metric_rows,
                         no_fsync)
from trainer_cli import cpu
from trainer_cli.config import load_config
from trainer_cli.run import data as data_mod, resume_run, start_run
from trainer_cli.run.build import build

CONFIG = CONFIGS / "sparse_linear.yaml"


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def _spec(tmp_path, matrix, labels=None, compressed=True):
    scipy.sparse.save_npz(tmp_path / "x.npz", matrix, compressed=compressed)
    np.save(tmp_path / "y.npy", np.zeros(matrix.shape[0], np.float32) if labels is None else labels)

    class Spec:
        type, path, label_path = "csr", str(tmp_path / "x.npz"), str(tmp_path / "y.npy")
    return Spec


@pytest.mark.parametrize("compressed", [True, False])
def test_scipy_files_are_read_and_batched_without_densifying(tmp_path, compressed):
    m = scipy.sparse.random(40, 25, density=0.2, format="csr", random_state=3, dtype=np.float64)
    m = m.tolil()
    m[5, :] = 0    # an empty row
    m = m.tocsr()
    m.eliminate_zeros()
    arrays = data_mod.load_dataset(_spec(tmp_path, m, compressed=compressed))
    assert isinstance(arrays.x, data_mod.CSRRows) and arrays.x.shape == (40, 25)
    rows = np.array([7, 5, 0, 39, 7])
    batch = arrays.features(rows)
    assert np.array_equal(scipy.sparse.csr_matrix((batch.data, batch.indices, batch.indptr),
                                                  shape=batch.shape).toarray(),
                          m.toarray()[rows].astype(np.float32))
    nd_batch = data_mod.as_batch(batch, cpu(0), np.float32)
    assert nd_batch.stype == "csr" and np.array_equal(nd_batch.asnumpy(),
                                                      m.toarray()[rows].astype(np.float32))
    train, val = data_mod.split_validation(arrays, type("S", (), {"val_fraction": 0.25,
                                                                 "shuffle": True, "seed": 1}))
    assert len(train) == 30 and len(val) == 10


def _write(tmp_path, **parts):
    np.savez(tmp_path / "x.npz", **parts)
    np.save(tmp_path / "y.npy", np.zeros(2, np.float32))

    class Spec:
        type, path, label_path = "csr", str(tmp_path / "x.npz"), str(tmp_path / "y.npy")
    return Spec


GOOD = dict(data=np.array([1.0, 2.0, 3.0], np.float32), indices=np.array([0, 2, 1]),
            indptr=np.array([0, 2, 3]), shape=np.array([2, 3]), format=np.array(b"csr"))


@pytest.mark.parametrize("change, message", [
    ({"indptr": np.array([0, 3, 2])}, "'indptr': decreases at row 1"),
    ({"indptr": np.array([0, 2, 4])}, "'indptr': ends at 4, but data holds 3"),
    ({"indices": np.array([0, 3, 1])}, "'indices': column ids must lie in \\[0, 3\\)"),
    ({"shape": np.array([2, 3, 1])}, "'shape': expected two non-negative integers"),
    ({"format": np.array(b"csc")}, "'format' is 'csc'; only csr"),
    ({"data": np.array(["a", "b", "c"])}, "'data': expected a 1-D array of numbers"),
])
def test_damaged_parts_are_refused_naming_the_file_and_key(tmp_path, change, message):
    with pytest.raises(data_mod.DataError, match=message) as err:
        data_mod.load_dataset(_write(tmp_path, **dict(GOOD, **change)))
    assert "x.npz" in str(err.value)


def test_a_missing_part_is_named(tmp_path):
    parts = dict(GOOD)
    del parts["indptr"]
    with pytest.raises(data_mod.DataError, match="missing indptr"):
        data_mod.load_dataset(_write(tmp_path, **parts))


def test_the_shipped_sparse_config_learns_with_row_sparse_gradients(tmp_path):
    parts = build(load_config(CONFIG), CONFIG)
    assert parts.net.weight.grad_stype == "row_sparse"
    result = start_run(CONFIG, ["epochs=6"], run_root=tmp_path)
    assert result.status == "finished" and result.summary["metrics"]["val_accuracy"] > 0.72


def test_a_stopped_csr_run_resumes_bitwise(tmp_path):
    overrides = ["epochs=2"]
    ref = start_run(CONFIG, overrides, run_root=tmp_path / "ref")
    cut = start_run(CONFIG, overrides, run_root=tmp_path / "cut", reporter=StopAt(37))
    assert cut.status == "interrupted"
    done = resume_run(cut.summary["run_dir"])
    assert done.summary["steps"] == ref.summary["steps"]
    for got, want in zip(final_arrays(cut.summary["run_dir"]), final_arrays(ref.summary["run_dir"])):
        assert_bitwise_equal(got, want)
    assert metric_rows(cut.summary["run_dir"]) == metric_rows(ref.summary["run_dir"])
