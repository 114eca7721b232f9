"""No two modules of one package import each other at module level (directly or round a longer
loop): such a cycle works only in the order the imports happen to run, and breaks when a module
is imported on its own first. Imports inside functions (deliberately late) are not counted."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "trainer_cli"


def _module_level_imports(folder):
    """{module: the sibling modules it imports at module level} for one package folder."""
    names = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir()
                                                     if (p / "__init__.py").is_file()}
    graph = {}
    for path in folder.glob("*.py"):
        deps = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module
                            else [alias.name for alias in node.names])
        graph[path.stem] = (deps & names) - {path.stem}
    return graph


def _cycle(graph):
    """One import cycle as a list of modules, or None."""
    state = {}

    def visit(module, path):
        state[module] = "open"
        for dep in sorted(graph.get(module, ())):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep, path + [dep])
                if found:
                    return found
        state[module] = "done"
        return None
    for module in sorted(graph):
        if module not in state:
            found = visit(module, [module])
            if found:
                return found
    return None


def test_no_module_level_import_cycle_inside_a_package():
    cycles = {}
    for init in sorted(PACKAGE.rglob("__init__.py")):
        found = _cycle(_module_level_imports(init.parent))
        if found:
            cycles[str(init.parent.relative_to(PACKAGE.parent))] = " -> ".join(found)
    assert not cycles, cycles


def test_the_check_finds_a_cycle():
    assert _cycle({"random": {"sampling"}, "sampling": {"random"}, "ops": set()}) == [
        "random", "sampling", "random"]
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
