"""``mx.metric``: evaluation metrics, defined in :mod:`trainer_cli.run.metrics` (see there)."""
from .run.metrics import (MAE, MSE, RMSE, F1, Accuracy, CrossEntropy, EvalMetric, Perplexity,
                          TopKAccuracy, create)

__all__ = ["EvalMetric", "Accuracy", "TopKAccuracy", "MAE", "MSE", "RMSE", "CrossEntropy",
           "Perplexity", "F1", "create"]
