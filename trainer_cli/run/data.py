"""Turning a config's ``data`` section into arrays: features ``x`` (n, ...) and labels ``y`` (n,).

Everything here is a pure function of the config: synthetic sets come from their own seed, and
the validation split from ``split.seed``, so a resumed run rebuilds exactly the same arrays.
Files are read with ``allow_pickle=False``; a file that cannot be used raises ``DataError``
naming it (the CLI exits 2). Large ``.npy`` files are memory-mapped, and nothing here reads
their features whole (a split keeps row numbers; batches read their rows).
"""
from __future__ import annotations

import csv
import math
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy
from numpy.lib import format as _npy_format

from .._bounded import open_regular
from .._csr_rows import gather_rows
from .._npz import NpzError, read_npy_header, read_npz
from ..config.suggest import excerpt
from .layout import RunDirError
from .memory import check_fits

__all__ = ["Arrays", "CSRRows", "DataError", "load_data", "load_files", "split_files",
           "load_dataset", "where", "labels_where", "split_validation", "is_mapped", "as_batch",
           "read_csr", "is_csr_npz", "load_npy"]

# A .npy file of this many data bytes or more is memory-mapped rather than read.
MAP_BYTES = 64 << 20


class DataError(RunDirError):
    """A data file that cannot be used: unreadable, ragged, non-numeric, or of mismatched length.

    A RunDirError subclass only so that the CLI reports it like other bad input files (exit 2).
    """


@dataclass
class Arrays:
    """Features and labels of a data set. ``x_rows`` (or None) selects the rows of a
    memory-mapped ``x`` that belong to this set, so that splitting a mapped file reads nothing:
    read features with :meth:`features`, never ``x`` directly."""

    x: numpy.ndarray
    y: numpy.ndarray
    x_rows: numpy.ndarray | None = None
    # The file of memory-mapped features, whose rows are checked for NaN/Inf as batches read
    # them (checking them at load would read the whole file); "" when x was checked at load.
    checked_as_read: str = ""
    scaling: object = None   # a run.scaling.FeatureScaling applied as rows are read (mapped x)
    # Text: the streams read side by side (a batch is one window of each), the recurrent state
    # carried from batch to batch (run/text.py); 0 for other data.
    streams: int = 0
    vocabulary: object = None      # text: the training text's run.text.Vocabulary

    def __len__(self):
        return len(self.y)

    def features(self, index) -> numpy.ndarray:
        """The features of samples ``index`` (an index array or a slice) of this set."""
        out = self.x[index] if self.x_rows is None else self.x[self.x_rows[index]]
        if self.checked_as_read:
            bad = ~numpy.isfinite(out.reshape(len(out), -1))
            if bad.any():
                at, column = numpy.unravel_index(int(numpy.argmax(bad)), bad.shape)
                _not_finite(self.checked_as_read, int(numpy.atleast_1d(self._rows(index))[at]),
                            "feature %d is %r" % (int(column), float(out.reshape(len(out), -1)[at, column])))
        if self.scaling is None:
            return out
        out = self.scaling.apply(out)
        if self.checked_as_read:
            self.scaling.refuse_overflow(out, self.checked_as_read, self._rows(index))
        return out

    def _rows(self, index):
        """The rows of ``x`` that ``index`` (of this set's samples) reads."""
        return numpy.arange(len(self.x))[index] if self.x_rows is None else self.x_rows[index]

    def take(self, index) -> "Arrays":
        if getattr(self.x, "lazy_rows", False):   # images: transformed when a batch reads them
            return Arrays(self.x.take(index), self.y[index])
        if is_mapped(self.x):  # the mapped rows stay on disk until a batch reads them
            rows = numpy.arange(len(self.x))[index] if self.x_rows is None else self.x_rows[index]
            return Arrays(self.x, self.y[index], rows, self.checked_as_read, self.scaling)
        return Arrays(self.features(index), self.y[index])


