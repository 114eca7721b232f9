"""A run's numba kernels, loaded before its training clock starts.

numba compiles a kernel, or loads it from its disk cache, at the first call with each kind of
arguments. ``_jit.warm_up`` pays numba's own start-up before the clock, but each kernel still
loaded at its first call inside training: on ``configs/mlp_synthetic.yaml`` (0.36 ms steps) the
first step took 26 ms and the first validation 16 ms more than the others, in the training time
and in the first speed and ETA the progress line shows.

:func:`preload_kernels` runs two training steps and one validation pass of the run's shapes on a
twin of the model (a network built again from the config, holding copies of the weights, with a
Trainer of its own and no kvstore) and throws the twin away. The run's own weights, optimizer
states, data order and random state are not touched: the random state is put back as it was, and
a run gives the same numbers with or without it. It is done only where it is cheap and cannot
reach outside this process: one process, one host device, a built-in model (a model file of the
user's is code that runs once), dense parameters of at most ``PRELOAD_BYTES``, float32 or
float64. It is a convenience: an error skips it, with a note in ``train.log``.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy

__all__ = ["preload_kernels", "PRELOAD_BYTES"]

# The twin holds a copy of the weights, its gradients and optimizer states, and what of them
# comes from the long-lived buffers (``ndarray.slabs``, arrays of 64 KiB or more) stays taken
# there; beyond this many bytes of weights the kernels' loading is small next to a step anyway.
PRELOAD_BYTES = 4 << 20


def preload_kernels(parts) -> str | None:
    """Load the kernels two training steps and one validation pass of ``parts`` call; returns a
    note when that failed (None when done, or when it does not apply)."""
    from .. import _jit
    from .. import random as _random

    if not _jit.loaded() or not _suitable(parts):
        return None
    state = _random.get_state()
    try:
        # The twin's numbers are thrown away, and so are its warnings: a learning rate that
        # overflows would otherwise print NumPy's warnings, source lines and all, before the
        # run's first line (the run's own steps report theirs in its log).
        with warnings.catch_warnings(), numpy.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            _twin_step(parts)
    except Exception as exc:  # noqa: BLE001 - a convenience: the run goes on without it
        return "kernels not loaded ahead (%s: %s)" % (type(exc).__name__, exc)
    finally:
        _random.set_state(state)
    return None


def _suitable(parts) -> bool:
    from .. import builtin_models
    from .model import parameter_bytes

    config = parts.config
    if parts.num_workers > 1 or len(parts.contexts) > 1 or parts.contexts[0].is_gpu:
        return False
    if config.precision == "float16" or config.model.dtype == "float16":
        return False
    if not isinstance(parts.train.x, numpy.ndarray):        # CSR rows: a sparse model
        return False
    if any(p.stype != "default" for p in parts.net.collect_params().values()):
        return False
    if parameter_bytes(parts.net) > PRELOAD_BYTES:
        return False                # a larger model's steps dwarf the loading
    # A model file of the user's is code, which runs once.
    return Path(builtin_models.__file__).parent.resolve() == Path(parts.model_file).resolve().parent


def _twin_step(parts):
    from .. import autograd
    from ..config.schema.model import MODEL_FACTORY
    from ..gluon import Trainer
    from ..gluon.block import name_counters_kept
    from ..ndarray import array as _array
    from . import grads
    from .build import build_optimizer
    from .data import as_batch
    from .finite import update_was_finite
    from .loop import _loss_sum, validation_pass
    from .model import build_network

    config, train, ctx = parts.config, parts.train, parts.contexts[0]
    dtype = numpy.dtype(config.model.dtype)
    rows = numpy.arange(min(config.data.batch_size, len(train)))
    # The real network's own file (a built-in model), named outright: no search that could
    # find another one.
    section = config.model.model_copy(update={"name": "%s:%s" % (parts.model_file, MODEL_FACTORY)})
    with name_counters_kept():
        twin, _ = build_network(section, parts.contexts, train.features(rows[:1]))
    mine = list(twin.collect_params().values())
    for param, real in zip(mine, parts.net.collect_params().values()):
        param.set_data(real.data().copy())
        param.grad_req = real.grad_req
    trainer = Trainer(twin.collect_params(), build_optimizer(config), kvstore=None)
    x = as_batch(train.features(rows), ctx, dtype)
    y = _array(train.y[rows], ctx=ctx, dtype=dtype)
    # Two steps: asked after the first, the Updater has its kernels check what they write from
    # the next update on (Adam's checking loop), which is another kernel.
    for _ in range(2):
        with autograd.record():
            out = twin(x)
            loss = parts.loss(out, y)
        loss.backward()
        _loss_sum(loss)
        grads.FiniteGrads()(mine)
        if config.grad_clip is not None:
            grads.GlobalNorm()(mine)
        trainer.update(len(rows))
        update_was_finite(trainer, True)
    _count(parts.metrics, train.y[rows], out)
    val = parts.val
    if val is not None and len(val):
        n = min(validation_pass(config.data.batch_size, val.x), len(val))
        out = twin(as_batch(val.features(slice(0, n)), ctx, dtype))
        _loss_sum(parts.loss(out, _array(val.y[:n], ctx=ctx, dtype=dtype)))
        _count(parts.val_metrics, val.y[:n], out)


def _count(metrics, label, out):
    """The counts the metrics that count a batch at once would take of it (their kernels loaded;
    a count is returned, not added)."""
    from .state import _host_view

    host = _host_view(out)      # the array the run's steps hand over, in its layout
    for metric in metrics.values():
        if hasattr(metric, "_count_host") and host is not None:
            metric._count_host(label, host)
