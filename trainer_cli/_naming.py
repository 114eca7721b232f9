"""How a class name becomes a config name, shared by the registries and the config layer."""
from __future__ import annotations

import re

__all__ = ["snake_case"]

_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """``SoftmaxCrossEntropy`` -> ``softmax_cross_entropy``, ``TopKAccuracy`` -> ``top_k_accuracy``."""
    return _BOUNDARY.sub("_", name).lower()
