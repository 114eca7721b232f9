"""Bounding-box operators of MXNet 1.9.1's ``contrib``: ``box_iou`` (pairwise IoU),
``box_nms`` / ``box_non_maximum_suppression`` (greedy non-maximum suppression),
``bipartite_matching`` (greedy matching of a score matrix), ``box_encode`` and ``box_decode``
(the normalised centre-offset training targets of detectors), to MXNet's bits on the CPU.

Each is computed in the data's dtype, operation by operation as MXNet's C++ does: float16 is
``mshadow::half_t`` (every operation done in float and rounded to half, which NumPy's float16
arithmetic is); ``log``/``exp`` are the C library's double functions, their results kept in
double where C++'s promotion keeps them (float32 targets are rounded once at the end; float16
goes through float). The float parameters (thresholds, ``std0``...) are C++ floats, so they
are rounded to float32 before they meet the data. Ties sort as MXNet's CPU ``std::stable_sort``
leaves them: by position. ``box_nms`` and ``bipartite_matching`` are sequential, greedy
algorithms: they run on the host with NumPy and their results go back to the input's device.

Gradients are MXNet's: ``box_nms`` hands each kept box's head gradient back to the box's
original position (zero for suppressed and padded boxes); ``box_iou``, ``bipartite_matching``,
``box_encode`` and ``box_decode`` have zero gradients (MXNet writes zeros into the inputs'
gradients).
"""
from __future__ import annotations

import numpy

from ..base import ShapeError
from . import _libm
from .ndarray import NDArray, _result, _xp_of

__all__ = ["box_iou", "box_nms", "box_non_maximum_suppression", "bipartite_matching",
           "box_encode", "box_decode"]

_FORMATS = ("corner", "center")
_FLOATS = (numpy.float16, numpy.float32, numpy.float64)


# ----------------------------------------------------------------------------- checks
def _array(op, name, x):
    if not isinstance(x, NDArray):
        raise TypeError("%s: %s must be an NDArray, got %s" % (op, name, type(x).__name__))
    if x._data.dtype.type not in _FLOATS:
        raise TypeError("%s: %s must be float16, float32 or float64 (MXNet supports only "
                        "floating point types), got %s" % (op, name, x._data.dtype))
    return x


def _same_dtype(op, named):
    first_name, first = named[0]
    for name, x in named[1:]:
        if x._data.dtype != first._data.dtype:
            raise TypeError("%s: %s and %s must have the same dtype, got %s and %s"
                            % (op, first_name, name, first._data.dtype, x._data.dtype))


def _format(op, name, value):
    if value not in _FORMATS:
        raise ValueError("%s: %s must be 'corner' or 'center', got %r" % (op, name, value))
    return value


def _int(op, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)):
        raise TypeError("%s: %s must be an int, got %r" % (op, name, value))
    return int(value)


def _float32(op, name, value):
    """A float parameter as MXNet holds it: a C++ float."""
    if isinstance(value, bool) or not isinstance(value, (int, float, numpy.integer,
                                                         numpy.floating)):
        raise TypeError("%s: %s must be a number, got %r" % (op, name, value))
    return numpy.float32(value)


def _versus_float(values, threshold):
    """``values`` (the data's dtype) next to a C++ float ``threshold``: a half is compared as
    a float, a float as a float, a double as a double."""
    if values.dtype == numpy.float16:
        return values.astype(numpy.float32), threshold
    return values, values.dtype.type(threshold)


# ----------------------------------------------------------------------------- box algebra
def _overlap(a_lo, a_hi, b_lo, b_hi, encode, xp):
    """The overlap of two 1-D extents along x or y (MXNet's ``Intersect``), zero if none.
    ``corner``: ``lo``/``hi`` are min and max; ``center``: centre and width."""
    if encode == "center":
        two = a_lo.dtype.type(2)
        a_half, b_half = a_hi / two, b_hi / two
        a_lo, a_hi = a_lo - a_half, a_lo + a_half
        b_lo, b_hi = b_lo - b_half, b_lo + b_half
        left = xp.where(b_lo > a_lo, b_lo, a_lo)
        right = xp.where(b_hi < a_hi, b_hi, a_hi)
    else:
        left = xp.where(a_lo > b_lo, a_lo, b_lo)
        right = xp.where(a_hi < b_hi, a_hi, b_hi)
    width = right - left
    return xp.where(width > 0, width, width.dtype.type(0))


