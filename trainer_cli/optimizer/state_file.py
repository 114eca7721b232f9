"""The optimizer-states file: an ``.npz`` of arrays plus a JSON header, never pickle.

Layout of the npz:

- ``__header__``: a uint8 array holding UTF-8 JSON (below);
- ``a0``, ``a1``, ...: the state arrays, in the order the header lists them.

The header::

    {"format": "trainer-cli/optimizer-states", "version": 1,
     "optimizer": null | {"name": registry name, "hyperparams": {...constructor values...},
                          "num_update": n, "update_counts": [[device_id, [[index, count], ...]], ...],
                          "current_device": device_id, "lr_mult": [[key, value], ...],
                          "wd_mult": [[key, value], ...], "extra": {...}, "extra_arrays": {name: key}},
     "devices": [{"device_id": d, "states": [{"index": i, "state": LAYOUT}, ...]}, ...]}

where a LAYOUT is ``null``, ``{"array": key, "dtype": "float32", "shape": [...]}``,
``{"row_sparse": {"shape": [...], "dtype": "float32", "indices": key, "data": key}}`` (a
row_sparse state stored as its parts: int64 row ids and one row of values per id, never
densified), or ``{"tuple": [LAYOUT, ...]}`` / ``{"list": [LAYOUT, ...]}``. The scheduler, with
every field that decides its values, sits in ``hyperparams.lr_scheduler``.

Version 2 added the row_sparse layout; a file without row_sparse states is still written as
version 1, and both versions are read.

Loading rebuilds the optimizer from the header (hyper-parameters and counts come from the file,
as MXNet's unpickling does) and returns the states as NDArrays on ``cpu(0)``; the ``Updater`` moves
them to each weight's device on first use. Anything wrong raises ``StateFileError``.
"""
from __future__ import annotations

import functools
import io
import json
import os

import numpy

from .._atomic import atomic_write
from .._bounded import load_json, open_regular
from .._npz import NpzError, read_npz, write_npz
from ..context import cpu
from ..ndarray import NDArray
from ..ndarray import sparse as _sparse
from ..ndarray.interop import raw
from ..ndarray.sparse import RowSparseNDArray
from .optimizer import Optimizer

__all__ = ["StateFileError", "FORMAT", "VERSION", "dumps_states", "states_arrays", "loads_states",
           "save_states_file", "load_states_file", "describe_states", "LayoutMemo"]

FORMAT = "trainer-cli/optimizer-states"
VERSION = 2
# Version 1 files (no row_sparse layouts) are what VERSION 2 writes without sparse states.
_READABLE = (1, 2)
_HEADER = "__header__"
_ZIP_MAGIC = b"PK\x03\x04"
_NPY_MAGIC = b"\x93NUMPY"


class StateFileError(ValueError):
    """A states file that cannot be read: truncated, corrupted, foreign, or from another version."""


# ---------------------------------------------------------------------- writing
def dumps_states(states_by_device: dict, optimizer: Optimizer | None, param_names=None) -> bytes:
    """Serialize ``{device_id: {index: state}}`` and (optionally) the optimizer to bytes.

    ``param_names`` (``{index: name}``) only labels the states for people reading the file.
    """
    buf = io.BytesIO()
    write_npz(buf, states_arrays(states_by_device, optimizer, param_names))
    return buf.getvalue()


def states_arrays(states_by_device: dict, optimizer: Optimizer | None, param_names=None,
                  copy=True, memo=None) -> dict:
    """The members of the ``.npz`` that :func:`dumps_states` writes (name -> host array). With
    ``copy=False`` host states are the live arrays themselves, for a write that ends before they
    change. ``memo`` (a :class:`LayoutMemo` the caller keeps) lets a later call skip the walk of
    states that are still the same objects holding the same host arrays; the result is the same
    either way."""
    arrays: dict = {}

    def put(array) -> str:
        key = "a%d" % len(arrays)
        arrays[key] = _host(array, copy)
        return key

    leaves = memo.leaves(states_by_device) if memo is not None else None
    if leaves is not None:
        for leaf, _ in leaves:
            put(leaf)
        devices_json, version = memo.devices_json, memo.version
    else:
        devices_json, version, leaves = _walk_states(states_by_device, put)
        if memo is not None:
            memo.remember(states_by_device, leaves, devices_json, version)
    # The header as json.dumps writes the whole dict (its default separators), the states'
    # part from the walk's text.
    text = json.dumps({"format": FORMAT, "version": version,
                       "optimizer": None if optimizer is None
                       else _describe_optimizer(optimizer, put)}, allow_nan=True)
    text = text[:-1] + ', "devices": ' + devices_json
    if param_names:
        text += ', "param_names": ' + (memo.names_json(param_names) if memo is not None
                                       else _names_json(param_names))
    text += "}"
    return {_HEADER: numpy.frombuffer(text.encode("utf-8"), dtype=numpy.uint8), **arrays}


