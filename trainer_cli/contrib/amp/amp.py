"""``contrib.amp``: MXNet 1.9.1's dynamic loss scaling for mixed-precision training.

The flow is MXNet's::

    from trainer_cli.contrib import amp
    amp.init()                               # once, before the Trainer
    net.cast('float16')                      # float16 parameters (or keep float32)
    trainer = gluon.Trainer(params, 'sgd', {'multi_precision': True, ...})
    amp.init_trainer(trainer)
    with autograd.record():
        loss = loss_fn(net(x), y)
        with amp.scale_loss(loss, trainer) as scaled:
            autograd.backward(scaled)
    trainer.step(batch_size)                 # skipped when a gradient is inf/nan

The scaler (:class:`LossScaler`) is MXNet's, rule for rule: the scale starts at 2^16; a step
whose gradients hold an inf or NaN is skipped whole (no update, no update count, no scheduler
step); the scale halves after an overflow and doubles after 2000 clean steps (at most 2^24), and
``scale_loss`` sees each change one check late, as in MXNet. What differs, on purpose (see
docs/compat.md): every device's gradients are checked, not only the first device's; with updates
on the kvstore the check comes before the push (MXNet applies the update first and only then
finds the overflow); ``amp.init`` does not rewrite operators to compute in float16 (cast the
model with ``net.cast('float16')``); the scaler's state can be saved and restored
(``get_state``/``set_state``), so a run resumes with its scale.
"""
from __future__ import annotations

import contextlib
import logging

import numpy

from ...gluon.trainer import Trainer
from ...ndarray.finite import all_finite
from ...optimizer import Optimizer

__all__ = ["init", "init_trainer", "scale_loss", "unscale", "LossScaler", "loss_scaler"]

_initialized = False
_first_scaler = None   # amp.init's scaler, which the first init_trainer takes (as in MXNet)
_first_taken = False


class LossScaler:
    """MXNet's dynamic loss scaler (``mxnet/contrib/amp/loss_scaler.py``)."""

    INITIAL = 2.0 ** 16
    MAX = 2.0 ** 24
    GROWTH_INTERVAL = 2000

    def __init__(self):
        self._loss_scale = self.INITIAL
        self._next_loss_scale = self._loss_scale
        self._max_loss_scale = self.MAX
        self._scale_seq_len = self.GROWTH_INTERVAL
        self._unskipped = 0
        self.last_overflow = False  # what the last has_overflow found (the runner counts skips)

    @property
    def loss_scale(self) -> float:
        return self._loss_scale

    def has_overflow(self, params) -> bool:
        """Whether any gradient of ``params`` (on any device) holds an inf or NaN; moves the
        scale as MXNet does."""
        overflow = not all_finite([g for p in params if p.grad_req != "null" for g in p.list_grad()])
        self.last_overflow = overflow
        return self.record(overflow)

    def record(self, overflow: bool) -> bool:
        """The scale's move after a check that found ``overflow``; returns ``overflow``."""
        self._loss_scale = self._next_loss_scale
        if overflow:
            self._next_loss_scale = self._loss_scale / 2.0
            self._unskipped = 0
            logging.info("AMP: decreasing loss scale to %f", self._next_loss_scale)
        else:
            self._unskipped += 1
        if self._unskipped == self._scale_seq_len:
            self._unskipped = 0
            self._next_loss_scale = min(self._max_loss_scale, self._loss_scale * 2.0)
            logging.info("AMP: increasing loss scale to %f", self._next_loss_scale)
        return overflow

    def get_state(self) -> dict:
        return {"loss_scale": self._loss_scale, "next_loss_scale": self._next_loss_scale,
                "unskipped": self._unskipped}

    def set_state(self, state: dict) -> None:
        scale, following, unskipped = state["loss_scale"], state["next_loss_scale"], state["unskipped"]
        for name, value in (("loss_scale", scale), ("next_loss_scale", following)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) \
                    or not 0 < value <= self.MAX or not numpy.isfinite(value):
                raise ValueError("AMP loss scaler state: %s must be a number in (0, 2^24], got %r"
                                 % (name, value))
        if not isinstance(unskipped, int) or isinstance(unskipped, bool) \
                or not 0 <= unskipped < self._scale_seq_len:
            raise ValueError("AMP loss scaler state: unskipped must be an integer in [0, %d), got %r"
                             % (self._scale_seq_len, unskipped))
        self._loss_scale, self._next_loss_scale = float(scale), float(following)
        self._unskipped = unskipped


