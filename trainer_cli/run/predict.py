"""``trainer predict``: a trained model's outputs for the samples of a file.

Input (by suffix): ``.npy`` (memory-mapped when large, read batch by batch), ``.npz`` (a CSR
matrix in SciPy's ``save_npz`` layout, or dense features: the only array, or the one named by
``key``, default ``x``), ``.csv`` (numbers only, every column a feature; a first line that is not
numbers is a header). Samples are checked like training data: numbers, the per-sample shape the
model trained on, finite (a NaN/Inf is reported by its row).

Output (by suffix), written batch by batch into a temporary file renamed at the end:

- ``.npz``: ``output`` (the network's outputs, float32), and for a classifier (loss
  ``softmax_cross_entropy`` or ``sigmoid_binary_cross_entropy``) ``class`` (int64) and
  ``probability`` (of that class, float32);
- ``.npy``: the outputs alone;
- ``.csv``: one line per sample: ``output_0, output_1, ...`` (the outputs flattened), then
  ``class`` and ``probability`` for a classifier.
"""
from __future__ import annotations

import contextlib
import csv
import errno
import io
import itertools
import math
import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy
from numpy.lib import format as _npy_format

from .._atomic import atomic_write, fsync_dir
from .._outpath import check_output_path, write_failure
from . import layout
from .data import CSRRows, DataError, is_csr_npz, is_mapped, load_npy, read_csr
from .prefetch import read_each

__all__ = ["INPUT_SUFFIXES", "OUTPUT_SUFFIXES", "read_input", "predict_file"]

INPUT_SUFFIXES = (".npy", ".npz", ".csv")
OUTPUT_SUFFIXES = (".npz", ".npy", ".csv")
# A .csv input larger than this is refused (it is parsed in memory): a .npy is read in batches.
CSV_LIMIT = 1 << 30
CSV_LINE_LIMIT = 8 << 20
_CSV_BLOCK = 1 << 20   # values parsed before they are packed into a float32 block


def read_input(path, key=None):
    """The features of an input file: a host array (memory-mapped for a large .npy) or CSRRows."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in INPUT_SUFFIXES:
        raise DataError("%s: expected a .npy, .npz or .csv file of samples" % path)
    if suffix == ".npy":
        x = load_npy(path)
    elif suffix == ".npz":
        x = _read_npz_input(path, key)
    else:
        x = _read_csv_input(path)
    if not isinstance(x, CSRRows):
        if x.dtype.kind not in "biuf":
            raise DataError("%s: samples must be numbers, got dtype %s" % (path, x.dtype))
        if x.ndim == 0 or len(x) == 0:
            raise DataError("%s: no samples" % path)
    elif len(x) == 0:
        raise DataError("%s: no samples" % path)
    return x


def _read_npz_input(path, key):
    from .._bounded import open_regular
    from .._npz import NpzError, read_npz

    try:
        with open_regular(path) as f:
            parts = read_npz(f)
    except (OSError, NpzError) as exc:
        raise DataError("%s: cannot read as an .npz (%s)" % (path, exc)) from None
    if key is None and is_csr_npz(parts):
        return read_csr(path, parts)
    if key is None:
        key = next(iter(parts)) if len(parts) == 1 else "x"
    if key not in parts:
        raise DataError("%s: no array %r (arrays: %s); name the features with --key"
                        % (path, key, ", ".join(sorted(parts)) or "none"))
    return parts[key]


def _read_csv_input(path):
    from .._bounded import open_regular

    try:
        # open_regular: a FIFO or a device in its place (``-i /dev/zero``) is refused, not read
        # forever.
        with open_regular(path) as raw:
            if os.fstat(raw.fileno()).st_size > CSV_LIMIT:
                raise DataError("%s: more than %d GiB of CSV; convert it to .npy, which is read "
                                "in batches" % (path, CSV_LIMIT >> 30))
            text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
            return _parse_csv(path, csv.reader(_bounded_lines(path, text)))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError("%s: cannot read (%s)" % (path, exc)) from None


def _bounded_lines(path, text):
    """The lines of ``text``, each at most CSV_LINE_LIMIT characters: one line of a gigabyte
    would otherwise become a list of millions of strings before its width is checked."""
    for line_no in itertools.count(1):
        line = text.readline(CSV_LINE_LIMIT + 1)
        if not line:
            return
        if len(line) > CSV_LINE_LIMIT:
            raise DataError("%s:%d: a line longer than %d MiB; convert the samples to .npy"
                            % (path, line_no, CSV_LINE_LIMIT >> 20))
        yield line


def _parse_csv(path, reader):
    """The rows of ``reader`` as float32, gathered a block at a time (a flat list of Python
    floats costs some 30 bytes a value: only a block of them is held)."""
    blocks, values, width, line, seen = [], [], None, 0, 0
    for row in reader:
        line = reader.line_num
        if not row:
            continue
        seen += 1
        if seen == 1 and not _numeric(row):
            continue   # a header
        if width is None:
            width = len(row)
        if len(row) != width:
            raise DataError("%s:%d: expected %d columns, got %d" % (path, line, width, len(row)))
        try:
            values.extend(float(cell) for cell in row)
        except ValueError:
            bad = next(c for c in row if not _numeric([c]))
            raise DataError("%s:%d: expected a number, got %r" % (path, line, bad[:40])) from None
        if len(values) >= _CSV_BLOCK:
            blocks.append(numpy.array(values, dtype=numpy.float32))
            values = []
    if width is None:
        raise DataError("%s: no data rows" % path)
    blocks.append(numpy.array(values, dtype=numpy.float32))
    return numpy.concatenate(blocks).reshape(-1, width)


def _numeric(cells) -> bool:
    try:
        [float(c) for c in cells]
    except ValueError:
        return False
    return True


def _classifier(config):
    """``(kind, axis, from_sigmoid)`` for a classifier's loss, or None."""
    loss = config.loss
    if loss.name == "softmax_cross_entropy" and loss.params.get("sparse_label", True):
        return "softmax", int(loss.params.get("axis", -1)), False
    if loss.name == "sigmoid_binary_cross_entropy":
        return "sigmoid", None, bool(loss.params.get("from_sigmoid", False))
    return None


