"""gluon.data.vision data sets from small synthetic files in the standard formats, and the
DataLoader's worker processes and threads."""
import gzip
import os
import signal
import struct

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import gluon, nd
from trainer_cli.gluon.data import vision
from trainer_cli.gluon.data.vision import transforms as T

RNG = numpy.random.RandomState(0)


def _write_idx(path, array, magic):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">I", magic) + struct.pack(">" + "I" * array.ndim, *array.shape))
        f.write(array.astype(numpy.uint8).tobytes())


def _mnist_files(root, prefix, n):
    images = RNG.randint(0, 256, size=(n, 28, 28)).astype(numpy.uint8)
    labels = RNG.randint(0, 10, size=n).astype(numpy.uint8)
    os.makedirs(root, exist_ok=True)
    _write_idx(os.path.join(root, prefix + "-images-idx3-ubyte.gz"), images, 0x803)
    _write_idx(os.path.join(root, prefix + "-labels-idx1-ubyte.gz"), labels, 0x801)
    return images, labels


@pytest.mark.parametrize("cls,folder", [(vision.MNIST, "mnist"),
                                        (vision.FashionMNIST, "fashion-mnist")])
def test_mnist_reads_idx_files_from_mxnets_default_place(tmp_path, monkeypatch, cls, folder):
    monkeypatch.setenv("MXNET_HOME", str(tmp_path))
    root = tmp_path / "datasets" / folder
    images, labels = _mnist_files(str(root), "train", 5)
    test_images, test_labels = _mnist_files(str(root), "t10k", 3)
    train = cls()
    assert len(train) == 5
    img, label = train[2]
    assert isinstance(img, nd.NDArray) and img.shape == (28, 28, 1) and img.dtype == numpy.uint8
    numpy.testing.assert_array_equal(img.asnumpy()[..., 0], images[2])
    assert label == labels[2] and label.dtype == numpy.int32
    test = cls(train=False, transform=lambda d, l: (d.astype("float32") / 255, l))
    assert len(test) == 3
    numpy.testing.assert_allclose(test[1][0].asnumpy()[..., 0], test_images[1] / 255.0, rtol=1e-6)


def test_missing_dataset_files_name_the_files_and_the_place(tmp_path):
    with pytest.raises(vision.DatasetFileError) as info:
        vision.MNIST(root=str(tmp_path / "nowhere"))
    message = str(info.value)
    assert "train-images-idx3-ubyte.gz" in message and "train-labels-idx1-ubyte.gz" in message
    assert str(tmp_path / "nowhere") in message and "does not download" in message
    assert not (tmp_path / "nowhere").exists()          # nothing created, nothing partial
    with pytest.raises(vision.DatasetFileError, match="data_batch_1.bin.*test_batch.bin|"
                                                      "data_batch_1.bin"):
        vision.CIFAR10(root=str(tmp_path))


def test_damaged_idx_files_are_refused(tmp_path):
    images, labels = _mnist_files(str(tmp_path), "train", 4)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    with gzip.open(path, "wb") as f:         # header says 4 images, 2 are there
        f.write(struct.pack(">IIII", 0x803, 4, 28, 28) + images[:2].tobytes())
    with pytest.raises(vision.DatasetFileError, match="truncated"):
        vision.MNIST(root=str(tmp_path))
    with gzip.open(path, "wb") as f:         # more than the header says
        f.write(struct.pack(">IIII", 0x803, 4, 28, 28) + images.tobytes() + b"extra")
    with pytest.raises(vision.DatasetFileError, match="more than"):
        vision.MNIST(root=str(tmp_path))
    path.write_bytes(b"not gzip at all")
    with pytest.raises(vision.DatasetFileError, match="damaged|idx"):
        vision.MNIST(root=str(tmp_path))
    with gzip.open(path, "wb") as f:         # a header claiming a huge file is not believed
        f.write(struct.pack(">IIII", 0x803, 4000000, 2800, 2800))
    with pytest.raises(vision.DatasetFileError, match="more than this reader takes"):
        vision.MNIST(root=str(tmp_path))


