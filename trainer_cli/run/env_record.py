"""Which environment variables a run's config read, without their values.

A value from ``${env:VAR}`` may be a secret (an API token), so config.yaml records the reference
and resume reads the variable again. ``env.json`` holds, for each variable, whether it was set
and a salted SHA-256 of its value, so that resume can say when a variable is no longer set or
holds something else; the digest tells nothing about a long random token (a short value such as
a learning rate can be guessed from it, as from the run's results)::

    {"format": 1, "salt": "<hex>", "variables": {"TOKEN": {"set": true, "sha256": "<hex>"}}}
"""
from __future__ import annotations

import hashlib
import json
import secrets

from .._atomic import write_text_atomic
from .._bounded import load_json, read_regular_text

__all__ = ["ENV_FILE", "write_env_record", "env_changes"]

ENV_FILE = "env.json"
ENV_LIMIT = 1 << 20


def _digest(salt: str, value: str) -> str:
    return hashlib.sha256(bytes.fromhex(salt) + value.encode("utf-8", "surrogateescape")).hexdigest()


def write_env_record(run_dir, env: dict) -> None:
    """Record ``env`` ({variable: value or None}) in ``run_dir``; nothing when it is empty."""
    if not env:
        return
    salt = secrets.token_hex(16)
    variables = {name: {"set": value is not None,
                        "sha256": _digest(salt, value) if value is not None else None}
                 for name, value in sorted(env.items())}
    write_text_atomic(run_dir / ENV_FILE, json.dumps({"format": 1, "salt": salt,
                                                      "variables": variables}, indent=1) + "\n")


def env_changes(run_dir, env: dict) -> list[str]:
    """What differs between the variables the run started with and ``env`` (as resume reads
    them), one sentence each; a missing or damaged env.json is said once."""
    if not env:
        return []
    path = run_dir / ENV_FILE
    try:
        record = load_json(read_regular_text(path, ENV_LIMIT))
        salt, variables = record["salt"], record["variables"]
        bytes.fromhex(salt)
        if not isinstance(variables, dict):
            raise ValueError("variables is not a mapping")
    except FileNotFoundError:
        return ["%s: missing; cannot tell whether %s changed since the run started"
                % (path, ", ".join(sorted(env)))]
    except (OSError, ValueError, UnicodeDecodeError, KeyError, TypeError) as exc:
        return ["%s: unreadable (%s); cannot tell whether %s changed since the run started"
                % (path, exc, ", ".join(sorted(env)))]
    notes = []
    for name, value in sorted(env.items()):
        before = variables.get(name)
        before = before if isinstance(before, dict) else {}
        was_set = before.get("set") is True
        if value is None:
            if was_set:
                notes.append("environment variable %s is no longer set: config.yaml's default "
                             "for ${env:%s} is used" % (name, name))
        elif not was_set:
            notes.append("environment variable %s is set now, but was not when the run started: "
                         "its value replaces the default" % name)
        elif before.get("sha256") != _digest(salt, value):
            notes.append("environment variable %s holds another value than when the run started "
                         "(config.yaml reads ${env:%s})" % (name, name))
    return notes
