"""``gluon.utils``: splitting batches across devices, clipping by global norm, and MXNet's
``check_sha1``, ``download`` (which downloads nothing) and ``replace_file``."""
from __future__ import annotations

import hashlib
import os
import warnings
import weakref
from collections import OrderedDict

import numpy

from .._bounded import open_regular
from ..base import NotDownloadedError
from ..ndarray import NDArray
from ..ndarray import creation, ops
from ..ndarray.host_threads import even_pieces
from ..ndarray.interop import raw as _raw

__all__ = ["split_data", "split_and_load", "clip_global_norm", "split_bounds", "check_sha1",
           "download", "replace_file", "shape_is_known", "HookHandle"]


def split_bounds(size, num_slice):
    """``(start, stop)`` of each slice as MXNet 1.9.1's ``split_data`` cuts ``size`` items: the
    first ``size % num_slice`` slices get one item more (NumPy's ``array_split`` rule), and with
    fewer items than slices the last slices are empty."""
    if num_slice < 1:
        raise ValueError("num_slice must be at least 1, not %d" % num_slice)
    return even_pieces(size, num_slice)


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Split ``data`` into ``num_slice`` pieces along ``batch_axis`` (see ``split_bounds``).

    Empty pieces are ordinary zero-size arrays on every axis (MXNet returns them only on axis 0,
    and cannot copy them to another device).
    """
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(
            "data with shape %s cannot be evenly split into %d slices along axis %d. Use a batch "
            "size that's multiple of %d or set even_split=False to allow uneven partitioning of "
            "data." % (str(data.shape), num_slice, batch_axis, num_slice))
    return [ops.slice_axis(data, batch_axis, start, stop)
            for start, stop in split_bounds(size, num_slice)]


def split_and_load(data, ctx_list, batch_axis=0, even_split=True):
    """Split ``data`` along ``batch_axis`` and put one piece on each context."""
    if not isinstance(data, NDArray):
        data = creation.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [piece.as_in_context(ctx) for piece, ctx in zip(slices, ctx_list)]


def _host_scalar(value, dtype):
    value = value.get() if hasattr(value, "get") else value
    return numpy.asarray(value, dtype=dtype).reshape(())[()]


def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Scale ``arrays`` in place so that their joint L2 norm is at most ``max_norm``.

    Returns the norm before clipping: a NumPy scalar, or a shape-(1,) NDArray when
    ``check_isfinite`` is False. The sum of squares, the norm and the scale stay in the arrays'
    precision, as MXNet computes them.
    """
    if not arrays:
        raise ValueError("clip_global_norm needs at least one array")
    ctx = arrays[0].context
    dtype = numpy.dtype(arrays[0].dtype)
    total = None
    for arr in arrays:
        flat = _raw(arr).reshape(-1)
        sq = _host_scalar(flat.dot(flat), dtype)
        total = sq if total is None else total + sq
    total_norm = numpy.sqrt(total)
    if check_isfinite and not numpy.isfinite(total_norm):
        warnings.warn(UserWarning("nan or inf is detected. Clipping results will be undefined."),
                      stacklevel=2)
    scale = dtype.type(max_norm) / (total_norm + dtype.type(1e-8))
    if scale < 1:
        # An infinite norm gives scale 0 and inf * 0 = nan: the "undefined" result warned about
        # above, without NumPy's second warning.
        with numpy.errstate(invalid="ignore"):
            for arr in arrays:
                data = _raw(arr)
                data *= data.dtype.type(scale)
    if check_isfinite:
        return total_norm
    return creation.array([total_norm], ctx=ctx, dtype=dtype)


def check_sha1(filename, sha1_hash) -> bool:
    """Whether the SHA-1 of the regular file ``filename`` is ``sha1_hash`` (hex), read in blocks
    (a FIFO or a device is refused, not read forever)."""
    digest = hashlib.sha1()
    with open_regular(filename) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() == sha1_hash


def download(url, path=None, overwrite=False, sha1_hash=None, retries=5, verify_ssl=True):
    """The path where MXNet's ``download`` would save ``url`` (``path``: a file, or a folder
    for the URL's last part; by default that part in the current folder), when a file is
    already there (with ``sha1_hash``: one of that SHA-1). trainer_cli downloads nothing:
    otherwise (or with ``overwrite``) ``NotDownloadedError`` names the path to put it at."""
    if retries < 0:
        raise ValueError("Number of retries should be at least 0, currently it's %r" % retries)
    if path is None:
        fname = url.split("/")[-1]
        if not fname:
            raise ValueError("Can't construct file-name from this URL. Please set the `path` "
                             "option manually.")
    else:
        path = os.path.expanduser(path)
        fname = os.path.join(path, url.split("/")[-1]) if os.path.isdir(path) else path
    if not overwrite and os.path.isfile(fname) and \
            (not sha1_hash or check_sha1(fname, sha1_hash)):
        return fname
    why = ("it has another SHA-1 than %s" % sha1_hash if os.path.isfile(fname) and not overwrite
           else "with overwrite=True" if overwrite else "it is not there")
    raise NotDownloadedError(
        "%s: trainer_cli does not download files (%s); fetch %s yourself and save it as %s "
        "(the path MXNet's download() would write)." % (fname, why, url, os.path.abspath(fname)))


def replace_file(src, dst):
    """Move ``src`` onto ``dst`` in one step (``os.replace``: atomic on one file system)."""
    os.replace(src, dst)


class HookHandle:
    """A hook's place in a dict of hooks (a block's forward hooks), which ``detach()`` (or
    leaving a ``with`` block) removes; MXNet 1.9.1's, keyed by ``id(hook)``, so the same
    function attached twice to one dict is there once."""

    def __init__(self):
        self._hooks_dict_ref = None
        self._id = None

    def attach(self, hooks_dict, hook):
        if self._hooks_dict_ref is not None:
            raise AssertionError("The same handle cannot be attached twice.")
        self._id = id(hook)
        hooks_dict[self._id] = hook
        self._hooks_dict_ref = weakref.ref(hooks_dict)

    def detach(self):
        hooks_dict = None if self._hooks_dict_ref is None else self._hooks_dict_ref()
        if hooks_dict is not None and self._id in hooks_dict:
            del hooks_dict[self._id]

    def __getstate__(self):
        return (None if self._hooks_dict_ref is None else self._hooks_dict_ref(), self._id)

    def __setstate__(self, state):
        # A copy whose dict is gone refers to an empty one, as MXNet's.
        self._hooks_dict_ref = weakref.ref(OrderedDict() if state[0] is None else state[0])
        self._id = state[1]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()


def shape_is_known(shape):
    """Whether every dimension of ``shape`` is known, as MXNet's (outside its NumPy shape mode,
    which trainer_cli does not have): None and a 0 dimension are unknown, an empty shape is not
    known; a negative dimension is an error."""
    if shape is None or len(shape) == 0:
        return False
    for size in shape:
        if size == 0:
            return False
        if size < 0:
            raise ValueError("shape dimension size cannot be less than 0, while received %s"
                             % size)
    return True