class CSRRows:
    """A CSR matrix on the host (SciPy's layout: ``data``, ``indices``, ``indptr``, ``shape``)
    whose rows batches take without densifying it: ``m[rows]`` is the CSRRows of those rows."""

    ndim = 2

    def __init__(self, data, indices, indptr, shape):
        self.data, self.indices, self.indptr = data, indices, indptr
        self.shape = (int(shape[0]), int(shape[1]))

    @property
    def dtype(self):
        return self.data.dtype

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, rows) -> "CSRRows":
        if isinstance(rows, slice):
            rows = numpy.arange(self.shape[0])[rows]
        rows = numpy.asarray(rows, dtype=numpy.int64).reshape(-1)
        indptr, indices, data = gather_rows(self.indptr, self.indices, self.data, rows)
        return CSRRows(data, indices, indptr, (len(rows), self.shape[1]))

    def astype(self, dtype):
        return CSRRows(self.data.astype(dtype), self.indices, self.indptr, self.shape)


def as_batch(x, ctx, dtype):
    """An NDArray of batch features ``x`` (a host array, or CSRRows: a CSRNDArray) on ``ctx``."""
    global _array
    if type(x) is CSRRows:
        from ..ndarray import sparse
        return sparse.csr_matrix((x.data, x.indices, x.indptr), shape=x.shape, ctx=ctx,
                                 dtype=dtype)
    if _array is None:
        from ..ndarray import array as _array
    return _array(x, ctx=ctx, dtype=dtype)


_array = None   # ndarray.array, imported at the first batch: this module stays light to import


def is_mapped(array) -> bool:
    """Whether ``array`` is (a view of) a memory-mapped file."""
    while array is not None:
        if isinstance(array, (numpy.memmap, mmap.mmap)):
            return True
        array = getattr(array, "base", None)
    return False


def load_data(section, classes: int | None = None, seed: int = 0) -> tuple[Arrays, Arrays | None]:
    """``(train, val)`` for a DataSection; ``val`` is None without data.val or data.split.

    ``classes`` (for a loss taking class indices): every label must then be a whole number in
    ``[0, classes)``, or at least ``>= 0`` when ``classes`` is 0 (not known from the config).
    ``seed`` (the run's) keys the random transforms of image data.
    """
    return split_files(section, *(arrays for _, arrays in load_files(section, classes, seed)))


def load_files(section, classes: int | None = None, seed: int = 0) -> list:
    """``[(spec, arrays)]`` of the training set and the validation set when one is given, as
    read (before any split: rows are numbered as in the files). Text: its windows, a split
    already made (the held-out end of the text)."""
    if section.train.type == "text":
        train, val = _load_text(section)
        return [(section.train, train)] + ([(section.val or section.train, val)] if val else [])
    workers = section.num_workers
    files = [(section.train, load_dataset(section.train, classes, seed, workers, "data.train"))]
    if section.val is not None:
        files.append((section.val, load_dataset(section.val, classes, seed, workers, "data.val")))
    return files


def _load_text(section) -> tuple[Arrays, Arrays | None]:
    """Text windows; a validation text shares the training text's vocabulary, and a split holds
    out the end of the text."""
    from .text import load_text, tokens_of, windows

    bs, spec = section.batch_size, section.train
    train, vocab = load_text(spec, bs)
    train.vocabulary = vocab
    if section.val is not None:
        val = load_text(section.val, bs, vocab)[0]
        val.vocabulary = vocab
        return train, val
    if section.split is None:
        return train, None
    ids = vocab.encode(tokens_of(spec))
    cut = len(ids) - max(1, int(round(len(ids) * section.split.val_fraction)))
    head = windows(ids[:cut + 1], bs, spec.bptt, spec.path)
    tail = windows(ids[cut:], bs, spec.bptt, spec.path + " (its held-out end, data.split)")
    head.vocabulary = tail.vocabulary = vocab
    return head, tail


