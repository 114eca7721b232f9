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


class Loader(yaml.SafeLoader):
    pass


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


def syntax_issue(exc: yaml.YAMLError, file: str | None, override: str | None = None) -> ConfigIssue:
    """A readable issue for a YAML scanner/parser/composer error."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"invalid YAML: {problem}"
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
            for key_node, value_node in sub.value:
                if key_node.tag == _MERGE_TAG:
                    self.merge(out, value_node, path)
                elif isinstance(key_node, ScalarNode) and key_node.value not in out:
                    out[key_node.value] = self.build(value_node, path + (key_node.value,),
                                                     self.place(key_node.start_mark))


def parse_yaml(text: str, file: str | None = None, *, override: str | None = None):
    """Parse one YAML document into ``(data, positions, issues)``.

    With ``override`` set, every position is that override's text instead of a file position.
    A syntax error gives ``data=None`` and a single issue.
    """
    positions = PositionMap()
    issues: list[ConfigIssue] = []
    loader = Loader(text)
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
