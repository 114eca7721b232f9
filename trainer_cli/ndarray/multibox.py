"""MXNet 1.9.1's SSD operators of ``nd.contrib``: ``MultiBoxPrior`` (the anchor boxes of a
feature map), ``MultiBoxTarget`` (training targets: anchors matched to ground truths, optional
hard negative mining, encoded box offsets) and ``MultiBoxDetection`` (predicted offsets decoded
into boxes, then a greedy per-class non-maximum suppression).

All three follow MXNet's CPU kernels (``src/operator/contrib/multibox_*``), which accept
float32 only, step by step in float32: the anchors, IoUs, targets and detections are MXNet's
bits. The ``logf``/``expf`` of the box encoding and decoding are the C library's (glibc's,
called for the values where rounding a float64 result could differ from it); without a
loadable C math library they are float64 results rounded to float32 (within 1 ulp). Their
backward is MXNet's: zero to every input that MXNet's ``Backward`` writes (under grad_req
'add' nothing is added, where MXNet's ``Backward`` overwrites the accumulated gradient with 0).
"""
from __future__ import annotations

import ast

import numpy

from . import _libm
from ._params import flag
from .ndarray import NDArray, _result, _xp_of

__all__ = ["MultiBoxPrior", "MultiBoxTarget", "MultiBoxDetection"]

_F32 = numpy.float32


# ----------------------------------------------------------------------------- arguments
def _array(op, name, value, ndim=None):
    if not isinstance(value, NDArray):
        raise TypeError("%s: %s must be an NDArray, got %s" % (op, name, type(value).__name__))
    if value.dtype != numpy.float32:
        # MXNet's legacy operators infer float32 only ("Unsupported data type").
        raise TypeError("%s: %s must be float32 (MXNet 1.9.1 supports no other dtype here), "
                        "got %s" % (op, name, numpy.dtype(value.dtype).name))
    if ndim is not None and value.ndim != ndim:
        raise ValueError("%s: %s must have %d dimensions, got shape %s"
                         % (op, name, ndim, tuple(value.shape)))
    return value


def _floats(op, name, value, length=None):
    """A tuple argument as MXNet parses it (a number is a 1-tuple; a string is parsed), float32."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip() or "()")
        except (ValueError, SyntaxError):
            raise ValueError("%s: %s must be a tuple of numbers, got %r" % (op, name, value))
    if isinstance(value, NDArray):
        value = value.asnumpy().ravel().tolist()
    if not isinstance(value, (list, tuple, numpy.ndarray)):
        value = (value,)
    try:
        values = tuple(_F32(float(v)) for v in value)
    except (TypeError, ValueError):
        raise ValueError("%s: %s must be a tuple of numbers, got %r" % (op, name, value))
    if length is not None and len(values) != length:
        raise ValueError("%s: %s must have %d values, got %d" % (op, name, length, len(values)))
    return values


def _float(op, name, value):
    try:
        return _F32(float(value))
    except (TypeError, ValueError):
        raise TypeError("%s: %s must be a number, got %r" % (op, name, value))


def _int(op, name, value):
    if isinstance(value, bool) or not isinstance(value, (int, numpy.integer)):
        if isinstance(value, (float, numpy.floating)) and float(value).is_integer():
            return int(value)
        raise TypeError("%s: %s must be an integer, got %r" % (op, name, value))
    return int(value)


def _host(arr):
    data = arr._data
    return data if _xp_of(data) is numpy else data.get()


# ----------------------------------------------------------------------------- C's expf/logf
def _c_math():
    """Whether the C library's expf/logf are there (without, float64's rounding alone: within
    an ulp of MXNet's)."""
    return _libm.native("expf") and _libm.native("logf")


# glibc's expf is within 0.502 ulp (relative error 1.69 * 2**-34 before its final rounding): it
# can differ from the correctly rounded float only within 0.002 ulp of a rounding midpoint.
_EXPF_MARGIN = 0.004


