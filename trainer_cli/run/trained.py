"""A run's trained model, for use: the network of its config with a checkpoint's weights
(``load_trained``), and ``evaluate_run``: the config's loss and metrics on its validation set,
its training set, or another data set given by ``data.*`` overrides.

Like ``resume``, this reads only the run directory's ``config.yaml`` and checkpoint, and imports
the model file only when it is the one the run recorded (``model.json``) or the user vouches
for it; nothing is trained and nothing in the run directory is written.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import numpy

from .. import random as _random
from ..config import ConfigError, ConfigIssue
from . import layout
from . import model_record as _model_record
from . import threads as _threads
from .checkpoint import using_checkpoint
from .layout import RunDirError

__all__ = ["Trained", "load_trained", "evaluate_run", "check_use_overrides"]

# What evaluate and predict may override: the data set and where the model runs.
_USE_KEYS = ("data", "context")


@dataclass
class Trained:
    config: object
    net: object
    contexts: list
    dtype: numpy.dtype
    step: int
    checkpoint: Path
    features: list | None     # the per-sample feature shape the run trained on (None: unknown)
    notes: list
    threads: int | None = None    # the thread count the checkpoint was made with (None: unknown)

    @contextlib.contextmanager
    def run_threads(self):
        """The BLAS on the thread count the run's steps had (its config's, or the one the
        checkpoint records), so that the network gives the run's bits on any BLAS."""
        requested = getattr(self.config, "threads", None)
        if self.threads is None and requested in (None, "auto"):
            yield
            return
        restore = _threads.apply(_threads.plan(requested, recorded=self.threads))
        try:
            yield
        finally:
            restore()


def check_use_overrides(overrides, command: str):
    """Overrides that could change the model or its training are refused: evaluate and predict
    use the run as it was trained (predict reads no data set: context only)."""
    allowed = _USE_KEYS if command == "evaluate" else ("context",)
    what = "data.* (the data set) and context" if command == "evaluate" else "context"
    bad = []
    for text in overrides:
        key = text.split("=", 1)[0].strip()
        if key.split(".", 1)[0] not in allowed:
            bad.append(ConfigIssue("%s takes overrides of %s only, not %s: it uses the run's "
                                   "model as it was trained" % (command, what, key or text),
                                   key=key or None, override=text))
    if bad:
        raise ConfigError(bad)


def _config(run_dir, overrides):
    from .session import read_run_config

    overrides = list(overrides)
    if any(o.split("=", 1)[0].strip().startswith("data.val") for o in overrides):
        # Another validation set replaces the split the run may have made.
        overrides.insert(0, "data.split=null")
    return read_run_config(run_dir, overrides)


def load_trained(run_dir, which=None, overrides=(), sample=None, trust_model_file=False,
                 command="evaluate", sample_from=None) -> Trained:
    """The network of ``run_dir``'s config with the weights of checkpoint ``which`` (None: the
    latest, ``"best"``, or a step). ``sample``: a few input rows for shape inference (None:
    the config's training data is read for them), checked against the samples the run trained
    on and, if they differ, blamed on ``sample_from``."""
    from .model import model_source

    run_dir = Path(run_dir)
    check_use_overrides(overrides, command)
    config = _config(run_dir, overrides)
    model_file, _ = model_source(config.model, forbid=run_dir)
    trusted = _model_record.check_record(run_dir, config.model.name, model_file, trust_model_file)
    return using_checkpoint(run_dir, which, lambda step, folder: _load_from(
        run_dir, step, folder, config, trusted, sample, sample_from))


def _load_from(run_dir, step, folder, config, trusted, sample, sample_from) -> Trained:
    from .fit import check_params
    from .model import build_network
    from ..gluon.param_file import ParamFileError, load_arrays

    meta = layout.read_meta(folder)
    features = (meta.get("data") or {}).get("features")
    if not (isinstance(features, list) and all(isinstance(d, int) and d > 0 for d in features)):
        features = None
    _random.seed(config.seed)
    contexts = config.contexts()
    section = config.model
    if config.data.train.type == "text":
        # The network's vocabulary is the training text's, as when the run built it.
        from .build import _with_vocabulary
        from .data import load_data

        text = load_data(config.data)[0]
        section = _with_vocabulary(section, text, None, None)
        sample = text.features(slice(0, 1)) if sample is None else sample
    if sample is None:
        from .build import _class_count
        from .data import load_dataset

        sample = load_dataset(config.data.train, _class_count(config)).features(slice(0, 1))
    elif features is not None and list(sample.shape[1:]) != features:
        from .data import DataError

        raise DataError("%s: samples of shape %s, but the model was trained on samples of shape "
                        "%s" % (sample_from, list(sample.shape[1:]), features))
    net, _ = build_network(section, contexts, sample, forbid=run_dir)
    params_path = folder / layout.PARAMS_FILE
    try:
        weights = load_arrays(params_path)
    except ParamFileError as exc:
        raise RunDirError(str(exc)) from None
    check_params(params_path, weights, net)
    net.load_parameters(str(params_path), ctx=contexts)
    return Trained(config=config, net=net, contexts=contexts,
                   dtype=numpy.dtype(config.model.dtype), step=step, checkpoint=folder,
                   features=features, notes=[trusted] if trusted else [],
                   threads=_threads.recorded(meta))


def evaluate_run(run_dir, which=None, overrides=(), on="val", trust_model_file=False,
                 progress=None) -> dict:
    """The config's loss and metrics for checkpoint ``which`` of ``run_dir`` on its validation
    set (``on="val"``: data.val or the split the run made, or the set ``-o data.val=...``
    names) or its training set (``on="train"``, the run's part of it when it split)."""
    from .build import _class_count, build_loss, build_metrics
    from .data import describe, load_dataset, split_validation
    from .loop import evaluate_arrays
    from .scaling import run_scaling, scale_arrays

    check_use_overrides(overrides, "evaluate")
    config = _config(Path(run_dir), overrides)
    section = config.data
    classes = _class_count(config)
    if section.train.type == "text" and (on == "train" or section.has_validation):
        from .data import load_data     # the streams and vocabulary of the run

        train, val = load_data(section)
        data, source = (val, "the validation text") if on == "val" else (train, "data.train")
    elif on == "val" and section.val is not None:
        data = load_dataset(section.val, classes)
        source = "data.val"
    elif on == "val" and section.split is None:
        raise ConfigError([ConfigIssue(
            "the run has no validation set (no data.val or data.split): evaluate another set with "
            "-o data.val=FILE, or the training set with --on train", key="data.val")])
    else:
        data = load_dataset(section.train, classes)
        if section.split is not None:
            train, val = split_validation(data, section.split)
            data = val if on == "val" else train
            source = "the validation split" if on == "val" else "the training split"
        else:
            source = "data.train"
    trained = load_trained(run_dir, which, overrides, sample=data.features(slice(0, 1)),
                           trust_model_file=trust_model_file, sample_from=source)
    scaling = run_scaling(run_dir, config, data.x.shape[1:])
    if scaling is not None:
        data = scale_arrays(data, scaling, source)
    with trained.run_threads():
        values = evaluate_arrays(trained.net, build_loss(config), build_metrics(config), data,
                                 section.batch_size, trained.contexts[0], trained.dtype, "",
                                 progress)
    return layout.json_safe({
        "run_dir": str(run_dir), "checkpoint": str(trained.checkpoint), "step": trained.step,
        "data": source, "samples": len(data), "described": describe(data),
        "metrics": values, "notes": trained.notes})