def _area(box, encode, xp):
    """MXNet's ``BoxArea``: zero for a box of negative width or height."""
    if encode == "center":
        width, height = box[..., 2], box[..., 3]
    else:
        width, height = box[..., 2] - box[..., 0], box[..., 3] - box[..., 1]
    bad = (width < 0) | (height < 0)
    return xp.where(bad, width.dtype.type(0), width * height)


def _intersection(a, b, encode, xp):
    """The intersection areas of boxes ``a`` and ``b`` (broadcast against each other)."""
    return (_overlap(a[..., 0], a[..., 2], b[..., 0], b[..., 2], encode, xp)
            * _overlap(a[..., 1], a[..., 3], b[..., 1], b[..., 3], encode, xp))


def _plus_half(start, length):
    """``start + length * 0.5`` with C++'s double ``0.5``: for float data the sum is a double
    rounded once to float (half_t rounds each step)."""
    if start.dtype == numpy.float32:
        return (start.astype(numpy.float64) + length.astype(numpy.float64) * 0.5).astype(
            numpy.float32)
    return start + length * start.dtype.type(0.5)


def _c_library(name, x, xp):
    """The C library's double ``log``/``exp`` of float64 ``x`` (MXNet calls them): on NumPy data
    through ``_libm``, since NumPy's own kernels differ by an ulp now and then."""
    if xp is not numpy or x.dtype != numpy.float64 or not x.size:
        return getattr(xp, name)(x)
    return _libm.call(name, x)


def _zero_grads(inputs):
    """The vjp of an operator whose gradient MXNet defines as zero: zeros written into every
    input that needs one."""
    def vjp(g, needs):
        xp = _xp_of(g)
        return tuple(xp.zeros(x._data.shape, dtype=x._data.dtype) if need else None
                     for x, need in zip(inputs, needs))
    return vjp


# ----------------------------------------------------------------------------- box_iou
def box_iou(lhs, rhs, format="corner"):  # noqa: A002 (MXNet's name)
    """MXNet's ``contrib.box_iou(lhs, rhs, format='corner')``: the intersection-over-union of
    every box of ``lhs`` (a_1, ..., a_n, 4) with every box of ``rhs`` (b_1, ..., b_m, 4), an
    array (a_1, ..., a_n, b_1, ..., b_m) of their dtype; 0 where boxes do not overlap.
    ``format``: boxes as ``corner`` [xmin, ymin, xmax, ymax] or ``center`` [x, y, w, h].
    MXNet defines its gradient as zero."""
    op = "box_iou"
    _array(op, "lhs", lhs), _array(op, "rhs", rhs)
    _same_dtype(op, [("lhs", lhs), ("rhs", rhs)])
    _format(op, "format", format)
    for name, x in (("lhs", lhs), ("rhs", rhs)):
        if x.ndim < 2 or x.shape[-1] != 4:
            raise ShapeError("box_iou: %s must have at least 2 dimensions, the last of size 4, "
                             "got shape %s" % (name, tuple(x.shape)))
    a, b = lhs._data, rhs._data
    xp = _xp_of(a)
    shape = tuple(a.shape[:-1]) + tuple(b.shape[:-1])
    with lhs._ctx.device_scope():
        a = a.reshape(-1, 1, 4)
        b = b.reshape(1, -1, 4)
        inter = _intersection(a, b, format, xp)
        union = _area(a, format, xp) + _area(b, format, xp) - inter
        with numpy.errstate(invalid="ignore", divide="ignore"):
            iou = inter / union
        out = xp.where(inter <= 0, inter.dtype.type(0), iou).reshape(shape)
    return _result(out, lhs._ctx, (lhs, rhs), _zero_grads((lhs, rhs)))


# ----------------------------------------------------------------------------- box_nms
def _class_ids(values):
    """``static_cast<int>`` of class ids: truncation; NaN and out-of-range ids are INT_MIN,
    as x86 converts them."""
    ids = numpy.trunc(values.astype(numpy.float64))
    bad = ~numpy.isfinite(ids) | (ids >= 2.0 ** 31) | (ids < -2.0 ** 31)
    return numpy.where(bad, -2.0 ** 31, ids).astype(numpy.int64)


