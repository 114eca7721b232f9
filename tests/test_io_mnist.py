"""``mx.io.MNISTIter``, ``test_utils.get_mnist_ubyte`` / ``get_mnist_iterator`` / ``get_cifar10``
and ``mx.contrib.io.DataLoaderIter``: MXNet 1.9.1's orders, parts, batches and provides
(tests/data/mxnet_io/mnist_iter.json, recorded from the real MXNet by ``mnist_cases.record``),
and the errors where MXNet's iterator would read garbage or crash."""
import os
import struct
import zipfile

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import gluon, test_utils
from trainer_cli.io._cxx_shuffle import shuffled_order

RECORDED, mnist_cases = replay.recording("mxnet_io", "mnist_iter.json", "mnist_cases")


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    return mnist_cases.record(mx, str(tmp_path_factory.mktemp("mnist")))


def test_every_recorded_case_is_here(ours):
    assert sorted(ours) == sorted(RECORDED)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_each_case_is_mxnets(ours, key):
    assert ours[key] == RECORDED[key]


def test_the_shuffle_is_a_permutation_that_depends_on_the_seed():
    a, b = shuffled_order(1000, 0), shuffled_order(1000, 1)
    assert sorted(a.tolist()) == list(range(1000)) and a.tolist() != b.tolist()
    # std::mt19937 keeps the seed's low 32 bits
    assert shuffled_order(50, -1).tolist() == shuffled_order(50, 2 ** 32 - 1).tolist()


@pytest.fixture
def small(tmp_path):
    return mnist_cases.write_idx(str(tmp_path), "small", 10, 28, 28)


def test_the_batches_are_the_bytes_over_256_and_the_last_short_batch_is_dropped(small):
    images, labels = small
    it = mx.io.MNISTIter(image=images, label=labels, batch_size=4, shuffle=False, silent=True)
    batches = list(it)
    assert len(batches) == 2
    raw = np.frombuffer(open(images, "rb").read()[16:], np.uint8).reshape(10, 1, 28, 28)
    np.testing.assert_array_equal(batches[1].data[0].asnumpy(), raw[4:8] / np.float32(256))
    assert batches[1].label[0].asnumpy().tolist() == [4, 5, 6, 7]
    assert batches[0].data[0].dtype == np.float32 and batches[0].pad == 0


def test_gzip_files_are_read_too(small, tmp_path):
    import gzip
    zipped = []
    for path in small:
        with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as g:
            g.write(f.read())
        zipped.append(path + ".gz")
    a = next(mx.io.MNISTIter(image=zipped[0], label=zipped[1], batch_size=3, silent=True))
    b = next(mx.io.MNISTIter(image=small[0], label=small[1], batch_size=3, silent=True))
    np.testing.assert_array_equal(a.data[0].asnumpy(), b.data[0].asnumpy())


def test_bad_arguments_and_files_say_what_is_wrong(small, tmp_path):
    images, labels = small
    with pytest.raises(ValueError, match="batch_size 11 is larger than the 10 images"):
        mx.io.MNISTIter(image=images, label=labels, batch_size=11, silent=True)
    with pytest.raises(ValueError, match="part_index 3 of num_parts 3"):
        mx.io.MNISTIter(image=images, label=labels, num_parts=3, part_index=3, silent=True)
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        mx.io.MNISTIter(image=images, label=labels, batch_size=0, silent=True)
    with pytest.raises(ValueError, match="float32"):
        mx.io.MNISTIter(image=images, label=labels, batch_size=2, dtype="float16", silent=True)
    with pytest.raises(TypeError, match="round_batch"):
        mx.io.MNISTIter(image=images, label=labels, batch_size=2, round_batch=True, silent=True)
    other = mnist_cases.write_idx(str(tmp_path), "other", 9, 28, 28)
    with pytest.raises(ValueError, match="holds 10 images but .* holds 9 labels"):
        mx.io.MNISTIter(image=images, label=other[1], batch_size=2, silent=True)
    with pytest.raises(mx.gluon.data.vision.datasets.DatasetFileError, match="not an idx file"):
        mx.io.MNISTIter(image=labels, label=labels, batch_size=2, silent=True)
    with pytest.raises(mx.gluon.data.vision.datasets.DatasetFileError, match="cannot read"):
        mx.io.MNISTIter(image=str(tmp_path / "missing"), label=labels, silent=True)
    # what MXNet's own get_mnist_iterator passes, and ignores
    it = mx.io.MNISTIter(image=images, label=labels, batch_size=2, input_shape=(784,),
                         silent=True)
    assert it.provide_data[0].shape == (2, 1, 28, 28)


