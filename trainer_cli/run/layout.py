"""The run directory's layout, and reading it back safely.

::

    <root>/<name>-<YYYYMMDD-HHMMSS>/
        config.yaml            the resolved config
        metrics.jsonl          one JSON object per logged event
        metrics.csv            the same rows as CSV
        train.log              human-readable log
        .lock                  flock'ed while a process writes here (released when it dies)
        checkpoints/
            step-<N>/          built in a temp folder, then renamed: only ever complete
                params.npz     parameters under structural names (Block.save_parameters)
                trainer.states optimizer states (trainer_cli.optimizer.state_file)
                kvstore.npz    only with gradient compression: the error-feedback residuals,
                               r<key>_<device position> in one process, r<key>_w<rank> for
                               every rank of a dist job (see run.kvstate)
                meta.json      step, epoch, position, RNG and loop state, and a SHA-256 of
                               each other file, so damage is detected before anything loads
            latest             the name of the newest checkpoint, written last
            abandoned-<time>/  checkpoints newer than the one `resume --from` went back to

Nothing here executes or unpickles what it reads.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

__all__ = [
    "CONFIG_FILE", "METRICS_FILE", "METRICS_CSV", "LOG_FILE", "CHECKPOINTS", "LATEST",
    "PARAMS_FILE", "STATES_FILE", "KVSTORE_FILE", "META_FILE", "META_FORMAT", "RunDirError",
    "checkpoint_name", "checkpoint_dir", "list_checkpoints", "read_latest", "read_meta",
    "verify_checkpoint", "newest_intact", "file_digest",
]

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
LOG_FILE = "train.log"
CHECKPOINTS = "checkpoints"
LATEST = "latest"
PARAMS_FILE = "params.npz"
STATES_FILE = "trainer.states"
KVSTORE_FILE = "kvstore.npz"
META_FILE = "meta.json"
META_FORMAT = 1

_STEP_DIR = re.compile(r"^step-(\d+)$")


class RunDirError(ValueError):
    """A run directory or checkpoint is missing, damaged or not ours (the CLI exits 2)."""


def checkpoint_name(step: int) -> str:
    return "step-%d" % step


def checkpoint_dir(run_dir, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / checkpoint_name(step)


def list_checkpoints(run_dir) -> list:
    """``[(step, path)]`` of every complete-looking ``step-N`` folder, oldest first."""
    folder = Path(run_dir) / CHECKPOINTS
    if not folder.is_dir():
        return []
    found = []
    for child in folder.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and child.is_dir():
            found.append((int(match.group(1)), child))
    return sorted(found)


def read_latest(run_dir):
    """The step named by the ``latest`` pointer, or None when there is no pointer."""
    pointer = Path(run_dir) / CHECKPOINTS / LATEST
    if not pointer.exists():
        return None
    try:
        text = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError("%s: cannot read the latest-checkpoint pointer (%s)" % (pointer, exc)) from None
    match = _STEP_DIR.match(text)
    if not match:
        raise RunDirError("%s: expected a checkpoint name like 'step-100', found %r" % (pointer, text[:60]))
    return int(match.group(1))


def file_digest(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_meta(ckpt_dir) -> dict:
    """The checkpoint's ``meta.json``, checked for shape; a clear RunDirError otherwise."""
    path = Path(ckpt_dir) / META_FILE
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError("%s: missing; the checkpoint is incomplete" % path) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunDirError("%s: damaged checkpoint metadata (%s)" % (path, exc)) from None
    if not isinstance(meta, dict) or meta.get("format") != META_FORMAT \
            or not isinstance(meta.get("step"), int) or not isinstance(meta.get("files"), dict):
        raise RunDirError("%s: not a trainer-cli checkpoint (format %d) metadata file" % (path, META_FORMAT))
    return meta


def verify_checkpoint(ckpt_dir) -> dict:
    """Check every file of a checkpoint against the sizes and digests in its meta.json."""
    ckpt_dir = Path(ckpt_dir)
    meta = read_meta(ckpt_dir)
    # meta.json names the files to hash; only known names, so it cannot point outside the folder.
    extra = [name for name in meta["files"] if name not in (PARAMS_FILE, STATES_FILE)]
    for name in extra:
        if name != KVSTORE_FILE:
            raise RunDirError("%s: lists an unexpected file %r" % (ckpt_dir / META_FILE, name[:60]))
    for name in [PARAMS_FILE, STATES_FILE] + extra:
        expected = meta["files"].get(name)
        path = ckpt_dir / name
        if not isinstance(expected, dict):
            raise RunDirError("%s: meta.json does not describe %s" % (ckpt_dir / META_FILE, name))
        if not path.is_file():
            raise RunDirError("%s: missing; the checkpoint is incomplete" % path)
        if path.stat().st_size != expected.get("size") or file_digest(path) != expected.get("sha256"):
            raise RunDirError("%s: damaged (its size or SHA-256 does not match meta.json)" % path)
    return meta


def newest_intact(run_dir, below=None):
    """The newest step whose checkpoint verifies (optionally older than ``below``), or None."""
    for step, path in reversed(list_checkpoints(run_dir)):
        if below is not None and step >= below:
            continue
        try:
            verify_checkpoint(path)
        except RunDirError:
            continue
        return step
    return None