def init(target_dtype="float16", target_precision_ops=None, conditional_fp32_ops=None,
         fp32_ops=None):
    """Turn AMP on (once per process; a second call does nothing, as in MXNet).

    Operators are not rewritten to compute in ``target_dtype``: the model's dtype is what its
    parameters are (``net.cast('float16')``). The op-list arguments are accepted and ignored."""
    global _initialized, _first_scaler
    if _initialized:
        return
    if target_dtype == "bfloat16" or numpy.dtype(target_dtype) != numpy.float16:
        raise ValueError("AMP here supports only float16 as a target_dtype, got %r" % (target_dtype,))
    _initialized = True
    logging.info("Using AMP")
    _first_scaler = LossScaler()


def init_trainer(optimizer_or_trainer):
    """Give a ``gluon.Trainer`` a dynamic loss scaler; its ``step`` then skips overflows."""
    global _first_taken
    if not _initialized:
        raise AssertionError("AMP not initialized, did you forget to call amp.init()?")
    if isinstance(optimizer_or_trainer, Trainer):
        scaler = _first_scaler if not _first_taken else LossScaler()
        _first_taken = True
        optimizer_or_trainer._amp_loss_scaler = scaler
        optimizer_or_trainer._amp_original_scale = optimizer_or_trainer._scale
        return
    if isinstance(optimizer_or_trainer, Optimizer):
        raise TypeError("AMP is currently only compatible with Gluon Trainer")
    raise TypeError("optimizer_or_trainer should be a Gluon Trainer or an optimizer, instead is %s"
                    % type(optimizer_or_trainer))


def loss_scaler(trainer):
    """The trainer's :class:`LossScaler` (None without ``init_trainer``)."""
    return getattr(trainer, "_amp_loss_scaler", None)


def _scaler_of(trainer):
    scaler = getattr(trainer, "_amp_loss_scaler", None)
    if scaler is None:
        raise AssertionError("Loss scaler is not initialized, did you forget to call "
                             "amp.init_trainer()?")
    return scaler


@contextlib.contextmanager
def scale_loss(loss, optimizer_or_trainer):
    """Yield the loss (or list of losses) times the current scale; the Trainer divides the
    gradients by it again through its rescale factor."""
    scaler = _scaler_of(optimizer_or_trainer)
    optimizer_or_trainer._scale = optimizer_or_trainer._amp_original_scale / scaler.loss_scale
    if isinstance(loss, (list, tuple)):
        yield [item * scaler.loss_scale for item in loss]
    else:
        yield scaler.loss_scale * loss


def unscale(optimizer_or_trainer):
    """Divide the gradients by the loss scale now (for clipping them by hand); the next
    ``step`` then rescales by ``1/batch_size`` only."""
    if isinstance(optimizer_or_trainer, Trainer):
        factor = optimizer_or_trainer._scale
        for param in optimizer_or_trainer._params:
            if param.grad_req == "null":
                continue
            for grad in param.list_grad():
                grad[:] *= factor
        optimizer_or_trainer._scale = 1.0
        return
    if isinstance(optimizer_or_trainer, Optimizer):
        raise TypeError("AMP is currently only compatible with Gluon Trainer")
    raise TypeError("optimizer_or_trainer should be a Gluon Trainer or an optimizer, instead is %s"
                    % type(optimizer_or_trainer))
