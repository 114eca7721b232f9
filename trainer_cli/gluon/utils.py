"""``gluon.utils``: splitting batches across devices and clipping by global norm."""
from __future__ import annotations

import math
import warnings

import numpy

from ..ndarray import NDArray
from ..ndarray import creation, ops

__all__ = ["split_data", "split_and_load", "clip_global_norm"]


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Split ``data`` into ``num_slice`` pieces along ``batch_axis``."""
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(
            "data with shape %s cannot be evenly split into %d slices along axis %d. Use a batch "
            "size that's multiple of %d or set even_split=False to allow uneven partitioning of "
            "data." % (str(data.shape), num_slice, batch_axis, num_slice))
    if size < num_slice:
        raise ValueError("Too many slices for data with shape %s. Arguments are num_slice=%d and "
                         "batch_axis=%d." % (str(data.shape), num_slice, batch_axis))
    if num_slice == 1:
        return [data]
    each, extras = divmod(size, num_slice)
    sizes = [0] + extras * [each + 1] + (num_slice - extras) * [each]
    points = numpy.cumsum(sizes)
    return [ops.slice_axis(data, batch_axis, int(points[i]), int(points[i + 1])) for i in range(num_slice)]


def split_and_load(data, ctx_list, batch_axis=0, even_split=True):
    """Split ``data`` along ``batch_axis`` and put one piece on each context."""
    if not isinstance(data, NDArray):
        data = creation.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [piece.as_in_context(ctx) for piece, ctx in zip(slices, ctx_list)]


def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Scale ``arrays`` in place so that their joint L2 norm is at most ``max_norm``."""
    if not arrays:
        raise ValueError("clip_global_norm needs at least one array")
    ctx = arrays[0].context
    total = None
    for arr in arrays:
        flat = arr._data.reshape(-1)
        sq = flat.dot(flat)
        sq = float(sq) if ctx.is_gpu is False else sq
        total = sq if total is None else total + sq
    total_norm = numpy.float32(math.sqrt(float(total))) if arrays[0]._data.dtype == numpy.float32 \
        else math.sqrt(float(total))
    if check_isfinite and not numpy.isfinite(total_norm):
        warnings.warn(UserWarning("nan or inf is detected. Clipping results will be undefined."),
                      stacklevel=2)
    scale = max_norm / (total_norm + 1e-8)
    if scale < 1.0:
        for arr in arrays:
            arr._data *= arr._data.dtype.type(scale)
    if check_isfinite:
        return float(total_norm)
    return creation.array([total_norm], ctx=ctx)
