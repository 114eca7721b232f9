"""What every config section shares: unknown keys are errors, types are not coerced, shorthand
forms are normalized once, and problems are raised where they are."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar

import annotated_types as at
from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, ValidationError, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from ..suggest import choice_message

__all__ = ["Section", "Shorthand", "problem", "detail", "fail", "choice_problem", "named_shorthand",
           "spelling_details", "ctx_value"]

Moves = list  # [(old relative path, new relative path)], see PositionMap.apply_moves


def problem(message: str, where: str = "value") -> PydanticCustomError:
    """An error at the current location. ``where`` says whether to point at the key or value."""
    return PydanticCustomError("config", "{message}", {"message": message, "where": where})


def detail(loc: tuple, message: str, value: Any = None, where: str = "value") -> InitErrorDetails:
    return InitErrorDetails(type=problem(message, where), loc=tuple(loc), input=value)


def fail(title: str, details: list[InitErrorDetails]):
    """Raise several errors at once, each at its own location below the current one."""
    raise ValidationError.from_exception_data(title, details)


def choice_problem(value, choices, what: str = "value") -> PydanticCustomError:
    return problem(choice_message(value, choices, what))


def ctx_value(info, key: str, default=None):
    context = info.context if info is not None else None
    return context.get(key, default) if isinstance(context, dict) else default


def named_shorthand(raw, key: str) -> tuple[Any, Moves]:
    """``adam`` -> ``{key: adam}``; the other spelling of ``name``/``type`` -> ``key``."""
    if isinstance(raw, str):
        return {key: raw}, [((), (key,))]
    if not isinstance(raw, dict):
        return raw, []
    other = "type" if key == "name" else "name"
    if other in raw and key not in raw:
        raw = {(key if k == other else k): v for k, v in raw.items()}
        return raw, [((other,), (key,))]
    return raw, []


def spelling_details(raw, key: str) -> list[InitErrorDetails]:
    """An error when a mapping gives both ``name`` and ``type``."""
    other = "type" if key == "name" else "name"
    if isinstance(raw, dict) and other in raw and key in raw:
        return [detail((other,), f"give either '{key}' or '{other}', not both", raw[other], "key")]
    return []


class Section(BaseModel):
    """Base of every config section."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False,
                              validate_default=False, use_attribute_docstrings=True)

    # Text for "expected ..." when the section is given as the wrong kind of value.
    expect_text: ClassVar[str] = "a mapping"

    @classmethod
    def normalize(cls, raw) -> tuple[Any, Moves]:
        """Rewrite accepted shorthand into the canonical form, saying which keys moved where.

        Pure and tolerant of anything: validation, not this, reports what is wrong. The config
        loader uses the moves to keep file positions attached to the keys that moved.
        """
        return raw, []

    @classmethod
    def precheck(cls, raw) -> None:
        """Problems with the shape of the (normalized) input that validation would garble."""

    @model_validator(mode="before")
    @classmethod
    def _normalize(cls, raw):
        raw, _ = cls.normalize(raw)
        cls.precheck(raw)
        return raw


class Shorthand:
    """JSON-schema marker: the section may also be written as a plain string (its name)."""

    def __init__(self, what: str = "name"):
        self.what = what

    def __get_pydantic_json_schema__(self, core_schema, handler: GetJsonSchemaHandler):
        schema = handler(core_schema)
        return {"anyOf": [{"type": "string", "description": f"shorthand for {{{self.what}: ...}}"},
                          schema]}


# NumPy's legacy generator (mxnet.random.seed's rule) takes seeds in [0, 2**32); checked here so
# that ``validate`` refuses what ``run`` could not use.
Seed = Annotated[int, at.Ge(0), at.Le(2**32 - 1)]
