"""Reading a config: YAML with positions, shorthand normalized, overrides merged, validated, and
every problem reported together as one ``ConfigError``."""
from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import ValidationError

from .._bounded import MiB, open_regular
from .canonical import canonicalize
from .errors import ConfigError, ConfigIssue
from .overrides import apply_overrides
from .positions import PositionMap
from .report import issues_from_validation
from .schema import RunConfig
from .suggest import closest
from .yamlio import MAX_DOCUMENT_CHARS, parse_yaml

__all__ = ["load_config", "validate_config_text", "validate_config_data"]

# The most bytes a run directory's config.yaml may hold (a real one holds a few kilobytes).
CONFIG_LIMIT = 16 * MiB


def load_config(path, overrides: Iterable[str] = (), *, check_files: bool = True,
                trace: dict | None = None) -> RunConfig:
    """Load and validate the YAML config at ``path``, with its includes and ``${...}``
    references composed (:mod:`.compose`) and ``-o`` overrides applied in order.

    Relative file paths in the config are looked up next to it, then in the working directory;
    the run name defaults to the file's stem. Raises ``ConfigError`` listing every problem.
    ``trace``, when given, receives ``positions`` and ``origins``: where every key came from.
    """
    from .compose import compose

    shown = os.fspath(path)
    data, positions, issues = _parsed(_read_config_text(shown), shown)
    data, positions, composed = compose(data, positions, shown, _read_included, issues)
    if trace is not None:
        trace["origins"] = composed.origins
    return _validate(data, positions, issues, overrides, shown, Path(path).resolve().parent,
                     Path(path).stem, check_files, trace, composed)


