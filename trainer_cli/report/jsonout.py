"""Strict JSON for ``--json``: scripts parse stdout with any JSON library, so no NaN/Infinity."""
from __future__ import annotations

import json
import math

__all__ = ["dumps", "jsonable", "error_dict"]


def jsonable(value):
    """``value`` with non-finite floats as the strings "nan", "inf", "-inf" and tuples as lists."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return jsonable(value.item())
    return value


def dumps(value, indent=2) -> str:
    return json.dumps(jsonable(value), indent=indent, allow_nan=False)


def error_dict(exc) -> dict:
    """What ``--json`` prints for a failure, so that stdout is JSON even then."""
    out = {"error": str(exc), "type": type(exc).__name__}
    if hasattr(exc, "to_dict"):
        out.update(exc.to_dict())
    return out
