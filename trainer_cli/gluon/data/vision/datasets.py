"""``gluon.data.vision`` datasets read from the standard local files, where MXNet keeps them.

Nothing is downloaded: put the files MXNet would have downloaded under ``root`` (by default
``$MXNET_HOME/datasets/<name>``, ``~/.mxnet/datasets/<name>`` without ``MXNET_HOME``, exactly
MXNet's place). A missing file is an error naming every file expected and the folder; a
truncated or foreign file is an error naming the file. Files are read bounded: a file may hold
at most what its header (idx) or the data set's size (CIFAR) says, and never more than
``MAX_FILE_BYTES``.
"""
from __future__ import annotations

import gzip
import os
import struct
import warnings

import numpy

from ...._bounded import MiB, open_regular
from ....base import data_dir
from .... import recordio
from ....ndarray import creation
from ..dataset import Dataset, RecordFileDataset
from .image_file import imdecode, imread

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100", "ImageFolderDataset", "read_idx",
           "read_image_list",
           "ImageRecordDataset",
           "ImageListDataset", "DatasetFileError", "data_dir"]

MAX_FILE_BYTES = 1024 * MiB


class DatasetFileError(ValueError):
    """A data set's file is missing, truncated or not what its name says."""




def _locate(root, names, what, subfolder=None, plain_too=False):
    """The paths of ``names`` in ``root`` (MXNet's layout), or in ``root/subfolder`` (the layout
    of the data set's own archive), or, with ``plain_too``, uncompressed (``x`` for ``x.gz``);
    an error naming every file and both places when one is missing."""
    folders = [root] + ([os.path.join(root, subfolder)] if subfolder else [])
    found, missing = [], []
    for name in names:
        candidates = [os.path.join(f, name) for f in folders]
        if plain_too and name.endswith(".gz"):
            candidates += [c[:-3] for c in candidates]
        path = next((c for c in candidates if os.path.isfile(c)), None)
        if path is None:
            missing.append(name)
        found.append(path)
    if missing:
        place = root if not subfolder else "%s (or %s)" % (root, os.path.join(root, subfolder))
        raise DatasetFileError(
            "%s: %s not found in %s. trainer_cli does not download data sets: put the file(s) "
            "%s there (the files MXNet downloads, or the data set's own archive unpacked), or "
            "give root= the folder that holds them." % (
                what, ", ".join(missing), place, ", ".join(names)))
    return found


def _read_bounded(path, limit, opener=None, head_only=False):
    """At most ``limit`` bytes of ``path`` (decompressed, for a ``.gz``); more is damage unless
    only the ``head_only`` is wanted."""
    try:
        raw = open_regular(path, "rb")
    except OSError as exc:
        raise DatasetFileError("%s: cannot read (%s)" % (path, exc.strerror or exc)) from None
    with raw:
        stream = gzip.GzipFile(fileobj=raw) if opener == "gzip" else raw
        try:
            data = stream.read(limit if head_only else limit + 1)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise DatasetFileError("%s: damaged (%s)" % (path, exc)) from None
    if len(data) > limit:
        raise DatasetFileError("%s: holds more than the %d bytes its header allows"
                               % (path, limit))
    return data


def read_idx(path, magic, dims, expected=None):
    """An idx file (gzip-compressed when named ``.gz``): big-endian magic, ``dims`` sizes, then
    uint8 values. ``expected``: the shape the header must give (checked before the data is
    inflated: a small gzip bomb behind a header of the wrong shape is not read)."""
    header = 4 + 4 * dims
    opener = "gzip" if path.endswith(".gz") else None
    head = _read_bounded(path, header, opener, head_only=True)
    if len(head) < header:
        raise DatasetFileError("%s: truncated idx header (%d of %d bytes)" % (path, len(head), header))
    found = struct.unpack(">I", head[:4])[0]
    if found != magic:
        raise DatasetFileError("%s: not an idx file of %d dimension(s) (magic %#x, expected %#x)"
                               % (path, dims, found, magic))
    shape = struct.unpack(">" + "I" * dims, head[4:header])
    count = int(numpy.prod(shape, dtype=numpy.int64))
    if header + count > MAX_FILE_BYTES:
        raise DatasetFileError("%s: header claims %s values, more than this reader takes"
                               % (path, shape))
    if expected is not None and shape != tuple(expected):
        raise DatasetFileError("%s: its header gives shape %s; expected %s"
                               % (path, shape, tuple(expected)))
    data = _read_bounded(path, header + count, opener)
    if len(data) != header + count:
        raise DatasetFileError("%s: truncated: %d data bytes where the header says %d"
                               % (path, len(data) - header, count))
    return numpy.frombuffer(data, dtype=numpy.uint8, offset=header).reshape(shape)