def _read_config_text(shown: str) -> str:
    try:
        # Regular files only: a FIFO or /dev/zero in its place must not hang or fill memory.
        with io.TextIOWrapper(open_regular(shown), encoding="utf-8") as f:
            # One character past the bound is enough for parse_yaml to refuse the document.
            return f.read(MAX_DOCUMENT_CHARS + 1)
    except FileNotFoundError:
        raise ConfigError([ConfigIssue("config file not found", file=shown)]) from None
    except IsADirectoryError:
        raise ConfigError([ConfigIssue("expected a config file, got a folder", file=shown)]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([ConfigIssue(f"not UTF-8 text (byte {exc.start}); is this a YAML file?",
                                       file=shown)]) from None
    except OSError as exc:
        raise ConfigError([ConfigIssue(f"cannot read the config: {exc.strerror or exc}",
                                       file=shown)]) from None


def _read_included(shown: str):
    """An included file, parsed (its YAML problems come back as issues); an OSError when it
    cannot be read, which the include reports at its own position."""
    try:
        text = _read_config_text(shown)
    except ConfigError as exc:
        raise OSError(exc.issues[0].message) from None
    data, positions, issues = parse_yaml(text, shown)
    if isinstance(data, dict) and data and not any(_section_like(k) for k in data):
        # Its problems would quote its keys: a YAML file that is no config is not echoed.
        raise OSError("not a trainer config (none of its keys is a section such as model, data "
                      "or optimizer)")
    return data, positions, issues


def _section_like(key) -> bool:
    from .compose import INCLUDE_KEY

    sections = list(RunConfig.model_fields) + [INCLUDE_KEY]
    return isinstance(key, str) and (key in sections or closest(key, sections) is not None)


def _parsed(text: str, filename: str):
    """``(data, positions, issues)`` of a config's text; a ConfigError when it is no mapping."""
    data, positions, issues = parse_yaml(text, filename)
    if issues and data is None:  # a syntax error: nothing below it can be trusted
        raise ConfigError(issues)
    if data is None:
        raise ConfigError([ConfigIssue("the config is empty; expected a mapping with at least "
                                       "model, data, loss and epochs or steps",
                                       file=filename, line=1, column=1)])
    if not isinstance(data, dict):
        raise ConfigError(issues + [ConfigIssue(
            "expected a mapping of sections (model, data, loss, ...), got a list"
            if isinstance(data, list) else f"expected a mapping of sections, got {data!r}",
            file=filename, line=1, column=1)])
    return data, positions, issues


def validate_config_text(text: str, *, filename: str = "<config>", overrides: Iterable[str] = (),
                         config_dir=None, config_name: str | None = None,
                         check_files: bool = True, env_references: bool = False) -> RunConfig:
    """Validate YAML text as a config; ``filename`` is what error positions name. No
    composition: text (a run directory's resolved config) never reaches other files through
    ``include`` nor other keys through ``${key}``; with ``env_references`` (resuming a run), the
    ``${env:...}`` references it recorded in place of their values are read again."""
    from .compose import compose

    data, positions, issues = _parsed(text, filename)
    composed = None
    if env_references:
        data, positions, composed = compose(data, positions, filename, None, issues,
                                            env_only=True)
    return _validate(data, positions, issues, overrides, filename, config_dir, config_name,
                     check_files, composed=composed)


def validate_config_data(data: dict, *, overrides: Iterable[str] = (), config_dir=None,
                         config_name: str | None = None, check_files: bool = True) -> RunConfig:
    """Validate an already-parsed config (a dict); problems have keys but no file positions."""
    return _validate(data, None, [], overrides, None, config_dir, config_name, check_files)


def _validate(data, positions: PositionMap | None, issues, overrides, filename, config_dir,
              config_name, check_files, trace=None, composed=None) -> RunConfig:
    issues = list(issues)
    reported = composed.failed if composed is not None else frozenset()
    # The values ${env:...} gave, by the path they were written at: never shown (secrets).
    secrets = {path: lookup_or_none(data, path) for path in composed.recorded} if composed else {}
    data = canonicalize(data, RunConfig, positions)
    overrides = list(overrides)
    if overrides:
        positions = positions if positions is not None else PositionMap()
        issues += apply_overrides(data, positions, overrides, RunConfig)
        data = canonicalize(data, RunConfig, positions)  # an override may itself be shorthand
    if trace is not None:
        trace["positions"], trace["data"] = positions, data
    context = {"config_dir": str(config_dir) if config_dir is not None else None,
               "config_name": config_name, "check_files": check_files}
    try:
        config = RunConfig.model_validate(data, context=context)
    except ValidationError as exc:
        # A value YAML could not read was already reported; its "got null" would only repeat it.
        unreadable = {i.key for i in issues if i.message.startswith("cannot read this value")}
        unreadable |= set(reported)
        issues += [i for i in issues_from_validation(exc, RunConfig, positions, filename)
                   if i.key not in unreadable]
        config = None
    if issues:
        # Override problems in command-line order (ConfigError keeps the order of equals).
        rank = {f"-o {text}": n for n, text in enumerate(overrides)}
        issues.sort(key=lambda i: rank.get(i.override, -1))
        if secrets:
            issues = [_redacted(i, composed.recorded, secrets) for i in issues]
        raise ConfigError(issues)
    if composed is not None and composed.env:
        config.record_env(_canonical(composed.recorded, positions), composed.env)
    return config


def lookup_or_none(data, path):
    from .compose import lookup

    try:
        return lookup(data, path)
    except KeyError:
        return None


def _canonical(recorded: dict, positions: PositionMap | None) -> dict:
    """The recorded values by their path in the canonical config, left out where an override
    replaced them (shorthand moves keys: the positions know where each went)."""
    if positions is None:
        return {}
    where = {tuple(entry.user_path): (path, entry) for path, entry in positions.items()}
    out = {}
    for user_path, value in recorded.items():
        found = where.get(tuple(user_path))
        if found is None or found[1].value.override is not None:
            continue
        out[found[0]] = value
    return out


def _redacted(issue: ConfigIssue, recorded: dict, secrets: dict) -> ConfigIssue:
    """``issue`` with the value of an ``${env:...}`` shown as its reference instead."""
    from dataclasses import replace

    from .positions import dotted
    from .suggest import show

    message = issue.message
    for path, value in secrets.items():
        if value is None or isinstance(value, (dict, list)):
            continue
        if issue.key != dotted(path) and not issue.key.startswith(dotted(path) + "."):
            continue
        shown = recorded[path] if isinstance(recorded[path], str) else "${env:...}"
        if isinstance(value, str):  # quoted as show() quotes it, then anywhere else
            message = message.replace(show(value), show(shown))
            message = message.replace(value, shown) if len(value) >= 4 else message
        elif len(str(value)) >= 4:  # a short number is no secret, and "1" is in ">= 1" too
            message = message.replace(show(value), show(shown))
    return replace(issue, message=message) if message != issue.message else issue
