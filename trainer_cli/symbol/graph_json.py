"""MXNet's symbol files (``*-symbol.json``, nnvm's graph JSON): written byte for byte as MXNet
1.9.1 writes them, and read back with every size bounded and every reference checked.

A graph is ``{"nodes": [...], "arg_nodes": [...], "node_row_ptr": [...], "heads": [...],
"attrs": {"mxnet_version": ["int", 10901]}}``; a node is ``{"op", "name", "attrs", "inputs"}``,
an input ``[node id, output index, version]`` pointing at an earlier node. Reading is plain JSON
(no code runs) and a file that breaks any of these rules is refused with the reason.
"""
from __future__ import annotations

import json
import os

from .._bounded import open_regular
from .symbol import MXNetSymbolError, Symbol, _Node, _outputs, _topological, op_entry

__all__ = ["dump_graph", "load_graph", "MAX_SYMBOL_FILE_BYTES"]

MXNET_VERSION = 10901
MAX_SYMBOL_FILE_BYTES = 64 << 20
_MAX_NODES = 1 << 20


# ---------------------------------------------------------------------- writing (dmlc's JSONWriter)
def _string(text):
    out = ['"']
    for ch in text:
        out.append({'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch, ch))
    out.append('"')
    return "".join(out)


class _Writer:
    """dmlc::JSONWriter's layout: a multi-line scope puts each item on its own line, indented by
    two spaces per open scope, items separated by ``", "``."""

    def __init__(self):
        self.parts = []
        self.scopes = []   # multi_line flag per open scope
        self.counts = []

    def _separator(self):
        if not self.scopes or self.scopes[-1]:
            self.parts.append("\n" + " " * (2 * len(self.scopes)))

    def _item_start(self):
        if self.counts[-1]:
            self.parts.append(", ")
        self.counts[-1] += 1
        self._separator()

    def begin(self, bracket, multi_line):
        self.parts.append(bracket)
        self.scopes.append(multi_line)
        self.counts.append(0)

    def end(self, bracket):
        multi_line = self.scopes.pop()
        count = self.counts.pop()
        if multi_line and count:
            self._separator()
        self.parts.append(bracket)

    def key(self, name):
        self._item_start()
        self.parts.append(_string(name) + ": ")

    def item(self):
        self._item_start()


def _write_value(w, value):
    if isinstance(value, str):
        w.parts.append(_string(value))
    elif isinstance(value, bool):
        w.parts.append("true" if value else "false")
    elif isinstance(value, int):
        w.parts.append(str(value))
    elif isinstance(value, dict):
        w.begin("{", len(value) > 1)
        for key in sorted(value):
            w.key(key)
            _write_value(w, value[key])
        w.end("}")
    elif isinstance(value, _Inline):
        w.begin("[", False)
        for item in value.items:
            w.item()
            _write_value(w, item)
        w.end("]")
    elif isinstance(value, list):
        # dmlc writes an array of plain values on one line when it has at most 10 items.
        plain = all(isinstance(v, (int, _Inline)) for v in value)
        w.begin("[", len(value) > 10 or not plain)
        for item in value:
            w.item()
            _write_value(w, item)
        w.end("]")
    elif isinstance(value, _Object):
        w.begin("{", True)
        for key, item in value.items:
            w.key(key)
            _write_value(w, item)
        w.end("}")
    else:
        raise TypeError("cannot write %r" % (value,))


class _Inline:
    """A fixed-size record written as a one-line array (an input entry, a typed attribute)."""

    def __init__(self, *items):
        self.items = items


class _Object:
    """An object whose keys keep their order (a node: op, name, attrs, inputs)."""

    def __init__(self, items):
        self.items = items


def dump_graph(symbol: Symbol) -> str:
    nodes = _topological(symbol._heads)
    ids = {id(node): i for i, node in enumerate(nodes)}
    json_nodes, row_ptr = [], [0]
    for node in nodes:
        items = [("op", node.op), ("name", node.name)]
        if node.attrs:
            items.append(("attrs", dict(node.attrs)))
        items.append(("inputs", [_Inline(ids[id(src)], index, version)
                                 for src, index, version in node.inputs]))
        json_nodes.append(_Object(items))
        row_ptr.append(row_ptr[-1] + node.num_outputs)
    graph = _Object([
        ("nodes", json_nodes),
        ("arg_nodes", [i for i, node in enumerate(nodes) if node.is_variable()]),
        ("node_row_ptr", row_ptr),
        ("heads", [_Inline(ids[id(node)], index, 0) for node, index in symbol._heads]),
        ("attrs", {"mxnet_version": _Inline("int", MXNET_VERSION)}),
    ])
    w = _Writer()
    _write_value(w, graph)
    return "".join(w.parts)


# ---------------------------------------------------------------------- reading
def load_graph(fname) -> Symbol:
    """The symbol in the file ``fname`` (read bounded: at most MAX_SYMBOL_FILE_BYTES)."""
    path = os.fspath(fname)
    try:
        f = open_regular(path)
    except OSError as exc:
        raise MXNetSymbolError("%s: cannot open the symbol file (%s)"
                               % (path, exc.strerror or exc)) from None
    with f:
        data = f.read(MAX_SYMBOL_FILE_BYTES + 1)
    if len(data) > MAX_SYMBOL_FILE_BYTES:
        raise MXNetSymbolError("%s: the symbol file is larger than %d bytes"
                               % (path, MAX_SYMBOL_FILE_BYTES))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MXNetSymbolError("%s: not a symbol file (not UTF-8 text at byte %d)"
                               % (path, exc.start)) from None
    return parse_graph(text, path)


def parse_graph(text, source="<string>") -> Symbol:
    def fail(what):
        raise MXNetSymbolError("%s: not a loadable MXNet symbol file: %s" % (source, what))

    try:
        graph = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise MXNetSymbolError("%s: not a symbol file (bad JSON: %s)" % (source, exc)) from None
    if not isinstance(graph, dict):
        fail("the top level is not an object")
    raw_nodes = graph.get("nodes")
    if not isinstance(raw_nodes, list) or not raw_nodes:
        fail("'nodes' is missing or not a non-empty list")
    if len(raw_nodes) > _MAX_NODES:
        fail("more than %d nodes" % _MAX_NODES)
    row_ptr = graph.get("node_row_ptr")
    if not (isinstance(row_ptr, list) and len(row_ptr) == len(raw_nodes) + 1
            and all(type(v) is int for v in row_ptr)):
        row_ptr = None
    nodes = []
    for i, raw in enumerate(raw_nodes):
        where = "node %d" % i
        if not isinstance(raw, dict):
            fail("%s is not an object" % where)
        op, name = raw.get("op"), raw.get("name")
        if not isinstance(op, str) or not isinstance(name, str):
            fail("%s has no string 'op' and 'name'" % where)
        attrs = raw.get("attrs", raw.get("attr", raw.get("param", {}))) or {}
        if not isinstance(attrs, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in attrs.items()):
            fail("%s (%s): 'attrs' is not an object of strings" % (where, name))
        inputs = raw.get("inputs", [])
        if not isinstance(inputs, list):
            fail("%s (%s): 'inputs' is not a list" % (where, name))
        if op == "null":
            if inputs:
                fail("%s (%s): a variable has inputs" % (where, name))
            node = _Node("null", name, attrs)
        else:
            entry = op_entry(op)
            outputs, visible = _outputs(op, attrs, entry and entry[4], entry and entry[5])
            if row_ptr is not None:
                stored = row_ptr[i + 1] - row_ptr[i]
                if 1 <= stored <= 64:
                    outputs = stored
                    visible = min(visible, stored)
            node = _Node(op, name, attrs, num_outputs=outputs, num_visible=visible)
            for k, item in enumerate(inputs):
                if not (isinstance(item, list) and len(item) in (2, 3)
                        and all(type(v) is int for v in item)):
                    fail("%s (%s): input %d is not [node, index, version]" % (where, name, k))
                src, index = item[0], item[1]
                version = item[2] if len(item) == 3 else 0
                if not 0 <= src < i:
                    fail("%s (%s): input %d refers to node %d, not an earlier node"
                         % (where, name, k, src))
                if not 0 <= index < nodes[src].num_outputs:
                    fail("%s (%s): input %d takes output %d of node %d, which has %d"
                         % (where, name, k, index, src, nodes[src].num_outputs))
                node.inputs.append((nodes[src], index, version))
        nodes.append(node)
    heads = graph.get("heads")
    if not isinstance(heads, list) or not heads:
        fail("'heads' is missing or empty")
    out = []
    for k, item in enumerate(heads):
        if not (isinstance(item, list) and len(item) in (2, 3) and all(type(v) is int for v in item)):
            fail("head %d is not [node, index, version]" % k)
        if not 0 <= item[0] < len(nodes) or not 0 <= item[1] < nodes[item[0]].num_outputs:
            fail("head %d refers to output %d of node %d, which does not exist"
                 % (k, item[1], item[0]))
        out.append((nodes[item[0]], item[1]))
    return Symbol(out)