def _suppress(boxes, ids, thresh, encode, block=256):
    """Greedy NMS over ``boxes`` (K, 4) sorted by descending score: which survive. A box is
    suppressed by an earlier surviving box of the same class (``ids`` None: any class) whose
    IoU with it exceeds ``thresh``. The IoUs are computed a block of reference boxes at a
    time, so the memory is ``block * K``."""
    k = len(boxes)
    alive = numpy.ones(k, dtype=bool)
    areas = _area(boxes, encode, numpy)
    for start in range(0, k, block):
        stop = min(start + block, k)
        refs = start + numpy.flatnonzero(alive[start:stop])
        if not len(refs):
            continue
        # Only boxes still alive can be suppressed (or suppress): the others are left out.
        later = start + numpy.flatnonzero(alive[start:])
        inter = _intersection(boxes[refs][:, None], boxes[later][None], encode, numpy)
        with numpy.errstate(invalid="ignore", divide="ignore"):
            iou = inter / (areas[refs][:, None] + areas[later][None] - inter)
        values, limit = _versus_float(iou, thresh)
        hits = values > limit
        if ids is not None:
            hits &= ids[refs][:, None] == ids[later][None]
        hits &= later[None] > refs[:, None]
        for row, ref in zip(hits, refs):
            if alive[ref]:
                alive[later[row]] = False
    return alive


def _nms_record(data, overlap_thresh, valid_thresh, topk, coord_start, score_index, id_index,
                background_id, force_suppress, in_format):
    """For each output row of ``data`` (B, N, W) on the host, the flat index (b * N + n) of
    the input row it copies, or -1 for padding: MXNet's hidden second output."""
    batch, num, _ = data.shape
    dtype = data.dtype
    record = numpy.full((batch, num), -1, dtype=numpy.int64)
    scores = data[:, :, score_index]
    valid = scores > dtype.type(valid_thresh)
    if id_index >= 0:
        valid &= data[:, :, id_index] != dtype.type(background_id)
    by_class = id_index >= 0 and not force_suppress
    for b in range(batch):
        rows = numpy.flatnonzero(valid[b])
        # Descending score; equal scores keep their positions' order (a stable sort).
        rows = rows[numpy.argsort(-scores[b, rows], kind="stable")][:topk]
        boxes = data[b, rows, coord_start:coord_start + 4]
        ids = _class_ids(data[b, rows, id_index]) if by_class else None
        kept = rows[_suppress(boxes, ids, overlap_thresh, in_format)]
        record[b, :len(kept)] = b * num + kept
    return record


def _convert(coords, to, xp):
    """MXNet's in-place conversion of the output's boxes to ``to``: a row whose first
    coordinate is negative is left as it is (the -1 padding, and, as in MXNet, any kept box
    whose x or xmin is below zero)."""
    t = coords.dtype.type
    a, b, c, d = (coords[..., i] for i in range(4))
    if to == "center":
        new = xp.stack([(a + c) / t(2), (b + d) / t(2), c - a, d - b], axis=-1)
    else:
        half_w, half_h = c / t(2), d / t(2)
        new = xp.stack([a - half_w, b - half_h, a + half_w, b + half_h], axis=-1)
    return xp.where((a < 0)[..., None], coords, new)


