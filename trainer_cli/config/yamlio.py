"""YAML in and out: parse into plain data plus the position of every key and value.

PyYAML's constructor forgets where things were, so the node tree from ``compose`` is walked here
instead; duplicate keys, which PyYAML silently lets the last one win, are reported.
"""
from __future__ import annotations

import re

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from .errors import ConfigIssue
from .positions import Entry, Place, PositionMap, dotted

__all__ = ["parse_yaml", "dump_yaml", "Loader", "Dumper"]

# YAML 1.1 reads ``1e-3`` (no dot, or no exponent sign) as a string; nobody writing a learning
# rate means that.
_EXP_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9][0-9_]*)[eE][-+]?[0-9]+$")
_MERGE_TAG = "tag:yaml.org,2002:merge"


# A config is a few hundred lines; these bounds stop a hostile file (an alias bomb, deep nesting,
# a huge document) from taking the time, memory or stack a parse would otherwise need.
MAX_DOCUMENT_CHARS = 1 << 20
MAX_DEPTH = 64
MAX_ALIAS_VALUES = 10_000


class LimitError(yaml.MarkedYAMLError):
    """A document beyond one of the bounds above."""


class Loader(yaml.SafeLoader):
    """SafeLoader whose composer bounds nesting depth and the values aliases expand to."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0
        self._alias_values = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values it stands for once expanded

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            node = super().compose_node(parent, index)
            # A node still being composed (an alias inside its own anchor) counts as one value.
            self._alias_values += self._sizes.get(id(node), 1)
            if self._alias_values > MAX_ALIAS_VALUES:
                raise LimitError(None, None, "aliases expand to more than %d values; write the "
                                 "values out or use fewer aliases" % MAX_ALIAS_VALUES,
                                 event.start_mark)
            return node
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise LimitError(None, None, "nested more than %d levels deep" % MAX_DEPTH,
                             self.peek_event().start_mark)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        if isinstance(node, SequenceNode):
            children = node.value
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        self._sizes[id(node)] = 1 + sum(self._sizes.get(id(c), 1) for c in children)
        return node


class Dumper(yaml.SafeDumper):
    pass


# The dumper must resolve the same way, so that the string "1e5" is quoted on the way out.
for _cls in (Loader, Dumper):
    _cls.add_implicit_resolver("tag:yaml.org,2002:float", _EXP_FLOAT, list("-+0123456789."))


def _represent_list(dumper, data):
    # Short lists of scalars (context, milestones) read best on one line.
    flow = len(data) <= 12 and all(isinstance(x, (str, int, float, bool)) or x is None for x in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


Dumper.add_representer(list, _represent_list)
Dumper.add_representer(tuple, _represent_list)


def dump_yaml(data) -> str:
    return yaml.dump(data, Dumper=Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)


def _place(file: str | None, mark) -> Place:
    return Place(file=file, line=mark.line + 1, column=mark.column + 1)


def _short(text, limit=160):
    # PyYAML's problems quote what they found (an alias name, a tag): never a whole long line.
    return text if text is None or len(text) <= limit else text[:limit - 3] + "..."


def syntax_issue(exc: yaml.YAMLError, file: str | None, override: str | None = None) -> ConfigIssue:
    """A readable issue for a YAML scanner/parser/composer error."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = _short(getattr(exc, "problem", None) or str(exc))
    context = _short(getattr(exc, "context", None))
    message = f"{'refused' if isinstance(exc, LimitError) else 'invalid YAML'}: {problem}"
    context_mark = getattr(exc, "context_mark", None)
    if context and context_mark is not None and context_mark is not mark:
        message += f" ({context} at line {context_mark.line + 1}, column {context_mark.column + 1})"
    elif context:
        message += f" ({context})"
    if "\t" in message or "'\\t'" in message:
        message += "; indent with spaces, not tabs"
    if override is not None:
        return ConfigIssue(message, override=override)
    if mark is None:
        return ConfigIssue(message, file=file)
    return ConfigIssue(message, file=file, line=mark.line + 1, column=mark.column + 1)


