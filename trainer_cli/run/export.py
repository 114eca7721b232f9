"""``trainer export``: a run checkpoint's weights as a file of their own, in MXNet's binary
``.params`` format (what MXNet Gluon's ``save_parameters`` writes: real MXNet 1.9's
``net.load_parameters`` reads it into the same network) or as an ``.npz``.

The names are the structural ones of ``Block.save_parameters`` (``0.weight``, ``1.bias``), as in
the checkpoint's ``params.npz``; nothing of the run's model code is imported (a run directory is
data), so the same network must be built to load them: here with the model's builder,
``net.load_parameters(path)``; in MXNet with the same layers in the same order.
"""
from __future__ import annotations

from pathlib import Path

from .._outpath import check_output_path, write_failure
from . import layout
from .checkpoint import using_checkpoint

__all__ = ["EXPORT_FORMATS", "export_path", "export_weights"]

# format -> the suffix its file gets
EXPORT_FORMATS = {"mxnet": ".params", "npz": ".npz"}


def export_path(prefix, fmt: str) -> Path:
    """The file ``prefix`` names for ``fmt``: ``prefix`` plus the format's suffix, unless it
    already ends with it."""
    suffix = EXPORT_FORMATS[fmt]
    prefix = str(prefix)
    return Path(prefix if prefix.endswith(suffix) else prefix + suffix)


def export_weights(run_dir, prefix, fmt: str = "mxnet", which=None) -> dict:
    """Write the weights of ``run_dir``'s checkpoint ``which`` (None: latest, ``"best"``, or a
    step) to ``export_path(prefix, fmt)``; returns what was written."""
    from ..gluon.param_file import ParamFileError, load_arrays, save_arrays

    if fmt not in EXPORT_FORMATS:
        raise ValueError("format must be one of %s, not %r" % (", ".join(EXPORT_FORMATS), fmt))
    def read(step, folder):
        try:
            return step, folder, load_arrays(folder / layout.PARAMS_FILE)
        except ParamFileError as exc:
            raise layout.RunDirError(str(exc)) from None
    step, folder, weights = using_checkpoint(run_dir, which, read)
    path = check_output_path(export_path(prefix, fmt), "export")
    layout.check_not_run_file(run_dir, path, "export")
    try:
        save_arrays(path, weights, format=fmt)
    except OSError as exc:   # its folder read-only, the disk full: said of the output
        raise write_failure(path, exc, "export") from None
    return {"path": str(path), "format": fmt, "checkpoint": str(folder), "step": step,
            "parameters": [{"name": name, "shape": list(array.shape), "dtype": array.dtype.name}
                           for name, array in weights.items()]}
