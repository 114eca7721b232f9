"""The Estimator's event handlers, as MXNet 1.9.1's: a handler takes part in the events whose
classes it derives from (``TrainBegin``, ``EpochEnd``, ...), in the order of its ``priority``
(smaller first); a ``batch_end``/``epoch_end`` returning True stops training.

Where MXNet's handlers go wrong, these do the sensible thing (docs/compat.md): ``mode='auto'``
compares accuracy and F1 with ``greater`` and everything else with ``less`` (MXNet always uses
``greater``); the CheckpointHandler removes exactly the files of the checkpoint it rotates out
and finds the latest checkpoint by its numbers, not by a file-name prefix.
"""
from __future__ import annotations

import math
import os
import re
import time
import warnings

import numpy

from ....metric import CompositeEvalMetric, EvalMetric
from ....metric import Loss as MetricLoss
from .utils import _check_metrics

__all__ = ["EventHandler", "TrainBegin", "TrainEnd", "EpochBegin", "EpochEnd", "BatchBegin",
           "BatchEnd", "StoppingHandler", "MetricHandler", "ValidationHandler",
           "LoggingHandler", "CheckpointHandler", "EarlyStoppingHandler",
           "GradientUpdateHandler"]


class EventHandler:
    pass


def _check_event_handlers(handlers):
    if isinstance(handlers, EventHandler):
        return [handlers]
    handlers = list(handlers or [])
    if not all(isinstance(handler, EventHandler) for handler in handlers):
        raise ValueError("handlers must be an EventHandler or a list of EventHandler, got: {}"
                         .format(handlers))
    return handlers


class TrainBegin(EventHandler):
    def train_begin(self, estimator, *args, **kwargs):
        pass


class TrainEnd(EventHandler):
    def train_end(self, estimator, *args, **kwargs):
        pass


class EpochBegin(EventHandler):
    def epoch_begin(self, estimator, *args, **kwargs):
        pass


class EpochEnd(EventHandler):
    def epoch_end(self, estimator, *args, **kwargs):
        return False


class BatchBegin(EventHandler):
    def batch_begin(self, estimator, *args, **kwargs):
        pass


class BatchEnd(EventHandler):
    def batch_end(self, estimator, *args, **kwargs):
        return False


class StoppingHandler(TrainBegin, BatchEnd, EpochEnd):
    """Stops training after ``max_epoch`` epochs or ``max_batch`` batches."""

    def __init__(self, max_epoch=None, max_batch=None):
        self.max_epoch = max_epoch
        self.max_batch = max_batch
        self.current_batch = 0
        self.current_epoch = 0
        self.stop_training = False

    def train_begin(self, estimator, *args, **kwargs):
        self.max_epoch = estimator.max_epoch
        self.max_batch = estimator.max_batch
        self.current_batch = 0
        self.current_epoch = 0

    def batch_end(self, estimator, *args, **kwargs):
        self.current_batch += 1
        if self.current_batch == self.max_batch:
            self.stop_training = True
        return self.stop_training

    def epoch_end(self, estimator, *args, **kwargs):
        self.current_epoch += 1
        if self.current_epoch == self.max_epoch:
            self.stop_training = True
        return self.stop_training


class MetricHandler(EpochBegin, BatchEnd):
    """Resets ``metrics`` at each epoch's start and updates them after each batch (a ``Loss``
    metric with the batch's losses, the others with labels and predictions)."""

    def __init__(self, metrics, priority=-1000):
        self.metrics = _check_metrics(metrics)
        self.priority = priority

    def epoch_begin(self, estimator, *args, **kwargs):
        for metric in self.metrics:
            metric.reset()

    def batch_end(self, estimator, *args, **kwargs):
        for metric in self.metrics:
            if isinstance(metric, MetricLoss):
                metric.update(0, kwargs["loss"])
            else:
                metric.update(kwargs["label"], kwargs["pred"])


class ValidationHandler(TrainBegin, BatchEnd, EpochEnd):
    """Runs ``eval_fn`` on ``val_data`` every ``epoch_period`` epochs (and every
    ``batch_period`` batches when set)."""

    def __init__(self, val_data, eval_fn, epoch_period=1, batch_period=None, priority=-1000,
                 event_handlers=None):
        self.val_data = val_data
        self.eval_fn = eval_fn
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.current_batch = 0
        self.current_epoch = 0
        self.priority = priority
        self.event_handlers = event_handlers

    def train_begin(self, estimator, *args, **kwargs):
        self.current_batch = 0
        self.current_epoch = 0

    def batch_end(self, estimator, *args, **kwargs):
        self.current_batch += 1
        if self.batch_period and self.current_batch % self.batch_period == 0:
            self.eval_fn(val_data=self.val_data, batch_axis=estimator.batch_axis,
                         event_handlers=self.event_handlers)

    def epoch_end(self, estimator, *args, **kwargs):
        self.current_epoch += 1
        if self.epoch_period and self.current_epoch % self.epoch_period == 0:
            self.eval_fn(val_data=self.val_data, batch_axis=estimator.batch_axis,
                         event_handlers=self.event_handlers)