class _DownloadedDataset(Dataset):
    """A data set held in memory: ``_data`` (NDArray) and ``_label`` (NumPy int32)."""

    def __init__(self, root, transform):
        self._transform = transform
        self._data = None
        self._label = None
        self._root = os.path.expanduser(root)
        self._get_data()

    def __getitem__(self, idx):
        if self._transform is not None:
            return self._transform(self._data[idx], self._label[idx])
        return self._data[idx], self._label[idx]

    def __len__(self):
        return len(self._label)

    def as_numpy(self):
        """``(images, labels)``: every image (N, H, W, C) and label, untransformed, as NumPy."""
        return self._data.asnumpy(), numpy.asarray(self._label)

    def _get_data(self):
        raise NotImplementedError


class MNIST(_DownloadedDataset):
    """MNIST handwritten digits: samples are uint8 NDArrays of shape (28, 28, 1) and int32
    labels, read from ``train-images-idx3-ubyte.gz`` / ``train-labels-idx1-ubyte.gz`` (or the
    ``t10k-`` pair with ``train=False``) in ``root``; uncompressed copies (no ``.gz``) are read
    too."""

    _namespace = "mnist"

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        if root is None:
            root = os.path.join(data_dir(), "datasets", self._namespace)
        super().__init__(root, transform)

    def _get_data(self):
        prefix = "train" if self._train else "t10k"
        data_name, label_name = prefix + "-images-idx3-ubyte.gz", prefix + "-labels-idx1-ubyte.gz"
        data_path, label_path = _locate(self._root, [data_name, label_name],
                                        type(self).__name__, plain_too=True)
        label = read_idx(label_path, 0x801, 1).astype(numpy.int32)
        data = read_idx(data_path, 0x803, 3, expected=(len(label), 28, 28))
        data = data.reshape(len(label), 28, 28, 1)
        self._data = creation.array(data, dtype=data.dtype)
        self._label = label


class FashionMNIST(MNIST):
    """Fashion-MNIST (Zalando's article images): the same files and layout as MNIST, by
    default under ``datasets/fashion-mnist``."""

    _namespace = "fashion-mnist"


class CIFAR10(_DownloadedDataset):
    """CIFAR-10: samples are uint8 NDArrays of shape (32, 32, 3) and int32 labels, read from the
    binary version's ``data_batch_1.bin`` ... ``data_batch_5.bin`` (``test_batch.bin`` with
    ``train=False``) in ``root`` (MXNet's layout) or in ``root/cifar-10-batches-bin`` (the
    folder the data set's own ``cifar-10-binary.tar.gz`` unpacks to)."""

    _namespace = "cifar10"
    _archive_folder = "cifar-10-batches-bin"     # inside the data set's own cifar-10-binary.tar.gz
    _record = 3072 + 1
    _train_files = ["data_batch_%d.bin" % i for i in range(1, 6)]
    _test_files = ["test_batch.bin"]
    _max_records = 60000

    def __init__(self, root=None, train=True, transform=None):
        self._train = train
        if root is None:
            root = os.path.join(data_dir(), "datasets", self._namespace)
        super().__init__(root, transform)

    def _label_of(self, records):
        return records[:, 0]

    def _read_batch(self, path):
        raw = _read_bounded(path, self._record * self._max_records)
        if not raw or len(raw) % self._record:
            raise DatasetFileError("%s: %d bytes is not a whole number of %d-byte CIFAR records"
                                   % (path, len(raw), self._record))
        records = numpy.frombuffer(raw, dtype=numpy.uint8).reshape(-1, self._record)
        images = records[:, self._record - 3072:].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
        return images, self._label_of(records).astype(numpy.int32)

    def _get_data(self):
        names = self._train_files if self._train else self._test_files
        paths = _locate(self._root, names, type(self).__name__, self._archive_folder)
        parts = [self._read_batch(p) for p in paths]
        data = numpy.concatenate([p[0] for p in parts])
        self._data = creation.array(data, dtype=data.dtype)
        self._label = numpy.concatenate([p[1] for p in parts])


class CIFAR100(CIFAR10):
    """CIFAR-100: ``train.bin`` / ``test.bin`` of the binary version, in ``root`` or
    ``root/cifar-100-binary``; labels are the 20 coarse classes, or the 100 fine ones with
    ``fine_label=True``."""

    _namespace = "cifar100"
    _archive_folder = "cifar-100-binary"
    _record = 3072 + 2
    _train_files = ["train.bin"]
    _test_files = ["test.bin"]

    def __init__(self, root=None, fine_label=False, train=True, transform=None):
        self._fine_label = fine_label
        super().__init__(root, train, transform)

    def _label_of(self, records):
        return records[:, 0 + int(bool(self._fine_label))]


_EXTS = (".jpg", ".jpeg", ".png")