def _classes(out, how):
    kind, axis, from_sigmoid = how
    out = out.astype(numpy.float64)
    if kind == "softmax":
        shifted = out - out.max(axis=axis, keepdims=True)
        prob = numpy.exp(shifted)
        prob /= prob.sum(axis=axis, keepdims=True)
        cls = prob.argmax(axis=axis)
        return cls.astype(numpy.int64), numpy.take_along_axis(
            prob, numpy.expand_dims(cls, axis), axis).squeeze(axis).astype(numpy.float32)
    p1 = out if from_sigmoid else 1.0 / (1.0 + numpy.exp(-out))
    cls = (p1 >= 0.5).astype(numpy.int64)
    return cls, numpy.where(cls == 1, p1, 1.0 - p1).astype(numpy.float32)


def predict_file(run_dir, input_path, output_path, which=None, key=None, overrides=(),
                 trust_model_file=False, batch_size=None, progress=None) -> dict:
    """Write the outputs of checkpoint ``which`` of ``run_dir`` (None: latest) for the samples
    in ``input_path`` to ``output_path``; returns what was written. ``progress(done, total)``
    after each batch."""
    from .loop import validation_pass
    from .data import as_batch
    from .scaling import SCALING_FILE, run_scaling
    from .trained import load_trained

    output_path = Path(output_path)
    if output_path.suffix.lower() not in OUTPUT_SUFFIXES:
        raise DataError("%s: the output's suffix says its format: .npz, .npy or .csv"
                        % output_path)
    check_output_path(output_path, "predict output")
    layout.check_not_run_file(run_dir, output_path, "predict output")
    x = read_input(input_path, key)
    if not isinstance(x, CSRRows) and x.ndim == 1:
        x = x.reshape(-1, 1)
    _check_finite(_rows(x, 0, 1), 0, input_path)   # before shape inference runs on it
    trained = load_trained(run_dir, which, overrides, sample=_rows(x, 0, 1).astype(numpy.float32),
                           trust_model_file=trust_model_file, command="predict",
                           sample_from=input_path)
    scaling = None if isinstance(x, CSRRows) else run_scaling(run_dir, trained.config, x.shape[1:])
    how = _classifier(trained.config)
    bs = batch_size or validation_pass(trained.config.data.batch_size, x)
    n = len(x)
    ctx, dtype = trained.contexts[0], trained.dtype
    passes = [slice(start, start + bs) for start in range(0, n, bs)]
    # A memory-mapped input: the next pass's rows are read from the disk while this one computes.
    if is_mapped(x) and len(passes) > 1:
        reads = read_each(lambda part: numpy.array(x[part]), passes, ahead=True)
    else:
        reads = read_each(lambda part: _rows(x, part.start, part.stop), passes, ahead=False)
    try:
        with _Writer(output_path, n, how is not None) as writer, trained.run_threads(), \
                contextlib.closing(reads):
            for part, rows in reads:
                start = part.start
                _check_finite(rows, start, input_path)
                if scaling is not None:       # the inputs as the model was trained on them
                    with numpy.errstate(over="ignore"):
                        rows = scaling.apply(rows)
                    # A value far from a feature's mean, over a tiny std: Inf in float32.
                    _check_finite(rows, start, "%s (scaled as the run's %s)"
                                  % (input_path, SCALING_FILE))
                out = trained.net(as_batch(rows if isinstance(rows, CSRRows)
                                           else rows.astype(numpy.float32, copy=False), ctx, dtype))
                out = numpy.asarray(out.asnumpy(), dtype=numpy.float32)
                writer.add(out, _classes(out, how) if how is not None else None)
                if progress is not None:
                    progress(min(start + bs, n), n)
    except OSError as exc:   # its folder read-only, the disk full: said of the output
        raise write_failure(output_path, exc, "predict output") from None
    return {"run_dir": str(run_dir), "checkpoint": str(trained.checkpoint), "step": trained.step,
            "input": str(input_path), "output": str(output_path), "samples": n,
            "output_shape": writer.shape, "classifier": how is not None,
            "notes": trained.notes}


