"""``trainer validate``: a config, checked in full and resolved."""
from __future__ import annotations

from ..config import load_config, resolved_dict

__all__ = ["validate_report"]


def validate_report(path, overrides=()) -> dict:
    """``{"config": RunConfig, "resolved": dict, "yaml": str}``; raises ``ConfigError`` with every
    problem at once."""
    config = load_config(path, overrides)
    return {"config": config, "resolved": resolved_dict(config), "yaml": config.resolved_yaml()}
