"""Following a path through the schema's types: which model owns a key, what a value must be."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel

from .describe import is_union, non_null, unwrap

__all__ = ["Target", "walk", "strip", "is_model", "union_member"]


def strip(annotation, metadata=()):
    """The annotation without ``Annotated`` and ``Optional`` wrappers, and its metadata."""
    annotation, metadata = unwrap(annotation, metadata)
    inner = non_null(annotation)
    if inner is not annotation:
        annotation, metadata = unwrap(inner, metadata)
    return annotation, metadata


def is_model(annotation) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def union_member(annotation, tag):
    """The member of a discriminated union whose ``type`` literal is ``tag``."""
    for member in get_args(annotation):
        member, _ = unwrap(member)
        if is_model(member) and "type" in member.model_fields:
            literal = member.model_fields["type"].annotation
            if get_origin(literal) is Literal and tag in get_args(literal):
                return member
    return None


@dataclass
class Target:
    path: tuple  # the location without pydantic's union tags
    annotation: Any = None  # what the value there must be; None when unknown
    metadata: list = field(default_factory=list)
    parent: type | None = None  # the model owning the last key
    description: str | None = None  # the field's description, when the path ends at a field


def walk(root, loc) -> Target:
    annotation, metadata = root, []
    path: list = []
    parent = None
    description = None
    items = [i for i in loc if not (isinstance(i, str) and i.startswith("[") and i.endswith("]"))]
    i = 0
    while i < len(items):
        item = items[i]
        i += 1
        if annotation is None:
            path.append(item)
            continue
        annotation, metadata = strip(annotation, metadata)
        description = None
        if is_model(annotation):
            parent = annotation
            path.append(item)
            spec = annotation.model_fields.get(item) if isinstance(item, str) else None
            annotation, metadata = (spec.annotation, list(spec.metadata)) if spec else (None, [])
            description = spec.description if spec else None
        elif is_union(annotation):
            member = union_member(annotation, item)
            if member is not None:  # pydantic puts the tag into the location; users never wrote it
                annotation, metadata = member, []
            else:
                path.append(item)
                annotation, metadata = None, []
        elif get_origin(annotation) in (list, tuple):
            path.append(item)
            annotation, metadata = (get_args(annotation) or (None,))[0], []
        elif get_origin(annotation) is dict:
            path.append(item)
            annotation, metadata = get_args(annotation)[1], []
        else:
            path.append(item)
            annotation, metadata = None, []
    return Target(tuple(path), annotation, metadata, parent, description)