def test_an_idx_header_of_the_wrong_shape_is_refused_before_inflating(tmp_path, monkeypatch):
    from trainer_cli.gluon.data.vision import datasets

    _mnist_files(str(tmp_path), "train", 4)
    path = tmp_path / "train-images-idx3-ubyte.gz"
    # A header of 1000 images of 1000 x 1000 (under the size bound) before a gzip bomb's body.
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">IIII", 0x803, 1000, 1000, 1000) + bytes(4096))
    reads = []
    real = datasets._read_bounded

    def spy(where, limit, opener=None, head_only=False):
        reads.append((os.path.basename(where), limit, head_only))
        return real(where, limit, opener, head_only)
    monkeypatch.setattr(datasets, "_read_bounded", spy)
    with pytest.raises(vision.DatasetFileError, match=r"shape \(1000, 1000, 1000\); expected "
                                                      r"\(4, 28, 28\)"):
        vision.MNIST(root=str(tmp_path))
    assert [r for r in reads if r[0] == path.name] == [(path.name, 16, True)]


def _cifar_records(n, label_bytes):
    labels = RNG.randint(0, 100, size=(n, label_bytes)).astype(numpy.uint8)
    pixels = RNG.randint(0, 256, size=(n, 3, 32, 32)).astype(numpy.uint8)
    raw = numpy.concatenate([labels, pixels.reshape(n, -1)], axis=1).tobytes()
    return raw, labels, pixels.transpose(0, 2, 3, 1)


def test_cifar10_reads_the_binary_batches(tmp_path):
    parts = [_cifar_records(2, 1) for _ in range(6)]
    for i in range(5):
        (tmp_path / ("data_batch_%d.bin" % (i + 1))).write_bytes(parts[i][0])
    (tmp_path / "test_batch.bin").write_bytes(parts[5][0])
    train = vision.CIFAR10(root=str(tmp_path))
    assert len(train) == 10
    img, label = train[7]                    # the second record of data_batch_4.bin
    assert img.shape == (32, 32, 3) and img.dtype == numpy.uint8
    numpy.testing.assert_array_equal(img.asnumpy(), parts[3][2][1])
    assert label == parts[3][1][1, 0]
    test = vision.CIFAR10(root=str(tmp_path), train=False)
    numpy.testing.assert_array_equal(test[0][0].asnumpy(), parts[5][2][0])
    (tmp_path / "test_batch.bin").write_bytes(parts[5][0][:-7])
    with pytest.raises(vision.DatasetFileError, match=r"test_batch\.bin: .*whole number"):
        vision.CIFAR10(root=str(tmp_path), train=False)


def test_cifar100_coarse_and_fine_labels(tmp_path):
    raw, labels, pixels = _cifar_records(3, 2)
    (tmp_path / "train.bin").write_bytes(raw)
    (tmp_path / "test.bin").write_bytes(raw)
    coarse = vision.CIFAR100(root=str(tmp_path))
    fine = vision.CIFAR100(root=str(tmp_path), fine_label=True, train=False)
    assert [coarse[i][1] for i in range(3)] == labels[:, 0].tolist()
    assert [fine[i][1] for i in range(3)] == labels[:, 1].tolist()
    numpy.testing.assert_array_equal(fine[2][0].asnumpy(), pixels[2])


def _png(path, pixels):
    from PIL import Image
    Image.fromarray(pixels).save(path)


def test_image_folder_dataset_with_transform_first_and_workers(tmp_path):
    pixels = {}
    for cls in ("cat", "dog"):
        (tmp_path / cls).mkdir()
        for i in range(3):
            p = RNG.randint(0, 256, size=(6, 8, 3)).astype(numpy.uint8)
            _png(str(tmp_path / cls / ("%d.png" % i)), p)
            pixels[(cls, i)] = p
    (tmp_path / "dog" / "notes.txt").write_text("not an image")
    (tmp_path / "README").write_text("not a folder")
    with pytest.warns(UserWarning):
        ds = vision.ImageFolderDataset(str(tmp_path))
    assert ds.synsets == ["cat", "dog"] and len(ds) == 6
    img, label = ds[4]
    assert label == 1 and img.dtype == numpy.uint8
    numpy.testing.assert_array_equal(img.asnumpy(), pixels[("dog", 1)])
    with pytest.warns(UserWarning):
        gray = vision.ImageFolderDataset(str(tmp_path), flag=0)
    assert gray[0][0].shape == (6, 8, 1)

    pipeline = T.Compose([T.Resize((4, 3)), T.ToTensor(), T.Normalize(0.5, 0.25)])
    data = ds.transform_first(pipeline)
    reference = [(d.asnumpy(), l.asnumpy()) for d, l in gluon.data.DataLoader(data, 4)]
    assert [r[0].shape for r in reference] == [(4, 3, 3, 4), (2, 3, 3, 4)]
    assert reference[0][1].tolist() == [0, 0, 0, 1]
    for kwargs in (dict(num_workers=2), dict(num_workers=2, thread_pool=True),
                   dict(num_workers=1, prefetch=0, pin_memory=True)):
        loader = gluon.data.DataLoader(data, 4, **kwargs)
        got = [(d.asnumpy(), l.asnumpy()) for d, l in loader]
        loader.close()
        assert len(got) == 2
        for (d, l), (rd, rl) in zip(got, reference):
            numpy.testing.assert_array_equal(d, rd)
            numpy.testing.assert_array_equal(l, rl)
    discard = gluon.data.DataLoader(data, 4, last_batch="discard", num_workers=2)
    assert [d.shape[0] for d, _ in discard] == [4]
    discard.close()