def split_files(section, train: Arrays, val: Arrays | None = None):
    """``(train, val)`` from the sets as read: ``data.split`` holds out part of the training set."""
    if val is not None:
        return train, val
    if section.split is not None:
        return split_validation(train, section.split)
    return train, None


def check_class_labels(y: numpy.ndarray, classes: int, where: str, why: str = "") -> None:
    """A DataError naming the first label that is not a class index (wrong labels would
    otherwise train silently to accuracy 0)."""
    if y.ndim != 1:
        raise DataError("%s: expected one class label per row, got labels of shape %s"
                        % (where, tuple(y.shape)))
    bad = ~numpy.isfinite(y) | (y < 0) | (y != numpy.floor(y))
    if classes:
        bad |= y >= classes
    if bad.any():
        row = int(numpy.argmax(bad))
        valid = "0 .. %d" % (classes - 1) if classes else "a whole number >= 0"
        valid += ": %s" % why if why else ""
        raise DataError("%s: row %d (counting from 0): label %r is not a class index (expected %s)"
                        % (where, row, float(y[row]), valid))


def split_validation(data: Arrays, split) -> tuple[Arrays, Arrays]:
    """Hold out ``val_fraction`` of the samples (at random with ``split.seed``, else the last
    ones); both parts keep the original sample order."""
    n = len(data)
    n_val = min(max(int(round(n * split.val_fraction)), 1), n - 1) if n > 1 else 0
    if n_val == 0:
        raise DataError("data.split: %d training sample(s) cannot be split into training and "
                        "validation sets" % n)
    if split.shuffle:
        order = numpy.random.default_rng(split.seed).permutation(n)
        val_idx, train_idx = numpy.sort(order[:n_val]), numpy.sort(order[n_val:])
    else:
        train_idx, val_idx = numpy.arange(n - n_val), numpy.arange(n - n_val, n)
    return data.take(train_idx), data.take(val_idx)


def load_dataset(spec, classes: int | None = None, seed: int = 0, num_workers: int = 0,
                 section_name: str = "data") -> Arrays:
    if spec.type == "text":
        from .text import load_text
        return load_text(spec, 1)[0]   # one stream (evaluate/predict of a single text)
    if spec.type in _IMAGE_TYPES:
        from .images import load_images
        arrays = load_images(spec, seed, num_workers, section_name)
        if classes is not None:
            check_class_labels(arrays.y, classes, labels_where(spec))
        return arrays
    loader = _LOADERS[spec.type]
    arrays = _checked(loader(spec), spec)
    if classes is not None:
        check_class_labels(arrays.y, classes, labels_where(spec))
    return arrays


# --------------------------------------------------------------------------------------------

def _synthetic(spec) -> Arrays:
    """A random linear teacher: features uniform in [-1, 1), which keeps the tutorial's lr 1 SGD
    stable; regression targets ``x @ w + b + noise``, classes the arg-max of noisy logits."""
    n, d = spec.num_samples, spec.num_features
    classes = 1 if spec.task == "regression" else spec.num_classes
    # float64 features, their float32 copy, and (n, classes) float64 logits and noise
    check_fits(n * d * 12 + n * classes * 16 + d * classes * 8,
               "data (synthetic): %d samples x %d features" % (n, d))
    rng = numpy.random.default_rng(spec.seed)
    x = rng.uniform(-1.0, 1.0, size=(n, d))
    if spec.task == "regression":
        w = rng.normal(size=d)
        b = rng.normal()
        y = x @ w + b + spec.noise * rng.normal(size=n)
        return Arrays(x.astype(numpy.float32), y.astype(numpy.float32))
    w = rng.normal(size=(d, spec.num_classes))
    logits = x @ w + spec.noise * rng.normal(size=(n, spec.num_classes))
    return Arrays(x.astype(numpy.float32), logits.argmax(axis=1).astype(numpy.float32))


def _npz(spec) -> Arrays:
    try:
        with numpy.load(spec.path, allow_pickle=False) as archive:
            return Arrays(archive[spec.x], archive[spec.y])
    except (OSError, ValueError, KeyError) as exc:
        raise DataError("%s: cannot read arrays %r and %r (%s)" % (spec.path, spec.x, spec.y, exc)) from None


