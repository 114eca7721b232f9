"""Writing, reading and pruning ``checkpoints/step-N/`` (layout in :mod:`.layout`).

A save builds ``checkpoints/.tmp-step-N-*/`` (params.npz, trainer.states, kvstore.npz when
compressing, then meta.json with each file's size and SHA-256), fsyncs the files and the folder,
renames it to ``step-N``, then rewrites ``latest`` atomically, and only then prunes. It comes in
two parts: :func:`begin_checkpoint` writes the arrays' bytes (training must wait for that much),
:meth:`PendingCheckpoint.finish` does the rest from the files, on whatever thread. A crash at
any point leaves the previous checkpoint and pointer intact; leftovers of an interrupted save or
prune start with ``.`` and are removed by :func:`clean_leftovers`.

The caller hands over the kvstore residuals (:func:`.kvstate.get_residuals`, which a dist job's
ranks call together) rather than the store: saving is rank 0's business alone.
"""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from .._atomic import (fsync_dir, make_temp_dir, open_new_file, start_writeback,
                       write_text_atomic)
from .._npz import write_npz_deferred
from .._stepwise import run_to_end
from .._bounded import read_regular
from . import fit, kvstate, layout
from .layout import RunDirError

__all__ = ["save_checkpoint", "snapshot", "file_writers", "begin_checkpoint", "PendingCheckpoint",
           "write_checkpoint", "load_checkpoint", "prune", "clean_leftovers", "set_aside_after",
           "resume_point", "chosen_checkpoint", "using_checkpoint", "point_best", "BEST_CHOICE"]

# What ``--from best`` passes for the checkpoint the ``best`` pointer names.
BEST_CHOICE = "best"

_TMP_PREFIX = ".tmp-step-"
_TRASH_PREFIX = ".trash-"


def snapshot(net, trainer, residuals: dict, copy=True) -> dict | None:
    """A checkpoint's files as the arrays they hold (file name -> {member: host array}): copies
    taken now, which can be written while training goes on; with ``copy=False`` the live arrays,
    for a save that ends before the next step. None when the kvstore holds the optimizer states
    (it writes their file itself: see :func:`file_writers`)."""
    states = trainer.states_arrays(copy)
    if states is None:
        return None
    files = {layout.PARAMS_FILE: net.parameter_arrays(copy=copy), layout.STATES_FILE: states}
    if residuals:
        files[layout.KVSTORE_FILE] = residuals
    return files


def save_checkpoint(run_dir, step: int, net, trainer, residuals: dict, meta: dict) -> Path:
    """Write checkpoint ``step`` and point ``latest`` at it; returns its folder. ``residuals``
    are ``kvstore.npz``'s entries (none: no such file)."""
    files = snapshot(net, trainer, residuals, copy=False) or file_writers(net, trainer, residuals)
    return write_checkpoint(run_dir, step, files, meta)


def file_writers(net, trainer, residuals: dict) -> dict:
    """A checkpoint's files as functions that write them from the live objects (the fallback of
    :func:`snapshot`: only for a save that finishes before training goes on)."""
    from ..gluon.param_file import save_arrays

    files = {layout.PARAMS_FILE: net.save_parameters, layout.STATES_FILE: trainer.save_states}
    if residuals:
        files[layout.KVSTORE_FILE] = lambda path: save_arrays(path, residuals)
    return files


