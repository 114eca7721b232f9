"""The resolved config (every default filled in) as YAML, and the JSON schema."""
from __future__ import annotations

from .schema import RunConfig
from .yamlio import dump_yaml

__all__ = ["resolved_dict", "resolved_yaml", "json_schema"]

_HEADER = "# Resolved by trainer-cli: every default filled in. Loading it again gives the same run.\n"


def resolved_dict(config: RunConfig) -> dict:
    """The config as plain data, as every file and screen shows it: a value that came from
    ``${env:...}`` is its reference, never the value (a token must not reach config.yaml,
    report.html, TensorBoard or a terminal); a literal ``${`` elsewhere is written ``$${``, so
    that reading it back (resume reads the references again) gives the same config."""
    data = _escaped(config.model_dump(mode="json"))
    for path, recorded in config.recorded_env.items():
        _put(data, path, recorded)
    return data


def resolved_yaml(config: RunConfig) -> str:
    return _HEADER + dump_yaml(resolved_dict(config))


def _escaped(value):
    if isinstance(value, dict):
        return {k: _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    if isinstance(value, str):
        return value.replace("${", "$${")
    return value


def _put(data, path: tuple, recorded) -> None:
    """Set ``recorded`` at ``path``; a recorded mapping or list only where its leaves hold
    references (the validated value may have gained defaults beside them)."""
    node = data
    for part in path[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return
    last = path[-1]
    if isinstance(recorded, (dict, list)):
        keys = recorded.items() if isinstance(recorded, dict) else enumerate(recorded)
        for key, value in keys:
            if "${env:" in repr(value):
                _put(data, tuple(path) + (key,), value)
        return
    try:
        node[last] = recorded
    except (IndexError, TypeError):
        pass


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
