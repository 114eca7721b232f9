"""Plain-words descriptions of what a schema field expects: "a number > 0", "one of keep, ..."."""
from __future__ import annotations

import types
from typing import Annotated, Literal, Union, get_args, get_origin

import annotated_types as at
from pydantic import BaseModel

__all__ = ["Expect", "describe", "literal_choices", "unwrap", "non_null", "is_union"]


class Expect:
    """Annotation metadata giving the description outright, for fields with custom validation."""

    def __init__(self, text: str):
        self.text = text

    def __repr__(self):
        return f"Expect({self.text!r})"


def unwrap(annotation, metadata=()):
    """Strip ``Annotated`` layers, collecting their metadata."""
    metadata = list(metadata)
    while get_origin(annotation) is Annotated:
        args = get_args(annotation)
        annotation, metadata = args[0], list(args[1:]) + metadata
    return annotation, metadata


def is_union(annotation) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def non_null(annotation):
    """``X`` for ``Optional[X]``; the annotation itself otherwise."""
    if is_union(annotation):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return members[0]
    return annotation


def literal_choices(annotation) -> list | None:
    annotation, _ = unwrap(annotation)
    annotation = non_null(annotation)
    annotation, _ = unwrap(annotation)
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    return None


def _bounds(metadata) -> str:
    parts = []
    for m in metadata:
        for kind, attr, sign in ((at.Gt, "gt", ">"), (at.Ge, "ge", ">="), (at.Lt, "lt", "<"),
                                 (at.Le, "le", "<=")):
            if isinstance(m, kind):
                parts.append(f"{sign} {getattr(m, attr)}")
        if isinstance(m, at.MinLen) and m.min_length:
            parts.append(f"with at least {m.min_length} item{'s' if m.min_length > 1 else ''}")
    return " and ".join(parts)


def describe(annotation, metadata=()) -> str:
    """What a value of this annotation looks like, in words a YAML user knows."""
    annotation, metadata = unwrap(annotation, metadata)
    for m in metadata:
        if isinstance(m, Expect):
            return m.text
    if is_union(annotation):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return describe(members[0], metadata)
        else:
            return " or ".join(describe(m) for m in members)
    bounds = _bounds(metadata)
    origin = get_origin(annotation)
    if origin is Literal:
        text = "one of " + ", ".join(str(c) for c in get_args(annotation))
    elif annotation is bool:
        text = "true or false"
    elif annotation is int:
        text = "an integer"
    elif annotation is float:
        text = "a number"
    elif annotation is str:
        text = "a string" if not bounds else "a non-empty string"
        bounds = ""
    elif origin in (list, tuple) or annotation in (list, tuple):
        args = get_args(annotation)
        text = "a list" + (f" of {_plural(describe(args[0]))}" if args else "")
    elif origin is dict or annotation is dict:
        text = "a mapping"
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
        text = getattr(annotation, "expect_text", None) or "a mapping"
    else:
        text = "a value"
    if bounds:
        text += " " + bounds
    # "or null" is left out: for an optional key, null only means "not set", which a user who
    # wrote a wrong value is not asking about.
    return text


def _plural(text: str) -> str:
    # "an integer >= 1" -> "integers >= 1"; longer descriptions stay whole after "a list of".
    for article in ("an ", "a "):
        if text.startswith(article):
            head, _, rest = text[len(article):].partition(" ")
            if not rest or rest[0] in "<>=":
                return (head + "s " + rest).strip()
    return text
