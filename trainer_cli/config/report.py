"""Turning pydantic's validation errors into ``ConfigIssue``s a user can act on: the position of
the offending key or value, the dotted key as written, what was expected, a did-you-mean."""
from __future__ import annotations

import re
from functools import lru_cache
from typing import get_args, get_origin

from pydantic import ValidationError

from .describe import describe, literal_choices
from .errors import ConfigIssue
from .positions import PositionMap, dotted
from .suggest import choice_list, choice_message, closest, did_you_mean, show
from .walk import Target, is_model, strip, walk

__all__ = ["issues_from_validation"]

_TYPE_ERRORS = {"model_type", "model_attributes_type", "dict_type", "list_type", "string_type",
                "int_type", "float_type", "bool_type", "int_from_float", "greater_than",
                "greater_than_equal", "less_than", "less_than_equal", "too_short", "too_long",
                "string_too_short", "string_too_long", "finite_number", "int_parsing",
                "float_parsing", "bool_parsing", "none_required", "is_instance_of"}


def issues_from_validation(exc: ValidationError, root, positions: PositionMap | None,
                           file: str | None) -> list[ConfigIssue]:
    out: list[ConfigIssue] = []
    seen = set()
    errors = exc.errors(include_url=False)
    misspelled = {tuple(err["loc"][:-1]) + loc: err for err in errors if err["type"] == "missing"
                  for loc in [_misspelling(err)] if loc is not None}
    for err in errors:
        if err["type"] == "extra_forbidden" and tuple(err["loc"]) in misspelled:
            continue  # said once, by the missing key it stands for
        issue = _issue(err, root, positions, file)
        marker = (issue.location, issue.key, issue.message)
        if marker not in seen:
            seen.add(marker)
            out.append(issue)
    return out


def _misspelling(err: dict):
    """Where a missing required key was written misspelled (``{nmae: sgd}``), relative to its
    section; shorthand may have moved the misspelling under ``params``. None if nowhere."""
    section, key = err.get("input"), err["loc"][-1] if err["loc"] else None
    if not isinstance(section, dict) or not isinstance(key, str):
        return None
    written = [(k,) for k in section if isinstance(k, str)]
    if isinstance(section.get("params"), dict):
        written += [("params", k) for k in section["params"] if isinstance(k, str)]
    return next((loc for loc in written if loc[-1] != key and closest(loc[-1], [key]) == key), None)


def _issue(err: dict, root, positions, file) -> ConfigIssue:
    target = walk(root, err["loc"])
    path, kind, ctx, value = target.path, err["type"], err.get("ctx") or {}, err.get("input")
    where = "value"
    if kind == "missing":
        key = path[-1] if path else ""
        expected = describe(target.annotation, target.metadata) if target.annotation else None
        if expected in ("a string", "a mapping", "a value") and target.description:
            expected = target.description
        typo = _misspelling(err)
        if typo is not None:
            return _placed(f"unknown key; did you mean {key!r}? (the required key {key!r} is "
                           f"missing" + (f": {expected})" if expected else ")"),
                           path[:-1] + typo, "key", positions, file)
        message = f"missing required key {key!r}" + (f" ({expected})" if expected else "")
        return _placed(message, path[:-1], "key", positions, file)
    if kind == "extra_forbidden":
        key = path[-1] if path else ""
        fields = list(target.parent.model_fields) if target.parent is not None else []
        hint = (did_you_mean(key, fields) or _other_variant(path, target.parent, root)
                or _elsewhere(key, path, root)
                or (f" (valid keys: {choice_list(fields)})" if fields else ""))
        return _placed("unknown key" + hint, path, "key", positions, file)
    if kind == "union_tag_invalid":
        choices = re.findall(r"'([^']*)'", str(ctx.get("expected_tags", "")))
        return _placed(choice_message(ctx.get("tag"), choices, "type"), path + ("type",), "value",
                       positions, file)
    if kind == "union_tag_not_found":
        tags = choice_list(_union_tags(target))
        # ``tyne: csv``: the misspelled key is the real mistake; name it where it was written.
        typo = next((k for k in value if isinstance(k, str) and did_you_mean(k, ["type"])), None) \
            if isinstance(value, dict) else None
        if typo is not None:
            return _placed(f"unknown key{did_you_mean(typo, ['type'])} (the required key 'type' "
                           f"is missing: one of {tags})", path + (typo,), "key", positions, file)
        return _placed(f"missing required key 'type' (one of {tags})", path, "key",
                       positions, file)
    if kind == "config":
        message, where = ctx.get("message", err["msg"]), ctx.get("where", "value")
    elif kind in ("literal_error", "enum"):
        choices = literal_choices(target.annotation) if target.annotation is not None else None
        choices = choices or re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        message = choice_message(value, choices)
    elif kind == "too_short" and not value:
        n = ctx.get("min_length", 1)
        message = f"expected at least {n} item{'s' if n != 1 else ''}, got {show(value)}"
    elif kind in _TYPE_ERRORS and target.annotation is not None:
        message = f"expected {describe(target.annotation, target.metadata)}, got {show(value)}"
    else:
        message = _plain(err["msg"])
    return _placed(message, path, where, positions, file)