class PendingCheckpoint:
    """Checkpoint ``step`` with its files' bytes in a temporary folder, made by
    :func:`begin_checkpoint` in the time ``numpy.save`` takes for them; the arrays may change from
    then on. :meth:`finish` (on any thread) completes, fsyncs and publishes it; :meth:`abandon`
    removes it."""

    def __init__(self, run_dir, step: int, meta: dict):
        self.step = int(step)
        self.folder = Path(run_dir) / layout.CHECKPOINTS
        self.final = self.folder / layout.checkpoint_name(step)
        self._meta = meta
        self._tmp = None
        self._files = []    # (name, path, open file or None, DeferredNpz or None)

    def _begin(self, files: dict):
        if self.final.exists():
            # Only a checkpoint of an abandoned future can be here (see set_aside_after).
            set_aside(self.folder, [self.final])
        self._tmp = Path(make_temp_dir(self.folder, "%s%d-" % (_TMP_PREFIX, self.step)))
        for name, content in files.items():
            path = self._tmp / name
            if callable(content):
                content(str(path))
                self._files.append((name, path, None, None))
            else:
                # A fresh folder renamed as a whole: the file needs no temporary name of its own.
                f = open_new_file(path, readable=True)
                try:
                    deferred = write_npz_deferred(f, content)
                except BaseException:
                    f.close()
                    raise
                self._files.append((name, path, f, deferred))

    def finish(self) -> Path:
        """Each file's CRCs, SHA-256 (of the bytes in the file) and fsync, meta.json, the rename
        to ``step-N``, then ``latest``; returns the checkpoint's folder."""
        return run_to_end(self.finish_steps())

    def finish_steps(self):
        """:meth:`finish` as a generator of small steps (``_stepwise``)."""
        try:
            described = {}
            for name, path, f, deferred in self._files:
                if deferred is None:
                    described[name] = {"size": path.stat().st_size,
                                       "sha256": layout.file_digest(path)}
                    with open(path, "rb") as written:
                        os.fsync(written.fileno())
                else:
                    start_writeback(f.fileno())     # the disk works while the bytes are hashed
                    size, digest = yield from deferred.finish_steps(f)
                    os.fsync(f.fileno())
                    f.close()
                    described[name] = {"size": size, "sha256": digest}
                yield
            # NaN/Inf (a diverged metric) as null: meta.json is strict JSON.
            meta = dict(layout.json_safe(self._meta), format=layout.META_FORMAT, step=self.step,
                        files=described,
                        saved_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
            with open_new_file(self._tmp / layout.META_FILE) as f:
                f.write((json.dumps(meta, indent=1, sort_keys=True, default=layout.meta_array)
                         + "\n").encode("utf-8"))
                os.fsync(f.fileno())
            fsync_dir(self._tmp)
            os.rename(self._tmp, self.final)
        except BaseException:
            self.abandon()
            raise
        fsync_dir(self.folder)
        write_text_atomic(self.folder / layout.LATEST, layout.checkpoint_name(self.step) + "\n")
        best = self._meta.get("best")
        if isinstance(best, dict) and best.get("step") == self.step:
            # The run's best so far is this checkpoint: named before any pruning can happen.
            write_text_atomic(self.folder / layout.BEST, layout.checkpoint_name(self.step) + "\n")
        return self.final

    def abandon(self):
        """Remove the unfinished checkpoint (``latest`` never pointed at it)."""
        for _, _, f, _ in self._files:
            if f is not None:
                f.close()
        self._files = []
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def begin_checkpoint(run_dir, step: int, files: dict, meta: dict) -> PendingCheckpoint:
    """Write checkpoint ``step``'s bytes from ``files`` (name -> {member: array} for an ``.npz``,
    or a function writing the file at the path it is given) into a temporary folder; the caller
    finishes it. Touches nothing but the run directory's ``checkpoints/``."""
    pending = PendingCheckpoint(run_dir, step, meta)
    try:
        pending._begin(files)
    except BaseException:
        pending.abandon()
        raise
    return pending


def write_checkpoint(run_dir, step: int, files: dict, meta: dict) -> Path:
    """Write checkpoint ``step`` from ``files`` (as :func:`begin_checkpoint` takes them), then
    point ``latest`` at it; returns its folder. May run on a background thread."""
    return begin_checkpoint(run_dir, step, files, meta).finish()


def load_checkpoint(ckpt_dir, net, trainer, kv, contexts) -> tuple[dict, list]:
    """Verify ``ckpt_dir`` and load it into ``net``, ``trainer`` and ``kv``; returns its meta and
    notes for the user (saved state that this job could not take back)."""
    from ..gluon.param_file import ParamFileError, load_arrays
    from ..gluon.parameter import ParameterError
    from ..optimizer.state_file import load_states_file

    ckpt_dir = Path(ckpt_dir)
    meta = layout.verify_checkpoint(ckpt_dir)
    # Every file is read and checked against the model, optimizer and config before any loads.
    params_path, states_path = ckpt_dir / layout.PARAMS_FILE, ckpt_dir / layout.STATES_FILE
    try:
        weights = load_arrays(params_path)
    except ParamFileError as exc:
        raise RunDirError(str(exc)) from None
    fit.check_params(params_path, weights, net)
    by_device, optimizer = load_states_file(states_path)
    fit.check_states(states_path, by_device, optimizer, net, trainer, weights)
    residuals, where = {}, ckpt_dir
    if layout.KVSTORE_FILE in meta["files"]:
        where = ckpt_dir / layout.KVSTORE_FILE
        try:
            residuals = load_arrays(where)
        except ParamFileError as exc:
            raise RunDirError(str(exc)) from None
        fit.check_residuals(where, residuals, kv, trainer, contexts)
    try:
        net.load_parameters(str(params_path), ctx=contexts)
    except ParameterError as exc:
        raise RunDirError("%s: does not fit the model in config.yaml: %s"
                          % (ckpt_dir / layout.PARAMS_FILE, exc)) from None
    trainer.load_states(str(states_path))
    try:
        note = kvstate.set_residuals(kv, residuals, contexts, where)
    except (KeyError, ValueError) as exc:
        raise RunDirError("%s: does not fit the model in config.yaml: %s"
                          % (where, exc.args[0] if exc.args else exc)) from None
    return meta, [note] if note else []


def resume_point(run_dir, from_step: int | None = None):
    """``(step, folder)`` of the checkpoint to resume from, or None when there is none yet.
    ``from_step``: a step, or ``"best"`` for the one the ``best`` pointer names.

    A damaged or missing checkpoint is an error that names the damaged file and the newest
    intact checkpoint to pass as ``--from``: going back silently would redo work unasked.
    """
    run_dir = Path(run_dir)
    if from_step == BEST_CHOICE:
        from_step = best_step(run_dir)
    if from_step is not None:
        path = layout.checkpoint_dir(run_dir, from_step)
        if not path.is_dir():
            have = ", ".join(p.name for _, p in layout.list_checkpoints(run_dir)) or "none"
            raise RunDirError("%s: no such checkpoint (checkpoints: %s)" % (path, have))
        _verify_or_explain(run_dir, from_step, path, "")
        return from_step, path
    try:
        step = layout.read_latest(run_dir)
    except RunDirError as exc:
        raise RunDirError("%s%s" % (exc, _suggest(run_dir, None))) from None
    if step is None:
        found = layout.list_checkpoints(run_dir)
        if not found:
            return None
        pointer = run_dir / layout.CHECKPOINTS / layout.LATEST
        raise RunDirError("%s: missing, but checkpoints exist%s" % (pointer, _suggest(run_dir, None)))
    path = layout.checkpoint_dir(run_dir, step)
    if not path.is_dir():
        raise RunDirError("%s: the latest checkpoint is missing%s" % (path, _suggest(run_dir, step)))
    _verify_or_explain(run_dir, step, path, " (the latest)")
    return step, path


def chosen_checkpoint(run_dir, which=None):
    """``(step, folder)`` of a run's checkpoint to use (evaluate, predict, export): the latest
    (``which`` None), the best (``"best"``) or a step; verified, or a RunDirError."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError("%s: no such run directory" % run_dir)
    point = resume_point(run_dir, which)
    if point is None:
        raise RunDirError("%s: no checkpoint yet (is it a run directory?)" % run_dir)
    return point


def using_checkpoint(run_dir, which, use):
    """``use(step, folder)`` for the checkpoint ``which`` (see :func:`chosen_checkpoint`). A run
    that trains meanwhile removes old checkpoints (``keep_last``): when ``use`` fails because
    the latest or best one it was given is gone, it is given the one chosen now (a few times)."""
    for attempt in range(_CHOOSE_AGAIN + 1):
        step, folder = chosen_checkpoint(run_dir, which)
        try:
            return use(step, folder)
        except Exception:  # noqa: BLE001 - whatever reading a removed file raised; else re-raised
            if isinstance(which, int) or folder.is_dir() or attempt == _CHOOSE_AGAIN:
                raise


_CHOOSE_AGAIN = 3


def best_step(run_dir) -> int:
    """The step the ``best`` pointer names; a RunDirError saying why there is none."""
    run_dir = Path(run_dir)
    step = layout.read_best(run_dir)
    if step is None:
        raise RunDirError("%s: no best checkpoint: a run selects one only with early_stopping "
                          "or checkpoint.keep_best in its config, once it has validated"
                          % (run_dir / layout.CHECKPOINTS / layout.BEST))
    return step


def point_best(run_dir, step) -> bool:
    """Point ``best`` at checkpoint ``step`` (a resume going back to where that was the best),
    or remove the pointer when ``step`` is None or its checkpoint is gone; True when it points."""
    folder = Path(run_dir) / layout.CHECKPOINTS
    pointer = folder / layout.BEST
    if step is None or not layout.checkpoint_dir(run_dir, step).is_dir():
        if pointer.is_file() and not pointer.is_symlink():
            pointer.unlink()
            fsync_dir(folder)
        return False
    text = layout.checkpoint_name(step) + "\n"
    try:
        same = read_regular(pointer, layout.LATEST_LIMIT) == text.encode()
    except OSError:
        same = False
    if not same:
        write_text_atomic(pointer, text)
    return True


def _verify_or_explain(run_dir, step, path, what):
    try:
        layout.verify_checkpoint(path)
    except RunDirError as exc:
        raise RunDirError("checkpoint %s%s is damaged: %s%s"
                          % (path.name, what, exc, _suggest(run_dir, step))) from None


def _suggest(run_dir, below) -> str:
    intact = layout.newest_intact(run_dir, below=below)
    if intact is None:
        return ". No intact checkpoint is left to resume from."
    return (". The newest intact checkpoint is %s; resume from it with: trainer resume %s --from %s"
            % (layout.checkpoint_name(intact), run_dir, layout.checkpoint_name(intact)))


def set_aside(folder: Path, paths) -> Path | None:
    """Move checkpoint folders into ``checkpoints/abandoned-<UTC time>/`` (kept, out of the way)."""
    paths = list(paths)
    if not paths:
        return None
    target = folder / ("abandoned-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime()))
    n = 1
    while target.exists() and any((target / p.name).exists() for p in paths):
        n += 1
        target = folder / ("abandoned-%s-%d" % (time.strftime("%Y%m%d-%H%M%S", time.gmtime()), n))
    target.mkdir(exist_ok=True)
    for p in paths:
        os.rename(p, target / p.name)
    fsync_dir(folder)
    return target


def set_aside_after(run_dir, step: int):
    """Checkpoints newer than ``step`` belong to a future the resumed run replaces: moving them
    aside keeps them from being pruned in place of, or colliding with, the new ones."""
    folder = Path(run_dir) / layout.CHECKPOINTS
    later = [p for s, p in layout.list_checkpoints(run_dir) if s > step]
    return [p.name for p in later], set_aside(folder, later)


def point_latest(run_dir, step: int):
    folder = Path(run_dir) / layout.CHECKPOINTS
    pointer = folder / layout.LATEST
    text = layout.checkpoint_name(step) + "\n"
    try:
        same = read_regular(pointer, layout.LATEST_LIMIT) == text.encode()
    except OSError:  # missing, or not a regular file: replaced below
        same = False
    if not same:
        write_text_atomic(pointer, text)


def clean_leftovers(run_dir):
    """Remove temp files and folders of writes, saves and prunes that a crash interrupted."""
    run_dir = Path(run_dir)
    folder = run_dir / layout.CHECKPOINTS
    for parent in (run_dir, folder):
        if not parent.is_dir():
            continue
        for child in parent.iterdir():
            if child.name.startswith((_TMP_PREFIX, _TRASH_PREFIX)) and child.is_dir():
                shutil.rmtree(child, ignore_errors=True)
            elif child.name.startswith(".tmp-") and child.is_file():
                child.unlink(missing_ok=True)


def prune(run_dir, keep_last: int, keep_best=None):
    """Delete all but the newest ``keep_last`` checkpoints and those the ``latest`` and ``best``
    pointers name. (A run directory from before the ``best`` pointer existed: with
    ``keep_best``, which has ``metric`` and ``mode``, the best by the value in its meta.json.)"""
    folder = Path(run_dir) / layout.CHECKPOINTS
    found = layout.list_checkpoints(run_dir)
    keep = {s for s, _ in found[-keep_last:]}
    for read in (layout.read_latest, layout.read_best):
        try:
            named = read(run_dir)
        except RunDirError:
            # A damaged pointer: keep everything rather than guess what it named.
            return
        if named is not None:
            keep.add(named)
    if keep_best is not None and layout.read_best(run_dir) is None:
        best = _best(found, keep_best)
        if best is not None:
            keep.add(best)
    for step, path in found:
        if step in keep:
            continue
        # Renamed first, so a crash mid-delete never leaves a half-deleted step-N behind.
        trash = folder / ("%s%s-%d" % (_TRASH_PREFIX, path.name, os.getpid()))
        os.rename(path, trash)
        shutil.rmtree(trash, ignore_errors=True)


def _best(found, keep_best):
    best_step, best_value = None, None
    for step, path in found:
        try:
            value = layout.read_meta(path).get("metrics", {}).get(keep_best.metric)
        except RunDirError:
            continue
        if not isinstance(value, (int, float)) or value != value:
            continue
        better = best_value is None or (value > best_value if keep_best.mode == "max"
                                        else value < best_value)
        if better:
            best_step, best_value = step, value
    return best_step