def _rows(x, start, stop):
    return x[start:stop] if not isinstance(x, CSRRows) else x[numpy.arange(start, min(stop, len(x)))]


def _check_finite(rows, start, where):
    values = rows.data if isinstance(rows, CSRRows) else rows
    if values.dtype.kind == "f":
        finite = numpy.isfinite(values)
        if values.dtype.itemsize > 4:
            # The network reads float32: a larger float64 would become Inf there, unseen.
            finite &= numpy.abs(values) <= numpy.finfo(numpy.float32).max
        if not finite.all():
            if isinstance(rows, CSRRows):
                bad = int(numpy.searchsorted(rows.indptr, int(numpy.argmin(finite)), side="right")) - 1
            else:
                bad = int(numpy.argmin(finite.reshape(len(rows), -1).all(axis=1)))
            raise DataError("%s: sample %d (counting from 0) holds NaN or Inf (or a number "
                            "beyond float32's range)" % (where, start + bad))


class _Writer:
    """The output file, written batch by batch: .npy members in temporary files (memory-mapped,
    so that no more than a batch is held), joined into the output at the end."""

    def __init__(self, path: Path, n: int, classes: bool):
        self.path, self.n, self.classes = path, n, classes
        self.suffix = path.suffix.lower()
        self.shape = None
        self.done = 0
        self._tmp = None
        self._arrays = {}
        self._csv = None

    def __enter__(self):
        self._tmp = tempfile.mkdtemp(prefix=".tmp-predict-", dir=self.path.parent or ".")
        return self

    def add(self, out, classes):
        if self.shape is None:
            self.shape = list(out.shape[1:])
            self._open(out, classes)
        k = len(out)
        if self.suffix == ".csv":
            flat = out.reshape(k, -1)
            for i in range(k):
                row = ["%.9g" % v for v in flat[i]]
                if classes is not None:
                    row += ["%d" % classes[0][i], "%.9g" % classes[1][i]]
                self._csv.writerow(row)
        else:
            self._arrays["output"][self.done:self.done + k] = out
            if classes is not None and "class" in self._arrays:
                self._arrays["class"][self.done:self.done + k] = classes[0]
                self._arrays["probability"][self.done:self.done + k] = classes[1]
        self.done += k

    def _open(self, out, classes):
        if self.suffix == ".csv":
            self._csv_file = open(os.path.join(self._tmp, "out.csv"), "w", newline="")
            self._csv = csv.writer(self._csv_file)
            header = ["output_%d" % i for i in range(math.prod(out.shape[1:]))]
            self._csv.writerow(header + (["class", "probability"] if classes is not None else []))
            return
        members = {"output": (numpy.float32, (self.n,) + out.shape[1:])}
        if classes is not None and self.suffix == ".npz":
            members["class"] = (numpy.int64, (self.n,) + classes[0].shape[1:])
            members["probability"] = (numpy.float32, (self.n,) + classes[1].shape[1:])
        for name, (dtype, shape) in members.items():
            path = os.path.join(self._tmp, name + ".npy")
            self._arrays[name] = _npy_format.open_memmap(path, mode="w+", dtype=dtype, shape=shape)
            _reserve(path)

    def __exit__(self, kind, exc, tb):
        try:
            if kind is None:
                self._publish()
        finally:
            if self._csv is not None:
                self._csv_file.close()
            self._arrays.clear()
            shutil.rmtree(self._tmp, ignore_errors=True)
        return False

    def _publish(self):
        for array in self._arrays.values():
            array.flush()
        if self.suffix == ".csv":
            self._csv_file.flush()
            self._move(os.path.join(self._tmp, "out.csv"))
        elif self.suffix == ".npy":
            self._move(os.path.join(self._tmp, "output.npy"))
        else:
            with atomic_write(self.path) as f:
                with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                    for name in self._arrays:
                        with open(os.path.join(self._tmp, name + ".npy"), "rb") as src, \
                                zf.open(name + ".npy", "w", force_zip64=True) as dst:
                            shutil.copyfileobj(src, dst, 1 << 20)

    def _move(self, src):
        with open(src, "rb") as f:
            os.fsync(f.fileno())
        os.replace(src, self.path)
        fsync_dir(self.path.parent if str(self.path.parent) else ".")


def _reserve(path):
    """Allocate the disk blocks of the sparse file ``path`` now: a memory-mapped write that
    finds the disk full is a SIGBUS that kills the process; here it is an ENOSPC OSError."""
    if not hasattr(os, "posix_fallocate"):
        return
    with open(path, "r+b") as f:
        try:
            os.posix_fallocate(f.fileno(), 0, os.fstat(f.fileno()).st_size)
        except OSError as exc:
            if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                return   # a file system that cannot reserve: written as before
            raise
