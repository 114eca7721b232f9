"""``nd.contrib.MultiBoxPrior``/``MultiBoxTarget``/``MultiBoxDetection``: every output and
gradient is MXNet 1.9.1's, bit for bit (tests/data/mxnet_multibox/multibox.npz, recorded from
the real MXNet by the same ``multibox_cases.record``), the same bad calls raise, and the
operators keep the invariants of SSD's box encoding, matching and suppression."""

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli.ndarray import _libm
from trainer_cli import autograd, nd
from trainer_cli.ndarray import multibox as _multibox

RECORDED, multibox_cases = replay.recording("mxnet_multibox", "multibox.npz", "multibox_cases")
OURS = multibox_cases.record(mx)
OURS.update(multibox_cases.errors(mx))
C = nd.contrib


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)
    assert {"MultiBoxPrior", "MultiBoxTarget", "MultiBoxDetection"} <= set(C.__all__)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_mxnets_bits(name):
    replay.same_bits(OURS[name], RECORDED[name])       # NaNs in the same places count as equal


# ----------------------------------------------------------------------------- helpers
def _anchors(shape=(1, 1, 4, 4), sizes=(0.3, 0.6), ratios=(1, 2, 0.5)):
    return C.MultiBoxPrior(nd.zeros(shape), sizes=sizes, ratios=ratios)


def _labels(rows):
    return nd.array(np.array(rows, np.float32))


def _iou(a, b):
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - w * h
    return w * h / union if union > 0 else 0.0


# ----------------------------------------------------------------------------- MultiBoxPrior
def test_prior_boxes_have_the_documented_sizes_and_centres():
    h, w = 3, 5
    sizes, ratios = (0.5, 0.2), (1.0, 2.0, 0.5)
    boxes = C.MultiBoxPrior(nd.zeros((1, 1, h, w)), sizes=sizes, ratios=ratios).asnumpy()
    boxes = boxes.reshape(h, w, 4, 4).astype(np.float64)
    pairs = [(0.5, 1.0), (0.2, 1.0), (0.5, 2.0), (0.5, 0.5)]
    for k, (s, r) in enumerate(pairs):
        np.testing.assert_allclose(boxes[..., k, 2] - boxes[..., k, 0], s * h / w * np.sqrt(r),
                                   rtol=1e-6)
        np.testing.assert_allclose(boxes[..., k, 3] - boxes[..., k, 1], s / np.sqrt(r),
                                   rtol=1e-6)
    cx = (boxes[..., 0] + boxes[..., 2]) / 2
    cy = (boxes[..., 1] + boxes[..., 3]) / 2
    np.testing.assert_allclose(cx, ((np.arange(w) + 0.5) / w)[None, :, None] + 0 * cx,
                               atol=1e-7)
    np.testing.assert_allclose(cy, ((np.arange(h) + 0.5) / h)[:, None, None] + 0 * cy,
                               atol=1e-7)


def test_prior_gradient_is_zero_and_add_keeps_what_was_accumulated():
    x = nd.ones((1, 2, 3, 3))
    x.attach_grad()
    x.grad[:] = 5
    with autograd.record():
        y = C.MultiBoxPrior(x, sizes=(0.4,))
    y.backward()
    assert (x.grad.asnumpy() == 0).all()            # grad_req 'write': MXNet writes zeros
    x.attach_grad(grad_req="add")
    x.grad[:] = 5
    with autograd.record():
        y = C.MultiBoxPrior(x * 2, sizes=(0.4,))
    y.backward()
    # MXNet's Backward overwrites an accumulated gradient with 0; we add nothing instead.
    assert (x.grad.asnumpy() == 5).all()


