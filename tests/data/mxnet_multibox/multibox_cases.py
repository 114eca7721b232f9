"""``nd.contrib.MultiBoxPrior``/``MultiBoxTarget``/``MultiBoxDetection`` as MXNet 1.9.1
computes them, written once against MXNet's API (``record(mx)``): each case's outputs (values,
dtype, shape) and the gradients of a weighted sum of the outputs under ``autograd.record()``;
``errors(mx)`` lists which bad calls raise.

    /work/mxvenv/bin/python tests/data/mxnet_multibox/make_multibox_records.py

records ``multibox.npz``; tests/test_nd_multibox.py replays both with trainer_cli."""
import numpy as np


def _run(mx, out, name, fn, *inputs, **kwargs):
    """``fn(*inputs, **kwargs)`` recorded: its outputs and every input's gradient of a weighted
    sum of them (inputs are float32; each has attach_grad)."""
    arrays = [mx.nd.array(x, dtype=np.float32) for x in inputs]
    for a in arrays:
        a.attach_grad()
    with mx.autograd.record():
        y = fn(*arrays, **kwargs)
        ys = y if isinstance(y, (list, tuple)) else [y]
        rng = np.random.RandomState(len(name))
        total = None
        for o in ys:
            w = mx.nd.array(rng.randn(*o.shape).astype(np.float32))
            term = (o * w).sum()
            total = term if total is None else total + term
    total.backward()
    for k, o in enumerate(ys):
        out["%s/out%d" % (name, k)] = o.asnumpy()
    for k, a in enumerate(arrays):
        out["%s/grad%d" % (name, k)] = a.grad.asnumpy()


def _labels(rng, batch, rows, counts, width=5, classes=3):
    """(batch, rows, width) labels: ``counts[n]`` random boxes, then -1 padding rows."""
    lab = -np.ones((batch, rows, width), np.float32)
    for n, k in enumerate(counts):
        lo = rng.uniform(0, 0.7, (k, 2))
        size = rng.uniform(0.1, 0.5, (k, 2))
        lab[n, :k, 0] = rng.randint(0, classes, k)
        lab[n, :k, 1:3] = lo
        lab[n, :k, 3:5] = np.minimum(lo + size, 1)
        if width > 5:
            lab[n, :k, 5:] = rng.uniform(0, 1, (k, width - 5))
    return lab


def _softmax(x, axis):
    """In float64, rounded once: the same float32 inputs under any NumPy."""
    e = np.exp(x.astype(np.float64) - x.max(axis, keepdims=True))
    return (e / e.sum(axis, keepdims=True)).astype(np.float32)


def _anchors(mx, shape, sizes, ratios):
    return mx.nd.contrib.MultiBoxPrior(mx.nd.zeros(shape), sizes=sizes, ratios=ratios).asnumpy()


