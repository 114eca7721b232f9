"""MXNet 1.9.1's ``Estimator``: ``fit`` trains ``net`` on a DataLoader for a number of epochs or
batches, the event handlers doing the updates, metrics, validation, logging, checkpoints and
early stopping; ``evaluate`` runs the validation metrics over a DataLoader."""
from __future__ import annotations

import copy
import logging
import sys
import warnings

from ....context import Context, cpu, gpu, num_gpus
from ....metric import Loss as MetricLoss
from ...data import DataLoader
from ...loss import Loss as GluonLoss
from .batch_processor import BatchProcessor
from .event_handler import (BatchBegin, BatchEnd, EpochBegin, EpochEnd, GradientUpdateHandler,
                            LoggingHandler, MetricHandler, StoppingHandler, TrainBegin, TrainEnd,
                            ValidationHandler, _check_event_handlers)
from .utils import _check_handler_metric_ref, _check_metrics, _suggest_metric_for_loss

__all__ = ["Estimator"]


class Estimator:
    """Trains ``net`` with ``loss`` and ``trainer`` (SGD at 0.001 when None) on ``context``;
    ``train_metrics`` default to accuracy (for a softmax cross-entropy loss) and the mean loss,
    named ``training ...``; ``val_metrics`` to copies of them named ``validation ...``."""

    logger = None

    def __init__(self, net, loss, train_metrics=None, val_metrics=None, initializer=None,
                 trainer=None, context=None, val_net=None, val_loss=None, batch_processor=None):
        self.net = net
        self.loss = self._check_loss(loss)
        self._train_metrics = _check_metrics(train_metrics)
        self._val_metrics = _check_metrics(val_metrics)
        self._add_default_training_metrics()
        self._add_validation_metrics()
        self.val_loss = self._check_loss(val_loss) if val_loss is not None else self.loss
        self.val_net = val_net if val_net is not None else self.net
        self.logger = logging.Logger(name="Estimator", level=logging.INFO)
        self.logger.addHandler(logging.StreamHandler(sys.stdout))
        self.context = self._check_context(context)
        self._initialize(initializer)
        self.trainer = self._check_trainer(trainer)
        self.batch_processor = self._check_batch_processor(batch_processor)
        self.max_epoch = self.max_batch = None
        self.batch_axis = 0

    @staticmethod
    def _check_loss(loss):
        if not isinstance(loss, GluonLoss):
            raise ValueError("loss must be a Loss, refer to gluon.loss.Loss:{}".format(loss))
        return loss

    @staticmethod
    def _check_context(context):
        gpus = num_gpus()
        available = [gpu(i) for i in range(gpus)]
        if context:
            if isinstance(context, Context):
                context = [context]
            elif not (isinstance(context, list) and all(isinstance(c, Context) for c in context)):
                raise ValueError("context must be a Context or a list of Context, for example "
                                 "mx.cpu() or [mx.gpu(0), mx.gpu(1)], refer to "
                                 "mxnet.Context:{}".format(context))
            for ctx in context:
                if not (ctx in available or str(ctx).startswith("cpu")):
                    raise ValueError("%s is not available, please make sure your context is in "
                                     "one of: mx.cpu(), %s"
                                     % (ctx, ", ".join(str(c) for c in available)))
            return context
        if gpus > 1:
            warnings.warn("You have multiple GPUs, gpu(0) will be used by default. To utilize "
                          "all your GPUs, specify context as a list of gpus, e.g. "
                          "context=[mx.gpu(0), mx.gpu(1)] ")
        return [gpu(0)] if gpus > 0 else [cpu()]

    @staticmethod
    def _check_batch_processor(batch_processor):
        if batch_processor is None:
            return BatchProcessor()
        if not callable(getattr(batch_processor, "fit_batch", None)) or \
                not callable(getattr(batch_processor, "evaluate_batch", None)):
            raise ValueError("Customized Batch Processor must contain fit_batch() and "
                             "evaluate_batch() methods")
        return batch_processor

    def _initialize(self, initializer):
        if not self._is_initialized():
            if initializer:
                self.net.initialize(init=initializer, ctx=self.context)
            else:
                self.net.initialize(ctx=self.context)
        elif initializer:
            warnings.warn("Network already fully initialized, skipping initialization. You don't "
                          "need to pass initializer if you already initialized your net. You can "
                          "use net.initialize(init=your_initializer, force_reinit=True) to force "
                          "re-initialize.")

    def _check_trainer(self, trainer):
        from ...trainer import Trainer
        if not trainer:
            warnings.warn("No trainer specified, default SGD optimizer with learning rate 0.001 "
                          "is used.")
            return Trainer(self.net.collect_params(), "sgd", {"learning_rate": 0.001})
        if not isinstance(trainer, Trainer):
            raise ValueError("Trainer must be a Gluon Trainer instance, refer to "
                             "gluon.Trainer:{}".format(trainer))
        return trainer

    def _is_initialized(self):
        params = self.net.collect_params()
        for name in params:
            try:
                params[name].list_ctx()
            except RuntimeError:
                return False
        return True

    def _add_default_training_metrics(self):
        if not self._train_metrics:
            suggested = _suggest_metric_for_loss(self.loss)
            if suggested:
                self._train_metrics = [suggested]
            self._train_metrics.append(MetricLoss(self.loss.name.rstrip("1234567890")))
        for metric in self._train_metrics:
            metric.name = "training " + metric.name

    def _add_validation_metrics(self):
        if not self._val_metrics:
            self._val_metrics = [copy.deepcopy(metric) for metric in self._train_metrics]
        for metric in self._val_metrics:
            if "training" in metric.name:
                metric.name = metric.name.replace("training", "validation")
            else:
                metric.name = "validation " + metric.name

    @property
    def train_metrics(self):
        return self._train_metrics

    @property
    def val_metrics(self):
        return self._val_metrics

    def evaluate(self, val_data, batch_axis=0, event_handlers=None):
        """Run the validation metrics over ``val_data`` (a DataLoader)."""
        if not isinstance(val_data, DataLoader):
            raise ValueError("Estimator only support input as Gluon DataLoader. Alternatively, "
                             "you can transform your DataIter or any NDArray into Gluon "
                             "DataLoader. Refer to gluon.data.DataLoader")
        for metric in self.val_metrics:
            metric.reset()
        handlers = self._prepare_default_validation_handlers(event_handlers)
        _, epoch_begin, batch_begin, batch_end, epoch_end, _ = self._categorize_handlers(handlers)
        for handler in epoch_begin:
            handler.epoch_begin(self)
        for batch in val_data:
            for handler in batch_begin:
                handler.batch_begin(self, batch=batch)
            _, label, pred, loss = self.batch_processor.evaluate_batch(self, batch, batch_axis)
            for handler in batch_end:
                handler.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
        for handler in epoch_end:
            handler.epoch_end(self)

    def fit(self, train_data, val_data=None, epochs=None, event_handlers=None, batches=None,
            batch_axis=0):
        """Train on ``train_data`` (a DataLoader) for ``epochs`` epochs or ``batches`` batches
        (exactly one of them), validating on ``val_data`` after each epoch when given."""
        if not isinstance(train_data, DataLoader):
            raise ValueError("Estimator only support input as Gluon DataLoader. Alternatively, "
                             "you can transform your DataIter or any NDArray into Gluon "
                             "DataLoader. Refer to gluon.data.dataloader")
        if (not epochs) == (not batches):
            raise ValueError("Fit only support exactly one type of iteration, train by number of "
                             "epochs or number of batches. Please specify one and only one of: "
                             "epochs or batches.")
        self.max_epoch = epochs
        self.max_batch = batches
        self.batch_axis = batch_axis
        handlers = self._prepare_default_handlers(val_data, event_handlers)
        train_begin, epoch_begin, batch_begin, batch_end, epoch_end, train_end = \
            self._categorize_handlers(handlers)
        for handler in train_begin:
            handler.train_begin(self)
        while True:
            for handler in epoch_begin:
                handler.epoch_begin(self)
            for batch in train_data:
                for handler in batch_begin:
                    handler.batch_begin(self, batch=batch)
                _, label, pred, loss = self.batch_processor.fit_batch(self, batch, batch_axis)
                # every handler sees the batch's end, even after one asked to stop
                stop = [handler.batch_end(self, batch=batch, pred=pred, label=label, loss=loss)
                        for handler in batch_end]
                if any(stop):
                    break
            stop = [handler.epoch_end(self) for handler in epoch_end]
            if any(stop):
                break
        for handler in train_end:
            handler.train_end(self)

    def _prepare_default_handlers(self, val_data, event_handlers):
        event_handlers = _check_event_handlers(event_handlers)
        added = [StoppingHandler(self.max_epoch, self.max_batch)]
        if not any(isinstance(h, GradientUpdateHandler) for h in event_handlers):
            added.append(GradientUpdateHandler())
        if not any(isinstance(h, MetricHandler) for h in event_handlers):
            added.append(MetricHandler(metrics=self.train_metrics))
        if not any(isinstance(h, ValidationHandler) for h in event_handlers) and val_data:
            added.append(ValidationHandler(val_data=val_data, eval_fn=self.evaluate))
        if not any(isinstance(h, LoggingHandler) for h in event_handlers):
            added.append(LoggingHandler(metrics=self.train_metrics))
        mixing = event_handlers and added
        event_handlers.extend(added)
        if mixing:
            known = set(self.train_metrics + self.val_metrics)
            for handler in event_handlers:
                _check_handler_metric_ref(handler, known)
        event_handlers.sort(key=lambda handler: getattr(handler, "priority", 0))
        return event_handlers

    def _prepare_default_validation_handlers(self, event_handlers):
        event_handlers = _check_event_handlers(event_handlers)
        added = []
        if not any(isinstance(h, MetricHandler) for h in event_handlers):
            added.append(MetricHandler(metrics=self.val_metrics))
        if not any(isinstance(h, LoggingHandler) for h in event_handlers):
            added.append(LoggingHandler(metrics=self.val_metrics))
        mixing = event_handlers and added
        event_handlers.extend(added)
        if mixing:
            known = set(self.val_metrics)
            for handler in event_handlers:
                _check_handler_metric_ref(handler, known)
        event_handlers.sort(key=lambda handler: getattr(handler, "priority", 0))
        return event_handlers

    @staticmethod
    def _categorize_handlers(event_handlers):
        kinds = (TrainBegin, EpochBegin, BatchBegin, BatchEnd, EpochEnd, TrainEnd)
        return tuple([h for h in event_handlers if isinstance(h, kind)] for kind in kinds)