def test_worker_errors_reach_the_caller_and_workers_stop():
    def broken(x):
        raise RuntimeError("transform failed on purpose")
    data = gluon.data.ArrayDataset(nd.arange(6)).transform(broken)
    loader = gluon.data.DataLoader(data, 2, num_workers=2)
    with pytest.raises(RuntimeError, match="on purpose"):
        list(loader)
    pool = loader._pool
    loader.close()
    assert pool is not None and all(not p.is_alive() for p in pool._pool)


class _KilledAt:
    """Samples 0..n-1; reading ``at`` in a worker process kills that worker (SIGKILL, as the
    out-of-memory killer would)."""

    def __init__(self, n, at):
        self.n, self.at, self.parent = n, at, os.getpid()

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i == self.at and os.getpid() != self.parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return numpy.float32(i)


def test_a_killed_worker_ends_the_wait_at_once_with_a_clear_error():
    loader = gluon.data.DataLoader(_KilledAt(24, 10), 4, num_workers=2, timeout=30)
    # The dead worker is seen before the deadline is: a wait that ran to the timeout would raise
    # DataLoaderTimeout instead.
    with pytest.raises(gluon.data.dataloader.DataLoaderWorkerDied, match="killed by signal 9"):
        list(loader)
    loader.close()


def test_workers_leave_ctrl_c_to_the_main_process():
    # As MXNet's: a worker ignores SIGINT (a terminal's Ctrl-C reaches the whole process group),
    # so it neither dies with a traceback nor loses its batch.
    import os
    import signal

    loader = gluon.data.DataLoader(gluon.data.SimpleDataset(list(range(8))), 2, num_workers=1,
                                   timeout=30)
    try:
        assert [b.asnumpy().tolist() for b in loader][0] == [0, 1]
        worker = loader._workers[0]
        os.kill(worker.pid, signal.SIGINT)
        assert [b.asnumpy().tolist() for b in loader][-1] == [6, 7]
        assert worker.exitcode is None
    finally:
        loader.close()


def test_batchify_fn_runs_in_the_workers():
    def pad_batch(samples):
        longest = max(len(s) for s in samples)
        return nd.array([list(s) + [0] * (longest - len(s)) for s in samples])
    data = gluon.data.SimpleDataset([[1], [2, 3], [4, 5, 6], [7]])
    for workers in (0, 2):
        loader = gluon.data.DataLoader(data, 2, batchify_fn=pad_batch, num_workers=workers)
        assert [b.asnumpy().tolist() for b in loader] == [[[1, 0], [2, 3]], [[4, 5, 6], [7, 0, 0]]]
        loader.close()


def test_image_list_dataset_from_lst_and_list(tmp_path):
    (tmp_path / "imgs").mkdir()
    first = RNG.randint(0, 256, size=(5, 4, 3)).astype(numpy.uint8)
    _png(str(tmp_path / "imgs" / "a.png"), first)
    _png(str(tmp_path / "imgs" / "b.png"), first[::-1].copy())
    (tmp_path / "train.lst").write_text("0\t1\timgs/a.png\n1\t0\t2.5\timgs/b.png\n")
    ds = vision.ImageListDataset(str(tmp_path), "train.lst")
    assert len(ds) == 2
    img, label = ds[0]
    numpy.testing.assert_array_equal(img.asnumpy(), first)
    assert label.asnumpy().tolist() == [1.0] and ds[1][1].asnumpy().tolist() == [0.0, 2.5]
    listed = vision.ImageListDataset(str(tmp_path), [[3, "imgs/b.png"]])
    numpy.testing.assert_array_equal(listed[0][0].asnumpy(), first[::-1])
    assert listed[0][1].asnumpy().tolist() == [3.0]
    (tmp_path / "bad.lst").write_text("0\timgs/a.png\n")
    with pytest.raises(vision.DatasetFileError, match=r"bad\.lst, line 1"):
        vision.ImageListDataset(str(tmp_path), "bad.lst")