def _expf(x):
    """C's ``expf`` of float32 ``x``: float64's exp rounded, and the C library's value where the
    two roundings can disagree (near a midpoint between floats, or out of the normal range)."""
    x = numpy.asarray(x, _F32)
    with numpy.errstate(over="ignore", under="ignore", invalid="ignore"):
        wide = numpy.exp(x.astype(numpy.float64))
        out = wide.astype(_F32)
    if not _c_math():
        return out
    with numpy.errstate(over="ignore", invalid="ignore"):
        near = out.astype(numpy.float64)
        lower = numpy.where(near <= wide, out, numpy.nextafter(out, _F32(-numpy.inf)))
        upper = numpy.nextafter(lower, _F32(numpy.inf))
        lo, hi = lower.astype(numpy.float64), upper.astype(numpy.float64)
        mid = (lo + hi) / 2
        risky = ~(numpy.abs(wide - mid) > _EXPF_MARGIN * (hi - lo)) | ~(wide > 1.2e-38) \
            | ~numpy.isfinite(hi)
    if risky.any():
        with numpy.errstate(all="ignore"):
            out[risky] = _libm.call("expf", x[risky])
    return out


def _logf(x):
    """C's ``logf`` of float32 ``x`` (glibc's logf errs up to 0.82 ulp: no cheap midpoint test,
    so every value goes to the C library; used only on the matched anchors)."""
    x = numpy.asarray(x, _F32)
    if not _c_math() or not x.size:
        with numpy.errstate(divide="ignore", invalid="ignore"):
            return numpy.log(x.astype(numpy.float64)).astype(_F32)
    return _libm.call("logf", x)


# ----------------------------------------------------------------------------- MultiBoxPrior
def MultiBoxPrior(data=None, sizes=(1.0,), ratios=(1.0,), clip=False, steps=(-1.0, -1.0),
                  offsets=(0.5, 0.5)):
    """MXNet's ``contrib.MultiBoxPrior``: SSD anchor boxes for a feature map ``data``
    (N, C, H, W, ...; only H and W matter), shape (1, H * W * (len(sizes) + len(ratios) - 1),
    4), rows ``[xmin, ymin, xmax, ymax]`` ordered by row, column, then anchor: first every size
    with ``ratios[0]``, then ``sizes[0]`` with each further ratio. A box of size ``s`` and ratio
    ``r`` is ``s * H / W * sqrt(r)`` wide and ``s / sqrt(r)`` high (fractions of the image),
    centred at ``((x + offsets[1]) * steps[1], (y + offsets[0]) * steps[0])``; ``steps`` of
    -1 (or any value <= 0) means ``(1/H, 1/W)``; ``clip`` clips coordinates to [0, 1]. All in
    float32, as MXNet computes it. The gradient to ``data`` is zero."""
    op = "MultiBoxPrior"
    _array(op, "data", data)
    if data.ndim < 4:
        raise ValueError("%s: data must have at least 4 dimensions (batch, channel, y, x), "
                         "got shape %s" % (op, tuple(data.shape)))
    height, width = int(data.shape[2]), int(data.shape[3])
    if height <= 0 or width <= 0:
        raise ValueError("%s: data's height and width must be > 0, got %d and %d"
                         % (op, height, width))
    sizes = _floats(op, "sizes", sizes)
    ratios = _floats(op, "ratios", ratios)
    steps = _floats(op, "steps", steps, 2)
    offsets = _floats(op, "offsets", offsets, 2)
    if not sizes or not ratios:
        raise ValueError("%s: sizes and ratios must each have at least one value, got %d and %d"
                         % (op, len(sizes), len(ratios)))
    for off in offsets:
        if not 0 <= off <= 1:
            raise ValueError("%s: offsets must lie in [0, 1], got %s"
                             % (op, tuple(float(o) for o in offsets)))
    if steps[0] * steps[1] < 0:
        raise ValueError("%s: steps must not mix a negative (automatic) and a positive "
                         "value, got %s" % (op, tuple(float(s) for s in steps)))
    if steps[0] <= 0 or steps[1] <= 0:
        steps = (_F32(1) / _F32(height), _F32(1) / _F32(width))
    with numpy.errstate(invalid="ignore", divide="ignore", over="ignore"):
        # The C++ loop's float arithmetic, one rounding per operation in its order.
        cy = (numpy.arange(height, dtype=_F32) + offsets[0]) * steps[0]
        cx = (numpy.arange(width, dtype=_F32) + offsets[1]) * steps[1]
        roots = numpy.sqrt(numpy.asarray(ratios, _F32))
        size = numpy.concatenate([numpy.asarray(sizes, _F32),
                                  numpy.full(len(ratios) - 1, sizes[0], _F32)])
        root = numpy.concatenate([numpy.full(len(sizes), roots[0], _F32), roots[1:]])
        half_w = size * _F32(height) / _F32(width) * root / _F32(2)
        half_h = size / root / _F32(2)
    xp = _xp_of(data._data)
    cx, cy, half_w, half_h = (xp.asarray(v) for v in (cx, cy, half_w, half_h))
    cx, cy = cx[None, :, None], cy[:, None, None]
    shape = (height, width, half_w.size)
    boxes = xp.stack([xp.broadcast_to(v, shape) for v in
                      (cx - half_w, cy - half_h, cx + half_w, cy + half_h)], axis=-1)
    boxes = boxes.reshape(1, -1, 4)
    if flag(op, "clip", clip):
        # MXNet's clip_zero_one: a NaN stays NaN.
        boxes = xp.where(boxes < 0, _F32(0), xp.where(boxes > 1, _F32(1), boxes))
    boxes = xp.ascontiguousarray(boxes, dtype=_F32)

    def vjp(g, needs):
        return (xp.zeros(data.shape, dtype=data.dtype),)
    return _result(boxes, data._ctx, (data,), vjp)