def box_nms(data, overlap_thresh=0.5, valid_thresh=0, topk=-1, coord_start=2, score_index=1,
            id_index=-1, background_id=-1, force_suppress=False, in_format="corner",
            out_format="corner"):
    """MXNet's ``contrib.box_nms(data, overlap_thresh=0.5, valid_thresh=0, topk=-1,
    coord_start=2, score_index=1, id_index=-1, background_id=-1, force_suppress=False,
    in_format='corner', out_format='corner')``: non-maximum suppression of the boxes of
    ``data`` (..., N, W); leading axes are batches, each row a box whose score is at
    ``score_index`` and whose 4 coordinates start at ``coord_start``.

    Boxes scoring above ``valid_thresh`` (and, with ``id_index >= 0``, whose class is not
    ``background_id``) are sorted by descending score (ties in input order); of the first
    ``topk`` (all if negative), each box still standing suppresses the later ones whose IoU
    with it exceeds ``overlap_thresh`` (of its own class only, unless ``force_suppress`` or
    ``id_index < 0``; class ids compare truncated to ints). The output has ``data``'s shape
    and dtype: each batch's surviving rows, whole, in score order, then rows of -1; the
    coordinates converted from ``in_format`` to ``out_format`` except in rows whose first
    coordinate is negative (MXNet's test for padding, which also skips kept boxes there).
    ``topk=0`` returns ``data`` unchanged, as MXNet does. MXNet's hidden second output (the
    rows' input positions) is not returned. The gradient of each surviving row goes to its
    input row unchanged (as MXNet's: also across a format conversion); other rows get zero.
    Runs on the host (a sequential algorithm); the result is on ``data``'s device."""
    op = "box_nms"
    _array(op, "data", data)
    overlap_thresh = _float32(op, "overlap_thresh", overlap_thresh)
    valid_thresh = _float32(op, "valid_thresh", valid_thresh)
    topk, coord_start, score_index, id_index, background_id = (
        _int(op, name, value) for name, value in (
            ("topk", topk), ("coord_start", coord_start), ("score_index", score_index),
            ("id_index", id_index), ("background_id", background_id)))
    _format(op, "in_format", in_format)
    _format(op, "out_format", out_format)
    shape = tuple(data.shape)
    if len(shape) < 2:
        raise ShapeError("box_nms: data must have at least 2 dimensions (..., num_boxes, "
                         "box_width), got shape %s" % (shape,))
    width = shape[-1]
    needed = 6 if id_index >= 0 else 5
    if width < needed:
        raise ShapeError("box_nms: the last axis must hold at least %d values (score%s and 4 "
                         "coordinates), got %d" % (needed, ", id" if id_index >= 0 else "",
                                                   width))
    if coord_start < 0:
        raise ValueError("box_nms: coord_start must be >= 0, got %d" % coord_start)
    if coord_start + 4 > width:
        raise ValueError("box_nms: coord_start + 4 must be <= the last axis (%d), got %d"
                         % (width, coord_start + 4))
    coords = range(coord_start, coord_start + 4)
    if not 0 <= score_index < width:
        raise ValueError("box_nms: score_index must lie in [0, %d), got %d"
                         % (width, score_index))
    if score_index in coords:
        raise ValueError("box_nms: score_index (%d) falls inside the coordinates [%d, %d]"
                         % (score_index, coord_start, coord_start + 3))
    if id_index >= 0:
        if id_index >= width:
            raise ValueError("box_nms: id_index must lie in [0, %d) or be negative, got %d"
                             % (width, id_index))
        if id_index in coords:
            raise ValueError("box_nms: id_index (%d) falls inside the coordinates [%d, %d]"
                             % (id_index, coord_start, coord_start + 3))
        if id_index == score_index:
            raise ValueError("box_nms: id_index and score_index must differ, both are %d"
                             % id_index)
    raw = data._data
    xp = _xp_of(raw)
    num = shape[-2]
    batch = int(numpy.prod(shape[:-2], dtype=numpy.int64))
    flat = raw.reshape(batch * num, width)
    if topk == 0:
        # MXNet copies the input through: no suppression, no -1 rows, no format conversion.
        with data._ctx.device_scope():
            out = flat.copy()
            record = xp.arange(batch * num).reshape(batch, num)
    else:
        host = flat if xp is numpy else flat.get()
        topk = num if topk < 0 else min(num, topk)
        rec = _nms_record(host.reshape(batch, num, width), overlap_thresh, valid_thresh, topk,
                          coord_start, score_index, id_index, background_id,
                          bool(force_suppress), in_format)
        with data._ctx.device_scope():
            record = xp.asarray(rec)
            kept = (record >= 0).reshape(-1, 1)
            out = xp.where(kept, flat[xp.maximum(record, 0).reshape(-1)],
                           flat.dtype.type(-1))
            if in_format != out_format and out.size:
                part = out[:, coord_start:coord_start + 4]
                out[:, coord_start:coord_start + 4] = _convert(part, out_format, xp)
    out = out.reshape(shape)

    def vjp(g, needs):
        flat_g = g.reshape(batch * num, width)
        grad = xp.zeros_like(flat_g)
        rows = record.reshape(-1)
        kept = rows >= 0
        grad[rows[kept]] = flat_g[kept]
        return (grad.reshape(shape),)
    return _result(out, data._ctx, (data,), vjp)