def test_prior_errors_name_the_argument():
    x = nd.zeros((1, 1, 2, 2))
    with pytest.raises(TypeError, match="MultiBoxPrior: data must be float32.*float64"):
        C.MultiBoxPrior(x.astype("float64"))
    with pytest.raises(ValueError, match="MultiBoxPrior: data must have at least 4"):
        C.MultiBoxPrior(nd.zeros((1, 2, 2)))
    with pytest.raises(ValueError, match="MultiBoxPrior: steps must have 2 values, got 3"):
        C.MultiBoxPrior(x, steps=(1, 1, 1))
    with pytest.raises(ValueError, match="MultiBoxPrior: steps must not mix a negative"):
        C.MultiBoxPrior(x, steps=(-1, 0.5))
    with pytest.raises(ValueError, match=r"MultiBoxPrior: offsets must lie in \[0, 1\]"):
        C.MultiBoxPrior(x, offsets=(1.5, 0.5))
    with pytest.raises(ValueError, match="MultiBoxPrior: sizes and ratios must each have"):
        C.MultiBoxPrior(x, sizes=())
    with pytest.raises(ValueError, match="MultiBoxPrior: sizes must be a tuple of numbers"):
        C.MultiBoxPrior(x, sizes="big")


# ----------------------------------------------------------------------------- MultiBoxTarget
def test_target_offsets_decode_back_to_the_matched_ground_truths():
    anchors = _anchors()
    labels = _labels([[[0, 0.1, 0.1, 0.45, 0.5], [2, 0.5, 0.4, 0.95, 0.9]],
                      [[1, 0.2, 0.6, 0.5, 0.95], [-1, -1, -1, -1, -1]]])
    num = anchors.shape[1]
    preds = nd.zeros((2, 4, num))
    loc, mask, cls = C.MultiBoxTarget(anchors, labels, preds, overlap_threshold=0.4)
    loc, mask, cls = loc.asnumpy(), mask.asnumpy(), cls.asnumpy()
    # decode with MultiBoxDetection: the class of each positive anchor made certain, no NMS
    prob = np.zeros((2, 4, num), np.float32)
    prob[:, 0] = 1
    for n in range(2):
        for j in np.flatnonzero(cls[n] > 0):
            prob[n, :, j] = 0
            prob[n, int(cls[n, j]), j] = 1
    det = C.MultiBoxDetection(nd.array(prob), nd.array(loc), anchors, clip=False,
                              nms_threshold=0).asnumpy()
    lab = labels.asnumpy()
    for n in range(2):
        positives = np.flatnonzero(cls[n] > 0)
        assert positives.size >= (2 if n == 0 else 1)
        assert (mask[n].reshape(-1, 4)[positives] == 1).all()
        assert (mask[n].reshape(-1, 4)[cls[n] <= 0] == 0).all()
        rows = det[n, :positives.size]
        np.testing.assert_array_equal(rows[:, 0], cls[n, positives] - 1)
        for row in rows:
            gt = lab[n][lab[n, :, 0] == row[0]]
            assert np.abs(gt[:, 1:5] - row[2:]).max(axis=1).min() < 2e-6


def test_target_every_ground_truth_gets_its_best_anchor_and_padding_ends_the_list():
    anchors = _anchors()
    a = anchors.asnumpy()[0]
    rows = [[1, 0.05, 0.05, 0.3, 0.3], [0, 0.6, 0.1, 0.9, 0.5], [-1, -1, -1, -1, -1],
            [2, 0.4, 0.4, 0.8, 0.8]]
    _, _, cls = C.MultiBoxTarget(anchors, _labels([rows]), nd.zeros((1, 2, a.shape[0])),
                                 overlap_threshold=0.99)
    cls = cls.asnumpy()[0]
    for gt in rows[:2]:
        best = int(np.argmax([_iou(box, gt[1:]) for box in a]))
        assert cls[best] == gt[0] + 1
    assert (cls > 0).sum() == 2                     # the row after the padding is ignored
    assert (cls == 0).sum() == a.shape[0] - 2       # no mining: every other anchor negative
    assert 3 not in cls


def test_target_hard_negatives_are_the_least_background_like():
    anchors = _anchors()
    num = anchors.shape[1]
    rng = np.random.RandomState(3)
    preds = rng.randn(1, 3, num).astype(np.float32)
    labels = _labels([[[0, 0.1, 0.1, 0.5, 0.5], [1, 0.55, 0.5, 0.95, 0.9]]])
    _, _, cls = C.MultiBoxTarget(anchors, labels, nd.array(preds), negative_mining_ratio=3,
                                 negative_mining_thresh=0.5, ignore_label=-7)
    cls = cls.asnumpy()[0]
    positives = int((cls > 0).sum())
    negatives = np.flatnonzero(cls == 0)
    assert negatives.size == 3 * positives
    assert set(np.unique(cls)) <= {-7.0, 0.0, 1.0, 2.0}
    p = np.exp(preds[0].astype(np.float64))
    background = p[0] / p.sum(0)
    a = anchors.asnumpy()[0]
    gts = labels.asnumpy()[0, :, 1:]
    eligible = [j for j in range(num) if cls[j] <= 0
                and max(_iou(a[j], g) for g in gts) < 0.5]
    ignored = [j for j in eligible if cls[j] == -7]
    assert background[negatives].max() <= background[ignored].min()