# ----------------------------------------------------------------------------- MultiBoxTarget
def _ious(anchors, labels):
    """(N, A, L) IoUs of the anchors with every label row, in MXNet's float32 order
    (intersection, then area + area - intersection, a zero union giving 0)."""
    al, at, ar, ab = (anchors[None, :, None, k] for k in range(4))
    gl, gt, gr, gb = (labels[:, None, :, k] for k in range(1, 5))
    zero = _F32(0)
    inter = (numpy.maximum(zero, numpy.minimum(ar, gr) - numpy.maximum(al, gl))
             * numpy.maximum(zero, numpy.minimum(ab, gb) - numpy.maximum(at, gt)))
    union = (ar - al) * (ab - at) + (gr - gl) * (gb - gt) - inter
    with numpy.errstate(invalid="ignore", divide="ignore"):
        return numpy.where(union == 0, zero, inter / numpy.where(union == 0, _F32(1), union))


def _best_gt(ious):
    """Per anchor: the first ground truth of largest IoU and that IoU (-1, -1 where none is
    > -1, as the C++ scan starting from -1 with ``>`` leaves it)."""
    clean = numpy.where(numpy.isnan(ious), -numpy.inf, ious)
    best = numpy.argmax(clean, axis=1)
    top = clean[numpy.arange(clean.shape[0]), best]
    found = top > -1
    return numpy.where(found, best, -1), numpy.where(found, top, _F32(-1)).astype(_F32)


def _background_prob(preds):
    """Softmax probability of class 0 per anchor, ``preds`` (classes, anchors), as MXNet's
    loop computes it: float32, the exponentials summed in class order."""
    top = preds[0].copy()
    for row in preds[1:]:
        top = numpy.where(row > top, row, top)
    total = numpy.zeros_like(top)
    for row in preds:
        total = total + _expf(row - top)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        return _expf(preds[0] - top) / total


def _encode(anchors, boxes, variances):
    """MXNet's AssignLocTargets in float32: the centre offsets over the anchor's size and the
    log size ratios, each over its variance."""
    al, at, ar, ab = anchors.T
    gl, gt, gr, gb = boxes.T
    aw, ah = ar - al, ab - at
    ax, ay = (al + ar) * _F32(0.5), (at + ab) * _F32(0.5)
    gw, gh = gr - gl, gb - gt
    gx, gy = (gl + gr) * _F32(0.5), (gt + gb) * _F32(0.5)
    vx, vy, vw, vh = variances
    with numpy.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return numpy.stack([(gx - ax) / aw / vx, (gy - ay) / ah / vy,
                            _logf(gw / aw) / vw, _logf(gh / ah) / vh], axis=1)