box_non_maximum_suppression = box_nms


# ----------------------------------------------------------------------------- matching
def _match(scores, num_col, threshold, is_ascend, topk, chunk=4096):
    """Greedy matching of one score matrix (flattened, R * C entries) on the host: entries in
    score order (ties by position), each whose row and column are both free and whose score
    passes ``threshold`` matched. MXNet stops at the first free entry that fails the
    threshold (the rest of the sorted entries fail it too) and, with ``topk > 0``, once it
    has made ``topk + 1`` matches (its count check follows the match)."""
    num_row = len(scores) // num_col if num_col else 0
    rows = numpy.full(num_row, -1, dtype=numpy.int64)
    cols = numpy.full(num_col, -1, dtype=numpy.int64)
    values, limit = _versus_float(scores, threshold)
    passing = values < limit if is_ascend else values > limit
    order = numpy.argsort(scores if is_ascend else -scores, kind="stable")
    order = order[passing[order]]
    r_of, c_of = order // num_col, order % num_col
    count, at = 0, 0
    while at < len(order):
        r, c = r_of[at:at + chunk], c_of[at:at + chunk]
        free = numpy.flatnonzero((rows[r] < 0) & (cols[c] < 0))
        if not len(free):
            at += chunk
            continue
        first = free[0]
        rows[r[first]], cols[c[first]] = c[first], r[first]
        count += 1
        if topk > 0 and count > topk:
            break
        at += first + 1
    return rows, cols


def bipartite_matching(data, is_ascend=False, threshold=None, topk=-1):
    """MXNet's ``contrib.bipartite_matching(data, is_ascend=False, threshold, topk=-1)``:
    greedy bipartite matching of the score matrices ``data`` (..., N, M). Entries are taken
    in descending score (ascending with ``is_ascend``; ties in position order), each
    matching its row and column if both are still free and its score is above ``threshold``
    (below, with ``is_ascend``). ``threshold`` is required. ``topk > 0`` limits the matches
    to ``topk + 1`` (MXNet 1.9.1's count check comes after the match). Returns
    ``[row_marker (..., N): each row's column or -1, col_marker (..., M): each column's row or
    -1]`` in ``data``'s dtype (MXNet's markers are floats too). Zero gradient, as MXNet.
    Runs on the host (a sequential algorithm); the results are on ``data``'s device."""
    op = "bipartite_matching"
    _array(op, "data", data)
    if threshold is None:
        raise ValueError("bipartite_matching: threshold is required (MXNet has no default)")
    threshold = _float32(op, "threshold", threshold)
    topk = _int(op, "topk", topk)
    shape = tuple(data.shape)
    if len(shape) < 2:
        raise ShapeError("bipartite_matching: data must have at least 2 dimensions (..., N, "
                         "M), got shape %s" % (shape,))
    num_row, num_col = shape[-2:]
    raw = data._data
    xp = _xp_of(raw)
    host = raw if xp is numpy else raw.get()
    batch = int(numpy.prod(shape[:-2], dtype=numpy.int64))
    host = host.reshape(batch, num_row * num_col)
    row_marker = numpy.empty((len(host), num_row), dtype=raw.dtype)
    col_marker = numpy.empty((len(host), num_col), dtype=raw.dtype)
    for b, scores in enumerate(host):
        row_marker[b], col_marker[b] = _match(scores, num_col, threshold, bool(is_ascend), topk)
    with data._ctx.device_scope():
        row_marker = xp.asarray(row_marker.reshape(shape[:-1]))
        col_marker = xp.asarray(col_marker.reshape(shape[:-2] + (num_col,)))
    vjp = _zero_grads((data,))
    return [_result(row_marker, data._ctx, (data,), vjp),
            _result(col_marker, data._ctx, (data,), vjp)]


# ----------------------------------------------------------------------------- encode/decode
def _center_form(corners):
    """(x, y, w, h) of corner boxes, as MXNet's encoder forms them."""
    xmin, ymin = corners[..., 0], corners[..., 1]
    width, height = corners[..., 2] - xmin, corners[..., 3] - ymin
    return _plus_half(xmin, width), _plus_half(ymin, height), width, height


