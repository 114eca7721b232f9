"""The files a text iterator reads (``CSVIter``, ``LibSVMIter``): the one named, or those of a
folder, in name order, without hidden files (as MXNet's dmlc-core lists them)."""
from __future__ import annotations

import os

__all__ = ["source_files"]


def source_files(path):
    """``[path]``, or the regular files of the folder ``path`` in name order."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if not n.startswith("."))
        return [os.path.join(path, n) for n in names if os.path.isfile(os.path.join(path, n))]
    return [path]