_CSR_KEYS = {"data", "indices", "indptr", "shape", "format"}


def _csr(spec) -> Arrays:
    """A CSR matrix from an .npz in SciPy's ``save_npz`` layout (never through pickle, every
    part checked), labels from a .npy."""
    return Arrays(read_csr(spec.path), load_npy(spec.label_path))


def _libsvm(spec) -> Arrays:
    """A LibSVM text file: its labels, and its features as a CSR matrix of ``num_features``
    columns (read as MXNet's LibSVMIter reads them)."""
    from ..io.libsvm_iter import LibSVMError, read_libsvm
    try:
        labels, indptr, indices, values = read_libsvm(spec.path, spec.num_features)
    except LibSVMError as exc:
        raise DataError(str(exc)) from None
    if not len(labels):
        raise DataError("%s: holds no samples" % spec.path)
    return Arrays(CSRRows(values, indices, indptr, (len(labels), spec.num_features)), labels)


def read_csr(path, parts=None) -> CSRRows:
    """The CSR matrix of an .npz in SciPy's ``save_npz`` layout (``parts``: its arrays, when
    already read)."""
    if parts is None:
        parts = _read_csr_parts(path)
    return _csr_rows(path, parts)


def is_csr_npz(parts: dict) -> bool:
    """Whether the arrays of an .npz are a CSR matrix's (SciPy's ``save_npz`` names)."""
    return {"data", "indices", "indptr", "shape"} <= set(parts)


def _read_csr_parts(path) -> dict:
    try:
        with open_regular(path) as f:
            parts = read_npz(f)
    except (OSError, NpzError) as exc:
        raise DataError("%s: cannot read as a CSR .npz (%s)" % (path, exc)) from None
    return parts


def _csr_rows(path, parts) -> CSRRows:
    missing = sorted({"data", "indices", "indptr", "shape"} - set(parts))
    if missing:
        raise DataError("%s: a CSR .npz holds data, indices, indptr and shape (as SciPy's save_npz "
                        "writes them); missing %s" % (path, ", ".join(missing)))
    fmt = parts.get("format")
    name = fmt.item() if fmt is not None and fmt.ndim == 0 else fmt
    name = name.decode("ascii", "replace") if isinstance(name, bytes) else name
    if fmt is not None and name != "csr":
        raise DataError("%s: key 'format' is %r; only csr matrices are read" % (path, name))
    shape, data = parts["shape"], parts["data"]
    indices, indptr = parts["indices"], parts["indptr"]

    def bad(key, why):
        return DataError("%s: key %r: %s" % (path, key, why))

    if shape.shape != (2,) or shape.dtype.kind not in "iu" or (shape < 0).any():
        raise bad("shape", "expected two non-negative integers, got %s" % shape.tolist())
    rows, cols = int(shape[0]), int(shape[1])
    for key, arr in (("indices", indices), ("indptr", indptr)):
        if arr.ndim != 1 or arr.dtype.kind not in "iu":
            raise bad(key, "expected a 1-D integer array, got %s of shape %s"
                      % (arr.dtype, arr.shape))
    if data.ndim != 1 or data.dtype.kind not in "biuf":
        raise bad("data", "expected a 1-D array of numbers, got %s of shape %s"
                  % (data.dtype, data.shape))
    if len(indptr) != rows + 1 or (len(indptr) and indptr[0] != 0):
        raise bad("indptr", "expected %d entries starting at 0 for %d rows" % (rows + 1, rows))
    if (numpy.diff(indptr) < 0).any():
        raise bad("indptr", "decreases at row %d" % int(numpy.argmax(numpy.diff(indptr) < 0)))
    if int(indptr[-1]) != len(data) or len(indices) != len(data):
        raise bad("indptr", "ends at %d, but data holds %d entries and indices %d"
                  % (int(indptr[-1]), len(data), len(indices)))
    if len(indices) and (int(indices.min()) < 0 or int(indices.max()) >= cols):
        raise bad("indices", "column ids must lie in [0, %d)" % cols)
    with numpy.errstate(over="ignore"):  # beyond float32 becomes inf, which _checked refuses
        values = data.astype(numpy.float32)
    return CSRRows(values, indices.astype(numpy.int64), indptr.astype(numpy.int64), (rows, cols))