def test_unknown_vision_names_are_plain_attribute_errors():
    with pytest.raises(AttributeError) as caught:
        vision.NoSuchDataset
    assert not isinstance(caught.value, mx.MXNetError)
    with pytest.raises(AttributeError) as caught:
        T.NoSuchTransform
    assert not isinstance(caught.value, mx.MXNetError)


class _WhoLoads(gluon.data.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, idx):
        return os.getpid()


def test_workers_are_separate_processes_and_threads_are_not():
    processes = gluon.data.DataLoader(_WhoLoads(), 3, num_workers=2)
    pids = {int(p) for batch in processes for p in batch.asnumpy()}
    processes.close()
    assert os.getpid() not in pids and len(pids) >= 1
    threads = gluon.data.DataLoader(_WhoLoads(), 3, num_workers=2, thread_pool=True)
    assert {int(p) for batch in threads for p in batch.asnumpy()} == {os.getpid()}
    threads.close()


def test_the_data_sets_own_archive_layouts_are_read_too(tmp_path):
    # CIFAR-10's own tarball unpacks to cifar-10-batches-bin/; MNIST files may be uncompressed.
    folder = tmp_path / "cifar-10-batches-bin"
    folder.mkdir()
    raw, labels, pixels = _cifar_records(2, 1)
    (folder / "test_batch.bin").write_bytes(raw)
    test = vision.CIFAR10(root=str(tmp_path), train=False)
    numpy.testing.assert_array_equal(test[1][0].asnumpy(), pixels[1])
    with pytest.raises(vision.DatasetFileError, match="cifar-10-batches-bin"):
        vision.CIFAR10(root=str(tmp_path), train=True)
    images = RNG.randint(0, 256, size=(2, 28, 28)).astype(numpy.uint8)
    (tmp_path / "t10k-images-idx3-ubyte").write_bytes(struct.pack(">IIII", 0x803, 2, 28, 28)
                                                      + images.tobytes())
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes(struct.pack(">II", 0x801, 2) + b"\x03\x07")
    mnist = vision.MNIST(root=str(tmp_path), train=False)
    assert [mnist[i][1] for i in range(2)] == [3, 7]
    numpy.testing.assert_array_equal(mnist[1][0].asnumpy()[..., 0], images[1])


def _ended(pid) -> bool:
    """Whether process ``pid`` is gone or a zombie (a reparented child nobody reaps yet)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


_ORPHAN_SCRIPT = """
import os, sys, time
from trainer_cli import gluon
loader = gluon.data.DataLoader(gluon.data.SimpleDataset(list(range(8))), 2, num_workers=2,
                               timeout=60)
next(iter(loader))
print(" ".join(str(p.pid) for p in loader._workers), flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
def test_workers_end_soon_after_their_parent_is_killed_with_sigkill():
    # A worker waits on a queue whose write end it holds itself: killed with SIGKILL (an
    # out-of-memory kill, a scheduler's last word), the parent would leave it waiting forever,
    # holding the dataset's memory.
    import signal
    import subprocess
    import sys
    import time

    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN_SCRIPT], stdout=subprocess.PIPE,
                            text=True)
    try:
        workers = [int(p) for p in proc.stdout.readline().split()]
        assert len(workers) == 2 and not any(_ended(p) for p in workers)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 20
    while not all(_ended(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in workers if not _ended(p)]
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_workers_leave_stops_to_the_caller():
    # Workers are forked under whatever stop handlers the caller set (a training run's raise):
    # SIGTERM ends a worker by its default action, silently; a hang-up and SIGUSR1 (a relayed
    # Ctrl-C) are ignored as Ctrl-C is.
    import signal
    import time

    def raising(signum, frame):
        raise KeyboardInterrupt("the caller's stop handler")

    old = {sig: signal.signal(sig, raising) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        loader = gluon.data.DataLoader(gluon.data.SimpleDataset(list(range(8))), 2,
                                       num_workers=1, timeout=30)
        assert [b.asnumpy().tolist() for b in loader][0] == [0, 1]
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    try:
        worker = loader._workers[0]
        for sig in (signal.SIGHUP, signal.SIGUSR1):
            os.kill(worker.pid, sig)
        assert [b.asnumpy().tolist() for b in loader][-1] == [6, 7]
        assert worker.exitcode is None
        os.kill(worker.pid, signal.SIGTERM)
        deadline = time.monotonic() + 30
        while worker.exitcode is None and time.monotonic() < deadline:
            worker.join(0.05)
        assert worker.exitcode == -signal.SIGTERM
    finally:
        loader.close()
