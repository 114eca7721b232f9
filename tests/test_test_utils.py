"""``trainer_cli.test_utils``: MXNet's test helpers on arrays, with MXNet 1.9.1's draws, tables
and failure reports (tests/data/mxnet_test_utils/records.json, recorded from the real MXNet by
the same ``cases.record``), and what MXNet's would do on files, environments and optimizers."""
import gzip
import json
import os
import struct
import sys

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import gluon, nd, optimizer
from trainer_cli import test_utils as tu
from trainer_cli.base import MXNetError, NotInTrainerCLIError

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data", "mxnet_test_utils"))
import utils_cases as cases  # noqa: E402

RECORDED = json.load(open(os.path.join(HERE, "data", "mxnet_test_utils", "records.json")))["cases"]
OURS = cases.record(mx)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_what_mxnet_gives(name):
    assert OURS[name] == RECORDED[name]


def test_mx_test_utils_is_the_module():
    assert mx.test_utils is tu
    assert list(tu.list_gpus()) == list(range(mx.num_gpus()))


def test_helpers_that_execute_symbols_or_read_pickles_say_they_are_absent():
    for name in ("check_numeric_gradient", "check_symbolic_forward", "get_mnist_pkl",
                 "get_zip_data", "chi_square_check"):
        with pytest.raises(NotInTrainerCLIError, match=name):
            getattr(tu, name)
    with pytest.raises(AttributeError) as caught:
        tu.no_such_helper
    assert not isinstance(caught.value, NotInTrainerCLIError)


def test_assert_almost_equal_takes_arrays_numbers_and_tolerance_dicts():
    tu.assert_almost_equal(nd.array([1., 2.]), np.array([1.0005, 2.]))     # atol 1e-3
    tu.assert_almost_equal(np.float64(1.0), 1.0 + 1e-6)
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.ones(2), np.ones(2) + 1e-4)              # float64: 1e-5, 1e-20
    tu.assert_almost_equal(np.ones(2), np.ones(2) + 1e-4, rtol={np.dtype(np.float64): 1e-3})
    tu.assert_almost_equal(np.array([np.nan, 1.]), np.array([np.nan, 1.]), equal_nan=True)
    tu.assert_almost_equal_ignore_nan(np.array([np.nan, 1.]), np.array([5., 1.]))
    tu.assert_almost_equal(np.array([True, False]), np.array([True, False]))
    with pytest.raises(AssertionError):
        tu.assert_almost_equal(np.array([True, False]), np.array([True, True]))
    with pytest.raises(AssertionError, match="are not equal"):
        tu.assert_almost_equal(np.ones(2), np.ones((1, 2)), use_broadcast=False)
    assert tu.almost_equal(nd.ones((2,)), np.ones(2)) and tu.same(nd.ones((2,)), np.ones(2))


def test_assert_almost_equal_with_err_passes_below_the_error_rate():
    a, b = np.zeros(10), np.zeros(10)
    b[0] = 1
    tu.assert_almost_equal_with_err(a, b, etol=0.2)
    with pytest.raises(AssertionError, match="exceeds tolerance"):
        tu.assert_almost_equal_with_err(a, b, etol=0.05)


def test_compare_optimizer_passes_for_the_same_rule_and_fails_for_another():
    tu.compare_optimizer(optimizer.create("sgd", momentum=0.9, learning_rate=0.1),
                         optimizer.create("sgd", momentum=0.9, learning_rate=0.1), (3, 4),
                         np.float32)
    tu.compare_optimizer(optimizer.create("adam"), optimizer.create("adam"), [(3, 4), (5,)],
                         np.float32, ntensors=2)
    tu.compare_optimizer(optimizer.create("sgd"), optimizer.create("sgd"), (6, 4), np.float32,
                         g_stype="row_sparse")
    with pytest.raises(AssertionError):
        tu.compare_optimizer(optimizer.create("sgd", learning_rate=0.1),
                             optimizer.create("sgd", learning_rate=0.5), (3, 4), np.float32)


def test_random_sparse_arrays_hold_what_they_report():
    np.random.seed(1)
    csr, (indptr, indices, data) = tu.rand_sparse_ndarray((7, 5), "csr", density=0.4)
    assert csr.stype == "csr" and csr.shape == (7, 5)
    assert csr.asnumpy()[np.nonzero(csr.asnumpy())].tolist() == [v for v in data.asnumpy() if v]
    rsp = tu.create_sparse_array_zd((5, 2), "row_sparse", 0.9, rsp_indices=[3, 1])
    assert rsp.indices.asnumpy().tolist() == [1, 3]
    with pytest.raises(ValueError, match="density"):
        tu.rand_ndarray((2, 2), "csr", density=2)
    with pytest.raises(ValueError, match="storage type"):
        tu.rand_sparse_ndarray((2, 2), "dense")