def _read_npy_magic(f):
    """The .npy format version; a ValueError that quotes nothing of a file that is not .npy
    (NumPy's own message shows its first bytes)."""
    if f.read(len(_npy_format.MAGIC_PREFIX)) != _npy_format.MAGIC_PREFIX:
        raise ValueError("not an .npy file: it does not start with NumPy's header")
    f.seek(0)
    return _npy_format.read_magic(f)


def load_npy(path) -> numpy.ndarray:
    """The array of a ``.npy`` file: a large one memory-mapped (read-only; pages are read as
    batches need them), a small one read into memory. The header is checked against the file's
    size before anything is mapped or allocated."""
    try:
        with open_regular(path) as f:
            version = _read_npy_magic(f)
            if version not in ((1, 0), (2, 0), (3, 0)):
                raise ValueError("unknown .npy format version %s" % (version,))
            shape, fortran, dtype = read_npy_header(f, version)
            if dtype.hasobject:
                raise ValueError("it holds Python objects (pickled data), which are never loaded")
            offset, size = f.tell(), os.fstat(f.fileno()).st_size
            nbytes = math.prod(shape) * dtype.itemsize
            if offset + nbytes > size:
                raise ValueError("its header claims %d data bytes of shape %s, but the file holds "
                                 "%d" % (nbytes, list(shape), size - offset))
            order = "F" if fortran else "C"
            if nbytes >= MAP_BYTES:
                mapped = numpy.memmap(f, dtype=dtype, mode="r", offset=offset, shape=shape,
                                      order=order)
                if hasattr(mmap, "MADV_RANDOM"):  # batches pick rows at random: no read-ahead
                    mapped._mmap.madvise(mmap.MADV_RANDOM)
                return mapped
            data = numpy.empty(shape, dtype=dtype, order=order)
            if nbytes and f.readinto(memoryview(data.reshape(-1, order="A")).cast("B")) != nbytes:
                raise ValueError("the file ended early")
            return data
    except (OSError, ValueError) as exc:
        raise DataError("%s: cannot read as a .npy array (%s)" % (path, exc)) from None


_load_npy = load_npy


def _npy(spec) -> Arrays:
    data = load_npy(spec.path)
    if spec.label_path is not None:
        return Arrays(data, load_npy(spec.label_path))
    if data.ndim != 2:
        raise DataError("%s: expected a 2-D array with a label column, got shape %s"
                        % (spec.path, data.shape))
    label = spec.label % data.shape[1]
    features = numpy.delete(data, label, axis=1)
    return Arrays(features, data[:, label])


def _csv(spec) -> Arrays:
    path = spec.path
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f, delimiter=spec.delimiter))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError("%s: cannot read (%s)" % (path, exc)) from None
    header = rows[0] if spec.header and rows else None
    body = rows[1:] if spec.header else rows
    first_line = 2 if spec.header else 1
    body_lines = [(first_line + i, r) for i, r in enumerate(body) if r]
    if not body_lines:
        raise DataError("%s: no data rows" % path)
    width = len(header) if header is not None else len(body_lines[0][1])

    def index(ref):
        if isinstance(ref, int):
            return ref % width
        return header.index(ref)

    label = index(spec.label)
    columns = [index(c) for c in spec.columns] if spec.columns else \
        [i for i in range(width) if i != label]
    values = numpy.empty((len(body_lines), width), dtype=numpy.float64)
    for r, (line, row) in enumerate(body_lines):
        if len(row) != width:
            raise DataError("%s:%d: expected %d columns, got %d" % (path, line, width, len(row)))
        for c, cell in enumerate(row):
            if c != label and c not in columns:
                continue
            try:
                values[r, c] = float(cell)
            except ValueError:
                # Short names and cells are quoted; a long one may be a line of a file that is
                # not CSV at all (/etc/passwd), which is never echoed.
                name = header[c] if header is not None and excerpt(header[c]) else "column %d" % c
                got = excerpt(cell, 16)
                raise DataError("%s:%d: %s: expected a number, got %s"
                                % (path, line, name,
                                   got or "text of %d characters" % len(cell))) from None
    return Arrays(values[:, columns].astype(numpy.float32), values[:, label].astype(numpy.float32))