def _walk_states(states_by_device: dict, put):
    """``(the header's "devices" as JSON text, the file's version, [(state leaf, its host
    array)])``, each array handed to ``put`` in the file's order."""
    sparse_used = []
    leaves = []

    def stored(array) -> str:
        key = put(array)
        leaves.append((array, raw(array) if isinstance(array, NDArray) else array))
        return key

    def layout(state):
        if state is None:
            return None
        if isinstance(state, (tuple, list)):
            return {type(state).__name__: [layout(s) for s in state]}
        if isinstance(state, RowSparseNDArray):
            sparse_used.append(True)
            data = stored(state.data)
            return {"row_sparse": {"shape": list(state.shape),
                                   "dtype": _dtype_name(raw(state.data).dtype),
                                   "indices": stored(state.indices), "data": data}}
        if isinstance(state, NDArray) and state.stype != "default":
            raise TypeError("cannot save a %s optimizer state" % state.stype)
        if isinstance(state, NDArray) or hasattr(state, "shape"):
            key = stored(state)
            host = leaves[-1][1]
            return {"array": key, "dtype": _dtype_name(host.dtype), "shape": list(host.shape)}
        raise TypeError("cannot save optimizer state of type %s" % type(state).__name__)

    devices = []
    for device_id in sorted(states_by_device):
        entries = [{"index": _json_key(index), "state": layout(state)}
                   for index, state in states_by_device[device_id].items()]
        devices.append({"device_id": int(device_id), "states": entries})
    return (json.dumps(devices, allow_nan=True), VERSION if sparse_used else 1,
            None if sparse_used else leaves)


def _names_json(param_names: dict) -> str:
    return json.dumps([[_json_key(i), str(n)] for i, n in sorted(param_names.items())])


class LayoutMemo:
    """What :func:`states_arrays` worked out from a trainer's states last time. The walk and its
    JSON are reused while every device's states are the same objects (a state's arrays are
    updated in place) and each dense state array still holds the same host array, whose dtype
    and shape the header records; anything else (a state replaced or added, a load, a sparse
    or device state) walks again. Frequent checkpoints of a small model spend most of their
    states' file here otherwise."""

    __slots__ = ("_devices", "_leaves", "devices_json", "version", "_names", "_names_json")

    def __init__(self):
        self._devices = None
        self._leaves = ()
        self._names = None

    def leaves(self, states_by_device: dict):
        """``[(state array, its host array)]`` in the file's order, or None when the states
        changed."""
        devices = self._devices
        if devices is None or len(devices) != len(states_by_device):
            return None
        for device_id, states, items in devices:
            now = states_by_device.get(device_id)
            if now is not states or len(now) != len(items):
                return None
            for (index, state), (now_index, now_state) in zip(items, now.items()):
                if state is not now_state or index != now_index:
                    return None
        for leaf, host in self._leaves:
            if raw(leaf) is not host:
                return None
        return self._leaves

    def remember(self, states_by_device: dict, leaves, devices_json: str, version: int):
        # Only dense states held as NumPy arrays: a sparse state's parts change shape each
        # step, and a device array's host copy is new at each call.
        if leaves is None or not all(isinstance(leaf, NDArray) and type(host) is numpy.ndarray
                                     for leaf, host in leaves):
            self._devices = None
            return
        self._devices = [(device_id, states, list(states.items()))
                         for device_id, states in states_by_device.items()]
        self._leaves = leaves
        self.devices_json, self.version = devices_json, version

    def names_json(self, param_names: dict) -> str:
        if self._names != param_names:
            self._names, self._names_json = dict(param_names), _names_json(param_names)
        return self._names_json