def record(mx):
    c = mx.nd.contrib
    out = {}
    rng = np.random.RandomState(0)
    # ---------------------------------------------------------------- MultiBoxPrior
    fmap = rng.randn(2, 3, 4, 5).astype(np.float32)
    prior = {
        "default": {},
        "sizes_ratios": dict(sizes=(0.5, 0.25, 0.1), ratios=(1, 2, 0.5)),
        "clip": dict(sizes=(0.9, 0.4), ratios=(1, 3, 1 / 3.0), clip=True),
        "steps_offsets": dict(sizes=(0.3,), ratios=(2, 1), steps=(0.1, 0.2),
                              offsets=(0.2, 0.7)),
        "steps_auto_zero": dict(sizes=(0.3,), steps=(0, 0.5)),
        "offsets_edges": dict(sizes=(0.2,), offsets=(0, 1)),
        "scalars": dict(sizes=0.75, ratios=3),
        "string_args": dict(sizes="(0.3, 0.1)", ratios="[1, 2]"),
        "odd_values": dict(sizes=(0.7, 0.13, 0.29), ratios=(0.7, 1.3, 2.9, 0.11)),
        "negative_ratio": dict(sizes=(0.5,), ratios=(1, -1)),
        "large_sizes_clip": dict(sizes=(1.7, 0.05), ratios=(1, 4), clip=True),
    }
    for name, kw in prior.items():
        _run(mx, out, "prior_" + name, c.MultiBoxPrior, fmap, **kw)
    _run(mx, out, "prior_wide", c.MultiBoxPrior, np.zeros((1, 1, 3, 7), np.float32),
         sizes=(0.2, 0.4), ratios=(1, 2, 0.5))
    _run(mx, out, "prior_1x1", c.MultiBoxPrior, np.zeros((1, 2, 1, 1), np.float32),
         sizes=(0.75, 0.5), ratios=(1, 2, 0.5))
    _run(mx, out, "prior_5d", c.MultiBoxPrior, np.zeros((1, 1, 2, 3, 2), np.float32),
         sizes=(0.3,))
    # d2l's SSD: five maps, sizes growing from 0.2 to 1.05 in 0.17 steps, ratios (1, 2, 0.5)
    d2l_sizes = [[0.2, 0.272], [0.37, 0.447], [0.54, 0.619], [0.71, 0.79], [0.88, 0.961]]
    for k, (hw, sizes) in enumerate(zip((32, 16, 8, 4, 1), d2l_sizes)):
        out["prior_d2l_%d" % k] = c.MultiBoxPrior(
            mx.nd.zeros((2, 8, hw, hw)), sizes=sizes, ratios=(1, 2, 0.5)).asnumpy()

    # ---------------------------------------------------------------- MultiBoxTarget
    anchors = _anchors(mx, (1, 1, 4, 4), (0.3, 0.6), (1, 2, 0.5))        # 64 anchors
    num = anchors.shape[1]
    labels = _labels(rng, 4, 4, (2, 1, 0, 4))
    labels[1, 2] = [2, 0.1, 0.1, 0.6, 0.6]      # after a padding row: ignored
    preds = rng.randn(4, 3, num).astype(np.float32)
    target = {
        "default": {},
        "overlap_03": dict(overlap_threshold=0.3),
        "overlap_07": dict(overlap_threshold=0.7),
        "overlap_off": dict(overlap_threshold=0),
        "ignore_label": dict(ignore_label=-2.5),
        "mining": dict(negative_mining_ratio=3),
        "mining_thresh": dict(negative_mining_ratio=2, negative_mining_thresh=0.3),
        "mining_fraction": dict(negative_mining_ratio=0.5, overlap_threshold=0.4),
        "mining_overlap_off": dict(negative_mining_ratio=3, overlap_threshold=0),
        "mining_min_samples": dict(negative_mining_ratio=1, minimum_negative_samples=20),
        "mining_ignore": dict(negative_mining_ratio=2, ignore_label=7),
        "variances": dict(variances=(0.1, 0.2, 0.3, 0.4)),
        "variances_one": dict(variances=(1, 1, 1, 1)),
        "thresh_only_mining": dict(negative_mining_ratio=1.7, negative_mining_thresh=0.65),
    }
    for name, kw in target.items():
        _run(mx, out, "target_" + name, c.MultiBoxTarget, anchors, labels, preds, **kw)
    wide = _labels(rng, 2, 3, (3, 2), width=7)
    _run(mx, out, "target_label_width7", c.MultiBoxTarget, anchors, wide,
         rng.randn(2, 2, num).astype(np.float32), negative_mining_ratio=2)
    # ties: duplicated anchors, duplicated ground truths, tied class scores
    tie_anchors = np.array([[[0.1, 0.1, 0.4, 0.4], [0.1, 0.1, 0.4, 0.4], [0.5, 0.5, 0.9, 0.9],
                             [0.5, 0.5, 0.9, 0.9], [0.0, 0.0, 0.2, 0.2], [0.7, 0.0, 1.0, 0.3],
                             [0.0, 0.7, 0.3, 1.0], [0.3, 0.3, 0.7, 0.7], [0.6, 0.6, 0.7, 0.7],
                             [0.05, 0.6, 0.25, 0.8]]], np.float32)
    tie_labels = np.array([[[1, 0.1, 0.1, 0.4, 0.4], [0, 0.1, 0.1, 0.4, 0.4],
                            [2, 0.5, 0.5, 0.9, 0.9], [-1, -1, -1, -1, -1]],
                           [[0, 0.3, 0.3, 0.7, 0.7], [-1, -1, -1, -1, -1],
                            [-1, -1, -1, -1, -1], [-1, -1, -1, -1, -1]]], np.float32)
    tie_preds = np.zeros((2, 3, 10), np.float32)          # every background prob equal
    for name, kw in {"ties": {}, "ties_mining": dict(negative_mining_ratio=1),
                     "ties_mining_2": dict(negative_mining_ratio=2, overlap_threshold=0.9)
                     }.items():
        _run(mx, out, "target_" + name, c.MultiBoxTarget, tie_anchors, tie_labels, tie_preds,
             **kw)
    # three identical anchors, two identical ground truths of different classes: the greedy
    # pairing and the threshold stage both take the first of equal IoUs
    triple = tie_anchors.copy()
    triple[0, 2] = triple[0, 0]
    twin = tie_labels[:1].copy()
    twin[0, 2] = -1
    for name, kw in {"ties_greedy_only": dict(overlap_threshold=0),
                     "ties_threshold": dict(overlap_threshold=0.5)}.items():
        _run(mx, out, "target_" + name, c.MultiBoxTarget, triple, twin, tie_preds[:1], **kw)
    partial = tie_preds.copy()
    partial[:, 0, ::3] = -1.0                                 # some lower, tied among them
    _run(mx, out, "target_ties_partial", c.MultiBoxTarget, tie_anchors, tie_labels, partial,
         negative_mining_ratio=1)
    # invalid ground truths: inverted and empty boxes never match; an empty anchor
    odd_labels = np.array([[[0, 0.6, 0.6, 0.2, 0.2], [1, 0.3, 0.3, 0.3, 0.3],
                            [2, 0.1, 0.1, 0.4, 0.4]]], np.float32)
    odd_anchors = tie_anchors.copy()
    odd_anchors[0, 8] = [0.5, 0.5, 0.5, 0.5]
    _run(mx, out, "target_invalid_boxes", c.MultiBoxTarget, odd_anchors, odd_labels,
         rng.randn(1, 3, 10).astype(np.float32), negative_mining_ratio=3)
    no_gt = -np.ones((2, 2, 5), np.float32)
    _run(mx, out, "target_no_gt", c.MultiBoxTarget, anchors, no_gt,
         rng.randn(2, 3, num).astype(np.float32))
    _run(mx, out, "target_no_gt_mining", c.MultiBoxTarget, anchors, no_gt,
         rng.randn(2, 3, num).astype(np.float32), negative_mining_ratio=3)
    # anchors sticking out of the image, gt on the border; varied log ratios
    edge_anchors = _anchors(mx, (1, 1, 3, 3), (0.9, 0.35, 0.15), (1, 2.5, 0.4))
    edge_labels = _labels(rng, 3, 6, (6, 5, 3))
    edge_labels[0, 0, 1:] = [0, 0, 1, 1]
    _run(mx, out, "target_edges", c.MultiBoxTarget, edge_anchors, edge_labels,
         rng.randn(3, 4, edge_anchors.shape[1]).astype(np.float32), overlap_threshold=0.2)

    # ---------------------------------------------------------------- MultiBoxDetection
    det_anchors = _anchors(mx, (1, 1, 3, 3), (0.4, 0.2), (1, 2, 0.5))    # 36 anchors
    nd = det_anchors.shape[1]
    logits = rng.randn(3, 4, nd).astype(np.float32) * 2
    prob = _softmax(logits, 1)
    loc = (rng.randn(3, nd * 4) * 0.5).astype(np.float32)
    detection = {
        "default": {},
        "no_clip": dict(clip=False),
        "threshold": dict(threshold=0.4),
        "nms_03": dict(nms_threshold=0.3),
        "nms_1": dict(nms_threshold=1.0),
        "nms_off_0": dict(nms_threshold=0),
        "nms_off_15": dict(nms_threshold=1.5),
        "force": dict(force_suppress=True, nms_threshold=0.2),
        "topk": dict(nms_topk=5),
        "topk_large": dict(nms_topk=500),
        "topk_nms_off": dict(nms_topk=3, nms_threshold=0),
        "background_id": dict(background_id=2),
        "variances": dict(variances=(0.2, 0.1, 0.4, 0.3), clip=False),
    }
    for name, kw in detection.items():
        _run(mx, out, "det_" + name, c.MultiBoxDetection, prob, loc, det_anchors, **kw)
    # ties: equal scores across anchors (stable order) and within an anchor (first class)
    tied = np.full((2, 3, nd), 0.25, np.float32)
    tied[0, 0] = 0.5
    tied[1, :, ::2] = [[0.2], [0.4], [0.4]]
    _run(mx, out, "det_ties", c.MultiBoxDetection, tied, np.zeros((2, nd * 4), np.float32),
         det_anchors, nms_threshold=0.45)
    _run(mx, out, "det_ties_topk", c.MultiBoxDetection, tied, loc[:2] * 0.1, det_anchors,
         nms_topk=7, force_suppress=True)
    background = np.zeros((2, 3, nd), np.float32)
    background[:, 0] = 1
    _run(mx, out, "det_all_background", c.MultiBoxDetection, background, loc[:2], det_anchors)
    _run(mx, out, "det_one_class", c.MultiBoxDetection, np.ones((1, 1, nd), np.float32),
         loc[:1], det_anchors)
    _run(mx, out, "det_negative_scores", c.MultiBoxDetection,
         -np.abs(rng.randn(1, 3, nd)).astype(np.float32) - 0.5, loc[:1], det_anchors,
         threshold=-2)
    big = (rng.randn(1, nd * 4) * 4).astype(np.float32)
    _run(mx, out, "det_large_offsets", c.MultiBoxDetection, prob[:1], big, det_anchors)
    _run(mx, out, "det_large_offsets_noclip", c.MultiBoxDetection, prob[:1], big, det_anchors,
         clip=False, nms_threshold=0.7)

    # ---------------------------------------------------------------- an SSD step (d2l)
    maps = [(8, 8), (4, 4), (2, 2), (1, 1)]
    ssd_anchors = np.concatenate(
        [_anchors(mx, (1, 1) + hw, s, (1, 2, 0.5)) for hw, s in zip(maps, d2l_sizes)], axis=1)
    na = ssd_anchors.shape[1]
    ssd_labels = _labels(rng, 4, 5, (1, 3, 5, 2), classes=2)
    ssd_logits = rng.randn(4, na, 3).astype(np.float32)
    _run(mx, out, "ssd_target", c.MultiBoxTarget, ssd_anchors, ssd_labels,
         ssd_logits.transpose(0, 2, 1))
    _run(mx, out, "ssd_target_mining", c.MultiBoxTarget, ssd_anchors, ssd_labels,
         ssd_logits.transpose(0, 2, 1), negative_mining_ratio=3)
    ssd_prob = _softmax(ssd_logits, -1).transpose(0, 2, 1).copy()
    ssd_loc = (rng.randn(4, na * 4) * 0.3).astype(np.float32)
    _run(mx, out, "ssd_detection", c.MultiBoxDetection, ssd_prob, ssd_loc, ssd_anchors)
    _run(mx, out, "ssd_detection_topk", c.MultiBoxDetection, ssd_prob, ssd_loc, ssd_anchors,
         nms_topk=20, threshold=0.4)
    return out


