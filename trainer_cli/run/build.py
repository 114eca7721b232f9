"""Everything a run needs, built from a RunConfig: data, network, loss, metrics, optimizer and the
``gluon.Trainer`` with its kvstore.

How gradients reach the optimizer is the Trainer's decision (``Trainer.mode``), made once by
MXNet's rules; the run only states its preference: with a kvstore it reduces gradients itself
(``allreduce_grads``) and then ``update``\\ s, so that it can check them for NaN/Inf and clip them
by global norm on the reduced values (``default_update_on_kvstore=False``). The kvstore runs the
optimizer (``trainer.step``, mode ``STORE``) only where the store requires it (``dist_async``) or
the config asks for it (``kvstore.update_on_kvstore: true``); global-norm clipping is then
impossible and refused.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ConfigError, ConfigIssue, names
from ..metric import create as create_metric
from . import data as _data
from . import warm_start as warm
from .model import build_network
from .order import BatchOrder

__all__ = ["Parts", "build", "build_optimizer", "build_loss", "build_metrics"]

# Metrics that read class scores: the runner hands them the network's raw outputs (logits).
_LOGIT_METRICS = ("cross_entropy", "perplexity")
# A run's values are over every sample seen (MXNet's metrics average each update's value by
# default: a short last batch would weigh as much as a full one).
_POOLED_METRICS = ("mae", "mse", "rmse", "f1")


@dataclass
class Parts:
    config: object
    contexts: list
    train: _data.Arrays
    val: _data.Arrays | None
    order: BatchOrder
    net: object
    model_file: Path
    loss: object
    metrics: dict            # config name -> EvalMetric (train)
    val_metrics: dict        # config name -> EvalMetric (validation)
    trainer: object
    kvstore: object          # the Trainer's store (``trainer.kvstore``), or None
    rank: int
    num_workers: int
    notes: list = field(default_factory=list)   # for the run's log: where its weights came from
    scaling: object = None   # data.normalize's fitted run.scaling.FeatureScaling, or None


def _issue(config_file, key, message):
    return ConfigError([ConfigIssue(message, key=key, file=str(config_file) if config_file else None)])


def _refuse_clip_on_store(config, config_file):
    why = ("kvstore.update_on_kvstore is true" if config.kvstore.update_on_kvstore
           else "kvstore %s updates on the kvstore" % config.kvstore_type)
    raise _issue(config_file, "grad_clip", "global-norm clipping needs the reduced gradients "
                 "before the update, but %s; remove grad_clip or set "
                 "kvstore.update_on_kvstore to false or null" % why)


def _required_inputs(loss_cls) -> int:
    """How many arrays the loss must be called with (``hybrid_forward`` after ``F``)."""
    params = list(inspect.signature(loss_cls.hybrid_forward).parameters.values())[2:]
    return sum(1 for p in params if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD)


def build_loss(config, config_file=None):
    cls = names.lookup("loss", config.loss.name)
    if cls is None:
        raise _issue(config_file, "loss.name", "unknown loss %r" % config.loss.name)
    needed = _required_inputs(cls)
    if needed != 2:
        # TripletLoss(pred, positive, negative), CosineEmbeddingLoss(input1, input2, label).
        raise _issue(config_file, "loss.name", "loss %s takes %d input arrays, but the runner "
                     "calls the loss with two (the network's output and the label); use it from "
                     "Python" % (config.loss.name, needed))
    try:
        return cls(**config.loss.params)
    except (TypeError, ValueError) as exc:
        raise _issue(config_file, "loss", "cannot create loss %s: %s" % (config.loss.name, exc)) from None


def build_metrics(config, config_file=None) -> dict:
    out = {}
    for i, section in enumerate(config.metrics):
        params = dict(section.params)
        if section.name in _LOGIT_METRICS:
            params.setdefault("from_logits", True)
        if section.name in _POOLED_METRICS:
            params.setdefault("average", "micro")
        try:
            out[section.name] = create_metric(section.name, **params)
        except (TypeError, ValueError) as exc:
            raise _issue(config_file, "metrics.%d" % i, "cannot create metric %s: %s"
                         % (section.name, exc)) from None
    return out


def build_optimizer(config, config_file=None):
    """The optimizer with its scheduler, exactly as a run creates it (``trainer lr`` uses it too).

    A scheduler without its own ``base_lr`` starts from the optimizer's ``learning_rate``, which
    is what MXNet ends up doing too (it overwrites ``base_lr``), minus the warning.
    """
    from .. import lr_scheduler, optimizer

    params = dict(config.optimizer.params)
    scheduler = None
    if config.lr_scheduler is not None:
        sched_params = dict(config.lr_scheduler.params)
        if "base_lr" not in sched_params and params.get("learning_rate") is not None:
            sched_params["base_lr"] = params["learning_rate"]
        try:
            scheduler = lr_scheduler.create(config.lr_scheduler.type, **sched_params)
        except (TypeError, ValueError) as exc:
            raise _issue(config_file, "lr_scheduler", "cannot create scheduler %s: %s"
                         % (config.lr_scheduler.type, exc)) from None
    try:
        return optimizer.create(config.optimizer.name, lr_scheduler=scheduler, **params)
    except (TypeError, ValueError) as exc:
        raise _issue(config_file, "optimizer", "cannot create optimizer %s: %s"
                     % (config.optimizer.name, exc)) from None


def _class_count(config) -> int | None:
    """How many classes the labels index (0: unknown), or None when labels are not indices."""
    loss = config.loss
    if loss.name != "softmax_cross_entropy" or loss.params.get("sparse_label", True) is False:
        return None
    classes = config.model.args.get("classes")
    return classes if isinstance(classes, int) and not isinstance(classes, bool) and classes > 0 else 0


def _check_feature_width(config, train, val) -> None:
    """CSR columns as many as the model's ``num_features`` (sparse_linear's convention; dense
    features have their width inferred by the first layer), and the validation set as wide as
    the training set: named here, not as a shape error inside the first step."""
    width = tuple(train.x.shape[1:])
    wanted = config.model.args.get("num_features")
    if isinstance(train.x, _data.CSRRows) and isinstance(wanted, int) \
            and not isinstance(wanted, bool) and width[0] != wanted:
        raise _data.DataError("%s: %d feature columns, but model.args.num_features is %d"
                              % (_data.where(config.data.train), width[0], wanted))
    if val is not None and tuple(val.x.shape[1:]) != width:
        raise _data.DataError("%s: validation features of shape %s per sample, but the training "
                              "set's (%s) are %s" % (_data.where(config.data.val),
                                                      list(val.x.shape[1:]),
                                                      _data.where(config.data.train), list(width)))


def _check_labels_fit(config, files, output_shape) -> None:
    """Class labels below the width of what the model actually outputs (its ``classes`` default,
    ``outputs``, a user model's layer), known from the sample forward pass: a label beyond it
    would train silently to accuracy 0. ``files``: (spec, arrays) as read, rows as in the file."""
    axis = config.loss.params.get("axis", -1)
    if len(output_shape) != 2 or axis not in (-1, 1):
        return
    width = output_shape[1]
    for spec, arrays in files:
        _data.check_class_labels(arrays.y, width, _data.labels_where(spec),
                                 "the model outputs %d class scores" % width)


def _check_devices(config, config_file):
    """A GPU the config asks for must be there: bad input (exit 2) naming ``context``, before any
    data is loaded."""
    wanted = [d for d in config.context if d.startswith("gpu")]
    if not wanted:
        return
    from ..context import GPUUnavailableError, gpu, num_gpus

    count = num_gpus()
    missing = [d for d in wanted if int(d.split(":")[1]) >= count]
    if not missing:
        return
    try:
        gpu(0).xp         # the reason, where CuPy itself is missing
    except GPUUnavailableError as exc:
        why = str(exc)[:1].lower() + str(exc)[1:]
    else:
        why = "CuPy sees %d GPU(s) on this machine" % count
    raise _issue(config_file, "context", "%s asked for, but %s (use context: cpu to train on the "
                 "CPU)" % (", ".join(missing), why))


def _scaled(config, config_file, train, val, run_dir):
    """``data.normalize: standard``: the scaling fitted on the training split (or, on resume,
    the one the run saved), applied to both sets."""
    from . import scaling as _scaling

    if isinstance(train.x, _data.CSRRows):
        raise _issue(config_file, "data.normalize", "standard scaling needs dense features; "
                     "centering sparse (CSR) features would make them dense")
    saved = None
    if run_dir is not None:
        saved = _scaling.read_scaling(run_dir, train.x.shape[1:])
    scaling = saved if saved is not None else _scaling.fit_scaling(train)
    train_name = _data.path_name(config.data.train)
    val_name = _data.path_name(config.data.val) if config.data.val is not None \
        else "the validation split of %s" % train_name
    return (_scaling.scale_arrays(train, scaling, train_name),
            _scaling.scale_arrays(val, scaling, val_name) if val is not None else None, scaling)


def _with_vocabulary(section, train, model_dir, config_file):
    """Text data: the model section with ``vocab_size`` (the training text's vocabulary) added
    to its args when its factory takes one and the config does not set it; a smaller one set
    is an error."""
    vocab = train.vocabulary
    if vocab is None:
        return section
    given = section.args.get("vocab_size")
    if given is not None:
        if isinstance(given, int) and given < len(vocab):
            raise _issue(config_file, "model.args.vocab_size", "vocab_size %d is smaller than "
                         "the %d tokens of the training text's vocabulary (<unk> included); "
                         "leave it out to have it set" % (given, len(vocab)))
        return section
    from ..config.schema.files import factory_params
    from .model import model_source

    file, factory = model_source(section, model_dir)
    accepted = factory_params(str(file), factory)
    if accepted is None or "vocab_size" not in accepted:
        return section
    return section.model_copy(update={"args": {**section.args, "vocab_size": len(vocab)}})


def build(config, config_file=None, model_dir=None, run_dir=None, warm_start=True) -> Parts:
    """Build a run's parts; the global random state must already be seeded. ``run_dir`` (on
    resume) is where no model file may come from. ``warm_start``: load ``model.init_from``'s
    weights (not when a checkpoint will replace them)."""
    from ..gluon import Trainer
    from ..gluon.trainer import STORE

    _check_devices(config, config_file)
    contexts = config.contexts()
    classes = _class_count(config)
    files = _data.load_files(config.data, classes, seed=config.seed)
    train, val = _data.split_files(config.data, *(arrays for _, arrays in files))
    _check_feature_width(config, train, val)
    scaling = None
    if config.data.normalize == "standard":
        train, val, scaling = _scaled(config, config_file, train, val, run_dir)
    order = BatchOrder(len(train), config.data.batch_size, config.data.last_batch,
                       config.data.shuffle, config.seed)
    if order.num_batches(0) == 0:
        raise _issue(config_file, "data.batch_size", "batch_size %d is larger than the %d "
                     "training samples and last_batch is discard: an epoch would have no batches"
                     % (config.data.batch_size, len(train)))
    sample_output: list = []
    net, model_file = build_network(_with_vocabulary(config.model, train, model_dir, config_file),
                                    contexts, train.features(slice(0, 1)), model_dir, run_dir,
                                    sample_output)
    if train.streams and not callable(getattr(net, "begin_state", None)):
        raise _issue(config_file, "model.name", "text data trains a language model that carries "
                     "its recurrent state from batch to batch: the model needs begin_state("
                     "batch_size, ctx=...) and forward(x, state) returning (output, state), as "
                     "the built-in rnn_lm has")
    if classes is not None and sample_output:
        _check_labels_fit(config, files, sample_output[0])
    del files  # the sets as read: a split made copies
    notes = []
    if warm_start and config.model.init_from is not None:
        notes.append(warm.load_init_from(net, config.model, contexts, config_file))
    frozen = warm.apply_freeze_and_lr_mult(net, config.model, config_file)
    if frozen and all(p.grad_req == "null" for p in net.collect_params().values()):
        raise _issue(config_file, "model.freeze", "every parameter of the model is frozen: "
                     "there would be nothing to train")
    if frozen:
        notes.append("frozen: %d of %d parameters (model.freeze)"
                     % (len(frozen), len(net.collect_params())))
    if config.grad_accumulation > 1:
        for param in net.collect_params().values():
            if param.grad_req != "null":
                param.grad_req = "add"
    if config.model.hybridize and callable(getattr(net, "hybridize", None)):
        net.hybridize()
    trainer = Trainer(warm.trained_params(net, frozen), build_optimizer(config, config_file),
                      kvstore=config.kvstore_type, compression_params=config.compression_params,
                      update_on_kvstore=config.kvstore.update_on_kvstore,
                      default_update_on_kvstore=False)
    # Deciding the mode creates the store; a dist one joins the MPI job, which the rank (who
    # writes the run directory) comes from.
    if trainer.mode == STORE and config.grad_clip is not None:
        _refuse_clip_on_store(config, config_file)
    kv = trainer.kvstore
    if (trainer.mode == STORE and kv is not None and "dist" in kv.type
            and config.data.last_batch == "keep" and len(train) % config.data.batch_size):
        # MXNet's rule: an optimizer on a dist kvstore keeps the first step's gradient scale.
        raise _issue(config_file, "data.last_batch", "last_batch keep makes each epoch's last "
                     "batch %d samples instead of %d, but the optimizer runs on the %s kvstore "
                     "(sparse gradients there require it, as in MXNet) and keeps the first "
                     "step's gradient scale; use last_batch: discard or rollover"
                     % (len(train) % config.data.batch_size, config.data.batch_size, kv.type))
    if config.precision == "float16":
        if trainer.mode == STORE and trainer.kvstore is not None and "dist" in trainer.kvstore.type:
            raise _issue(config_file, "precision", "precision float16 skips steps whose "
                         "gradients overflow, which the workers of %s cannot agree on when the "
                         "kvstore runs the optimizer; set kvstore.update_on_kvstore to false"
                         % trainer.kvstore.type)
        from ..contrib import amp

        amp.init()
        amp.init_trainer(trainer)
    return Parts(config=config, contexts=contexts, train=train, val=val, order=order, net=net,
                 model_file=model_file, loss=build_loss(config, config_file),
                 metrics=build_metrics(config, config_file),
                 val_metrics=build_metrics(config, config_file), trainer=trainer, kvstore=kv,
                 rank=getattr(kv, "rank", 0) if kv is not None else 0,
                 num_workers=getattr(kv, "num_workers", 1) if kv is not None else 1,
                 notes=notes, scaling=scaling)