def _target_one(ious, anchors, label, preds, overlap_threshold, ignore_label, mining_ratio,
                mining_thresh, variances):
    """One image's (loc_target, loc_mask, cls_target) by MXNet's matching."""
    num_anchors = anchors.shape[0]
    loc = numpy.zeros((num_anchors, 4), _F32)
    mask = numpy.zeros((num_anchors, 4), _F32)
    cls = numpy.full(num_anchors, ignore_label, _F32)
    padding = numpy.flatnonzero(label[:, 0] == -1)
    num_gt = int(padding[0]) if padding.size else label.shape[0]
    if num_gt == 0:
        return loc, mask, cls
    ious = ious[:, :num_gt]
    match = numpy.full(num_anchors, -1, numpy.int64)
    positive = numpy.zeros(num_anchors, bool)
    # Bipartite stage: repeatedly the largest remaining IoU (first in anchor, then ground-truth
    # order on ties) pairs its anchor and ground truth, while one above 1e-6 remains.
    work = numpy.where(numpy.isnan(ious), -numpy.inf, ious)
    floor = _F32(1e-6)
    for _ in range(num_gt):
        flat = int(numpy.argmax(work))
        j, k = divmod(flat, num_gt)
        if not work[j, k] > floor:
            break
        match[j], positive[j] = k, True
        work[j, :] = -numpy.inf
        work[:, k] = -numpy.inf
    best, best_iou = _best_gt(ious)
    if overlap_threshold > 0:
        extra = ~positive & (best_iou > overlap_threshold)
        match[extra], positive[extra] = best[extra], True
    num_positive = int(positive.sum())
    negative = numpy.zeros(num_anchors, bool)
    if mining_ratio > 0:
        # int(num_positive * ratio) in float, capped by the anchors left.
        num_negative = min(int(_F32(num_positive) * mining_ratio), num_anchors - num_positive)
        if num_negative > 0:
            candidates = numpy.flatnonzero(~positive & (best_iou < mining_thresh))
            prob = _background_prob(preds[:, candidates])
            # std::stable_sort by descending -prob: least background-like first, ties in
            # anchor order. MXNet fails when fewer candidates than num_negative remain; all
            # of them are taken here.
            order = numpy.argsort(prob, kind="stable")
            negative[candidates[order[:num_negative]]] = True
    else:
        negative = ~positive
    pos = numpy.flatnonzero(positive)
    if pos.size:
        gt_rows = label[match[pos]]
        cls[pos] = gt_rows[:, 0] + _F32(1)
        mask[pos] = 1
        loc[pos] = _encode(anchors[pos], gt_rows[:, 1:5], variances)
    cls[negative] = 0
    return loc, mask, cls