def _mnist_zip(folder):
    path = os.path.join(folder, "mnist.zip")
    with zipfile.ZipFile(path, "w") as zf:
        for prefix, n in (("train", 12), ("t10k", 8)):
            images, labels = mnist_cases.write_idx(folder, prefix, n, 28, 28)
            zf.write(images, prefix + "-images-idx3-ubyte")
            zf.write(labels, prefix + "-labels-idx1-ubyte")
            os.remove(images), os.remove(labels)
    return path


def test_get_mnist_iterator_unpacks_the_archive_once_it_is_in_place(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(test_utils.NotDownloadedError, match="mnist.zip"):
        test_utils.get_mnist_iterator(4, (1, 28, 28))
    _mnist_zip(str(tmp_path / "data"))
    train, val = test_utils.get_mnist_iterator(4, (1, 28, 28))
    assert sorted(os.listdir("data")) == ["mnist.zip", "t10k-images-idx3-ubyte",
                                          "t10k-labels-idx1-ubyte", "train-images-idx3-ubyte",
                                          "train-labels-idx1-ubyte"]
    assert len(list(train)) == 3 and len(list(val)) == 2
    assert train.provide_data[0].shape == (4, 1, 28, 28)
    flat, _ = test_utils.get_mnist_iterator(4, (784,))
    assert flat.provide_data[0].shape == (4, 784)
    # both shuffled with seed 0, as MXNet's
    val.reset()
    first = next(val).label[0].asnumpy().tolist()
    assert first == [i % 10 for i in shuffled_order(8, 0)[:4]]


def test_get_cifar10_unpacks_into_data_cifar(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(test_utils.NotDownloadedError, match="cifar10.zip"):
        test_utils.get_cifar10()
    with zipfile.ZipFile("data/cifar10.zip", "w") as zf:
        for name in ("train.rec", "test.rec", "train.lst", "test.lst"):
            zf.writestr("cifar/" + name, name)
    test_utils.get_cifar10()
    assert open("data/cifar/test.lst").read() == "test.lst"


@pytest.mark.parametrize("member", ["../evil", "/abs/evil", "a/../../evil", "c:evil"])
def test_an_archive_member_outside_the_folder_is_refused(tmp_path, monkeypatch, member):
    monkeypatch.chdir(tmp_path)
    os.makedirs("data")
    with zipfile.ZipFile("data/mnist.zip", "w") as zf:
        zf.writestr("train-images-idx3-ubyte", b"x")
        zf.writestr(member, b"x")
    with pytest.raises(mx.base.MXNetError, match="outside"):
        test_utils.get_mnist_ubyte()
    assert os.listdir("data") == ["mnist.zip"]      # nothing written


def test_a_symlink_member_and_a_damaged_archive_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs("data")
    with zipfile.ZipFile("data/mnist.zip", "w") as zf:
        info = zipfile.ZipInfo("train-images-idx3-ubyte")
        info.external_attr = (0o120777 << 16)
        zf.writestr(info, "/etc/passwd")
    with pytest.raises(mx.base.MXNetError, match="symbolic link"):
        test_utils.get_mnist_ubyte()
    with open("data/mnist.zip", "wb") as f:
        f.write(b"PK\x03\x04 not really")
    with pytest.raises(mx.base.MXNetError, match="not a readable zip"):
        test_utils.get_mnist_ubyte()


def test_dataloader_iter_pads_the_last_batch_and_casts():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10, dtype=np.float32)
    loader = gluon.data.DataLoader(gluon.data.ArrayDataset(x, y), batch_size=4)
    it = mx.contrib.io.DataLoaderIter(loader, dtype="float16")
    assert it.batch_size == 4
    assert [(d.name, d.shape, d.dtype) for d in it.provide_data + it.provide_label] == \
        [("data", (4, 2), "float16"), ("softmax_label", (4,), "float16")]
    for _ in range(2):      # reset starts a new pass
        batches = list(it)
        it.reset()
    assert [b.pad for b in batches] == [0, 0, 2]
    last = batches[-1]
    assert last.data[0].dtype == np.float16
    np.testing.assert_array_equal(last.data[0].asnumpy(), np.vstack([x[8:], np.zeros((2, 2))]))
    assert last.label[0].asnumpy().tolist() == [8, 9, 0, 0]


def test_writing_into_a_missing_folder_names_the_file_not_a_temporary():
    net = gluon.nn.Dense(2, in_units=2)
    net.initialize()
    with pytest.raises(FileNotFoundError, match=r"folder /nonexistent-trainer-cli does not exist"
                       r".*'/nonexistent-trainer-cli/x.params'"):
        net.save_parameters("/nonexistent-trainer-cli/x.params")