def _elsewhere(key, path: tuple, root) -> str:
    """A did-you-mean for a key put in the wrong section: ``batch_size`` at the top level."""
    if not isinstance(key, str):
        return ""
    paths = schema_paths(root)
    here = tuple(path[:-1])
    exact = [p for p in paths if p[-1] == key and p[:-1] != here]
    close = exact or [p for p in paths if p[:-1] != here and closest(key, [p[-1]]) is not None]
    if not close:
        return ""
    # Prefer the place nearest to where the key was written, then the shortest path.
    best = min(close, key=lambda p: (-_shared(p, here), len(p), dotted(p)))
    return f"; did you mean {dotted(best)!r}?"


def _other_variant(path: tuple, parent, root) -> str:
    """For a key that another ``type`` of the same section accepts (``path`` on synthetic data)."""
    spec = getattr(parent, "model_fields", {}).get("type")
    if spec is None or tuple(path) not in schema_paths(root):
        return ""
    tags = get_args(spec.annotation)
    return f" for type {tags[0]}; other types take it" if len(tags) == 1 else ""


def _shared(a, b) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


@lru_cache(maxsize=None)
def schema_paths(root) -> tuple:
    """Every key path the schema knows, down through sections, datasets and common params."""
    out = []

    def visit(annotation, prefix, depth):
        annotation, _ = strip(annotation)
        if depth > 4:
            return
        if is_model(annotation):
            for name, spec in annotation.model_fields.items():
                out.append(prefix + (name,))
                visit(spec.annotation, prefix + (name,), depth + 1)
            for name in getattr(annotation, "types", {}) if "params" in annotation.model_fields else ():
                out.append(prefix + ("params", name))
        elif get_origin(annotation) is list:
            visit(get_args(annotation)[0], prefix, depth + 1)
        else:
            for member in get_args(annotation):
                member, _ = strip(member)
                if is_model(member):
                    visit(member, prefix, depth + 1)

    visit(root, (), 0)
    return tuple(dict.fromkeys(out))


def _union_tags(target: Target) -> list:
    annotation, _ = strip(target.annotation) if target.annotation is not None else (None, [])
    tags = []
    for member in get_args(annotation) if annotation is not None else ():
        member, _ = strip(member)
        fields = getattr(member, "model_fields", {})
        if "type" in fields:
            tags += list(get_args(fields["type"].annotation))
    return tags


def _plain(msg: str) -> str:
    # Pydantic's phrasing, reworded for someone who wrote YAML rather than Python.
    msg = re.sub(r"^Value error, ", "", msg)
    msg = re.sub(r"^Assertion failed, ", "", msg)
    msg = re.sub(r"^Input should be ", "expected ", msg)
    return msg.replace("dictionary", "mapping").replace("Input ", "value ")


def _placed(message: str, path: tuple, where: str, positions: PositionMap | None,
            file: str | None) -> ConfigIssue:
    if positions is None:
        return ConfigIssue(message, key=dotted(path), file=file)
    found, entry = positions.find(path)
    if entry is None:
        return ConfigIssue(message, key=dotted(path), file=file)
    shown = entry.user_path + tuple(path[len(found):]) if where != "key" or found == path else entry.user_path
    # A key the user did not write (a default, a missing key) is best pointed at by its parent's key.
    use_key = where == "key" or found != tuple(path)
    place = entry.key if use_key and entry.key is not None else entry.value
    return ConfigIssue(message, key=dotted(shown), file=place.file if place.override is None else None,
                       line=place.line, column=place.column, override=place.override)