def errors(mx):
    """Which bad calls raise (1) and which do not (0), by name."""
    c, nd = mx.nd.contrib, mx.nd
    x = nd.zeros((1, 1, 2, 2))
    a = nd.array([[[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]]])
    lab = nd.array([[[0, 0, 0, 0.5, 0.5], [-1, -1, -1, -1, -1]]])
    p = nd.zeros((1, 2, 2))
    calls = {
        "prior_float64": lambda: c.MultiBoxPrior(x.astype("float64")),
        "prior_float16": lambda: c.MultiBoxPrior(x.astype("float16")),
        "prior_3d": lambda: c.MultiBoxPrior(nd.zeros((1, 2, 2))),
        "prior_empty_sizes": lambda: c.MultiBoxPrior(x, sizes=()),
        "prior_empty_ratios": lambda: c.MultiBoxPrior(x, ratios=()),
        "prior_steps_3": lambda: c.MultiBoxPrior(x, steps=(1, 1, 1)),
        "prior_steps_mixed": lambda: c.MultiBoxPrior(x, steps=(-1, 0.5)),
        "prior_offsets_range": lambda: c.MultiBoxPrior(x, offsets=(1.5, 0.5)),
        "prior_offsets_negative": lambda: c.MultiBoxPrior(x, offsets=(0.5, -0.1)),
        "prior_offsets_1": lambda: c.MultiBoxPrior(x, offsets=(0.5,)),
        "prior_ok": lambda: c.MultiBoxPrior(x, steps=(0, 0.5)),
        "target_float64": lambda: c.MultiBoxTarget(a.astype("float64"), lab.astype("float64"),
                                                   p.astype("float64")),
        "target_anchor_batch": lambda: c.MultiBoxTarget(nd.concat(a, a, dim=0), lab, p),
        "target_anchor_2d": lambda: c.MultiBoxTarget(a[0], lab, p),
        "target_anchor_width": lambda: c.MultiBoxTarget(nd.zeros((1, 2, 5)), lab, p),
        "target_label_width": lambda: c.MultiBoxTarget(a, lab[:, :, :4], p),
        "target_pred_anchors": lambda: c.MultiBoxTarget(a, lab, nd.zeros((1, 2, 3))),
        "target_bad_padding": lambda: c.MultiBoxTarget(
            a, nd.array([[[0, 0, 0, 0.5, 0.5], [-1, 0, -1, -1, -1]]]), p),
        "target_mining_thresh": lambda: c.MultiBoxTarget(a, lab, p, negative_mining_ratio=3,
                                                         negative_mining_thresh=0),
        "target_variances_3": lambda: c.MultiBoxTarget(a, lab, p, variances=(1, 1, 1)),
        "target_ok": lambda: c.MultiBoxTarget(a, lab, p, negative_mining_ratio=-3,
                                              negative_mining_thresh=0),
        "det_float64": lambda: c.MultiBoxDetection(p.astype("float64"),
                                                   nd.zeros((1, 8), dtype="float64"),
                                                   a.astype("float64")),
        "det_loc_size": lambda: c.MultiBoxDetection(p, nd.zeros((1, 7)), a),
        "det_anchor_count": lambda: c.MultiBoxDetection(nd.zeros((1, 2, 3)),
                                                        nd.zeros((1, 12)), a),
        "det_cls_2d": lambda: c.MultiBoxDetection(p[0], nd.zeros((1, 8)), a),
        "det_anchor_width": lambda: c.MultiBoxDetection(p, nd.zeros((1, 8)),
                                                        nd.zeros((1, 2, 3))),
        "det_variances_5": lambda: c.MultiBoxDetection(p, nd.zeros((1, 8)), a,
                                                       variances=(1, 1, 1, 1, 1)),
        "det_keep_topk": lambda: c.MultiBoxDetection(p, nd.zeros((1, 8)), a, keep_topk=3),
        "det_ok": lambda: c.MultiBoxDetection(p, nd.zeros((1, 8)), a, nms_threshold=-1),
    }
    out = {}
    for name, call in calls.items():
        try:
            res = call()
            for r in (res if isinstance(res, (list, tuple)) else [res]):
                r.asnumpy()
            out["raises/" + name] = np.array(0)
        except Exception:    # MXNetError there, TypeError/ValueError here
            out["raises/" + name] = np.array(1)
    return out
