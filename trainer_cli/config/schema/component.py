"""A library object chosen by name, with keyword arguments for its constructor.

Optimizers, schedulers, losses, metrics and initializers are all written the same ways::

    optimizer: adam
    optimizer: {name: adam, learning_rate: 0.001}         # type: is accepted for name:
    optimizer: {name: adam, params: {learning_rate: 0.001}}

and all normalize to the last form (``type`` instead of ``name`` for the scheduler).
"""
from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from ..suggest import did_you_mean
from .base import Section, choice_problem, detail, fail, named_shorthand, spelling_details
from .hyperparams import check_value


class Component(Section):
    key: ClassVar[str] = "name"  # the canonical spelling of the chooser key
    what: ClassVar[str] = "component"  # used in messages: "unknown optimizer 'adm'"
    choices: ClassVar = staticmethod(lambda: [])  # valid names, from the library
    spec: ClassVar = staticmethod(lambda name: None)  # names.ParamSpec of a name, or None
    types: ClassVar[dict] = {}  # hyperparams table of value types
    reserved: ClassVar[dict] = {}  # argument -> why a config may not set it

    @classmethod
    def normalize(cls, raw):
        raw, moves = named_shorthand(raw, cls.key)
        if not isinstance(raw, dict):
            return raw, moves
        params = raw.get("params", {})
        if not isinstance(params, dict):
            return raw, moves
        keep = {cls.key, "params", "type" if cls.key == "name" else "name"}
        flat = [k for k in raw if k not in keep and k not in params]
        if not flat:
            return raw, moves
        params = dict(params)
        out = {}
        for k, v in raw.items():
            if k in flat:
                params[k] = v
                moves.append(((k,), ("params", k)))
            elif k != "params":
                out[k] = v
        out["params"] = params
        return out, moves

    @classmethod
    def precheck(cls, raw):
        if not isinstance(raw, dict):
            return
        other = "type" if cls.key == "name" else "name"
        details = spelling_details(raw, cls.key)
        params = raw.get("params")
        if isinstance(params, dict):
            for k in raw:
                if k in params and k not in (cls.key, other, "params"):
                    details.append(detail((k,), f"'{k}' is given both here and under params",
                                          raw[k], "key"))
        if details:
            fail(cls.__name__, details)

    @classmethod
    def check_name(cls, value):
        if not isinstance(value, str):
            return value  # the str type check reports it
        choices = cls.choices()
        lowered = value.lower()
        if lowered not in choices:
            raise choice_problem(value, choices, cls.what)
        return lowered

    @classmethod
    def check_params(cls, name, params: dict) -> dict:
        """Every unknown, reserved, missing or ill-typed argument, each at its own key."""
        details = []
        spec = cls.spec(name) if name is not None else None
        for key, value in params.items():
            if key in cls.reserved:
                details.append(detail((key,), f"cannot be set here: {cls.reserved[key]}", value, "key"))
                continue
            if spec is not None and spec.accepted is not None and key not in spec.accepted:
                valid = sorted(set(spec.accepted) - set(cls.reserved))
                hint = did_you_mean(key, valid) or f" (valid: {', '.join(valid) or 'none'})"
                details.append(detail((key,), f"unknown {cls.what} parameter for {name}{hint}",
                                      value, "key"))
                continue
            annotation = cls.value_type(name, key)
            problem = check_value(annotation, value) if annotation is not None else None
            if problem:
                details.append(detail((key,) + problem[0], problem[1], value))
        if spec is not None:
            for key in sorted(spec.required - set(params)):
                details.append(detail((), f"{name} needs the parameter '{key}'", params, "key"))
        details += cls.extra_checks(name, params)
        if details:
            fail(cls.__name__, details)
        return params

    @classmethod
    def value_type(cls, name, key):
        return cls.types.get(key)

    @classmethod
    def extra_checks(cls, name, params) -> list:
        return []


class NamedComponent(Component):
    """A component chosen by ``name`` (``type`` accepted on input)."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict, validate_default=True)

    @field_validator("name")
    @classmethod
    def _check_name(cls, value):
        return cls.check_name(value)

    @field_validator("params")
    @classmethod
    def _check_params(cls, value, info):
        return cls.check_params(info.data.get("name"), value)
