"""``trainer inspect STATES_FILE``: what a trainer states file holds, read without pickle."""
from __future__ import annotations

import os
import warnings

import numpy

from .._bounded import open_regular
from ..ndarray import NDArray
from ..optimizer.state_file import StateFileError, describe_states, loads_states

__all__ = ["inspect_states_file", "states_summary"]


def _leaves(state, path=""):
    """``(slot, array)`` for every array in a state (tuples and lists nest)."""
    if state is None:
        return
    if isinstance(state, (tuple, list)):
        for i, s in enumerate(state):
            yield from _leaves(s, "%s[%d]" % (path, i))
        return
    yield path or "state", state


def _array_summary(slot, array) -> dict:
    """Shape, dtype and L2 norm of a state array; a row_sparse one also says how many rows it
    stores (and is summed over those, never densified)."""
    rows = None
    if getattr(array, "stype", "default") == "row_sparse":
        rows, shape = int(array.indices.shape[0]), list(array.shape)
        host = array.data.asnumpy()
    else:
        host = array.asnumpy() if isinstance(array, NDArray) else numpy.asarray(array)
        shape = list(host.shape)
    norm = float(numpy.sqrt(numpy.sum(numpy.square(host, dtype=numpy.float64)))) if host.size else 0.0
    out = {"slot": slot, "shape": shape, "dtype": host.dtype.name, "norm": norm,
           "stype": "default" if rows is None else "row_sparse"}
    if rows is not None:
        out["rows_stored"] = rows
    return out


def states_summary(data: bytes, source: str) -> dict:
    """The report of a states file's bytes; ``StateFileError`` naming ``source`` when they are
    not a readable trainer-cli states file."""
    with warnings.catch_warnings():
        # Rebuilding an optimizer repeats its construction warnings, which say nothing here.
        warnings.simplefilter("ignore")
        header = describe_states(data, source)
        by_device, optimizer = loads_states(data, source)
    desc = header.get("optimizer") or {}
    names = {k: v for k, v in (desc.get("hyperparams") or {}).get("param_idx2name") or []}
    names.update({k: v for k, v in header.get("param_names") or []})
    devices = []
    for device_id in sorted(by_device):
        params = []
        for index, state in sorted(by_device[device_id].items(), key=lambda kv: str(kv[0])):
            params.append({"index": index, "name": names.get(index),
                           "states": [_array_summary(slot, a) for slot, a in _leaves(state)]})
        devices.append({"device_id": device_id, "params": params})
    out = {
        "path": source,
        "size": len(data),
        "format": header.get("format"),
        "version": header.get("version"),
        "optimizer": None,
        "hyperparams": None,
        "num_update": None,
        "learning_rate": None,
        "lr_scheduler": None,
        "update_counts": None,
        "lr_mult": None,
        "wd_mult": None,
        "devices": devices,
    }
    if optimizer is not None:
        hyper = dict(desc.get("hyperparams") or {})
        hyper.pop("param_idx2name", None)
        hyper.pop("lr_scheduler", None)
        out.update(
            optimizer=optimizer.registry_name,
            hyperparams=hyper,
            num_update=int(optimizer.num_update),
            learning_rate=float(optimizer.learning_rate),
            lr_scheduler=None if optimizer.lr_scheduler is None else optimizer.lr_scheduler.to_dict(),
            update_counts={str(dev): {str(i): c for i, c in counts.items()}
                           for dev, counts in optimizer._all_index_update_counts.items() if counts},
            lr_mult={str(k): v for k, v in optimizer.lr_mult.items()},
            wd_mult={str(k): v for k, v in optimizer.wd_mult.items()},
        )
    return out


def inspect_states_file(path) -> dict:
    """The report of a trainer states file (``Trainer.save_states`` or a checkpoint's)."""
    source = os.fspath(path)
    try:
        with open_regular(source) as f:
            data = f.read()
    except OSError as exc:
        raise StateFileError("%s: cannot read optimizer states: %s"
                             % (source, exc.strerror or exc)) from None
    return {"kind": "states_file", **states_summary(data, source)}
