"""How many optimizer steps a config's ``epochs`` make, from the size of its training set.

Sizes come from the cheapest exact source: the config for synthetic data, array headers for
.npz/.npy (nothing is loaded), a row count for CSV, a load for scikit-learn's bundled sets, and
for a run directory the size its checkpoint recorded. The split and the batching are the run's
own (``run.data.split_validation``, ``run.order.BatchOrder``), so the counts cannot drift apart.
"""
from __future__ import annotations

import csv
import zipfile
from pathlib import Path

import numpy

from ..config import ConfigError, ConfigIssue
from ..run.data import Arrays, split_validation
from ..run.order import BatchOrder

__all__ = ["dataset_size", "train_size", "planned_steps"]


def _npy_rows(fileobj) -> int:
    version = numpy.lib.format.read_magic(fileobj)
    if version == (1, 0):
        shape, _, _ = numpy.lib.format.read_array_header_1_0(fileobj)
    else:
        shape, _, _ = numpy.lib.format.read_array_header_2_0(fileobj)
    if not shape:
        raise ValueError("it holds a scalar, not an array of samples")
    return int(shape[0])


def _csv_rows(path: str, delimiter: str, header: bool) -> int:
    with open(path, newline="", encoding="utf-8-sig") as f:
        rows = sum(1 for row in csv.reader(f, delimiter=delimiter) if row)
    return max(rows - (1 if header else 0), 0)


def _sklearn_rows(name: str) -> int:
    from sklearn import datasets  # optional dependency; validation already checked it is there

    return int(getattr(datasets, "load_" + name)(return_X_y=True)[0].shape[0])


def dataset_size(dataset) -> int:
    """Number of samples of one dataset section (``SyntheticData``, ``NpzData``, ...)."""
    kind = dataset.type
    if kind in ("synthetic", "ratings"):
        return dataset.num_samples
    if kind == "sklearn":
        return _sklearn_rows(dataset.name)
    if kind == "npz":
        with zipfile.ZipFile(dataset.path) as z, z.open(dataset.x + ".npy") as member:
            return _npy_rows(member)
    if kind == "csr":
        with open(dataset.label_path, "rb") as f:
            return _npy_rows(f)
    if kind == "npy":
        with open(dataset.path, "rb") as f:
            return _npy_rows(f)
    if kind == "libsvm":
        from ..io.libsvm_iter import read_libsvm
        return len(read_libsvm(dataset.path, dataset.num_features)[0])
    if kind == "csv":
        return _csv_rows(dataset.path, dataset.delimiter, dataset.header)
    raise ValueError("unknown dataset type %r" % (kind,))


def train_size(config, source=None) -> int:
    """Samples in the training set after any ``data.split``; a ``ConfigError`` naming the data
    file (and ``source``, the config) when it cannot be read."""
    train = config.data.train
    try:
        n = dataset_size(train)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, csv.Error, UnicodeDecodeError) as exc:
        where = getattr(train, "path", None) or train.type
        raise ConfigError([ConfigIssue(
            "cannot count the samples of %s: %s" % (Path(where).name, exc),
            key="data.train", file=None if source is None else str(source))]) from None
    if config.data.split is not None:
        index = numpy.arange(n)
        n = len(split_validation(Arrays(index, index), config.data.split)[0])
    return n


def planned_steps(config, n_train: int | None = None, source=None) -> dict:
    """The number of optimizer steps a run of ``config`` makes, and how that was worked out:
    ``{"steps", "from", "train_samples", "updates_per_epoch"}`` (``updates_per_epoch`` is a
    list when it varies between epochs, None without epochs). ``n_train`` skips reading data."""
    out = {"steps": config.steps, "from": "steps", "train_samples": None, "updates_per_epoch": None}
    if config.epochs is None:
        return out
    n = train_size(config, source) if n_train is None else n_train
    data = config.data
    order = BatchOrder(n, data.batch_size, data.last_batch, data.shuffle, config.seed)
    per_epoch = [order.updates_in_epoch(e, config.grad_accumulation) for e in range(config.epochs)]
    total = order.total_updates(config.epochs, config.steps, config.grad_accumulation)
    out.update(steps=total, train_samples=n,
               updates_per_epoch=per_epoch[0] if len(set(per_epoch)) == 1 else per_epoch)
    if config.steps is None or total < config.steps:
        out["from"] = "epochs"
    return out