# The bundled CSV files behind sklearn.datasets.load_<name>: (file, whether its first line is
# sklearn's "n_samples,n_features,..." header). The last column is the target.
_SKLEARN_FILES = {"digits": ("digits.csv.gz", False), "iris": ("iris.csv", True),
                  "wine": ("wine_data.csv", True), "breast_cancer": ("breast_cancer.csv", True)}


def _sklearn(spec) -> Arrays:
    fast = _sklearn_file(spec.name)
    if fast is not None:
        return fast
    try:
        from sklearn import datasets
    except ImportError:
        raise DataError("data: type sklearn needs scikit-learn: pip install scikit-learn") from None
    x, y = getattr(datasets, "load_" + spec.name)(return_X_y=True)
    return Arrays(numpy.asarray(x, dtype=numpy.float32), numpy.asarray(y, dtype=numpy.float32))


def _sklearn_file(name) -> Arrays | None:
    """The same arrays as ``load_<name>(return_X_y=True)``, read from scikit-learn's data file
    without importing scikit-learn (which pulls in scipy: seconds of start-up)."""
    import gzip
    import importlib.util

    entry = _SKLEARN_FILES.get(name)
    spec = importlib.util.find_spec("sklearn")
    if entry is None or spec is None or not spec.submodule_search_locations:
        return None
    file, has_header = entry
    path = Path(list(spec.submodule_search_locations)[0]) / "datasets" / "data" / file
    if not path.is_file():
        return None
    opener = gzip.open if file.endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            data = numpy.loadtxt(f, delimiter=",", skiprows=1 if has_header else 0)
    except (OSError, ValueError):
        return None
    return Arrays(data[:, :-1].astype(numpy.float32), data[:, -1].astype(numpy.float32))


def _ratings(spec) -> Arrays:
    """Ratings ``<u, v> + noise`` of random (user, item) pairs: ids as float32 features, as
    MXNet's Embedding takes them. Factors have variance 1/rank, so ratings have variance ~1."""
    check_fits((spec.num_users + spec.num_items) * spec.rank * 8 + spec.num_samples * 48,
               "data (ratings): %d users, %d items of rank %d, %d samples"
               % (spec.num_users, spec.num_items, spec.rank, spec.num_samples))
    rng = numpy.random.default_rng(spec.seed)
    scale = 1.0 / numpy.sqrt(numpy.sqrt(spec.rank))
    users = rng.normal(scale=scale, size=(spec.num_users, spec.rank))
    items = rng.normal(scale=scale, size=(spec.num_items, spec.rank))
    u = rng.integers(0, spec.num_users, size=spec.num_samples)
    i = rng.integers(0, spec.num_items, size=spec.num_samples)
    y = numpy.einsum("nk,nk->n", users[u], items[i]) + spec.noise * rng.normal(size=spec.num_samples)
    return Arrays(numpy.stack([u, i], axis=1).astype(numpy.float32), y.astype(numpy.float32))


_IMAGE_TYPES = ("image_folder", "image_record", "mnist", "fashion_mnist", "cifar10", "cifar100")
_LOADERS = {"synthetic": _synthetic, "ratings": _ratings, "csr": _csr, "libsvm": _libsvm,
            "npz": _npz, "npy": _npy, "csv": _csv, "sklearn": _sklearn}


