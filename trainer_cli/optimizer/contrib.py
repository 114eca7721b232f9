"""``optimizer.contrib``: where MXNet 1.9 keeps GroupAdaGrad."""
from .adagrad import GroupAdaGrad

__all__ = ["GroupAdaGrad"]