def test_download_returns_a_file_in_place_and_otherwise_says_where_to_put_it(tmp_path,
                                                                            monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.bin").write_bytes(b"1")
    assert tu.download("http://example.com/a/x.bin", dirname="data") == os.path.join("data",
                                                                                     "x.bin")
    with pytest.raises(tu.NotDownloadedError, match="y.bin") as caught:
        tu.download("http://example.com/a/y.bin")
    assert isinstance(caught.value, MXNetError) and isinstance(caught.value, FileNotFoundError)
    assert str(tmp_path / "y.bin") in str(caught.value)
    with pytest.raises(tu.NotDownloadedError, match="without overwrite"):
        tu.download("http://example.com/a/x.bin", dirname="data", overwrite=True)


def _idx(path, magic, shape, values):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + struct.pack(">" + "I" * len(shape), *shape))
        f.write(np.asarray(values, dtype=np.uint8).tobytes())


def test_get_mnist_reads_the_four_files_where_mxnet_downloads_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for prefix, count in (("train", 3), ("t10k", 2)):
        _idx(tmp_path / (prefix + "-labels-idx1-ubyte.gz"), 0x801, (count,), [9, 250, 1][:count])
        _idx(tmp_path / (prefix + "-images-idx3-ubyte.gz"), 0x803, (count, 28, 28),
             np.arange(count * 784) % 256)
    got = tu.get_mnist()
    assert got["train_data"].shape == (3, 1, 28, 28) and got["train_data"].dtype == np.float32
    assert got["train_label"].dtype == np.int8 and got["train_label"].tolist() == [9, -6, 1]
    assert got["test_data"][1, 0, 0, 0] == np.float32(784 % 256) / 255
    os.remove(tmp_path / "t10k-labels-idx1-ubyte.gz")
    with pytest.raises(tu.NotDownloadedError, match="t10k-labels"):
        tu.get_mnist()


def test_environment_sets_and_restores(monkeypatch):
    monkeypatch.setenv("TC_A", "before")
    monkeypatch.delenv("TC_B", raising=False)
    with tu.environment({"TC_A": "inside", "TC_B": "new"}):
        assert os.environ["TC_A"] == "inside" and os.environ["TC_B"] == "new"
    assert os.environ["TC_A"] == "before" and "TC_B" not in os.environ
    with pytest.raises(KeyError):
        with tu.environment("TC_A", None):
            assert "TC_A" not in os.environ
            raise KeyError("inside")
    assert os.environ["TC_A"] == "before"


def test_default_context_is_the_current_one():
    try:
        tu.set_default_context(mx.cpu(1))
        assert tu.default_context() == mx.cpu(1) and nd.zeros((1,)).context == mx.cpu(1)
    finally:
        tu.set_default_context(mx.cpu(0))
    assert tu.default_context() == mx.cpu(0)


def test_exception_and_retry_helpers():
    tu.assert_exception(lambda: 1 / 0, ZeroDivisionError)
    with pytest.raises(AssertionError, match="did not raise"):
        tu.assert_exception(lambda: 1, ZeroDivisionError)
    calls = []

    @tu.retry(3)
    def flaky():
        calls.append(1)
        assert len(calls) == 3
    flaky()
    assert len(calls) == 3

    @tu.retry(2)
    def failing():
        calls.append(1)
        raise AssertionError("always")
    with pytest.raises(AssertionError, match="always"):
        failing()


def test_discard_stderr_silences_file_descriptor_2(capfd):
    with tu.discard_stderr():
        os.write(2, b"hidden\n")
    os.write(2, b"shown\n")
    assert capfd.readouterr().err == "shown\n"


def test_same_array_and_dummy_iter():
    x = nd.arange(4)
    assert tu.same_array(x, x[:]) and tu.same_array(x, x.reshape((2, 2))) is False
    assert not tu.same_array(x, x.copy())       # (MXNet: True, False, False as well)
    assert x.asnumpy().tolist() == [0, 1, 2, 3]
    it = tu.DummyIter(mx.io.NDArrayIter(np.arange(8.).reshape(4, 2), batch_size=2))
    first = [next(it).data[0].asnumpy().tolist() for _ in range(3)]
    assert first == [[[0., 1.], [2., 3.]]] * 3


def test_hybridize_consistency_checks_a_dense_block_and_a_numpy_reference():
    def builder(prefix):
        net = gluon.nn.HybridSequential(prefix=prefix)
        with net.name_scope():
            net.add(gluon.nn.Dense(3, activation="tanh", in_units=4))
        return net
    data = [nd.array(np.random.RandomState(0).randn(2, 4))]
    tu.check_gluon_hybridize_consistency(builder, data)
    with pytest.raises(AssertionError):
        tu.check_gluon_hybridize_consistency(builder, data, numpy_func=lambda x: x[:, :3] + 5)