def _log_target(ratio, mean, std, xp):
    """``(log(ratio) - mean) / std`` with C++'s types: ``log`` is double; for float data the
    rest stays double and is rounded once; for half_t the double is taken to float, the
    subtraction rounded to half, then divided in half."""
    wide = _c_library("log", ratio.astype(numpy.float64), xp)
    if ratio.dtype == numpy.float16:
        diff = (wide.astype(numpy.float32) - mean.astype(numpy.float32)).astype(numpy.float16)
        return diff / std
    return ((wide - mean.astype(numpy.float64)) / std.astype(numpy.float64)).astype(ratio.dtype)


def box_encode(samples, matches, anchors, refs, means, stds):
    """MXNet's ``contrib.box_encode(samples, matches, anchors, refs, means, stds)``: the
    training targets of anchors. ``samples`` (B, N): > 0.5 marks a positive anchor;
    ``matches`` (B, N): the index (truncated) into ``refs`` of each anchor's box;
    ``anchors`` (B, N, 4) and ``refs`` (B, M, 4): corner boxes; ``means``, ``stds`` (4,).
    For a positive anchor the targets are ``((ref_x - a_x) / a_w - means[0]) / stds[0]``,
    likewise y, ``(log(ref_w / a_w) - means[2]) / stds[2]``, likewise h; 0 elsewhere.
    Returns ``[targets, masks]``, both of ``anchors``' shape and dtype, the mask 1 at positive
    anchors and 0 elsewhere. All inputs share one float dtype. Zero gradients, as MXNet."""
    op = "box_encode"
    named = [("samples", samples), ("matches", matches), ("anchors", anchors),
             ("refs", refs), ("means", means), ("stds", stds)]
    for name, x in named:
        _array(op, name, x)
    _same_dtype(op, named)
    if anchors.ndim < 3 or anchors.shape[-1] != 4:
        raise ShapeError("box_encode: anchors must be (B, N, 4), got shape %s"
                         % (tuple(anchors.shape),))
    batch, num = anchors.shape[:2]
    if anchors.size != batch * num * 4:
        raise ShapeError("box_encode: anchors must be (B, N, 4), got shape %s"
                         % (tuple(anchors.shape),))
    if refs.ndim < 3 or refs.shape[-1] != 4 or refs.shape[0] != batch \
            or refs.size != batch * refs.shape[1] * 4:
        raise ShapeError("box_encode: refs must be (B, M, 4) with anchors' B = %d, got shape %s"
                         % (batch, tuple(refs.shape)))
    if samples.ndim != 2 or samples.size != batch * num:
        raise ShapeError("box_encode: samples must be (B, N) = (%d, %d), got shape %s"
                         % (batch, num, tuple(samples.shape)))
    if matches.ndim < 2 or matches.size != batch * num:
        raise ShapeError("box_encode: matches must be (B, N) = (%d, %d), got shape %s"
                         % (batch, num, tuple(matches.shape)))
    for name, x in (("means", means), ("stds", stds)):
        if tuple(x.shape) != (4,):
            raise ShapeError("box_encode: %s must have shape (4,), got %s"
                             % (name, tuple(x.shape)))
    xp = _xp_of(anchors._data)
    num_refs = refs.shape[1]
    dtype = anchors._data.dtype
    with anchors._ctx.device_scope():
        anchor = anchors._data.reshape(batch, num, 4)
        ref_boxes = refs._data.reshape(batch, num_refs, 4)
        positive = samples._data.reshape(batch, num) > dtype.type(0.5)
        with numpy.errstate(invalid="ignore"):
            index = matches._data.reshape(batch, num).astype(numpy.int64)   # truncation
        inside = (index >= 0) & (index < num_refs)
        if not bool(xp.all(inside | ~positive)):
            # MXNet reads outside refs here (undefined values); only positive anchors are
            # read at all, so negative ones may carry any match (GluonCV passes -1).
            raise ValueError("box_encode: matches must lie in [0, %d) (the boxes of refs) "
                             "where samples > 0.5" % num_refs)
        index = xp.where(inside, index, 0)
        picked = xp.take_along_axis(ref_boxes, index[..., None].repeat(4, axis=-1), axis=1)
        ref_x, ref_y, ref_w, ref_h = _center_form(picked)
        a_x, a_y, a_w, a_h = _center_form(anchor)
        m, s = means._data, stds._data
        with numpy.errstate(all="ignore"):
            targets = xp.stack([((ref_x - a_x) / a_w - m[0]) / s[0],
                                ((ref_y - a_y) / a_h - m[1]) / s[1],
                                _log_target(ref_w / a_w, m[2], s[2], xp),
                                _log_target(ref_h / a_h, m[3], s[3], xp)], axis=-1)
        mask = positive[..., None]
        targets = xp.where(mask, targets, dtype.type(0)).reshape(anchors.shape)
        masks = xp.broadcast_to(mask, (batch, num, 4)).astype(dtype).reshape(anchors.shape)
    inputs = tuple(x for _, x in named)
    vjp = _zero_grads(inputs)
    return [_result(targets, anchors._ctx, inputs, vjp),
            _result(masks, anchors._ctx, inputs, vjp)]