class ImageRecordDataset(RecordFileDataset):
    """The images of a RecordIO file made by ``recordio.pack_img`` (MXNet's ``im2rec``), with
    its ``.idx`` beside it: item ``i`` is ``(image, label)``, the image a uint8 NDArray (H, W, 3)
    RGB, or (H, W, 1) with ``flag=0``, the label the record header's (a number or an array);
    ``transform(image, label)`` when given."""

    def __init__(self, filename, flag=1, transform=None):
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx):
        header, encoded = recordio.unpack(super().__getitem__(idx))
        img = creation.array(imdecode(encoded, self._flag, "%s, record %d" % (self.filename, idx)),
                             dtype=numpy.uint8)
        if self._transform is not None:
            return self._transform(img, header.label)
        return img, header.label


class ImageFolderDataset(Dataset):
    """Images in one folder per class (``root/car/0001.jpg``): class ``i`` is the i-th folder
    name in sorted order (``synsets[i]``); ``items`` lists ``(filename, label)``. Images are
    decoded when read, as uint8 (H, W, 3) NDArrays (``flag=0``: (H, W, 1) gray)."""

    def __init__(self, root, flag=1, transform=None):
        self._root = os.path.expanduser(root)
        self._flag = flag
        self._transform = transform
        self._exts = list(_EXTS)
        self._list_images(self._root)

    def _list_images(self, root):
        self.synsets = []
        self.items = []
        try:
            folders = sorted(os.listdir(root))
        except OSError as exc:
            raise DatasetFileError("%s: cannot list the image folder (%s)"
                                   % (root, exc.strerror or exc)) from None
        for folder in folders:
            path = os.path.join(root, folder)
            if not os.path.isdir(path):
                warnings.warn("Ignoring %s, which is not a directory." % path, stacklevel=3)
                continue
            label = len(self.synsets)
            self.synsets.append(folder)
            for filename in sorted(os.listdir(path)):
                filename = os.path.join(path, filename)
                ext = os.path.splitext(filename)[1]
                if ext.lower() not in self._exts:
                    warnings.warn("Ignoring %s of type %s. Only support %s"
                                  % (filename, ext, ", ".join(self._exts)))
                    continue
                self.items.append((filename, label))

    def __getitem__(self, idx):
        img = creation.array(imread(self.items[idx][0], self._flag), dtype=numpy.uint8)
        label = self.items[idx][1]
        if self._transform is not None:
            return self._transform(img, label)
        return img, label

    def __len__(self):
        return len(self.items)


def read_image_list(fname, limit):
    """The lines of an image list file (MXNet's im2rec ``.lst``: tab-separated index,
    label(s), relative path) as ``(index, [labels], path)``; at most ``limit`` bytes are read,
    and a line of another form is an error naming the file and the line."""
    text = _read_bounded(fname, limit)
    try:
        lines = text.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        raise DatasetFileError("%s: not a UTF-8 text list" % fname) from None
    entries = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        try:
            if len(fields) < 3:
                raise ValueError
            entries.append((int(fields[0]), [float(v) for v in fields[1:-1]], fields[-1]))
        except ValueError:
            raise DatasetFileError("%s, line %d: expected 'index<TAB>label(s)<TAB>path', got %r"
                                   % (fname, lineno, line[:80])) from None
    return entries


class ImageListDataset(Dataset):
    """Images named by a list: a ``.lst`` file under ``root`` (tab-separated ``index``,
    label(s), relative path per line, MXNet's im2rec format) or a list of ``[label(s)...,
    path]`` entries. Labels come back as float32 NDArrays, as in MXNet."""

    MAX_LIST_BYTES = 256 * MiB

    def __init__(self, root=".", imglist=None, flag=1):
        self._root = os.path.expanduser(root)
        self._flag = flag
        self._items = []
        if isinstance(imglist, (str, os.PathLike)):
            fname = os.path.join(self._root, os.fspath(imglist))
            for _, labels, path in read_image_list(fname, self.MAX_LIST_BYTES):
                self._items.append((numpy.array(labels, dtype=numpy.float32),
                                    os.path.join(self._root, path)))
        elif isinstance(imglist, (list, tuple)):
            for i, entry in enumerate(imglist):
                if len(entry) < 2 or not isinstance(entry[-1], str):
                    raise ValueError("imglist[%d]: expected [label(s)..., path], got %r" % (i, entry))
                labels = entry[:-1] if len(entry) > 2 else entry[0]
                self._items.append((numpy.array(labels, dtype=numpy.float32).reshape(-1),
                                    os.path.join(self._root, entry[-1])))
        else:
            raise ValueError("imglist must be a .lst file name or a list, got %r" % (imglist,))

    def __getitem__(self, idx):
        labels, path = self._items[idx]
        img = creation.array(imread(path, self._flag), dtype=numpy.uint8)
        return img, creation.array(labels)

    def __len__(self):
        return len(self._items)
