"""Which model code a run ran: ``model.json`` in the run directory, written when the run starts
and checked before a resume imports anything.

A run directory is data, not code. Its ``config.yaml`` names the model, and on resume that name
is looked up in the usual places (never inside the run directory). But a run directory someone
sent you could name a model file it did not come with, for example ``/shared/x.py:build``, or a
``models/net.py`` that has changed since the run started. So a run records the model's source when it starts:
the config's name for it, the file's path and SHA-256, and whether it is a built-in model that
ships with trainer-cli. ``resume`` imports a user's model file only when the file it would load is
the recorded one, byte for byte. A different file, a changed file, or a run without a record is
refused, with the file named, unless the user vouches for it (``trainer resume
--trust-model-file``). Built-in models are the package's own code and are always accepted.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from .._atomic import write_text_atomic
from .._bounded import FileRefused, load_json, read_regular_text
from ..config.names import BUILTIN_MODELS
from .layout import RunDirError

__all__ = ["RECORD_FILE", "record_for", "write_record", "check_record"]

RECORD_FILE = "model.json"
_MAX_RECORD = 64 << 10


def _sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _builtin(path: Path) -> bool:
    """Whether ``path`` is the package's own model code: builtin_models/ or the model zoo."""
    path = Path(path).resolve()
    for folder in (BUILTIN_MODELS, _ZOO):
        try:
            path.relative_to(folder)
        except ValueError:
            continue
        return True
    return False


# The model zoo's folder (``zoo:NAME`` models), found without importing it.
_ZOO = Path(__file__).resolve().parent.parent / "gluon" / "model_zoo"


def record_for(name: str, file) -> dict:
    """What ``model.json`` holds for a model called ``name`` loaded from ``file``."""
    file = Path(file).resolve()
    return {"format": 1, "name": name, "file": str(file), "sha256": _sha256(file),
            "builtin": _builtin(file)}


def write_record(run_dir, record: dict) -> None:
    write_text_atomic(Path(run_dir) / RECORD_FILE, json.dumps(record, indent=1, sort_keys=True) + "\n")


def _read_record(run_dir):
    path = Path(run_dir) / RECORD_FILE
    try:
        text = read_regular_text(path, _MAX_RECORD)
    except FileNotFoundError:
        return None
    except (OSError, FileRefused, UnicodeDecodeError) as exc:
        raise RunDirError("%s: unreadable (%s)" % (path, exc)) from None
    try:
        record = load_json(text)
    except ValueError as exc:
        raise RunDirError("%s: damaged (%s)" % (path, exc)) from None
    if not isinstance(record, dict) or record.get("format") != 1 \
            or not all(isinstance(record.get(k), str) for k in ("name", "file", "sha256")):
        raise RunDirError("%s: not a trainer-cli model record" % path)
    return record


def check_record(run_dir, name: str, file, trust: bool = False) -> str | None:
    """Refuse (RunDirError) to import ``file`` for a resume of ``run_dir`` unless it is the
    recorded model source, a built-in model, or ``trust``; returns a note to log when ``trust``
    let a file through."""
    file = Path(file).resolve()
    if _builtin(file):
        return None
    record = _read_record(run_dir)
    current = _sha256(file)
    if record is not None and record["file"] == str(file) and record["sha256"] == current:
        return None
    if record is None:
        why = "it has no record of the model it ran (%s)" % RECORD_FILE
    elif record["file"] != str(file):
        why = "it ran %s" % record["file"]
    else:
        why = "that file has changed since (its SHA-256 is not the recorded one)"
    message = ("%s: resuming would import the model file %s, but %s. A run directory is data: "
               "resume runs only the model code the run started with. If you trust this file, "
               "resume with --trust-model-file" % (run_dir, file, why))
    if not trust:
        raise RunDirError(message)
    return "model file %s trusted by --trust-model-file (%s)" % (file, why)
