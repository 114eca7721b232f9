"""MXNet 1.9.1's box operators of ``nd.contrib`` (``box_iou``, ``box_nms`` and its alias
``box_non_maximum_suppression``, ``bipartite_matching``, ``box_encode``, ``box_decode``),
written once against MXNet's API (``record(mx)``): each case's outputs (values, dtype, shape)
and, under ``autograd.record()``, every input's gradient of a weighted sum of the outputs
(the inputs' gradients are set to 5 first, so an operator whose gradient MXNet defines as
zero must write the zeros).

    /work/mxvenv/bin/python tests/data/mxnet_boxes/make_boxes_records.py

records ``boxes.npz``; tests/test_nd_boxes.py replays ``record`` with trainer_cli."""
import numpy as np

DTYPES = ("float32", "float64", "float16")


def _grad(mx, out, name, fn, *inputs, grads=True):
    """``fn(*inputs)`` (one NDArray or a list) recorded: each output and, with ``grads``,
    each input's gradient of a weighted sum of the outputs."""
    arrays = [mx.nd.array(x, dtype=x.dtype) for x in inputs]
    if grads:
        for a in arrays:
            a.attach_grad()
            a.grad[:] = 5
    with mx.autograd.record():
        y = fn(*arrays)
        ys = y if isinstance(y, (list, tuple)) else [y]
        rng = np.random.RandomState(len(name))
        total = None
        for part in ys:
            w = mx.nd.array(rng.randn(*part.shape), dtype=part.dtype)
            term = (part * w).sum()
            total = term if total is None else total + term
    if grads:
        total.backward()
    for k, part in enumerate(ys):
        out["%s/out%d" % (name, k)] = part.asnumpy()
    if grads:
        for k, a in enumerate(arrays):
            out["%s/grad%d" % (name, k)] = a.grad.asnumpy()


def _corners(rng, shape, lo=0.0, span=0.7, size=0.4):
    """Corner boxes (..., 4): random minima, positive widths and heights."""
    start = lo + rng.rand(*shape, 2) * span
    extent = 0.05 + rng.rand(*shape, 2) * size
    return np.concatenate([start, start + extent], axis=-1)


def _detections(rng, batch, num, classes=3, clusters=4, ties=True):
    """Rows [id, score, xmin, ymin, xmax, ymax] clustered so that many overlap; scores
    rounded to one decimal so that many tie."""
    centres = rng.rand(clusters, 2) * 0.6 + 0.2
    pick = rng.randint(0, clusters, size=(batch, num))
    mid = centres[pick] + rng.randn(batch, num, 2) * 0.04
    half = 0.08 + rng.rand(batch, num, 2) * 0.06
    ids = rng.randint(0, classes, size=(batch, num, 1)).astype(np.float64)
    scores = rng.rand(batch, num, 1)
    if ties:
        scores = np.round(scores, 1)
    return np.concatenate([ids, scores, mid - half, mid + half], axis=-1)