def _describe_optimizer(opt: Optimizer, put) -> dict:
    scalars, extra_arrays = opt._extra_state()
    return {
        "name": opt.registry_name,
        "hyperparams": opt.hyperparams(),
        "num_update": opt.num_update,
        "update_counts": [[int(dev), [[_json_key(i), int(c)] for i, c in counts.items()]]
                          for dev, counts in opt._all_index_update_counts.items()],
        "current_device": _current_device(opt),
        "lr_mult": [[_json_key(k), v] for k, v in opt.lr_mult.items()],
        "wd_mult": [[_json_key(k), v] for k, v in opt.wd_mult.items()],
        "extra": scalars,
        "extra_arrays": {name: put(a) for name, a in extra_arrays.items()},
    }


def _current_device(opt):
    for dev, counts in opt._all_index_update_counts.items():
        if counts is opt._index_update_count:
            return int(dev)
    return 0


def save_states_file(path, states_by_device: dict, optimizer: Optimizer | None,
                     param_names=None) -> None:
    """Write ``dumps_states(...)`` to ``path`` atomically (temp file, fsync, rename)."""
    data = dumps_states(states_by_device, optimizer, param_names)
    with atomic_write(path, "wb") as f:
        f.write(data)


# ---------------------------------------------------------------------- reading
def loads_states(data: bytes, source: str = "<bytes>"):
    """``(states_by_device, optimizer or None)`` from bytes written by ``dumps_states``."""
    header, arrays = _read(data, source)
    return _rebuild(header, arrays, source)


def load_states_file(path):
    """``(states_by_device, optimizer or None)`` from a file written by ``save_states_file``."""
    path = os.fspath(path)
    try:
        with open_regular(path) as f:
            header, arrays = _read(f, path)
    except OSError as exc:
        raise StateFileError("%s: cannot read optimizer states: %s"
                             % (path, getattr(exc, "strerror", None) or exc)) from None
    return _rebuild(header, arrays, path)


def describe_states(data: bytes, source: str = "<bytes>") -> dict:
    """The header alone (for ``trainer inspect``), validated like a full load."""
    header, arrays = _read(data, source)
    _rebuild(header, arrays, source)
    return header


