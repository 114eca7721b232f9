"""Shell completion of arguments: config files, run directories and ``-o`` keys.

Click does the shell side (``_TRAINER_COMPLETE=bash_source trainer``, see the README); these
functions say what fits where. Each is cheap: a glob of the working folder, a listing of the
runs root, or the schema's key paths.
"""
from __future__ import annotations

import glob
import os

from click.shell_completion import CompletionItem

__all__ = ["complete_config", "complete_run_dir", "complete_override"]


def _folders(incomplete):
    return [CompletionItem(p + "/") for p in sorted(glob.glob(glob.escape(incomplete) + "*"))
            if os.path.isdir(p) and not os.path.basename(p).startswith(".")]


def complete_config(ctx, param, incomplete):
    """YAML files (and folders to descend into) matching what was typed."""
    files = [CompletionItem(p) for p in sorted(glob.glob(glob.escape(incomplete) + "*"))
             if p.endswith((".yaml", ".yml")) and os.path.isfile(p)]
    return files + _folders(incomplete)


def complete_run_dir(ctx, param, incomplete):
    """Run directories: under what was typed, else under ./runs/."""
    from ..report.history import is_run_dir

    if not incomplete or not os.path.dirname(incomplete) and not os.path.isdir("runs/" + incomplete):
        prefix = os.path.join("runs", incomplete) if os.path.isdir("runs") else incomplete
    else:
        prefix = incomplete
    found = sorted(glob.glob(glob.escape(prefix) + "*"))
    runs = [CompletionItem(p) for p in found if is_run_dir(p)]
    return runs + [item for item in _folders(prefix) if not is_run_dir(item.value.rstrip("/"))]


def complete_override(ctx, param, incomplete):
    """``key=`` for every key the config schema knows, e.g. ``optimizer.params.learning_rate=``."""
    if "=" in incomplete:
        return []
    from ..config.report import schema_paths
    from ..config.schema import RunConfig

    keys = sorted({".".join(map(str, p)) for p in schema_paths(RunConfig)})
    return [CompletionItem(k + "=") for k in keys if k.startswith(incomplete)]
