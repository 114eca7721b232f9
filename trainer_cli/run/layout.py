"""The run directory's layout, and reading it back safely.

::

    <root>/<name>-<YYYYMMDD-HHMMSS>/
        config.yaml            the resolved config
        metrics.jsonl          one JSON object per logged event
        metrics.csv            the same rows as CSV
        train.log              human-readable log
        env.json               the variables config.yaml's ${env:...} read: set or not, and a
                               salted digest of each value (never the value; run/env_record.py)
        feature_scaling.npz    only with data.normalize: the features' mean and std (run.scaling)
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
            best               the name of the best checkpoint (runs with early_stopping or
                               checkpoint.keep_best): written after the checkpoint it names,
                               which is never pruned
            abandoned-<time>/  checkpoints newer than the one `resume --from` went back to

Nothing here executes or unpickles what it reads, and every read is bounded: only regular files
are opened (a FIFO or a device in their place is refused, never waited on), small files have size
limits, and a data file is read no further than the size its meta.json records. A ``step-N`` that
is a symbolic link is refused: checkpoints are folders of the run directory itself.
"""
from __future__ import annotations

import base64
import hashlib
import math
import os
import re
from pathlib import Path

import numpy

from .._bounded import MiB, load_json, open_regular, read_regular_text

__all__ = [
    "CONFIG_FILE", "METRICS_FILE", "METRICS_CSV", "LOG_FILE", "CHECKPOINTS", "LATEST", "BEST",
    "PARAMS_FILE", "STATES_FILE", "KVSTORE_FILE", "META_FILE", "META_FORMAT", "RunDirError",
    "checkpoint_name", "checkpoint_dir", "list_checkpoints", "read_latest", "read_best", "read_meta",
    "check_not_linked", "check_not_run_file",
    "verify_checkpoint", "newest_intact", "file_digest", "json_safe", "meta_array", "LATEST_LIMIT",
    "META_LIMIT",
]

CONFIG_FILE = "config.yaml"
METRICS_FILE = "metrics.jsonl"
METRICS_CSV = "metrics.csv"
LOG_FILE = "train.log"
CHECKPOINTS = "checkpoints"
LATEST = "latest"
BEST = "best"
PARAMS_FILE = "params.npz"
STATES_FILE = "trainer.states"
KVSTORE_FILE = "kvstore.npz"
META_FILE = "meta.json"
META_FORMAT = 1