def _read(data, source: str):
    """``(header, arrays)`` from the bytes (or a seekable binary file) of a states file."""
    def fail(why):
        return StateFileError("%s: not a readable trainer-cli optimizer-states file: %s"
                              % (source, why))
    fileobj = io.BytesIO(data) if isinstance(data, (bytes, bytearray, memoryview)) else data
    head = fileobj.read(len(_NPY_MAGIC))
    fileobj.seek(0)
    if head == _NPY_MAGIC:
        raise fail("it holds a single array, not an .npz archive")
    if head[:4] != _ZIP_MAGIC:
        raise fail("it is not an .npz archive")
    try:
        arrays = read_npz(fileobj)
    except NpzError as exc:
        raise fail(str(exc)) from None
    if _HEADER not in arrays:
        raise fail("it is an .npz without a %s entry (written by something else?)" % _HEADER)
    raw_header = arrays.pop(_HEADER)
    try:
        if raw_header.dtype != numpy.uint8 or raw_header.ndim != 1:
            raise ValueError("header has dtype %s and shape %s" % (raw_header.dtype, raw_header.shape))
        header = load_json(raw_header.tobytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise fail("unreadable header (%s)" % (exc,)) from exc
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise fail("the header does not name the format %r" % FORMAT)
    if header.get("version") not in _READABLE:
        raise StateFileError("%s: optimizer-states format version %r; this trainer-cli reads "
                             "versions %s" % (source, header.get("version"),
                                              " and ".join(map(str, _READABLE))))
    return header, arrays


def _rebuild(header: dict, arrays: dict, source: str):
    def fail(why):
        return StateFileError("%s: invalid optimizer-states file: %s" % (source, why))

    ctx = cpu(0)

    def array(key, dtype=None, shape=None):
        if key not in arrays:
            raise fail("array %r listed in the header is missing" % (key,))
        a = arrays[key]
        if dtype is not None and a.dtype.name != dtype:
            raise fail("array %r has dtype %s, the header says %s" % (key, a.dtype.name, dtype))
        if shape is not None and list(a.shape) != list(shape):
            raise fail("array %r has shape %s, the header says %s"
                       % (key, list(a.shape), list(shape)))
        return a

    def row_sparse(parts):
        shape = [int(n) for n in parts["shape"]]
        if not shape or min(shape) < 0:
            raise fail("bad row_sparse shape %r" % (parts["shape"],))
        indices = array(parts["indices"], "int64")
        data = array(parts["data"], parts.get("dtype"))
        if indices.ndim != 1 or list(data.shape) != [len(indices)] + shape[1:]:
            raise fail("row_sparse state of shape %s has indices of shape %s and data of shape %s"
                       % (shape, list(indices.shape), list(data.shape)))
        try:
            # Checks that the row ids are sorted, unique and inside the shape.
            return _sparse.row_sparse_array((data, indices), shape=shape, ctx=ctx, dtype=data.dtype)
        except ValueError as exc:
            raise fail("bad row_sparse state: %s" % (exc,)) from None

    def state(layout):
        if layout is None:
            return None
        if not isinstance(layout, dict) or len(layout) == 0:
            raise fail("bad state layout %r" % (layout,))
        if "array" in layout:
            return NDArray(array(layout["array"], layout.get("dtype"), layout.get("shape")), ctx)
        if "row_sparse" in layout:
            return row_sparse(layout["row_sparse"])
        if "tuple" in layout:
            return tuple(state(s) for s in layout["tuple"])
        if "list" in layout:
            return [state(s) for s in layout["list"]]
        raise fail("bad state layout %r" % (layout,))

    try:
        by_device = {}
        for entry in header.get("devices", []):
            states = {}
            for item in entry["states"]:
                states[_py_key(item["index"])] = state(item["state"])
            by_device[int(entry["device_id"])] = states
        optimizer = None
        if header.get("optimizer") is not None:
            optimizer = _build_optimizer(header["optimizer"], array, fail)
    except StateFileError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise fail("%s: %s" % (type(exc).__name__, exc)) from exc
    return by_device, optimizer


def _build_optimizer(desc: dict, array, fail) -> Optimizer:
    name = desc["name"]
    klass = Optimizer.opt_registry.get(str(name).lower())
    if klass is None:
        raise fail("unknown optimizer %r (known: %s)" % (name, ", ".join(sorted(Optimizer.opt_registry))))
    hp = dict(desc["hyperparams"])
    hp["param_idx2name"] = {_py_key(k): v for k, v in hp.get("param_idx2name") or []}
    try:
        opt = klass(**hp)
    except TypeError as exc:
        raise fail("cannot rebuild optimizer %r from its hyper-parameters: %s" % (name, exc)) from exc
    opt.num_update = desc["num_update"]
    opt._all_index_update_counts = {
        int(dev): {_py_key(i): int(c) for i, c in counts} for dev, counts in desc["update_counts"]}
    opt._all_index_update_counts.setdefault(0, {})
    opt._set_current_context(int(desc.get("current_device", 0)))
    opt.lr_mult = {_py_key(k): v for k, v in desc.get("lr_mult", [])}
    opt.wd_mult = {_py_key(k): v for k, v in desc.get("wd_mult", [])}
    extra_arrays = {n: array(key) for n, key in (desc.get("extra_arrays") or {}).items()}
    opt._set_extra_state(desc.get("extra") or {}, extra_arrays)
    return opt


# ---------------------------------------------------------------------- helpers
# numpy works a dtype's name out in Python at each call: a checkpoint of a small model asks for
# it once per state array, and took 4 us each.
_dtype_name = functools.lru_cache(maxsize=None)(lambda dtype: dtype.name)


def _host(a, copy=True) -> numpy.ndarray:
    if isinstance(a, NDArray):
        data = raw(a)
        return data if not copy and type(data) is numpy.ndarray else a.asnumpy()
    if isinstance(a, numpy.ndarray):
        return a
    return a.get()       # cupy


def _json_key(k):
    """Indices are ints (Gluon) or strings (kvstore keys); JSON keeps either type as a value."""
    if isinstance(k, (bool, numpy.bool_)):
        raise TypeError("a bool is not a parameter index")
    if isinstance(k, (int, numpy.integer)):
        return int(k)
    if isinstance(k, str):
        return k
    raise TypeError("parameter index %r must be an int or a str" % (k,))


def _py_key(k):
    if isinstance(k, (int, str)) and not isinstance(k, bool):
        return k
    raise ValueError("bad parameter index %r" % (k,))