class _Builder:
    def __init__(self, file: str | None, positions: PositionMap, issues: list, override: str | None):
        self.file = file
        self.positions = positions
        self.issues = issues
        self.override = override
        self.constructor = yaml.constructor.SafeConstructor()
        self.active: set[int] = set()

    def place(self, mark) -> Place:
        if self.override is not None:
            return Place(override=self.override)
        return _place(self.file, mark)

    def issue(self, message, mark, path):
        place = self.place(mark)
        self.issues.append(ConfigIssue(message, key=dotted(path), file=place.file, line=place.line,
                                       column=place.column, override=place.override))

    def build(self, node, path: tuple, key_place: Place | None):
        self.positions.set(path, Entry(key_place, self.place(node.start_mark), path))
        if id(node) in self.active:
            self.issue("an alias refers to a value that contains it", node.start_mark, path)
            return None
        self.active.add(id(node))
        try:
            if isinstance(node, MappingNode):
                return self.mapping(node, path)
            if isinstance(node, SequenceNode):
                return [self.build(item, path + (i,), None) for i, item in enumerate(node.value)]
            return self.scalar(node, path)
        finally:
            self.active.discard(id(node))

    def scalar(self, node: ScalarNode, path):
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            self.issue(f"cannot read this value: {exc.problem}", node.start_mark, path)
            return None
        except ValueError:  # int() refuses more digits than sys.get_int_max_str_digits()
            self.issue("cannot read this value: a number of %d characters; no setting takes one "
                       "that long" % len(node.value), node.start_mark, path)
            return None

    def mapping(self, node: MappingNode, path):
        out: dict = {}
        first: dict = {}
        merged = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode):
                self.issue("a key must be a plain name, not a list or mapping", key_node.start_mark, path)
                continue
            key = key_node.value
            if key in first:
                line, col = first[key].line + 1, first[key].column + 1
                where = f" (first given at line {line}, column {col})" if self.override is None else ""
                self.issue(f"duplicate key{where}; give each key once", key_node.start_mark, path + (key,))
            first[key] = key_node.start_mark
            out[key] = self.build(value_node, path + (key,), self.place(key_node.start_mark))
        for source in merged:
            self.merge(out, source, path)
        return out

    def merge(self, out, source, path):
        # ``<<: *defaults``: keys written explicitly win over merged ones.
        sources = source.value if isinstance(source, SequenceNode) else [source]
        for sub in sources:
            if not isinstance(sub, MappingNode):
                self.issue("'<<' must merge a mapping or a list of mappings", sub.start_mark, path)
                continue
            if id(sub) in self.active:  # ``m: &m {<<: *m}``
                self.issue("'<<' merges a mapping that contains it", sub.start_mark, path)
                continue
            self.active.add(id(sub))
            try:
                self._merge_one(out, sub, path)
            finally:
                self.active.discard(id(sub))

    def _merge_one(self, out, sub, path):
        for key_node, value_node in sub.value:
            if key_node.tag == _MERGE_TAG:
                self.merge(out, value_node, path)
            elif isinstance(key_node, ScalarNode) and key_node.value not in out:
                out[key_node.value] = self.build(value_node, path + (key_node.value,),
                                                 self.place(key_node.start_mark))


def _issue_at(message, text, offset, file, override) -> ConfigIssue:
    if override is not None:
        return ConfigIssue(message, override=override)
    before = text[:offset]
    line = before.count("\n") + 1
    return ConfigIssue(message, file=file, line=line, column=offset - (before.rfind("\n") + 1) + 1)


def parse_yaml(text: str, file: str | None = None, *, override: str | None = None):
    """Parse one YAML document into ``(data, positions, issues)``.

    With ``override`` set, every position is that override's text instead of a file position.
    A syntax error gives ``data=None`` and a single issue.
    """
    positions = PositionMap()
    issues: list[ConfigIssue] = []
    if len(text) > MAX_DOCUMENT_CHARS:
        return None, positions, [_issue_at(f"refused: longer than {MAX_DOCUMENT_CHARS} characters",
                                           text, MAX_DOCUMENT_CHARS, file, override)]
    try:
        loader = Loader(text)  # the reader refuses control characters (a NUL byte) right here
    except yaml.reader.ReaderError as exc:
        return None, positions, [_issue_at(
            f"invalid YAML: unacceptable character #x{exc.character:04x} ({exc.reason})",
            text, exc.position, file, override)]
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as exc:
        return None, positions, [syntax_issue(exc, file, override)]
    finally:
        loader.dispose()
    if node is None:
        return None, positions, issues
    root_key = Place(override=override) if override is not None else None
    data = _Builder(file, positions, issues, override).build(node, (), root_key)
    return data, positions, issues
