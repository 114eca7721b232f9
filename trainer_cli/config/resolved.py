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
    return schema