def MultiBoxTarget(anchor=None, label=None, cls_pred=None, overlap_threshold=0.5,
                   ignore_label=-1.0, negative_mining_ratio=-1.0, negative_mining_thresh=0.5,
                   minimum_negative_samples=0, variances=(0.1, 0.1, 0.2, 0.2)):
    """MXNet's ``contrib.MultiBoxTarget``: SSD training targets ``[loc_target (N, A*4),
    loc_mask (N, A*4), cls_target (N, A)]`` from ``anchor`` (1, A, 4), ``label`` (N, L, >=5)
    rows ``[class, xmin, ymin, xmax, ymax, ...]`` (the first row whose class is -1 ends an
    image's ground truths; it must be all -1) and ``cls_pred`` (N, classes, A).

    Each ground truth first takes its best anchor (greedily, largest IoU first); then every
    other anchor whose best IoU exceeds ``overlap_threshold`` (> 0) is matched too. Matched
    anchors get class ``label + 1`` and the box offsets ``((gx - ax) / aw / v0, (gy - ay) / ah
    / v1, log(gw / aw) / v2, log(gh / ah) / v3)`` with mask 1. With ``negative_mining_ratio``
    > 0 only the ``int(positives * ratio)`` unmatched anchors of IoU below
    ``negative_mining_thresh`` and the lowest background softmax probability (ties: lower
    anchor first) get class 0, the rest ``ignore_label``; otherwise every unmatched anchor
    gets 0. An image without ground truths is all ``ignore_label``. ``minimum_negative_samples``
    is accepted and, as in MXNet's CPU operator, unused.

    Computed on the host (the matching is sequential); the outputs are on ``anchor``'s device.
    The gradient to ``cls_pred`` is zero; ``anchor``'s and ``label``'s are left as they are,
    as MXNet does."""
    op = "MultiBoxTarget"
    _array(op, "anchor", anchor, 3)
    _array(op, "label", label, 3)
    _array(op, "cls_pred", cls_pred, 3)
    a_shape, l_shape, p_shape = tuple(anchor.shape), tuple(label.shape), tuple(cls_pred.shape)
    if a_shape[0] != 1 or a_shape[1] <= 0 or a_shape[2] != 4:
        raise ValueError("%s: anchor must have shape (1, num_anchors > 0, 4), got %s"
                         % (op, a_shape))
    if l_shape[1] <= 0 or l_shape[2] < 5:
        raise ValueError("%s: label must have shape (batch, num_labels > 0, label_width >= 5), "
                         "got %s" % (op, l_shape))
    if p_shape[2] != a_shape[1]:
        raise ValueError("%s: cls_pred's last axis (%d) must equal the number of anchors (%d)"
                         % (op, p_shape[2], a_shape[1]))
    if p_shape[0] != l_shape[0]:
        raise ValueError("%s: cls_pred's batch (%d) must equal label's (%d)"
                         % (op, p_shape[0], l_shape[0]))
    overlap_threshold = _float(op, "overlap_threshold", overlap_threshold)
    ignore_label = _float(op, "ignore_label", ignore_label)
    mining_ratio = _float(op, "negative_mining_ratio", negative_mining_ratio)
    mining_thresh = _float(op, "negative_mining_thresh", negative_mining_thresh)
    _int(op, "minimum_negative_samples", minimum_negative_samples)
    variances = _floats(op, "variances", variances, 4)
    if mining_ratio > 0 and not mining_thresh > 0:
        raise ValueError("%s: negative_mining_thresh must be > 0 when negative mining is on "
                         "(negative_mining_ratio > 0), got %s" % (op, float(mining_thresh)))
    anchors = _host(anchor).reshape(-1, 4)
    labels = _host(label)
    preds = _host(cls_pred)
    for n, image in enumerate(labels):
        pad = numpy.flatnonzero(image[:, 0] == -1)
        if pad.size and not (image[pad[0], 1:5] == -1).all():
            raise ValueError("%s: label row %d of image %d has class -1 (padding) but "
                             "coordinates %s; padding rows must be all -1"
                             % (op, int(pad[0]), n, image[pad[0], 1:5].tolist()))
    ious = _ious(anchors, labels)
    batch, num_anchors = l_shape[0], a_shape[1]
    locs = numpy.empty((batch, num_anchors * 4), _F32)
    masks = numpy.empty((batch, num_anchors * 4), _F32)
    classes = numpy.empty((batch, num_anchors), _F32)
    for n in range(batch):
        loc, mask, cls = _target_one(ious[n], anchors, labels[n], preds[n], overlap_threshold,
                                     ignore_label, mining_ratio, mining_thresh, variances)
        locs[n], masks[n], classes[n] = loc.reshape(-1), mask.reshape(-1), cls
    xp = _xp_of(anchor._data)
    outs = [xp.asarray(v) for v in (locs, masks, classes)]
    inputs = (anchor, label, cls_pred)

    def vjp(g, needs):
        return (None, None, xp.zeros(cls_pred.shape, dtype=cls_pred.dtype) if needs[2] else None)
    return [_result(v, anchor._ctx, inputs, vjp) for v in outs]