def _exp_to(values, dtype, xp):
    """C++'s ``dw = exp(dw)``: the double ``exp`` assigned to ``dtype`` (half_t from double goes
    through float)."""
    wide = _c_library("exp", values.astype(numpy.float64), xp)
    if dtype == numpy.float16:
        wide = wide.astype(numpy.float32)
    return wide.astype(dtype)


def box_decode(data, anchors, std0=1.0, std1=1.0, std2=1.0, std3=1.0, clip=-1.0,
               format="center"):  # noqa: A002 (MXNet's name)
    """MXNet's ``contrib.box_decode(data, anchors, std0=1.0, std1=1.0, std2=1.0, std3=1.0,
    clip=-1.0, format='center')``: boxes from predicted offsets ``data`` (B, N, 4) relative to
    ``anchors`` (1, N, 4) (any shape of N * 4 values with at least 3 dimensions, the last 4),
    given as ``format`` (``center`` [x, y, w, h] or ``corner``): ``x = d0 * std0 * a_w + a_x``,
    likewise y; ``w = exp(min(d2 * std2, clip)) * a_w`` (no clipping unless ``clip > 0``),
    likewise h. Returns corner boxes (B, N, 4) of ``data``'s dtype. Zero gradients, as
    MXNet."""
    op = "box_decode"
    _array(op, "data", data), _array(op, "anchors", anchors)
    _same_dtype(op, [("data", data), ("anchors", anchors)])
    _format(op, "format", format)
    scales = [_float32(op, name, v) for name, v in
              (("std0", std0), ("std1", std1), ("std2", std2), ("std3", std3))]
    clip = _float32(op, "clip", clip)
    if data.ndim != 3 or data.shape[-1] != 4:
        raise ShapeError("box_decode: data must be (B, N, 4), got shape %s"
                         % (tuple(data.shape),))
    num = data.shape[1]
    if anchors.ndim < 3 or anchors.shape[-1] != 4 or anchors.size != num * 4:
        raise ShapeError("box_decode: anchors must be (1, N, 4) with data's N = %d, got shape "
                         "%s" % (num, tuple(anchors.shape)))
    x = data._data
    xp = _xp_of(x)
    dtype = x.dtype
    t = dtype.type
    std = [t(s) for s in scales]
    with data._ctx.device_scope():
        a = anchors._data.reshape(1, num, 4)
        a_x, a_y, a_w, a_h = (a[..., i] for i in range(4))
        if format == "corner":
            a_w, a_h = a_w - a_x, a_h - a_y
            a_x, a_y = _plus_half(a_x, a_w), _plus_half(a_y, a_h)
        with numpy.errstate(all="ignore"):
            o_x = x[..., 0] * std[0] * a_w + a_x
            o_y = x[..., 1] * std[1] * a_h + a_y
            d_w = x[..., 2] * std[2]
            d_h = x[..., 3] * std[3]
            if clip > 0:
                limit = t(clip)
                d_w = xp.where(d_w < limit, d_w, limit)
                d_h = xp.where(d_h < limit, d_h, limit)
            half = t(0.5)
            o_w = _exp_to(d_w, dtype, xp) * a_w * half
            o_h = _exp_to(d_h, dtype, xp) * a_h * half
            out = xp.stack([o_x - o_w, o_y - o_h, o_x + o_w, o_y + o_h], axis=-1)
    return _result(out, data._ctx, (data, anchors), _zero_grads((data, anchors)))