def record(mx):
    c = mx.nd.contrib
    out = {}
    rng = np.random.RandomState(0)

    # ------------------------------------------------------------------ box_iou
    special = np.array([[0.1, 0.1, 0.4, 0.4],     # ordinary
                        [0.4, 0.1, 0.6, 0.4],     # touches the first along x = 0.4
                        [0.1, 0.1, 0.4, 0.4],     # the first again: IoU 1
                        [0.5, 0.5, 0.3, 0.9],     # xmax < xmin: area 0
                        [0.2, 0.2, 0.2, 0.3],     # zero width
                        [-0.3, -0.2, 0.15, 0.2]])  # negative coordinates
    for dt in DTYPES:
        lhs = _corners(rng, (2, 3)).astype(dt)
        rhs = _corners(rng, (5,)).astype(dt)
        _grad(mx, out, "iou_corner_" + dt, lambda a, b: c.box_iou(a, b), lhs, rhs)
        _grad(mx, out, "iou_center_" + dt, lambda a, b: c.box_iou(a, b, format="center"),
              lhs, rhs)
        _grad(mx, out, "iou_special_" + dt, lambda a, b: c.box_iou(a, b),
              special.astype(dt), special.astype(dt))
        _grad(mx, out, "iou_special_center_" + dt,
              lambda a, b: c.box_iou(a, b, format="center"),
              special.astype(dt), special[::-1].astype(dt))
    big_l, big_r = _corners(rng, (40,)), _corners(rng, (2, 30))
    _grad(mx, out, "iou_many", lambda a, b: c.box_iou(a, b), big_l.astype("float32"),
          big_r.astype("float32"), grads=False)

    # ------------------------------------------------------------------ box_nms
    dets = _detections(rng, 2, 24)
    nms_options = {
        "default": {},
        "thresh03": {"overlap_thresh": 0.3},
        "thresh0": {"overlap_thresh": 0.0},
        "thresh_neg": {"overlap_thresh": -0.5},
        "thresh1": {"overlap_thresh": 1.0},
        "valid": {"valid_thresh": 0.45},
        "topk1": {"topk": 1},
        "topk5": {"topk": 5},
        "topk_big": {"topk": 100},
        "topk0": {"topk": 0, "out_format": "center"},
        "by_class": {"id_index": 0},
        "by_class_force": {"id_index": 0, "force_suppress": True},
        "background": {"id_index": 0, "background_id": 1},
        "background_force": {"id_index": 0, "background_id": 2, "force_suppress": True,
                             "topk": 6},
        "background_without_id": {"background_id": 1},
        "to_center": {"out_format": "center"},
        "from_center": {"in_format": "center", "overlap_thresh": 0.2},
        "center_to_corner": {"in_format": "center", "out_format": "corner"},
        "center_center": {"in_format": "center", "out_format": "center", "id_index": 0},
    }
    for key, kwargs in nms_options.items():
        _grad(mx, out, "nms_%s" % key, lambda d, kw=kwargs: c.box_nms(d, **kw),
              dets.astype("float32"))
    for dt in ("float64", "float16"):
        _grad(mx, out, "nms_default_" + dt, lambda d: c.box_nms(d), dets.astype(dt))
        _grad(mx, out, "nms_options_" + dt,
              lambda d: c.box_nms(d, overlap_thresh=0.35, valid_thresh=0.15, topk=10,
                                  id_index=0, background_id=0, out_format="center"),
              dets.astype(dt))
    # Another layout: [x, y, w, h, extra, id, score] (centre boxes at 0, id 5, score 6).
    layout = np.concatenate([dets[..., 2:4] / 2 + dets[..., 4:6] / 2,
                             dets[..., 4:6] - dets[..., 2:4],
                             rng.randn(2, 24, 1), dets[..., :2]], axis=-1)
    _grad(mx, out, "nms_layout",
          lambda d: c.box_nms(d, coord_start=0, score_index=6, id_index=5, in_format="center",
                              overlap_thresh=0.25),
          layout.astype("float32"))
    _grad(mx, out, "nms_layout_corner_out",
          lambda d: c.box_nms(d, coord_start=0, score_index=6, in_format="center",
                              out_format="corner", topk=7),
          layout.astype("float32"))
    # Leading batch axes, one batch with nothing valid.
    multi = _detections(rng, 6, 9).reshape(2, 3, 9, 6)
    multi[1, 2, :, 1] = -0.5
    _grad(mx, out, "nms_batch_axes", lambda d: c.box_nms(d, overlap_thresh=0.4, topk=6),
          multi.astype("float32"))
    # Nothing valid anywhere: all -1, zero gradient.
    _grad(mx, out, "nms_none_valid", lambda d: c.box_nms(d, valid_thresh=2.0),
          dets.astype("float32"))
    # Ties, class ids that truncate to the same int, invalid boxes, a box of negative xmin
    # (MXNet leaves it unconverted when out_format differs), identical boxes.
    ties = np.array([[0.7, 0.5, 0.1, 0.1, 0.3, 0.3],
                     [0.2, 0.5, 0.1, 0.1, 0.3, 0.3],       # same box, same score
                     [1.0, 0.5, 0.12, 0.1, 0.3, 0.3],
                     [1.9, 0.9, -0.05, 0.0, 0.2, 0.25],   # xmin < 0
                     [-0.5, 0.5, 0.6, 0.6, 0.5, 0.9],     # xmax < xmin: area 0
                     [2.0, 0.0, 0.1, 0.1, 0.3, 0.3],      # score 0: not valid
                     [0.0, 0.5, 0.6, 0.6, 0.8, 0.8],
                     [0.0, 0.5, 0.6, 0.6, 0.8, 0.8],
                     [-1.0, 0.8, 0.65, 0.1, 0.9, 0.3],    # id -1: the default background
                     [3.0, 0.6, 0.9, 0.9, 0.95, 0.85]])   # ymax < ymin: area 0
    for key, kwargs in {"ties": {}, "ties_class": {"id_index": 0},
                        "ties_center": {"out_format": "center"},
                        "ties_center_class": {"out_format": "center", "id_index": 0,
                                              "overlap_thresh": 0.0},
                        "ties_neg_valid": {"valid_thresh": -1.0, "topk": 4},
                        "ties_neg_thresh": {"overlap_thresh": -0.5},   # 0 / 0 IoUs: kept
                        "ties_background": {"id_index": 0, "background_id": 0}}.items():
        _grad(mx, out, "nms_" + key, lambda d, kw=kwargs: c.box_nms(d, **kw),
              ties.astype("float32"))
    # A negative overlap_thresh suppresses disjoint boxes (IoU 0), but not a pair of empty
    # boxes, whose IoU is 0 / 0.
    empty = np.array([[0, 0.9, 0.5, 0.5, 0.4, 0.6], [0, 0.8, 0.1, 0.1, 0.2, 0.2],
                      [0, 0.7, 0.7, 0.7, 0.6, 0.8]])
    _grad(mx, out, "nms_empty_boxes", lambda d: c.box_nms(d, overlap_thresh=-0.5),
          empty.astype("float32"))
    _grad(mx, out, "nms_alias",
          lambda d: c.box_non_maximum_suppression(d, overlap_thresh=0.2, id_index=0),
          dets.astype("float32"))
    many = _detections(rng, 1, 300, classes=5, clusters=12, ties=False)
    _grad(mx, out, "nms_many", lambda d: c.box_nms(d, overlap_thresh=0.45, id_index=0),
          many.astype("float32"))

    # ------------------------------------------------------------------ bipartite_matching
    scores = rng.rand(2, 5, 4)
    tied = np.array([[0.5, 0.5, 0.2], [0.5, 0.5, 0.2], [0.2, 0.9, 0.2], [0.1, 0.1, 0.1]])
    bm_options = {
        "default": {"threshold": 0.1},
        "high": {"threshold": 0.6},
        "ascend": {"threshold": 0.6, "is_ascend": True},
        "topk1": {"threshold": 0.0, "topk": 1},
        "topk2": {"threshold": 0.0, "topk": 2},
        "topk0": {"threshold": 0.0, "topk": 0},
        "ascend_topk": {"threshold": 1.0, "is_ascend": True, "topk": 1},
    }
    for key, kwargs in bm_options.items():
        _grad(mx, out, "bm_" + key, lambda s, kw=kwargs: c.bipartite_matching(s, **kw),
              scores.astype("float32"))
    for dt in DTYPES:
        _grad(mx, out, "bm_wide_" + dt, lambda s: c.bipartite_matching(s, threshold=0.05),
              rng.rand(3, 7).astype(dt))
        _grad(mx, out, "bm_tall_" + dt,
              lambda s: c.bipartite_matching(s, threshold=0.3, is_ascend=True),
              rng.rand(7, 3).astype(dt))
    _grad(mx, out, "bm_ties", lambda s: c.bipartite_matching(s, threshold=0.1), tied)
    _grad(mx, out, "bm_ties_ascend",
          lambda s: c.bipartite_matching(s, threshold=0.6, is_ascend=True), tied)
    _grad(mx, out, "bm_at_threshold", lambda s: c.bipartite_matching(s, threshold=0.5),
          tied.astype("float32"))
    _grad(mx, out, "bm_batch_axes", lambda s: c.bipartite_matching(s, threshold=0.2),
          rng.rand(2, 3, 4, 5).astype("float32"))
    _grad(mx, out, "bm_many", lambda s: c.bipartite_matching(s, threshold=0.3),
          rng.rand(2, 60, 9).astype("float32"), grads=False)

    # ------------------------------------------------------------------ box_encode
    batch, num, num_refs = 2, 12, 4
    for dt in DTYPES:
        samples = rng.choice([-1.0, 0.0, 1.0, 0.5, 0.7], size=(batch, num))
        matches = rng.randint(0, num_refs, size=(batch, num)) + rng.choice([0.0, 0.6],
                                                                           size=(batch, num))
        matches[samples <= 0.5] = -1          # GluonCV's "no match", never read by MXNet
        anchors = _corners(rng, (batch, num))
        refs = _corners(rng, (batch, num_refs))
        means = np.array([0.0, 0.1, -0.2, 0.05])
        stds = np.array([0.1, 0.1, 0.2, 0.2])
        inputs = [v.astype(dt) for v in (samples, matches, anchors, refs, means, stds)]
        _grad(mx, out, "encode_" + dt, lambda *a: c.box_encode(*a), *inputs)
    _grad(mx, out, "encode_plain", lambda *a: c.box_encode(*a),
          *[v.astype("float32") for v in (samples, matches, anchors, refs, np.zeros(4),
                                          np.ones(4))])
    anchors_4d = anchors.reshape(batch, num, 1, 4)
    _grad(mx, out, "encode_anchors_4d", lambda *a: c.box_encode(*a),
          *[v.astype("float32") for v in (samples, matches.reshape(batch, num, 1),
                                          anchors_4d, refs, means, stds)])

    # ------------------------------------------------------------------ box_decode
    num = 10
    for dt in DTYPES:
        offsets = (rng.randn(3, num, 4) * 1.5).astype(dt)
        corner_anchors = _corners(rng, (1, num)).astype(dt)
        centre_anchors = np.concatenate([corner_anchors[..., :2] / 2 + corner_anchors[..., 2:] / 2,
                                         corner_anchors[..., 2:] - corner_anchors[..., :2]],
                                        axis=-1).astype(dt)
        _grad(mx, out, "decode_center_" + dt, lambda d, a: c.box_decode(d, a),
              offsets, centre_anchors)
        _grad(mx, out, "decode_corner_" + dt,
              lambda d, a: c.box_decode(d, a, format="corner"), offsets, corner_anchors)
        _grad(mx, out, "decode_stds_clip_" + dt,
              lambda d, a: c.box_decode(d, a, std0=0.1, std1=0.1, std2=0.2, std3=0.3,
                                        clip=0.25, format="corner"),
              offsets, corner_anchors)
        _grad(mx, out, "decode_stds_" + dt,
              lambda d, a: c.box_decode(d, a, 0.1, 0.2, 0.3, 0.4, -2.0), offsets,
              centre_anchors)
    _grad(mx, out, "decode_anchors_4d", lambda d, a: c.box_decode(d, a, clip=0.5),
          offsets.astype("float32"), centre_anchors.reshape(1, 1, num, 4).astype("float32"))
    return out
