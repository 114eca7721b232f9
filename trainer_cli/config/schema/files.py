"""Input files a config names: where a relative path points, and cheap looks inside them that
read headers only and never execute anything."""
from __future__ import annotations

import ast
import csv
import os
import zipfile
from pathlib import Path

import numpy

from ..._bounded import file_kind
from ..suggest import show
from .base import ctx_value, problem

__all__ = ["resolve_input", "resolve_source", "npz_names", "npy_shape", "csv_header", "top_level_names",
           "factory_params"]


def _bases(info) -> list[Path]:
    # Next to the config first (a config and its data travel together), then the working folder.
    config_dir = ctx_value(info, "config_dir")
    bases = [Path(config_dir)] if config_dir is not None else []
    cwd = Path(os.getcwd())
    if cwd not in bases:
        bases.append(cwd)
    return bases


def checking_files(info) -> bool:
    return bool(ctx_value(info, "check_files", True))


def resolve_input(value: str, info, what: str = "file") -> str:
    """The absolute path of an existing input file, or a problem naming where it was looked for."""
    special = None
    try:
        path = Path(os.path.expanduser(value))
        candidates = [path] if path.is_absolute() else [base / path for base in _bases(info)]
        for c in candidates:
            if c.is_file():
                return str(c.resolve())
            if c.is_dir():
                raise problem(f"expected a {what}, got the folder {show(value)}")
            if special is None and c.exists():  # a FIFO, a device (/dev/zero): there, no file
                special = file_kind(c.stat().st_mode)
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, a loop of links
        raise problem(f"cannot use {show(value)} as a {what}: {getattr(exc, 'strerror', None) or exc}")
    if special is not None:
        raise problem(f"{show(value)} is not a regular file but {special}; expected a {what}")
    where = "" if path.is_absolute() else " (looked in " + " and ".join(
        f"'{c.parent}'" for c in candidates) + ")"
    raise problem(f"{what} {show(value)} not found{where}")


def resolve_source(value: str, info) -> str:
    """The absolute path of an existing file or folder to read weights from. A relative path
    that exists nowhere is a problem; an absolute one is checked when it is read, so that a run
    directory's resolved config stays valid after the source is gone (its own checkpoints win)."""
    try:
        path = Path(os.path.expanduser(value))
        if path.is_absolute():
            return str(path)
        candidates = [base / path for base in _bases(info)]
        for c in candidates:
            if c.exists():
                return str(c.resolve())
    except (OSError, ValueError) as exc:
        raise problem(f"cannot use {show(value)}: {getattr(exc, 'strerror', None) or exc}")
    raise problem(f"{show(value)} not found (looked in "
                  + " and ".join(f"'{c.parent}'" for c in candidates) + ")")


def npz_names(path: str) -> list[str]:
    try:
        with zipfile.ZipFile(path) as z:
            return [n[:-4] if n.endswith(".npy") else n for n in z.namelist()]
    except (zipfile.BadZipFile, OSError) as exc:
        raise problem(f"cannot read {Path(path).name} as an .npz archive: {exc}") from None


def npy_shape(path: str) -> tuple:
    try:
        with open(path, "rb") as f:
            if f.read(len(numpy.lib.format.MAGIC_PREFIX)) != numpy.lib.format.MAGIC_PREFIX:
                # NumPy's own message quotes the first bytes of a file that may not be ours.
                raise ValueError("not an .npy file: it does not start with NumPy's header")
            f.seek(0)
            version = numpy.lib.format.read_magic(f)
            if version == (1, 0):
                shape, _, _ = numpy.lib.format.read_array_header_1_0(f)
            else:
                shape, _, _ = numpy.lib.format.read_array_header_2_0(f)
        return shape
    except (ValueError, OSError) as exc:
        raise problem(f"cannot read {Path(path).name} as an .npy array: {exc}") from None


def csv_header(path: str, delimiter: str) -> list[str]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            return next(csv.reader(f, delimiter=delimiter), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise problem(f"cannot read the first line of {Path(path).name}: {exc}") from None


def _parse(path: str) -> ast.Module:
    try:
        return ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)
    except SyntaxError as exc:
        raise problem(f"{Path(path).name} has a syntax error at line {exc.lineno}: {exc.msg}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise problem(f"cannot read {Path(path).name}: {exc}") from None


def factory_params(path: str, name: str) -> list[str] | None:
    """Keyword names ``name(...)`` accepts, read from the source; None when it cannot be told
    (no such def, ``**kwargs``, or something other than a plain function or class)."""
    found = _factory_args(path, name)
    return None if found is None else list(found)


# What an argument's annotation, or else its default, says it takes.
_KIND_OF_ANNOTATION = {"int": "int", "float": "float", "str": "str", "bool": "bool", "list": "list",
                       "tuple": "list", "Sequence": "list", "List": "list", "Tuple": "list"}
_KIND_OF_DEFAULT = {int: "int", float: "float", str: "str", bool: "bool", tuple: "list", list: "list"}


def factory_arg_kinds(path: str, name: str) -> dict[str, str]:
    """``{argument: 'int' | 'float' | 'str' | 'bool' | 'list'}`` for the arguments of ``name``
    whose plain annotation or literal default says what they take (others are left out)."""
    return {k: v for k, v in (_factory_args(path, name) or {}).items() if v is not None}


def _kind(annotation, default) -> str | None:
    if annotation is not None:
        node = annotation.value if isinstance(annotation, ast.Subscript) else annotation
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.split("[")[0].strip()
        else:
            text = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None)
        return _KIND_OF_ANNOTATION.get(text)
    if default is not None:
        try:
            value = ast.literal_eval(default)
        except ValueError:
            return None
        return _KIND_OF_DEFAULT.get(type(value))
    return None


def _factory_args(path: str, name: str) -> dict[str, str | None] | None:
    for node in _parse(path).body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            init = [n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
            if not init or node.bases:
                return None  # inherited constructors are not visible here
            node, skip = init[0], 1
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            skip = 0
        else:
            continue
        args = node.args
        if args.kwarg is not None:
            return None
        positional = args.posonlyargs + args.args
        defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
        pairs = list(zip(positional, defaults))[skip:] + list(zip(args.kwonlyargs, args.kw_defaults))
        return {a.arg: _kind(a.annotation, d) for a, d in pairs}
    return None


def top_level_names(path: str) -> list[str]:
    """Functions, classes and assignments at the top of a Python file, found without running it."""
    tree = _parse(path)
    out = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append(node.name)
        elif isinstance(node, ast.Assign):
            out += [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.append(node.target.id)
    return out
