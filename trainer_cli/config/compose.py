"""Config composition: ``include:`` of other files, ``${env:VAR}`` and ``${key.path}``.

- ``include: base.yaml`` or ``include: [a.yaml, b.yaml]`` (paths relative to the including file)
  merges those files first, in order, then the including file on top: mappings merge key by key,
  anything else (a scalar, a list) is replaced whole by the later file. Included files may include
  others; a cycle, more than 16 levels or more than 64 files in all is an error.
  Only ``.yaml`` and ``.yml`` files may be included (never a NUL byte in the name): an error in
  an included file quotes it, which must not show a system file such as ``/etc/shadow``.
- ``${env:VAR}`` is the environment variable VAR (an error where it is not set), and
  ``${env:VAR,default}`` falls back to ``default``. ``${data.batch_size}`` is the value of another
  key of the composed config. A string that is exactly one ``${...}`` takes the value's type
  (``${env:LR,0.1}`` is the number 0.1, a key reference may be a list or a mapping); inside longer
  text the value is spliced in as text. ``$${`` is a literal ``${``. References are bounded like
  YAML aliases: at most 10,000 values and 1 MiB of text in all come out of them (a chain of
  ``s2: "${s1}${s1}"`` would otherwise double without end); beyond, the config is refused at the
  reference that crossed the bound.

Every key keeps the file, line and column it came from, through includes, so that an error names
the file where the bad value was written; :func:`explain` tells where a key got its value.

A value from ``${env:...}`` may be a secret: composition also records each such value's form
with its references kept (``Composed.recorded``), which is what files and screens show. A run
directory's ``config.yaml`` is written resolved (no include, no key reference) but with those
references, and is read with ``env_only``: resuming a run never reads another file, and reads
the environment only for the ``${env:...}`` it recorded.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError, ConfigIssue
from .positions import Entry, Place, PositionMap, dotted
from .suggest import show
from .yamlio import MAX_ALIAS_VALUES, MAX_DOCUMENT_CHARS

__all__ = ["compose", "Composed", "INCLUDE_KEY", "MAX_INCLUDE_DEPTH", "MAX_INCLUDE_FILES"]

INCLUDE_KEY = "include"
MAX_INCLUDE_DEPTH = 16
MAX_INCLUDE_FILES = 64
INCLUDE_SUFFIXES = (".yaml", ".yml")
_REF = re.compile(r"\$\{([^{}]*)\}")
_ESCAPED = "$${"
# What references may expand to in all: the bounds YAML aliases have (yamlio).
MAX_REFERENCE_VALUES = MAX_ALIAS_VALUES
MAX_REFERENCE_CHARS = MAX_DOCUMENT_CHARS


# Values shown as they are even when they came from ${env:...}: they name the run's folder,
# which shows them anyway. A run directory's config.yaml holds them as values, and may not read
# them from the environment (a hostile one could otherwise write a variable into train.log).
SHOWN_AS_VALUE = (("name",), ("run_dir",))


class _Refused(Exception):
    """A reference expansion beyond the bounds: composition stops there."""


class _Composer:
    def __init__(self, read_file, issues, *, recording=False, env_only=False):
        self.read_file = read_file  # path -> (data, positions, issues) or raises OSError
        self.issues = issues
        # Recording: ${env:...} stays a reference (what files and screens show); the paths of
        # the values that held one, with that form, are kept in ``recorded``.
        self.recording = recording
        self.recorded: dict[tuple, object] = {}
        self.env_used = 0
        self.env_values: dict[str, str | None] = {}  # variable -> its value (None: unset)
        # A run directory's config.yaml: only its recorded ${env:...} references are read.
        self.env_only = env_only
        self.files = 0
        self.origins: dict[tuple, list[str]] = {}  # key path -> how it got its value
        self.failed: set[str] = set()  # dotted keys whose ${...} could not be filled in
        self.expanded_values = 0  # values and characters references produced, for the bounds
        self.expanded_chars = 0

    # -- includes ---------------------------------------------------------------------------
    def layer(self, data, positions, file, chain):
        """``data`` with its includes merged under it; ``(data, positions)``."""
        if not isinstance(data, dict) or INCLUDE_KEY not in data:
            return data, positions
        spec = data[INCLUDE_KEY]
        entry = positions.get((INCLUDE_KEY,))
        place = entry.value if entry is not None else Place(file=file)
        names = [spec] if isinstance(spec, str) else spec
        if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
            self._issue("expected a file name or a list of file names to include, got %s"
                        % show(spec), place, INCLUDE_KEY)
            names = []
        elif any("\0" in n for n in names):
            self._issue("a file name to include cannot hold a NUL byte, got %s"
                        % show(next(n for n in names if "\0" in n)), place, INCLUDE_KEY)
            names = []
        merged, merged_pos = {}, PositionMap()
        for name in names:
            path = (Path(file).parent / name) if file else Path(name)
            shown = os.path.normpath(str(path))
            if shown in chain:
                self._issue("include cycle: %s" % " -> ".join(list(chain) + [shown]), place, INCLUDE_KEY)
                continue
            if len(chain) >= MAX_INCLUDE_DEPTH or self.files >= MAX_INCLUDE_FILES:
                self._issue("too many includes (at most %d levels and %d files)"
                            % (MAX_INCLUDE_DEPTH, MAX_INCLUDE_FILES), place, INCLUDE_KEY)
                break
            if Path(name).suffix.lower() not in INCLUDE_SUFFIXES:
                self._issue("cannot include %s: only .yaml and .yml files can be included"
                            % show(name), place, INCLUDE_KEY)
                continue
            self.files += 1
            try:
                sub, sub_pos, sub_issues = self.read_file(shown)
            except OSError as exc:
                self._issue("cannot include %s: %s" % (name, exc.strerror or exc), place, INCLUDE_KEY)
                continue
            self.issues.extend(sub_issues)
            if sub is None:
                continue
            if not isinstance(sub, dict):
                self._issue("%s: an included file must be a mapping of sections" % name, place,
                            INCLUDE_KEY)
                continue
            sub, sub_pos = self.layer(sub, sub_pos, shown, chain + (shown,))
            self._merge(merged, merged_pos, sub, sub_pos, (), "from %s" % shown)
        own = {k: v for k, v in data.items() if k != INCLUDE_KEY}
        own_pos = PositionMap()
        for path, e in positions.items():
            if not path or path[0] != INCLUDE_KEY:
                own_pos.set(path, e)
        self._merge(merged, merged_pos, own, own_pos, (), "from %s" % (file or "<config>"))
        root = positions.get(())
        if root is not None:
            merged_pos.set((), root)
        return merged, merged_pos

    def _merge(self, dst, dst_pos, src, src_pos, base, how):
        for key, value in src.items():
            path = base + (key,)
            if isinstance(value, dict) and isinstance(dst.get(key), dict):
                entry = src_pos.get(path)
                if entry is not None and dst_pos.get(path) is None:
                    dst_pos.set(path, entry)
                self._merge(dst[key], dst_pos, value, src_pos, path, how)
                continue
            prior = dst_pos.get(path) if key in dst else None
            dst[key] = value
            dst_pos.drop_under(path)
            for p, e in src_pos.items():
                if p[:len(path)] == path:
                    dst_pos.set(p, e)
            if prior is not None:
                self.origins[path] = ["replaces the value written at %s" % self._where(prior, how)]

    @staticmethod
    def _where(entry, how):
        if entry is None:
            return how
        place = entry.value
        return "%s:%s:%s" % (place.file, place.line, place.column)

    def _issue(self, message, place, key):
        self.failed.add(key)
        self.issues.append(ConfigIssue(message, key=key, file=place.file, line=place.line,
                                       column=place.column, override=place.override))

    # -- interpolation ----------------------------------------------------------------------
    def interpolate(self, data, positions):
        self.root, self.positions, self.resolving = data, positions, []
        return self._walk(data, ())

    def _walk(self, value, path):
        if isinstance(value, dict):
            for key in list(value):
                value[key] = self._walk(value[key], path + (key,))
            return value
        if isinstance(value, list):
            for i, item in enumerate(value):
                value[i] = self._walk(item, path + (i,))
            return value
        if isinstance(value, str) and "${" in value:
            used = self.env_used
            out = self._string(value, path)
            if self.recording and self.env_used > used and not self.resolving \
                    and path not in SHOWN_AS_VALUE:
                self.recorded[path] = out
            return out
        return value

    def _string(self, text, path):
        escaped = text.replace(_ESCAPED, "\0")
        whole = _REF.fullmatch(escaped)
        if whole is not None:
            found, ok = self._resolve(whole.group(1).strip(), path)
            return found if ok else text
        def splice(match):
            found, ok = self._resolve(match.group(1).strip(), path)
            if not ok:
                return match.group(0)
            return found if isinstance(found, str) else _scalar_text(found)
        # A recorded value is read again (on resume): its literal ``${`` stays escaped.
        return _REF.sub(splice, escaped).replace("\0", _ESCAPED if self.recording else "${")

    def _resolve(self, ref, path):
        place = self._place(path)
        if ref.startswith("env:"):
            name, sep, default = ref[4:].partition(",")
            name = name.strip()
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                self._issue("${env:%s}: expected an environment variable name" % name, place, dotted(path))
                return None, False
            if self.env_only and path[:1] in SHOWN_AS_VALUE:
                self._issue("${env:%s}: a run directory's config.yaml cannot read %s from the "
                            "environment (it names the run's folder)" % (name, path[0]), place,
                            dotted(path))
                return None, False
            if self.recording:
                self.env_used += 1
                return "${%s}" % ref, True
            self.env_values[name] = os.environ.get(name)
            if name in os.environ:
                value = os.environ[name]
                self.origins.setdefault(path, []).append("${env:%s} (set in the environment)" % name)
            elif sep:
                value = default.strip()
                self.origins.setdefault(path, []).append("${env:%s} not set: its default" % name)
            else:
                self._issue("environment variable %s is not set (give a default: ${env:%s,value})"
                            % (name, name), place, dotted(path))
                return None, False
            self._charge(value, place, path)
            return _yaml_scalar(value), True
        if self.env_only:
            self._issue("${%s}: a run directory's config.yaml reads only ${env:...} references"
                        % ref, place, dotted(path))
            return None, False
        target = tuple(int(p) if p.isdigit() else p for p in ref.split(".")) if ref else ()
        if not target or any(p == "" for p in target):
            self._issue("${%s}: expected env:VAR or a dotted key such as data.batch_size" % ref,
                        place, dotted(path))
            return None, False
        if target in self.resolving or target == path:
            self._issue("${%s}: the reference refers to itself" % ref, place, dotted(path))
            return None, False
        try:
            value = lookup(self.root, target)
        except KeyError:
            self._issue("${%s}: no such key in the config" % ref, place, dotted(path))
            return None, False
        self.resolving.append(target)
        try:
            value = self._walk(_copy(value), target)
        finally:
            self.resolving.pop()
        self._charge(value, place, path)
        self.origins.setdefault(path, []).append("${%s}" % ref)
        return value, True

    def _charge(self, value, place, path):
        """Count what a reference expanded to; past the bounds, stop composing (a few lines of
        references can otherwise ask for exponential time or memory)."""
        values, chars = _size(value)
        self.expanded_values += values
        self.expanded_chars += chars
        if self.expanded_values > MAX_REFERENCE_VALUES or self.expanded_chars > MAX_REFERENCE_CHARS:
            self._issue("refused: ${...} references expand to more than %d values or %d "
                        "characters; write the values out or use fewer references"
                        % (MAX_REFERENCE_VALUES, MAX_REFERENCE_CHARS), place, dotted(path))
            raise _Refused

    def _place(self, path):
        _, entry = self.positions.find(path)
        return entry.value if entry is not None else Place()


def lookup(data, path: tuple):
    """The value at ``path`` (keys and list positions) in nested dicts and lists; KeyError."""
    for part in path:
        if isinstance(data, dict) and part in data:
            data = data[part]
        elif isinstance(data, list) and isinstance(part, int) and part < len(data):
            data = data[part]
        else:
            raise KeyError(path)
    return data


def _size(value) -> tuple[int, int]:
    """``(values, characters)`` a composed value holds."""
    if isinstance(value, dict):
        sizes = [_size(v) for v in value.values()]
    elif isinstance(value, list):
        sizes = [_size(v) for v in value]
    else:
        return 1, len(value) if isinstance(value, str) else 0
    return 1 + sum(s[0] for s in sizes), sum(s[1] for s in sizes)


def _copy(value):
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def _yaml_scalar(text: str):
    """``"0.1"`` -> 0.1, ``"true"`` -> True, ``"8"`` -> 8; anything else stays text."""
    from .yamlio import parse_yaml

    data, _, issues = parse_yaml(text)
    if issues or isinstance(data, (dict, list)) or data is None:
        return text
    return data


def _scalar_text(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class Composed:
    """What composition gives besides the data: ``origins`` maps key paths to how each got its
    value (for explain); ``failed`` holds the dotted keys already reported (their raw text would
    only fail validation a second time); ``recorded`` maps the path of every value that used
    ``${env:...}`` to its form with the references kept (what files and screens show), and
    ``env`` every variable read to its value (None: not set)."""

    origins: dict = field(default_factory=dict)
    failed: set = field(default_factory=set)
    recorded: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)


def compose(data, positions: PositionMap, file: str | None, read_file, issues: list, *,
            env_only: bool = False):
    """Includes merged and references resolved: ``(data, positions, Composed)``; problems are
    appended to ``issues``. ``env_only`` (a run directory's config.yaml): no includes, and only
    ``${env:...}`` references, which that file records instead of their values."""
    composer = _Composer(read_file, issues, env_only=env_only)
    if not env_only:
        chain = (os.path.normpath(file),) if file else ()
        data, positions = composer.layer(data, positions, file, chain)
    recorder = _Composer(None, [], recording=True, env_only=env_only)
    if isinstance(data, dict):
        shadow = _copy(data)
        try:
            data = composer.interpolate(data, positions)
            if composer.env_values:
                recorder.interpolate(shadow, positions)
        except _Refused:
            raise ConfigError(issues) from None
    return data, positions, Composed(composer.origins, composer.failed, recorder.recorded,
                                     composer.env_values)