class LoggingHandler(TrainBegin, TrainEnd, EpochBegin, EpochEnd, BatchBegin, BatchEnd):
    """Logs the metrics to ``estimator.logger`` each epoch, or every ``log_interval``
    batches."""

    def __init__(self, log_interval="epoch", metrics=None, priority=numpy.inf):
        if not isinstance(log_interval, int) and log_interval != "epoch":
            raise ValueError("log_interval must be either an integer or string 'epoch'")
        self.metrics = _check_metrics(metrics)
        self.batch_index = 0
        self.current_epoch = 0
        self.processed_samples = 0
        self.priority = priority
        self.log_interval = log_interval
        self.log_interval_time = 0

    def _values(self):
        return ", ".join("%s: %.4f" % metric.get() for metric in self.metrics)

    def train_begin(self, estimator, *args, **kwargs):
        self.train_start = time.time()
        trainer = estimator.trainer
        estimator.logger.info("Training begin: using optimizer %s with current learning rate "
                              "%.4f ", trainer.optimizer.__class__.__name__,
                              trainer.learning_rate)
        if estimator.max_epoch:
            estimator.logger.info("Train for %d epochs.", estimator.max_epoch)
        else:
            estimator.logger.info("Train for %d batches.", estimator.max_batch)
        self.current_epoch = 0
        self.batch_index = 0
        self.processed_samples = 0
        self.log_interval_time = 0

    def train_end(self, estimator, *args, **kwargs):
        train_time = time.time() - self.train_start
        msg = "Train finished using total %ds with %d epochs. " % (train_time, self.current_epoch)
        estimator.logger.info((msg + self._values()).rstrip(", "))

    def batch_begin(self, estimator, *args, **kwargs):
        if isinstance(self.log_interval, int):
            self.batch_start = time.time()

    def batch_end(self, estimator, *args, **kwargs):
        if isinstance(self.log_interval, int):
            batch_time = time.time() - self.batch_start
            msg = "[Epoch %d][Batch %d]" % (self.current_epoch, self.batch_index)
            self.processed_samples += kwargs["batch"][0].shape[0]
            msg += "[Samples %s] " % self.processed_samples
            self.log_interval_time += batch_time
            if self.batch_index % self.log_interval == 0:
                msg += "time/interval: %.3fs " % self.log_interval_time
                self.log_interval_time = 0
                estimator.logger.info((msg + self._values()).rstrip(", "))
        self.batch_index += 1

    def epoch_begin(self, estimator, *args, **kwargs):
        self.epoch_start = time.time()
        if any("training" in metric.name for metric in self.metrics):
            estimator.logger.info("[Epoch %d] Begin, current learning rate: %.4f",
                                  self.current_epoch, estimator.trainer.learning_rate)
        else:
            estimator.logger.info("Validation Begin")

    def epoch_end(self, estimator, *args, **kwargs):
        epoch_time = time.time() - self.epoch_start
        msg = "[Epoch %d] Finished in %.3fs, " % (self.current_epoch, epoch_time)
        estimator.logger.info((msg + self._values()).rstrip(", "))
        self.current_epoch += 1
        self.batch_index = 0


def _monitor_op(mode, monitor, who):
    if mode not in ("auto", "min", "max"):
        warnings.warn("%s mode %s is unknown, fallback to auto mode." % (who, mode),
                      RuntimeWarning)
        mode = "auto"
    if mode == "auto":
        name = monitor.get()[0].lower()
        mode = "max" if ("acc" in name or "f1" in name) else "min"
    return numpy.greater if mode == "max" else numpy.less


