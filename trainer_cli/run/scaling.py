"""Feature scaling (``data.normalize: standard``): each feature's mean and standard deviation,
fitted on the training split only, saved with the run as ``feature_scaling.npz`` (arrays
``mean`` and ``std``, float64), and applied as ``(x - mean) / std`` to every set the model sees:
training, validation, and what ``evaluate``/``predict`` feed a trained run
(:func:`read_scaling` then :meth:`FeatureScaling.apply`).

The standard deviation is the population one (``ddof=0``, as scikit-learn's ``StandardScaler``),
and a constant feature's is taken as 1, so that it becomes 0 rather than NaN. A value that
scaling takes beyond float32 (far from the training data over a tiny spread: a feature of
values around 1e-30, say) is refused with the row that holds it, as a NaN/Inf in the data is.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy

from .._bounded import MiB, open_regular
from .._npz import NpzError, read_npz
from .layout import RunDirError

__all__ = ["SCALING_FILE", "FeatureScaling", "fit_scaling", "write_scaling", "read_scaling",
           "run_scaling", "scale_arrays"]

SCALING_FILE = "feature_scaling.npz"
# Two float64 values per feature: 64 MiB holds four million features.
SCALING_LIMIT = 64 * MiB
# Rows read at a time while fitting (memory-mapped features are never read whole).
_FIT_ROWS = 1 << 14


@dataclass
class FeatureScaling:
    mean: numpy.ndarray     # float64, the shape of one sample's features
    std: numpy.ndarray      # float64, > 0

    def apply(self, x) -> numpy.ndarray:
        """``(x - mean) / std`` of a batch of samples (rows), as float32 (a value beyond float32
        becomes Inf: see :meth:`refuse_overflow`)."""
        with numpy.errstate(over="ignore"):
            return ((numpy.asarray(x, dtype=numpy.float64) - self.mean)
                    / self.std).astype(numpy.float32)

    def refuse_overflow(self, scaled, where: str, rows=None) -> None:
        """A DataError naming the first sample of ``scaled`` (from :meth:`apply`) that scaling
        took beyond float32, ``rows`` its row numbers in ``where`` (default 0, 1, ...)."""
        flat = scaled.reshape(len(scaled), -1)
        bad = ~numpy.isfinite(flat)
        if not bad.any():
            return
        at, column = numpy.unravel_index(int(numpy.argmax(bad)), bad.shape)
        row = int(at) if rows is None else int(numpy.atleast_1d(rows)[at])
        from .data import DataError
        raise DataError(
            "%s: row %d (counting from 0): feature %d, scaled by the training split's mean "
            "%.6g and standard deviation %.6g (data.normalize: standard), is beyond float32: "
            "the value is too far from the training data's; remove that row, or train "
            "without data.normalize" % (where, row, int(column), self.mean.reshape(-1)[column],
                                        self.std.reshape(-1)[column]))


def fit_scaling(train) -> FeatureScaling:
    """The mean and standard deviation of every feature of ``train`` (a run's ``Arrays``),
    accumulated in float64 over chunks of rows."""
    n = len(train)
    total = total_sq = None
    for start in range(0, n, _FIT_ROWS):
        chunk = numpy.asarray(train.features(slice(start, start + _FIT_ROWS)), dtype=numpy.float64)
        part, part_sq = chunk.sum(axis=0), numpy.square(chunk).sum(axis=0)
        total = part if total is None else total + part
        total_sq = part_sq if total_sq is None else total_sq + part_sq
    mean = total / n
    # A second pass for the variance: E[x^2] - E[x]^2 loses every digit on large offsets.
    squares = numpy.zeros_like(mean)
    for start in range(0, n, _FIT_ROWS):
        chunk = numpy.asarray(train.features(slice(start, start + _FIT_ROWS)), dtype=numpy.float64)
        squares += numpy.square(chunk - mean).sum(axis=0)
    std = numpy.sqrt(squares / n)
    std[~(std > 0)] = 1.0
    return FeatureScaling(mean, std)


def scale_arrays(arrays, scaling: FeatureScaling, where: str):
    """``arrays`` (the set ``where`` names) with scaled features: scaled once in memory and
    checked, or (memory-mapped features) batch by batch as they are read."""
    from .data import Arrays, is_mapped

    if is_mapped(arrays.x):
        return Arrays(arrays.x, arrays.y, arrays.x_rows, arrays.checked_as_read, scaling=scaling)
    scaled = scaling.apply(arrays.features(slice(None)))
    scaling.refuse_overflow(scaled, where)
    return Arrays(scaled, arrays.y)


def write_scaling(run_dir, scaling: FeatureScaling) -> Path:
    """Save ``scaling`` into the run directory, atomically."""
    from ..gluon.param_file import save_arrays

    path = Path(run_dir) / SCALING_FILE
    save_arrays(path, {"mean": scaling.mean, "std": scaling.std})
    return path


def read_scaling(run_dir, feature_shape=None) -> FeatureScaling | None:
    """The run's saved feature scaling, checked (size, members, dtype, shape, finite, std > 0);
    None when the run has none. ``feature_shape``: the shape one sample's features must have.
    A damaged or foreign file is a RunDirError naming it."""
    path = Path(run_dir) / SCALING_FILE
    try:
        f = open_regular(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise RunDirError("%s: cannot read (%s)" % (path, exc.strerror or exc)) from None
    with f:
        size = os.fstat(f.fileno()).st_size
        if size > SCALING_LIMIT:
            raise RunDirError("%s: %d bytes, more than feature scaling holds (at most %d)"
                              % (path, size, SCALING_LIMIT))
        try:
            arrays = read_npz(f)
        except NpzError as exc:
            raise RunDirError("%s: damaged (%s)" % (path, exc)) from None
    if sorted(arrays) != ["mean", "std"]:
        raise RunDirError("%s: expected the arrays mean and std, found %s"
                          % (path, ", ".join(sorted(arrays))[:200] or "none"))
    mean, std = arrays["mean"], arrays["std"]
    if mean.dtype.kind != "f" or std.dtype.kind != "f" or mean.shape != std.shape:
        raise RunDirError("%s: mean and std must be float arrays of one shape, got %s %s and %s %s"
                          % (path, mean.dtype, mean.shape, std.dtype, std.shape))
    if feature_shape is not None and tuple(mean.shape) != tuple(feature_shape):
        raise RunDirError("%s: scales features of shape %s, but the data's are %s"
                          % (path, tuple(mean.shape), tuple(feature_shape)))
    if not (numpy.isfinite(mean).all() and numpy.isfinite(std).all() and (std > 0).all()):
        raise RunDirError("%s: mean and std must be finite, and std > 0" % path)
    return FeatureScaling(mean.astype(numpy.float64), std.astype(numpy.float64))


def run_scaling(run_dir, config, feature_shape=None) -> FeatureScaling | None:
    """The scaling a trained run's model expects its inputs in (for evaluate and predict): the
    saved one when its config has ``data.normalize: standard`` (a missing file is then an
    error, never unscaled inputs), else None."""
    if config.data.normalize != "standard":
        return None
    scaling = read_scaling(run_dir, feature_shape)
    if scaling is None:
        raise RunDirError("%s: missing; the run scales its features (data.normalize: standard) "
                          "and its model expects them scaled" % (Path(run_dir) / SCALING_FILE))
    return scaling
