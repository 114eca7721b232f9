"""``gluon.contrib.estimator``: MXNet 1.9.1's ``Estimator`` (``fit``/``evaluate`` over DataLoaders)
and its event handlers, the Python-level counterpart of ``trainer run``."""
from . import batch_processor, estimator, event_handler
from .batch_processor import BatchProcessor
from .estimator import Estimator
from .event_handler import (BatchBegin, BatchEnd, CheckpointHandler, EarlyStoppingHandler,
                            EpochBegin, EpochEnd, EventHandler, GradientUpdateHandler,
                            LoggingHandler, MetricHandler, StoppingHandler, TrainBegin, TrainEnd,
                            ValidationHandler)

__all__ = ["Estimator", "BatchProcessor", "EventHandler", "TrainBegin", "TrainEnd", "EpochBegin",
           "EpochEnd", "BatchBegin", "BatchEnd", "StoppingHandler", "MetricHandler",
           "ValidationHandler", "LoggingHandler", "CheckpointHandler", "EarlyStoppingHandler",
           "GradientUpdateHandler"]