# ----------------------------------------------------------------------------- MultiBoxDetection
def _cmin(a, b):
    return numpy.where(b < a, b, a)       # std::min(a, b)


def _cmax(a, b):
    return numpy.where(a < b, b, a)       # std::max(a, b)


def _decode(anchors, loc, clip, variances):
    """MXNet's TransformLocations in float32: (A, 4) boxes from (A, 4) offsets."""
    al, at, ar, ab = anchors.T
    px, py, pw, ph = loc.T
    vx, vy, vw, vh = variances
    two = _F32(2)
    aw, ah = ar - al, ab - at
    ax, ay = (al + ar) / two, (at + ab) / two
    with numpy.errstate(invalid="ignore", over="ignore"):
        ox = px * vx * aw + ax
        oy = py * vy * ah + ay
        ow = _expf(pw * vw) * aw / two
        oh = _expf(ph * vh) * ah / two
        boxes = numpy.stack([ox - ow, oy - oh, ox + ow, oy + oh], axis=1)
    if clip:
        boxes = _cmax(_F32(0), _cmin(_F32(1), boxes))
    return boxes


def _overlap(box, boxes):
    """MXNet's CalculateOverlap of one box with many, float32 (0 where the union is <= 0)."""
    zero = _F32(0)
    w = _cmax(zero, _cmin(box[2], boxes[:, 2]) - _cmax(box[0], boxes[:, 0]))
    h = _cmax(zero, _cmin(box[3], boxes[:, 3]) - _cmax(box[1], boxes[:, 1]))
    inter = w * h
    union = ((box[2] - box[0]) * (box[3] - box[1])
             + (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]) - inter)
    with numpy.errstate(invalid="ignore", divide="ignore"):
        return numpy.where(union <= 0, zero, inter / numpy.where(union <= 0, _F32(1), union))


def _detect_one(prob, loc, anchors, clip, threshold, nms_threshold, force_suppress, variances,
                nms_topk):
    num_classes, num_anchors = prob.shape
    out = numpy.full((num_anchors, 6), -1, _F32)
    if num_classes > 1:
        # The C++ scan: score from -1, class j >= 1 taken where strictly greater.
        fg = numpy.where(numpy.isnan(prob[1:]), -numpy.inf, prob[1:])
        best = numpy.argmax(fg, axis=0)
        top = fg[best, numpy.arange(num_anchors)]
        found = top > -1
        ids = numpy.where(found, best + 1, 0)
        score = numpy.where(found, top, _F32(-1)).astype(_F32)
    else:
        ids = numpy.zeros(num_anchors, numpy.int64)
        score = numpy.full(num_anchors, -1, _F32)
    ids = numpy.where((ids > 0) & (score < threshold), 0, ids)
    valid = numpy.flatnonzero(ids > 0)
    count = valid.size
    if count == 0:
        return out
    out[:count, 0] = (ids[valid] - 1).astype(_F32)
    out[:count, 1] = score[valid]
    out[:count, 2:] = _decode(anchors[valid], loc[valid], clip, variances)
    if not 0 < nms_threshold <= 1:
        return out
    order = numpy.argsort(-out[:count, 1], kind="stable")   # std::stable_sort, descending
    keep = count
    ranked = out[order]                 # MXNet reorders from a copy taken before the cut
    if 0 < nms_topk < count:
        keep = nms_topk
        # Rows keep.. are marked invalid in place: they keep their unsorted values.
        out[keep:count, 0] = -1
    out[:keep] = ranked[:keep]
    rows = out[:keep]
    for i in range(keep):
        cls = rows[i, 0]
        if cls < 0:
            continue
        rest = rows[i + 1:]
        live = rest[:, 0] >= 0
        if not force_suppress:
            live &= rest[:, 0] == cls
        idx = numpy.flatnonzero(live)
        if idx.size:
            iou = _overlap(rows[i, 2:], rest[idx, 2:])
            rest[idx[iou >= nms_threshold], 0] = -1
    return out