def json_safe(value):
    """``value`` (dicts, lists, tuples and scalars) with NaN/Inf as None, so that meta.json and
    ``--json`` output are strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def meta_array(value) -> dict:
    """An array as meta.json holds it (a language model's carried state): its dtype, shape and
    bytes in base64. The ``default`` of ``json.dumps`` for a meta whose live form holds arrays,
    so that they are encoded only by whoever writes the file."""
    if not isinstance(value, numpy.ndarray):
        raise TypeError("Object of type %s is not JSON serializable" % type(value).__name__)
    value = numpy.ascontiguousarray(value)
    return {"dtype": value.dtype.name, "shape": list(value.shape),
            "data": base64.b64encode(value.tobytes()).decode("ascii")}


# The most bytes each small file may hold (they hold a few hundred to a few thousand).
LATEST_LIMIT = 4096
META_LIMIT = 16 * MiB

_STEP_DIR = re.compile(r"^step-(\d+)$", re.ASCII)  # "step-١٨" is not step 18


class RunDirError(ValueError):
    """A run directory or checkpoint is missing, damaged or not ours (the CLI exits 2)."""


def checkpoint_name(step: int) -> str:
    return "step-%d" % step


def checkpoint_dir(run_dir, step: int) -> Path:
    return Path(run_dir) / CHECKPOINTS / checkpoint_name(step)


def list_checkpoints(run_dir) -> list:
    """``[(step, path)]`` of every complete-looking ``step-N`` folder, oldest first."""
    folder = Path(run_dir) / CHECKPOINTS
    found = []
    try:
        if not folder.is_dir():
            return []
        for child in folder.iterdir():
            match = _STEP_DIR.match(child.name)
            if match and child.is_dir():
                found.append((int(match.group(1)), child))
    except OSError as exc:  # a folder of mode 000, say
        raise RunDirError("%s: cannot read the checkpoints folder (%s)" % (folder, _why(exc))) from None
    return sorted(found)


def read_latest(run_dir):
    """The step named by the ``latest`` pointer, or None when there is no pointer."""
    return _read_pointer(run_dir, LATEST)


def read_best(run_dir):
    """The step named by the ``best`` pointer, or None when there is no pointer."""
    return _read_pointer(run_dir, BEST)


def _read_pointer(run_dir, name):
    pointer = Path(run_dir) / CHECKPOINTS / name
    try:
        text = read_regular_text(pointer, LATEST_LIMIT).strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError("%s: cannot read the %s-checkpoint pointer (%s)"
                          % (pointer, name, _why(exc))) from None
    match = _STEP_DIR.match(text)
    if not match:
        raise RunDirError("%s: expected a checkpoint name like 'step-100', found %r" % (pointer, text[:60]))
    return int(match.group(1))


def file_digest(path, limit: int | None = None) -> str:
    """SHA-256 of the regular file ``path``; with ``limit``, of at most its first ``limit + 1``
    bytes (enough to tell that a file is longer than it should be)."""
    digest = hashlib.sha256()
    left = limit + 1 if limit is not None else None
    with open_regular(path) as f:
        while left is None or left > 0:
            block = f.read(1 << 20 if left is None else min(1 << 20, left))
            if not block:
                break
            digest.update(block)
            if left is not None:
                left -= len(block)
    return digest.hexdigest()


def _why(exc) -> str:
    return (getattr(exc, "strerror", None) or str(exc)) if isinstance(exc, OSError) else str(exc)


# Files of the run directory itself that an output of the same suffix could replace.
_RUN_FILES = (CONFIG_FILE, METRICS_FILE, METRICS_CSV, LOG_FILE, "env.json", "model.json",
              "feature_scaling.npz", "report.html")


def check_not_run_file(run_dir, path, what="output") -> None:
    """An output (predict's, export's) may not replace a file of the run it reads: a
    checkpoint's ``params.npz`` or ``metrics.csv`` overwritten by a typo is lost data."""
    from .._outpath import OutputRefused

    run_dir = os.path.realpath(run_dir)
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    checkpoints = os.path.join(run_dir, CHECKPOINTS)
    inside = folder == checkpoints or folder.startswith(checkpoints + os.sep)
    if inside or (folder == run_dir and os.path.basename(path) in _RUN_FILES):
        raise OutputRefused("%s: %s: a file of the run directory %s it reads (its checkpoints and "
                            "records are never replaced); write elsewhere" % (path, what, run_dir))


def check_not_linked(ckpt_dir) -> None:
    """A ``step-N`` that is a symbolic link could lead anywhere: refused."""
    ckpt_dir = Path(ckpt_dir)
    if ckpt_dir.is_symlink():
        raise RunDirError("%s: a symbolic link (to %s); a checkpoint is a folder of the run "
                          "directory itself" % (ckpt_dir, os.readlink(ckpt_dir)))


def read_meta(ckpt_dir) -> dict:
    """The checkpoint's ``meta.json``, checked for shape; a clear RunDirError otherwise."""
    check_not_linked(ckpt_dir)
    path = Path(ckpt_dir) / META_FILE
    try:
        meta = load_json(read_regular_text(path, META_LIMIT))
    except FileNotFoundError:
        raise RunDirError("%s: missing; the checkpoint is incomplete" % path) from None
    except (OSError, ValueError) as exc:    # UnicodeDecodeError and JSON's errors included
        raise RunDirError("%s: damaged checkpoint metadata (%s)" % (path, _why(exc))) from None
    if not isinstance(meta, dict) or meta.get("format") != META_FORMAT \
            or not _is_int(meta.get("step")) or not isinstance(meta.get("files"), dict):
        raise RunDirError("%s: not a trainer-cli checkpoint (format %d) metadata file" % (path, META_FORMAT))
    if meta["step"] < 0:
        raise RunDirError("%s: step: expected a count of steps (0 or more), got %d"
                          % (path, meta["step"]))
    return meta


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def verify_checkpoint(ckpt_dir) -> dict:
    """Check every file of a checkpoint against the sizes and digests in its meta.json."""
    ckpt_dir = Path(ckpt_dir)
    meta = read_meta(ckpt_dir)
    where = ckpt_dir / META_FILE
    # meta.json names the files to hash; only known names, so it cannot point outside the folder.
    extra = [name for name in meta["files"] if name not in (PARAMS_FILE, STATES_FILE)]
    for name in extra:
        if name != KVSTORE_FILE:
            raise RunDirError("%s: lists an unexpected file %r" % (where, name[:60]))
    for name in [PARAMS_FILE, STATES_FILE] + extra:
        expected = meta["files"].get(name)
        path = ckpt_dir / name
        if not isinstance(expected, dict):
            raise RunDirError("%s: meta.json does not describe %s" % (where, name))
        size, sha = expected.get("size"), expected.get("sha256")
        if not _is_int(size) or size < 0 or not isinstance(sha, str):
            raise RunDirError("%s: files.%s: expected a size (an integer, 0 or more) and a "
                              "sha256 (a string)" % (where, name))
        try:
            with open_regular(path) as f:
                actual = os.fstat(f.fileno()).st_size
        except FileNotFoundError:
            raise RunDirError("%s: missing; the checkpoint is incomplete" % path) from None
        except OSError as exc:
            raise RunDirError("%s: cannot read (%s)" % (path, _why(exc))) from None
        try:
            if actual != size or file_digest(path, size) != sha:
                raise RunDirError("%s: damaged (its size or SHA-256 does not match meta.json)" % path)
            _check_archive(path)
        except OSError as exc:
            raise RunDirError("%s: cannot read (%s)" % (path, _why(exc))) from None
    return meta


def _check_archive(path) -> None:
    """A checkpoint's archives are written uncompressed: a compressed member (a zip bomb, even
    with hashes to match) is refused from the central directory, before anything inflates."""
    import zipfile

    from .._npz import NpzError, check_declared_sizes

    with open_regular(path) as f:
        try:
            with zipfile.ZipFile(f) as archive:
                infos = archive.infolist()
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError,
                NotImplementedError, RuntimeError):
            return  # not a readable archive: the reader of the file says what it is
    try:
        check_declared_sizes(infos, stored_only=True)
    except NpzError as exc:
        raise RunDirError("%s: %s" % (path, exc)) from None


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
