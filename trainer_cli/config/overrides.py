"""``-o key.path=value`` overrides: the value is YAML (``3``, ``[cpu:0, cpu:1]``, ``{name: sgd}``)
and replaces whatever the file had at that path; every problem cites the override's text."""
from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel

from .canonical import canonical_path
from .errors import ConfigIssue
from .positions import Entry, Place, PositionMap, dotted
from .suggest import show
from .walk import walk
from .yamlio import parse_yaml

__all__ = ["apply_overrides", "parse_override"]


def parse_override(text: str):
    """``(key parts, value, value positions, issues)`` of one ``key.path=value`` string."""
    label = f"-o {text}"
    key, sep, raw = text.partition("=")
    parts = tuple(p.strip() for p in key.strip().split("."))
    if not sep or not key.strip():
        return None, None, None, [ConfigIssue("expected key.path=value, e.g. -o epochs=3",
                                              override=label)]
    if any(not p for p in parts):
        return None, None, None, [ConfigIssue(f"expected a dotted key path, got {key.strip()!r}",
                                              override=label)]
    value, positions, issues = parse_yaml(raw, override=label)
    # Problems inside the value are named from the override's key down.
    issues = [replace(i, key=".".join(p for p in (dotted(parts), i.key) if p)) for i in issues]
    return parts, value, positions, issues


def apply_overrides(data: dict, positions: PositionMap, overrides, root) -> list[ConfigIssue]:
    """Apply each override in order to the canonical ``data`` in place; return their problems."""
    issues: list[ConfigIssue] = []
    for text in overrides:
        parts, value, value_positions, problems = parse_override(text)
        if problems:
            issues += problems
            continue
        problem = _set(root, data, positions, canonical_path(root, parts), parts, value,
                       value_positions, f"-o {text}")
        if problem:
            issues.append(ConfigIssue(problem, key=dotted(parts), override=f"-o {text}"))
    return issues


def _set(root, data, positions: PositionMap, path, user_path, value, value_positions,
         label) -> str | None:
    place = Place(override=label)
    node = data
    walked: tuple = ()
    for depth, key in enumerate(path):
        last = depth == len(path) - 1
        if isinstance(node, list):
            index = _index(key, len(node))
            if index is None:
                return f"no item {key} in {dotted(walked) or 'the config'}, which has {len(node)} items"
            key = index
        elif not isinstance(node, dict):
            return (f"cannot set {dotted(path[depth:])!r} inside {dotted(walked)}, "
                    f"which is {show(node)}")
        walked += (key,)
        if last:
            node[key] = value
            positions.drop_under(walked)
            positions.set(walked, Entry(place, place, tuple(user_path)))
            for rel, entry in value_positions.items():
                positions.set(walked + rel, Entry(place, place, tuple(user_path) + rel))
            return None
        if isinstance(node, dict) and node.get(key) is None:
            node[key] = _default_mapping(root, walked)
            # Name the created key as the user did when no shorthand moved it.
            shown = user_path[:depth + 1] if len(path) == len(user_path) else user_path
            positions.set(walked, Entry(place, place, tuple(shown)))
        node = node[key]
    return None


def _default_mapping(root, path):
    """What an absent section stands for, so ``-o optimizer.params.momentum=0.9`` without an
    optimizer section tunes the default optimizer instead of asking for its name."""
    target = walk(root, path)
    if target.parent is None or not path:
        return {}
    spec = target.parent.model_fields.get(path[-1])
    default = spec.get_default(call_default_factory=True) if spec is not None else None
    if isinstance(default, BaseModel):
        return default.model_dump(mode="json")
    if isinstance(default, list):
        return list(default)
    return {}


def _index(key, length) -> int | None:
    try:
        index = int(key)
    except (TypeError, ValueError):
        return None
    return index if -length <= index < length else None