def test_target_with_too_few_negative_candidates_takes_them_all():
    # MXNet fails here ("temp.size() >= num_negative"); all the candidates are taken instead.
    anchors = nd.array([[[0, 0, .5, .5], [.5, .5, 1, 1], [.1, .1, .6, .6], [.4, .4, .9, .9],
                         [0, 0, 1, 1], [.2, .2, .3, .3]]])
    labels = _labels([[[0, 0.05, 0.05, 0.5, 0.5], [-1, -1, -1, -1, -1]]])
    _, _, cls = C.MultiBoxTarget(anchors, labels, nd.zeros((1, 3, 6)), overlap_threshold=0.9,
                                 negative_mining_ratio=30, negative_mining_thresh=0.05)
    cls = cls.asnumpy()[0]
    assert cls.tolist() == [1, 0, -1, 0, -1, 0]     # 3 candidates of IoU < 0.05, not 5


def test_target_gradient_is_zero_to_cls_pred_and_leaves_the_others():
    anchors = _anchors()
    labels = _labels([[[0, 0.1, 0.1, 0.5, 0.5]]])
    preds = nd.ones((1, 2, anchors.shape[1]))
    for x in (anchors, labels, preds):
        x.attach_grad()
        x.grad[:] = 7
    with autograd.record():
        outs = C.MultiBoxTarget(anchors, labels, preds)
        total = outs[0].sum() + outs[1].sum() * 2 + outs[2].sum() * 3
    total.backward()
    assert (preds.grad.asnumpy() == 0).all()
    assert (anchors.grad.asnumpy() == 7).all() and (labels.grad.asnumpy() == 7).all()


def test_target_takes_out_for_its_three_outputs():
    anchors = _anchors()
    num = anchors.shape[1]
    outs = [nd.zeros((1, num * 4)), nd.zeros((1, num * 4)), nd.zeros((1, num))]
    got = C.MultiBoxTarget(anchors, _labels([[[0, 0.1, 0.1, 0.5, 0.5]]]),
                           nd.zeros((1, 2, num)), out=outs)
    assert all(g is o for g, o in zip(got, outs))
    assert outs[2].asnumpy().max() == 1


def test_target_errors_name_the_argument():
    a = nd.array([[[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]]])
    lab = _labels([[[0, 0, 0, 0.5, 0.5]]])
    p = nd.zeros((1, 2, 2))
    with pytest.raises(TypeError, match="MultiBoxTarget: label must be float32"):
        C.MultiBoxTarget(a, lab.astype("float16"), p)
    with pytest.raises(ValueError, match=r"MultiBoxTarget: anchor must have shape \(1, "):
        C.MultiBoxTarget(nd.concat(a, a, dim=0), lab, p)
    with pytest.raises(ValueError, match="MultiBoxTarget: cls_pred's last axis \\(3\\)"):
        C.MultiBoxTarget(a, lab, nd.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match="MultiBoxTarget: label row 1 of image 0 has class -1"):
        C.MultiBoxTarget(a, _labels([[[0, 0, 0, .5, .5], [-1, 0, -1, -1, -1]]]), p)
    with pytest.raises(ValueError, match="MultiBoxTarget: negative_mining_thresh must be > 0"):
        C.MultiBoxTarget(a, lab, p, negative_mining_ratio=3, negative_mining_thresh=0)
    with pytest.raises(ValueError, match="MultiBoxTarget: variances must have 4 values"):
        C.MultiBoxTarget(a, lab, p, variances=(1, 1, 1))


