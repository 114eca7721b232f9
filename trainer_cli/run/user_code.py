"""Errors raised in a user's own model code, told with their place: the block that failed (its
name, class and shapes, which ``gluon.Block`` attaches as ``failed_block``) and the innermost
line of the user's code on the way (a frame outside trainer_cli and the installed libraries, or
in the model file itself, which for a built-in model is inside the package)."""
from __future__ import annotations

import sysconfig
import traceback
from pathlib import Path

__all__ = ["user_frame", "explain"]

_PACKAGE = Path(__file__).resolve().parents[1]


def _library_dirs() -> list:
    dirs = [_PACKAGE]
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.append(Path(path).resolve())
    return dirs


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
    except ValueError:
        return False
    return True


def user_frame(exc, model_file=None) -> str | None:
    """``file:line (in function)`` of the innermost frame of ``exc``'s traceback in the user's
    code, or None when none is."""
    libraries = _library_dirs()
    model = Path(model_file).resolve() if model_file is not None else None
    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        if frame.filename.startswith("<"):
            continue
        path = Path(frame.filename).resolve()
        if path == model or not any(_inside(path, d) for d in libraries):
            found = "%s:%d (in %s)" % (frame.filename, frame.lineno, frame.name)
    return found


def explain(exc, model_file=None) -> str | None:
    """One line for an error of the user's model code: the exception's type, the block that
    failed, the user's file:line, then the message; None when neither is known (an error of the
    runner itself keeps its own message, and so does bad input, which exits 2 however deep in
    the model it is found, e.g. a parameter too large for the memory)."""
    from .errors import input_error_types

    if isinstance(exc, input_error_types()):
        return None
    block = getattr(exc, "failed_block", None)
    where = user_frame(exc, model_file)
    if block is None and where is None:
        return None
    text = type(exc).__name__
    if block is not None:
        text += " in block %s" % block
    if where is not None:
        text += ", at %s" % where
    return "%s: %s" % (text, exc)
