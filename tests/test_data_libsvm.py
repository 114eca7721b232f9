"""LibSVM text files for `data:` (type: libsvm): read as MXNet's LibSVMIter reads them into CSR
batches, a sparse linear model trains on one from the config, and a damaged line or a feature
outside num_features is an error naming the file and the line."""
import numpy as np
import pytest

from run_helpers import no_fsync
from trainer_cli import cpu
from trainer_cli.config import ConfigError, load_config
from trainer_cli.run import data as data_mod, start_run


@pytest.fixture(autouse=True)
def _fast_disk(monkeypatch):
    no_fsync(monkeypatch)


def _spec(path, num_features):
    class Spec:
        type = "libsvm"
    Spec.path, Spec.num_features = str(path), num_features
    return Spec


def test_a_libsvm_file_is_read_as_csr_rows(tmp_path):
    path = tmp_path / "x.libsvm"
    path.write_text("1 0:1.5 3:2\n0 1:0.5\n\n2 2:3 4:-1\n0\n")
    arrays = data_mod.load_dataset(_spec(path, 5))
    assert isinstance(arrays.x, data_mod.CSRRows) and arrays.x.shape == (4, 5)
    assert arrays.y.tolist() == [1, 0, 2, 0]
    batch = data_mod.as_batch(arrays.features(np.array([2, 0])), cpu(0), np.float32)
    assert batch.stype == "csr"
    np.testing.assert_array_equal(batch.asnumpy(), [[0, 0, 3, 0, -1], [1.5, 0, 0, 2, 0]])


@pytest.mark.parametrize("text, message", [
    ("1 0:1\n0 5:1\n", "x.libsvm, the line ending at byte 12: feature index 5 outside the data "
                       "shape's 5 columns"),
    ("1 0:1\n0 a:b\n", "x.libsvm, the line ending at byte 12: expected 'label index:value"),
    ("\n\n", "x.libsvm: holds no samples"),
])
def test_damaged_lines_are_refused_naming_the_file_and_line(tmp_path, text, message):
    path = tmp_path / "x.libsvm"
    path.write_text(text)
    with pytest.raises(data_mod.DataError, match=message):
        data_mod.load_dataset(_spec(path, 5))


CONFIG = """\
model:
  name: sparse_linear
  args: {num_features: 40, outputs: 2}
  init: {name: normal, sigma: 0.01}
data:
  train: {path: train.libsvm, num_features: 40}
  split: {val_fraction: 0.25}
  batch_size: 16
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: adam, params: {learning_rate: 0.05}}
seed: 3
epochs: 6
checkpoint: {every_epoch: true, keep_last: 1}
"""


def test_a_sparse_linear_model_trains_on_a_libsvm_file(tmp_path):
    rng = np.random.RandomState(0)
    lines = []
    for _ in range(240):
        cols = sorted(rng.choice(40, size=4, replace=False))
        # the class is whether more of the words come from the first half of the vocabulary
        label = int(sum(c < 20 for c in cols) >= 2)
        lines.append("%d %s" % (label, " ".join("%d:1" % c for c in cols)))
    (tmp_path / "train.libsvm").write_text("\n".join(lines) + "\n")
    config = tmp_path / "sparse.yaml"
    config.write_text(CONFIG)
    assert load_config(config).data.train.type == "libsvm"      # by the file's suffix
    result = start_run(config, run_root=tmp_path / "runs")
    assert result.status == "finished"
    assert result.summary["metrics"]["val_accuracy"] > 0.75


def test_num_features_is_required(tmp_path):
    (tmp_path / "train.libsvm").write_text("1 0:1\n")
    config = tmp_path / "sparse.yaml"
    config.write_text(CONFIG.replace("{path: train.libsvm, num_features: 40}",
                                     "{type: libsvm, path: train.libsvm}"))
    with pytest.raises(ConfigError, match="num_features"):
        load_config(config)
