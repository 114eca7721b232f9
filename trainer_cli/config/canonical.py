"""Rewriting accepted shorthand into the one form the schema validates, keeping positions.

Each section's ``normalize`` does the rewriting (the schema calls it too, so Python users get the
same shorthand); this module applies it through the whole tree and moves the recorded positions
along with the keys, and finds where an override's key path lands in the canonical form.
"""
from __future__ import annotations

from typing import get_args, get_origin

from .positions import PositionMap
from .walk import is_model, strip, union_member

__all__ = ["canonicalize", "canonical_path"]


def canonicalize(value, annotation, positions: PositionMap | None = None, path: tuple = ()):
    annotation, _ = strip(annotation)
    if is_model(annotation):
        normalize = getattr(annotation, "normalize", None)
        if normalize is not None:
            value, moves = normalize(value)
            if positions is not None and moves:
                positions.apply_moves(path, moves)
        if isinstance(value, dict):
            value = dict(value)
            for key, item in value.items():
                spec = annotation.model_fields.get(key)
                if spec is not None:
                    value[key] = canonicalize(item, spec.annotation, positions, path + (key,))
        return value
    if get_origin(annotation) in (list, tuple) and isinstance(value, list):
        item_type = (get_args(annotation) or (None,))[0]
        return [canonicalize(v, item_type, positions, path + (i,)) for i, v in enumerate(value)]
    if isinstance(value, dict) and get_args(annotation):
        member = union_member(annotation, value.get("type"))
        if member is not None:
            return canonicalize(value, member, positions, path)
    return value


class _Probe:
    """Stands for an override's value while finding where its key lands."""


def _find(tree, target, path=()):
    if tree is target:
        return path
    if isinstance(tree, dict):
        for k, v in tree.items():
            found = _find(v, target, path + (k,))
            if found is not None:
                return found
    return None


def canonical_path(root, parts) -> tuple:
    """Where the user's key path ``parts`` lives in the canonical tree.

    ``optimizer.lerning_rate`` -> ``('optimizer', 'params', 'lerning_rate')``;
    ``data.path`` -> ``('data', 'train', 'path')``; ``metrics.0.name`` -> ``('metrics', 0, 'name')``.
    Parts the schema does not know are kept as written, for validation to report.
    """
    annotation = root
    out: list = []
    for part in parts:
        annotation, _ = strip(annotation) if annotation is not None else (None, [])
        if is_model(annotation):
            probe = _Probe()
            normalized, _ = annotation.normalize({part: probe})
            rel = _find(normalized, probe) or (part,)
            for key in rel:
                out.append(key)
                annotation = _descend(annotation, key)
        elif get_origin(annotation) in (list, tuple):
            out.append(int(part) if str(part).lstrip("-").isdigit() else part)
            annotation = (get_args(annotation) or (None,))[0]
        elif get_origin(annotation) is dict:
            out.append(part)
            annotation = get_args(annotation)[1]
        else:
            out.append(part)
            annotation = None
    return tuple(out)


def _descend(annotation, key):
    annotation, _ = strip(annotation) if annotation is not None else (None, [])
    if is_model(annotation):
        spec = annotation.model_fields.get(key)
        return spec.annotation if spec is not None else None
    if get_origin(annotation) is dict:
        return get_args(annotation)[1]
    return None