def MultiBoxDetection(cls_prob=None, loc_pred=None, anchor=None, clip=True, threshold=0.01,
                      background_id=0, nms_threshold=0.5, force_suppress=False,
                      variances=(0.1, 0.1, 0.2, 0.2), nms_topk=-1):
    """MXNet's ``contrib.MultiBoxDetection``: detections (N, A, 6) rows ``[class_id, score,
    xmin, ymin, xmax, ymax]`` from ``cls_prob`` (N, classes, A; class 0 is the background),
    ``loc_pred`` (N, A*4) and ``anchor`` (1, A, 4).

    Each anchor takes its most probable class >= 1 (the first on ties), reported as
    ``class - 1``; anchors whose score is below ``threshold`` are dropped, the rest are decoded
    (``variances`` as in ``MultiBoxTarget``; ``clip`` clips to [0, 1]) and packed first, in
    anchor order. When 0 < ``nms_threshold`` <= 1 they are sorted by descending score (stable:
    ties keep anchor order), cut to ``nms_topk`` (> 0) and suppressed greedily: a detection
    whose IoU with a kept higher-scoring one of the same class (any class with
    ``force_suppress``) is >= ``nms_threshold`` gets class -1 and stays in its row. Unused
    rows are all -1. ``background_id`` is accepted and, as in MXNet's CPU operator, unused.

    Computed on the host (the suppression is sequential); the output is on ``cls_prob``'s
    device. The gradient to each input is zero, as MXNet's."""
    op = "MultiBoxDetection"
    _array(op, "cls_prob", cls_prob, 3)
    _array(op, "loc_pred", loc_pred, 2)
    _array(op, "anchor", anchor, 3)
    c_shape, l_shape, a_shape = tuple(cls_prob.shape), tuple(loc_pred.shape), tuple(anchor.shape)
    if a_shape[1] <= 0 or a_shape[2] != 4:
        raise ValueError("%s: anchor must have shape (1, num_anchors > 0, 4), got %s"
                         % (op, a_shape))
    if c_shape[2] != a_shape[1]:
        raise ValueError("%s: cls_prob's last axis (%d) must equal the number of anchors (%d)"
                         % (op, c_shape[2], a_shape[1]))
    if l_shape[1] != c_shape[2] * 4:
        raise ValueError("%s: loc_pred's second axis (%d) must be 4 * the number of anchors "
                         "(%d)" % (op, l_shape[1], c_shape[2] * 4))
    if l_shape[0] != c_shape[0]:
        raise ValueError("%s: loc_pred's batch (%d) must equal cls_prob's (%d)"
                         % (op, l_shape[0], c_shape[0]))
    threshold = _float(op, "threshold", threshold)
    nms_threshold = _float(op, "nms_threshold", nms_threshold)
    _int(op, "background_id", background_id)
    nms_topk = _int(op, "nms_topk", nms_topk)
    variances = _floats(op, "variances", variances, 4)
    # MXNet reads the anchors as (A, 4) from the first A rows, whatever the leading axis.
    anchors = _host(anchor).reshape(-1, 4)[:a_shape[1]]
    probs = _host(cls_prob)
    locs = _host(loc_pred).reshape(c_shape[0], c_shape[2], 4)
    clip = flag(op, "clip", clip)
    force_suppress = flag(op, "force_suppress", force_suppress)
    out = numpy.empty((c_shape[0], a_shape[1], 6), _F32)
    for n in range(c_shape[0]):
        out[n] = _detect_one(probs[n], locs[n], anchors, clip, threshold, nms_threshold,
                             force_suppress, variances, nms_topk)
    xp = _xp_of(cls_prob._data)
    inputs = (cls_prob, loc_pred, anchor)

    def vjp(g, needs):
        return tuple(xp.zeros(x.shape, dtype=x.dtype) if need else None
                     for x, need in zip(inputs, needs))
    return _result(xp.asarray(out), cls_prob._ctx, inputs, vjp)