# ----------------------------------------------------------------------------- MultiBoxDetection
def _random_detection_inputs(seed=5, batch=2, classes=4):
    anchors = _anchors((1, 1, 5, 5), (0.35, 0.2), (1, 2, 0.5))
    num = anchors.shape[1]
    rng = np.random.RandomState(seed)
    logits = rng.randn(batch, classes, num) * 2
    prob = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    loc = rng.randn(batch, num * 4) * 0.3
    return nd.array(prob.astype(np.float32)), nd.array(loc.astype(np.float32)), anchors


@pytest.mark.parametrize("force", [False, True])
def test_detection_keeps_no_overlapping_pair_and_sorts_by_score(force):
    prob, loc, anchors = _random_detection_inputs()
    det = C.MultiBoxDetection(prob, loc, anchors, nms_threshold=0.4,
                              force_suppress=force).asnumpy()
    for rows in det:
        used = rows[rows[:, 1] >= 0]
        assert (np.diff(used[:, 1]) <= 0).all()
        kept = used[used[:, 0] >= 0]
        assert kept.shape[0] > 0
        for i in range(len(kept)):
            for j in range(i + 1, len(kept)):
                if force or kept[i, 0] == kept[j, 0]:
                    assert _iou(kept[i, 2:], kept[j, 2:]) < 0.4
        # each suppressed row overlaps a kept, better-scoring one of its own class (any class
        # with force_suppress) at least at the threshold
        p = prob.asnumpy()
        for row in used[used[:, 0] < 0]:
            assert any(_iou(k[2:], row[2:]) >= 0.4 - 1e-6 and k[1] >= row[1]
                       for k in kept)
        assert (p.shape[1] - 1) > kept[:, 0].max()


def test_detection_gradient_is_zero_to_every_input():
    prob, loc, anchors = _random_detection_inputs(batch=1)
    for x in (prob, loc, anchors):
        x.attach_grad()
        x.grad[:] = 3
    with autograd.record():
        y = C.MultiBoxDetection(prob, loc, anchors)
    y.backward()
    for x in (prob, loc, anchors):
        assert (x.grad.asnumpy() == 0).all()


def test_detection_errors_name_the_argument():
    a = nd.array([[[0, 0, 0.5, 0.5], [0.5, 0.5, 1, 1]]])
    p = nd.zeros((1, 2, 2))
    with pytest.raises(TypeError, match="MultiBoxDetection: cls_prob must be float32"):
        C.MultiBoxDetection(p.astype("float64"), nd.zeros((1, 8)), a)
    with pytest.raises(ValueError, match=r"MultiBoxDetection: loc_pred's second axis \(7\)"):
        C.MultiBoxDetection(p, nd.zeros((1, 7)), a)
    with pytest.raises(ValueError, match="MultiBoxDetection: cls_prob must have 3 dimensions"):
        C.MultiBoxDetection(p[0], nd.zeros((1, 8)), a)
    with pytest.raises(TypeError, match="MultiBoxDetection: nms_topk must be an integer"):
        C.MultiBoxDetection(p, nd.zeros((1, 8)), a, nms_topk="all")
    with pytest.raises(TypeError):
        C.MultiBoxDetection(p, nd.zeros((1, 8)), a, keep_topk=3)


# ----------------------------------------------------------------------------- C's expf/logf
def test_without_a_c_math_library_results_are_within_an_ulp(monkeypatch):
    monkeypatch.setattr(_multibox, "_c_math", lambda: False)
    fallback = multibox_cases.record(mx)
    for name in ("ssd_detection/out0", "target_variances/out0", "target_variances_one/out0",
                 "det_large_offsets_noclip/out0"):
        np.testing.assert_allclose(fallback[name], RECORDED[name], rtol=3e-7, atol=1e-8)


@pytest.mark.skipif(not _multibox._c_math(), reason="no loadable C math library")
def test_expf_is_the_c_librarys_expf_everywhere():
    rng = np.random.RandomState(0)
    x = np.concatenate([rng.uniform(-12, 12, 200000), rng.uniform(-110, 95, 20000),
                        [0, -0.0, np.inf, -np.inf, np.nan, 88.72, 88.73, -103.9]])
    x = x.astype(np.float32)
    with np.errstate(all="ignore"):
        want = _libm.call("expf", x)          # every element through the C library
    np.testing.assert_array_equal(_multibox._expf(x), want)