def where(spec) -> str:
    """How a message names a data set: its file, or its type."""
    return getattr(spec, "path", None) or "data (%s)" % spec.type


def labels_where(spec) -> str:
    """How a message names the file of a data set's labels (``label_path`` where it has one)."""
    return getattr(spec, "label_path", None) or where(spec)


def _checked(arrays: Arrays, spec) -> Arrays:
    name = where(spec)
    x, y = arrays.x, arrays.y
    for what, arr in (("features", x), ("labels", y)):
        if arr.dtype.kind not in "biuf":
            raise DataError("%s: %s must be numbers, got dtype %s" % (name, what, arr.dtype))
    if x.ndim < 1 or len(x) == 0:
        raise DataError("%s: no samples" % name)
    if len(x) != len(y):
        raise DataError("%s: %d feature rows but %d labels" % (name, len(x), len(y)))
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.reshape(-1)
    if isinstance(x, CSRRows):
        with numpy.errstate(over="ignore"):
            arrays = Arrays(x, numpy.ascontiguousarray(y, dtype=numpy.float32))
    else:
        if x.ndim == 1:
            x = x.reshape(-1, 1)
        # MXNet's convention: float32 features and labels; the model's dtype is applied per
        # batch. (Mapped float32 features stay mapped: ascontiguousarray of them is a view.)
        with numpy.errstate(over="ignore"):  # a float64 beyond float32 becomes inf: refused below
            arrays = Arrays(numpy.ascontiguousarray(x, dtype=numpy.float32),
                            numpy.ascontiguousarray(y, dtype=numpy.float32))
    if is_mapped(arrays.x):
        arrays.checked_as_read = name
    check_finite(arrays, name, labels_where(spec))
    return arrays


# Features checked at a time: the mask of a large in-memory set stays small.
FINITE_CHUNK_BYTES = 16 << 20


def check_finite(arrays: Arrays, where: str, labels_where: str | None = None) -> None:
    """A DataError naming the first row holding NaN or Inf (in float32, as training reads it):
    one in the validation set would otherwise give a null val_loss every epoch, exit 0.
    (Memory-mapped features are checked as batches read them instead: see Arrays.)"""
    x = arrays.x
    if arrays.checked_as_read:
        pass
    elif isinstance(x, CSRRows):
        bad = ~numpy.isfinite(x.data)
        if bad.any():
            pos = int(numpy.argmax(bad))
            row = int(numpy.searchsorted(x.indptr, pos, side="right")) - 1
            _not_finite(where, row, "feature %d is %r" % (int(x.indices[pos]), float(x.data[pos])))
    else:
        per_row = max(1, math.prod(x.shape[1:]) * x.dtype.itemsize)
        step = max(1, FINITE_CHUNK_BYTES // per_row)
        for start in range(0, len(x), step):
            chunk = numpy.asarray(x[start:start + step])
            bad = ~numpy.isfinite(chunk.reshape(len(chunk), -1))
            if bad.any():
                row, column = numpy.unravel_index(int(numpy.argmax(bad)), bad.shape)
                _not_finite(where, start + int(row), "feature %d is %r"
                            % (int(column), float(chunk.reshape(len(chunk), -1)[row, column])))
    y = arrays.y.reshape(len(arrays.y), -1)
    bad = ~numpy.isfinite(y)
    if bad.any():
        row, column = numpy.unravel_index(int(numpy.argmax(bad)), bad.shape)
        _not_finite(labels_where or where, int(row), "label %r is not a finite number" % float(y[row, column]))


def _not_finite(where, row, what):
    raise DataError("%s: row %d (counting from 0): %s; remove or fill in that row"
                    % (where, row, what))


def describe(arrays: Arrays | None) -> str:
    if arrays is None:
        return "none"
    return "%d samples, features %s" % (len(arrays), tuple(arrays.x.shape[1:]))


def path_name(spec) -> str:
    path = getattr(spec, "path", None)
    return Path(path).name if path else spec.type