class CheckpointHandler(TrainBegin, BatchEnd, EpochEnd):
    """Saves ``<model_prefix>-epoch<E>batch<B>.params`` (the parameters) and ``.states`` (the
    Trainer's states, the project's npz format) in ``model_dir`` every ``epoch_period`` epochs
    or ``batch_period`` batches, keeping the last ``max_checkpoints``; with ``save_best`` also
    ``<model_prefix>-best`` when ``monitor`` improves; ``resume_from_checkpoint`` loads the
    latest before training."""

    def __init__(self, model_dir, model_prefix="model", monitor=None, verbose=0, save_best=False,
                 mode="auto", epoch_period=1, batch_period=None, max_checkpoints=5,
                 resume_from_checkpoint=False):
        self.monitor = monitor
        self.verbose = verbose
        os.makedirs(model_dir, exist_ok=True)
        self.model_dir = model_dir
        self.model_prefix = model_prefix
        self.save_best = save_best
        if self.save_best and not isinstance(self.monitor, EvalMetric):
            raise ValueError("To save best model only, please provide one of the metric objects "
                             "from estimator.train_metrics and estimator.val_metrics as monitor.")
        self.epoch_period = epoch_period
        self.batch_period = batch_period
        self.current_batch = 0
        self.current_epoch = 0
        self.max_checkpoints = max_checkpoints
        self.resume_from_checkpoint = resume_from_checkpoint
        self.saved_checkpoints = []
        self.trained_epoch = self.trained_batch = -1
        if self.save_best:
            self.monitor_op = _monitor_op(mode, monitor, "CheckpointHandler")
            self.best = numpy.inf if self.monitor_op is numpy.less else -numpy.inf

    def train_begin(self, estimator, *args, **kwargs):
        self.current_epoch = 0
        self.current_batch = 0
        if self.save_best:
            self.best = numpy.inf if self.monitor_op is numpy.less else -numpy.inf
        if self.resume_from_checkpoint:
            if (estimator.max_batch and (not self.batch_period or self.epoch_period)) or \
                    (estimator.max_epoch and (not self.epoch_period or self.batch_period)):
                raise ValueError("To use resume from checkpoint, you must only specify the same "
                                 "type of period you used for training. For example, if you are "
                                 "training based on number of epochs, you must save only based "
                                 "on epochs, and set batch_period to None.")
            self._resume_from_checkpoint(estimator)

    def batch_end(self, estimator, *args, **kwargs):
        if self.current_batch == 0:
            self._save_symbol(estimator)
        if self.batch_period and (self.current_batch + 1) % self.batch_period == 0:
            self._save_checkpoint(estimator)
        self.current_batch += 1

    def epoch_end(self, estimator, *args, **kwargs):
        if self.epoch_period and (self.current_epoch + 1) % self.epoch_period == 0:
            self._save_checkpoint(estimator)
        self.current_epoch += 1

    def _save_checkpoint(self, estimator):
        if self.resume_from_checkpoint and self.trained_epoch >= 0:
            save_epoch = self.current_epoch + self.trained_epoch + 1
            save_batch = self.current_batch + self.trained_batch + (0 if estimator.max_epoch
                                                                    else 1)
        else:
            save_epoch, save_batch = self.current_epoch, self.current_batch
        prefix = "%s-epoch%dbatch%d" % (self.model_prefix, save_epoch, save_batch)
        self._save_params_and_trainer(estimator, prefix)
        if self.verbose > 0:
            estimator.logger.info("[Epoch %d] CheckpointHandler: trained total %d batches, saving "
                                  "model at %s with prefix: %s", self.current_epoch,
                                  self.current_batch + 1, self.model_dir, prefix)
        if self.save_best:
            monitor_name, monitor_value = self.monitor.get()
            if numpy.isnan(monitor_value):
                warnings.warn(RuntimeWarning(
                    "Skipping save best because %s is not updated, make sure you pass one of "
                    "the metric objects estimator.train_metrics and estimator.val_metrics as "
                    "monitor" % monitor_name))
            elif self.monitor_op(monitor_value, self.best):
                previous, self.best = self.best, monitor_value
                self._save_params_and_trainer(estimator, self.model_prefix + "-best")
                if self.verbose > 0:
                    estimator.logger.info("[Epoch %d] CheckpointHandler: %s improved from %0.5f "
                                          "to %0.5f, updating best model at %s with prefix: %s",
                                          self.current_epoch, monitor_name, previous,
                                          monitor_value, self.model_dir,
                                          self.model_prefix + "-best")

    def _save_symbol(self, estimator):
        estimator.logger.info(
            "Model architecture (symbol file) is not saved by the CheckpointHandler here; "
            "HybridBlock.export writes it.")

    def _save_params_and_trainer(self, estimator, file_prefix):
        estimator.net.save_parameters(os.path.join(self.model_dir, file_prefix + ".params"))
        estimator.trainer.save_states(os.path.join(self.model_dir, file_prefix + ".states"))
        if not file_prefix.endswith("-best"):
            self.saved_checkpoints.append(file_prefix)
        while len(self.saved_checkpoints) > self.max_checkpoints:
            old = self.saved_checkpoints.pop(0)
            for suffix in (".params", ".states"):
                path = os.path.join(self.model_dir, old + suffix)
                if os.path.lexists(path):
                    os.remove(path)

    def _checkpoints_on_disk(self):
        pattern = re.compile(re.escape(self.model_prefix) + r"-epoch(\d+)batch(\d+)\.params$")
        found = []
        for name in os.listdir(self.model_dir):
            match = pattern.match(name)
            if match:
                found.append((int(match.group(1)), int(match.group(2))))
        return sorted(found)

    def _resume_from_checkpoint(self, estimator):
        found = self._checkpoints_on_disk()
        if not found:
            estimator.logger.info("CheckpointHandler: No checkpoint found, training from scratch "
                                  "for %s" % ("%d batches" % estimator.max_batch
                                              if estimator.max_batch
                                              else "%d epochs" % estimator.max_epoch))
            return
        self.saved_checkpoints = ["%s-epoch%dbatch%d" % ((self.model_prefix,) + f) for f in found]
        self.trained_epoch, self.trained_batch = found[-1]
        msg = ("CheckpointHandler: Checkpoint resumed from epoch %d batch %d, continue to train "
               "for " % (self.trained_epoch, self.trained_batch))
        if estimator.max_epoch:
            if self.trained_epoch >= estimator.max_epoch - 1:
                raise ValueError("Found checkpoint with maximum number of epoch %d reached, "
                                 "please specify resume_from_checkpoint=False (default value) if "
                                 "you want to train from scratch." % estimator.max_epoch)
            estimator.max_epoch = estimator.max_epoch - self.trained_epoch - 1
            msg += "%d epochs " % estimator.max_epoch
        if estimator.max_batch:
            if self.trained_batch >= estimator.max_batch - 1:
                raise ValueError("Found checkpoint with maximum number of batch %d reached, "
                                 "please specify resume_from_checkpoint=False (default value) if "
                                 "you want to train from scratch." % self.trained_batch)
            estimator.max_batch = estimator.max_batch - self.trained_batch - 1
            msg += "%d batches " % estimator.max_batch
        prefix = os.path.join(self.model_dir, "%s-epoch%dbatch%d" % (
            self.model_prefix, self.trained_epoch, self.trained_batch))
        for suffix in (".params", ".states"):
            if not os.path.isfile(prefix + suffix):
                raise ValueError("Failed to load checkpoint, %s does not exist" % (prefix + suffix))
        estimator.net.load_parameters(prefix + ".params", ctx=estimator.context)
        estimator.trainer.load_states(prefix + ".states")
        estimator.logger.warning(msg)


