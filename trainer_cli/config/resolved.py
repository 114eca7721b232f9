"""The resolved config (every default filled in) as YAML, and the JSON schema."""
from __future__ import annotations

from .schema import RunConfig
from .yamlio import dump_yaml

__all__ = ["resolved_dict", "resolved_yaml", "json_schema"]

_HEADER = "# Resolved by trainer-cli: every default filled in. Loading it again gives the same run.\n"


def resolved_dict(config: RunConfig) -> dict:
    return config.model_dump(mode="json")


def resolved_yaml(config: RunConfig) -> str:
    return _HEADER + dump_yaml(resolved_dict(config))


def json_schema() -> dict:
    """The JSON schema of a config file (validation mode: what a user may write)."""
    schema = RunConfig.model_json_schema()
    schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    schema["title"] = "trainer-cli run config"
    # Composition happens before validation (config.compose); a file may name what it includes.
    schema.setdefault("properties", {})["include"] = {
        "description": "config files merged under this one, in order (relative to this file)",
        "anyOf": [{"type": "string", "minLength": 1},
                  {"type": "array", "items": {"type": "string", "minLength": 1}}]}
    _add_shorthand(schema)
    return schema


def _add_shorthand(schema: dict) -> None:
    """The forms the loader normalizes (canonical.py) that pydantic's schema, which describes
    the normalized config, does not know: ``context: gpu``, ``split: 0.2``, a dataset given as
    its path, a component's parameters beside its name."""
    props = schema["properties"]
    context = props["context"]
    props["context"] = {"description": context.pop("description", ""), "anyOf": [
        dict(context["items"], description="one device"), context]}
    defs = schema["$defs"]
    defs["SplitSection"] = {"anyOf": [
        {"type": "number", "description": "shorthand for {val_fraction: ...}"}, defs["SplitSection"]]}
    data = defs["DataSection"]["properties"]
    for key in ("train", "val"):
        data[key] = {"anyOf": [{"type": "string", "description": "a data file path"}, data[key]]}
    # ``optimizer: {name: adam, learning_rate: 0.1}``: a component's parameters may sit beside
    # its name; which keys are valid depends on the name, so the loader, not the schema, checks.
    for section in defs.values():
        if "params" in section.get("properties", {}):
            section["additionalProperties"] = True
