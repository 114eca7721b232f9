"""``trainer validate``: a config, checked in full and resolved; ``--explain KEY``: where a key
got its value (a file and line, through includes; an override; a ``${...}``; or the default)."""
from __future__ import annotations

from ..config import ConfigError, ConfigIssue, load_config, resolved_dict

__all__ = ["validate_report", "explain_report"]


def validate_report(path, overrides=()) -> dict:
    """``{"config": RunConfig, "resolved": dict, "yaml": str}``; raises ``ConfigError`` with every
    problem at once."""
    config = load_config(path, overrides)
    return {"config": config, "resolved": resolved_dict(config), "yaml": config.resolved_yaml()}


def _flat_keys(value, prefix=()):
    if isinstance(value, dict):
        for k, v in value.items():
            yield prefix + (k,)
            yield from _flat_keys(v, prefix + (k,))


def explain_report(path, overrides, key: str) -> dict:
    """``{"key", "value", "source", "via"}`` for the dotted ``key`` of the resolved config."""
    from ..config.compose import lookup
    from ..config.suggest import did_you_mean

    trace: dict = {}
    config = load_config(path, overrides, trace=trace)
    resolved = resolved_dict(config)
    parts = tuple(int(p) if p.isdigit() else p for p in key.split("."))
    try:
        value = lookup(resolved, parts)
    except KeyError:
        known = [".".join(map(str, p)) for p in _flat_keys(resolved)]
        raise ConfigError([ConfigIssue("--explain: no key %r in the resolved config%s"
                                       % (key, did_you_mean(key, known)), file=str(path))]) from None
    positions = trace.get("positions")
    entry = positions.get(parts) if positions is not None else None
    if entry is None:
        source = "default (not set in any file or override)"
    elif entry.value.override is not None:
        source = "override %s" % entry.value.override
    else:
        place = entry.value
        source = "%s:%s:%s" % (place.file, place.line, place.column)
    origins = trace.get("origins", {})
    via = origins.get(parts) or (origins.get(tuple(entry.user_path)) if entry is not None else None) or []
    if entry is not None and entry.value.override is not None:
        via = []  # what the files said no longer counts
    return {"key": key, "value": value, "source": source, "via": list(via)}