class EarlyStoppingHandler(TrainBegin, EpochEnd, TrainEnd):
    """Stops training when ``monitor`` has not improved by more than ``min_delta`` for
    ``patience`` epochs (or has not beaten ``baseline``)."""

    def __init__(self, monitor, min_delta=0, patience=0, mode="auto", baseline=None):
        if not isinstance(monitor, EvalMetric):
            raise ValueError("Please provide one of the metric objects from "
                             "estimator.train_metrics and estimator.val_metrics as monitor.")
        if isinstance(monitor, CompositeEvalMetric):
            raise ValueError("CompositeEvalMetric is not supported for EarlyStoppingHandler, "
                             "please specify a simple metric instead.")
        self.monitor = monitor
        self.baseline = baseline
        self.patience = patience
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        self.monitor_op = _monitor_op(mode, monitor, "EarlyStoppingHandler")
        self.min_delta = min_delta if self.monitor_op is numpy.greater else -min_delta

    def train_begin(self, estimator, *args, **kwargs):
        self.wait = 0
        self.stopped_epoch = 0
        self.current_epoch = 0
        self.stop_training = False
        if self.baseline is not None:
            self.best = self.baseline
        else:
            self.best = numpy.inf if self.monitor_op is numpy.less else -numpy.inf

    def epoch_end(self, estimator, *args, **kwargs):
        monitor_name, monitor_value = self.monitor.get()
        if math.isnan(monitor_value):
            warnings.warn(RuntimeWarning(
                "%s is not updated, make sure you pass one of the metric objects from "
                "estimator.train_metrics and estimator.val_metrics as monitor." % monitor_name))
        elif self.monitor_op(monitor_value - self.min_delta, self.best):
            self.best = monitor_value
            self.wait = 0
        else:
            self.wait += 1
            if self.wait >= self.patience:
                self.stopped_epoch = self.current_epoch
                self.stop_training = True
        self.current_epoch += 1
        return self.stop_training

    def train_end(self, estimator, *args, **kwargs):
        if self.stopped_epoch > 0:
            estimator.logger.info("[Epoch %d] EarlyStoppingHandler: early stopping due to %s not "
                                  "improving", self.stopped_epoch, self.monitor.get()[0])


class GradientUpdateHandler(BatchEnd):
    """``trainer.step(batch size)`` after each batch (the batch size: the losses' first axis)."""

    def __init__(self, priority=-2000):
        self.priority = priority

    def batch_end(self, estimator, *args, **kwargs):
        loss = kwargs["loss"]
        if not isinstance(loss, list):
            loss = [loss]
        estimator.trainer.step(sum(one.shape[0] for one in loss))
