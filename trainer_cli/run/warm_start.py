"""Starting a network from other weights (``model.init_from``), and which of its parameters train
at all (``model.freeze``) or at their own rate (``model.lr_mult``).

A source is read as data, never as code: a checkpoint folder is verified against its meta.json
(sizes and SHA-256) before its ``params.npz`` is read, a ``latest``/``best`` pointer is a small
text file read with a bound, and a run directory is only ever looked into for those. Nothing of
a run directory (its config, its model file) is imported.

Patterns are globs (``fnmatch``) over the structural names that ``save_parameters`` writes and a
checkpoint's ``params.npz`` holds (``features.0.weight``, ``output.bias``).
"""
from __future__ import annotations

import re
from fnmatch import fnmatchcase
from pathlib import Path

from .._bounded import read_regular_text
from ..config import ConfigError, ConfigIssue
from . import layout
from .layout import RunDirError

__all__ = ["source_params_file", "load_init_from", "apply_freeze_and_lr_mult",
           "trained_params", "POINTERS"]

# Pointer files of a run's checkpoints/ folder that init_from may name (``best`` is kept by runs
# that keep their best checkpoint).
POINTERS = (layout.BEST, layout.LATEST)
_STEP_TEXT = re.compile(r"^step-(\d+)$", re.ASCII)


def _issue(config_file, key, message):
    return ConfigError([ConfigIssue(message, key=key, file=str(config_file) if config_file else None)])


def _checkpoint_params(folder: Path) -> Path:
    layout.verify_checkpoint(folder)         # refuses a linked, incomplete or damaged checkpoint
    return folder / layout.PARAMS_FILE


def _follow_pointer(pointer: Path) -> Path:
    try:
        text = read_regular_text(pointer, layout.LATEST_LIMIT).strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise RunDirError("%s: cannot read the checkpoint pointer (%s)"
                          % (pointer, getattr(exc, "strerror", None) or exc)) from None
    if not _STEP_TEXT.match(text):
        raise RunDirError("%s: expected a checkpoint name like 'step-100', found %r"
                          % (pointer, text[:60]))
    return pointer.parent / text


def source_params_file(source) -> Path:
    """The parameter file that ``init_from`` names: a checkpoint's verified ``params.npz`` (for a
    ``step-N`` folder, a ``latest``/``best`` pointer, or a run directory: its ``best``, else its
    ``latest``), or the file itself (an MXNet ``.params`` or an ``.npz``)."""
    path = Path(source)
    if path.is_dir():
        if (path / layout.META_FILE).exists():
            return _checkpoint_params(path)
        folder = path / layout.CHECKPOINTS
        if folder.is_dir():
            for name in POINTERS:
                if (folder / name).exists():
                    return _checkpoint_params(_follow_pointer(folder / name))
            raise RunDirError("%s: a run directory without a checkpoint to start from (no %s)"
                              % (path, " or ".join("checkpoints/%s" % n for n in POINTERS)))
        raise RunDirError("%s: a folder that is neither a checkpoint (no %s) nor a run directory "
                          "(no %s/)" % (path, layout.META_FILE, layout.CHECKPOINTS))
    if path.name in POINTERS and path.parent.name == layout.CHECKPOINTS:
        return _checkpoint_params(_follow_pointer(path))
    if not path.exists():
        raise RunDirError("%s: not found" % path)
    return path


def load_init_from(net, model_section, contexts, config_file=None) -> str:
    """Overwrite ``net``'s parameters (initialized, their shapes known) with those of
    ``model_section.init_from``; returns a note naming the file read."""
    from ..gluon.param_file import ParamFileError
    from ..gluon.parameter import ParameterError

    source = model_section.init_from
    try:
        params_file = source_params_file(source)
        net.load_parameters(str(params_file), ctx=contexts,
                            allow_missing=model_section.allow_missing,
                            ignore_extra=model_section.ignore_extra, cast_dtype=True)
    except (RunDirError, ParamFileError) as exc:
        raise _issue(config_file, "model.init_from", str(exc)) from None
    except ParameterError as exc:
        text = str(exc).replace("Set allow_missing=True", "Set model.allow_missing: true") \
                       .replace("Set ignore_extra=True", "Set model.ignore_extra: true")
        raise _issue(config_file, "model.init_from", "%s does not fit the model: %s"
                     % (params_file, text)) from None
    return "weights from %s" % params_file


def _matching(pattern, names) -> list:
    return [name for name in names if fnmatchcase(name, pattern)]


def _no_match(config_file, key, pattern, names):
    shown = ", ".join(list(names)[:12]) + (", ..." if len(names) > 12 else "")
    return _issue(config_file, key, "pattern %r matches no parameter of the model (parameters: "
                  "%s)" % (pattern, shown))


def apply_freeze_and_lr_mult(net, model_section, config_file=None) -> list:
    """Set ``grad_req = 'null'`` on the frozen parameters and ``lr_mult`` on those matched;
    returns the frozen Parameters. A pattern that matches nothing is an error (a typo would
    otherwise train everything), as is a parameter given two different multipliers."""
    params = net._collect_params_with_prefix()
    names = list(params)
    frozen = {}
    for i, pattern in enumerate(model_section.freeze):
        found = _matching(pattern, names)
        if not found:
            raise _no_match(config_file, "model.freeze.%d" % i, pattern, names)
        for name in found:
            frozen[id(params[name])] = params[name]
    mult = {}
    for pattern, value in model_section.lr_mult.items():
        found = _matching(pattern, names)
        if not found:
            raise _no_match(config_file, "model.lr_mult.%s" % pattern, pattern, names)
        for name in found:
            param = params[name]
            if id(param) in frozen:
                raise _issue(config_file, "model.lr_mult.%s" % pattern, "%s is frozen (model."
                             "freeze), so a learning-rate multiplier would never apply" % name)
            earlier = mult.get(id(param))
            if earlier is not None and earlier[1] != value:
                raise _issue(config_file, "model.lr_mult.%s" % pattern, "%s gets %g here and %g "
                             "from %r: give each parameter one multiplier"
                             % (name, value, earlier[1], earlier[0]))
            mult[id(param)] = (pattern, value)
            param.lr_mult = value
    for param in frozen.values():
        param.grad_req = "null"
    return list(frozen.values())


def trained_params(net, frozen) -> dict:
    """The parameters the Trainer updates: all of ``net``'s but the frozen ones."""
    skip = {id(p) for p in frozen}
    return {name: p for name, p in net.collect_params().items() if id(p) not in skip}
