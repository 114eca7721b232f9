"""``nd.contrib``'s box operators (``box_iou``, ``box_nms``, ``box_non_maximum_suppression``,
``bipartite_matching``, ``box_encode``, ``box_decode``): values, dtypes, shapes and gradients
are MXNet 1.9.1's, bit for bit (tests/data/mxnet_boxes/boxes.npz, recorded from the real MXNet
by the same ``boxes_cases.record``). Beside the recorded bits: suppression and matching
against plain loops, box_nms's gradient against finite differences, IoU invariants, decode
inverting encode, and the refusals of bad arguments."""

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.ndarray import boxes as _boxes

RECORDED, boxes_cases = replay.recording("mxnet_boxes", "boxes.npz", "boxes_cases")
OURS = boxes_cases.record(mx)
C = nd.contrib


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_each_case_is_mxnets_bits(name):
    replay.same_bits(OURS[name], RECORDED[name])


def test_the_names_are_in_contrib():
    for name in ("box_iou", "box_nms", "box_non_maximum_suppression", "bipartite_matching",
                 "box_encode", "box_decode"):
        assert name in C.__all__ and callable(getattr(C, name))


# ----------------------------------------------------------------------------- plain loops
def _iou(a, b, t):
    """IoU of two corner boxes, one scalar operation at a time in the dtype ``t``."""
    def overlap(a1, a2, b1, b2):
        w = t(min(a2, b2)) - t(max(a1, b1))
        return w if w > 0 else t(0)

    def area(x):
        w, h = t(x[2] - x[0]), t(x[3] - x[1])
        return t(0) if w < 0 or h < 0 else t(w * h)
    inter = t(overlap(a[0], a[2], b[0], b[2]) * overlap(a[1], a[3], b[1], b[3]))
    with np.errstate(invalid="ignore"):
        return t(inter / t(t(area(a) + area(b)) - inter))


def _plain_nms(data, thresh, valid, topk, by_class):
    """Greedy NMS of (N, 6) rows [id, score, box] as a list of kept row indices."""
    t = data.dtype.type
    rows = [i for i in range(len(data)) if data[i, 1] > t(valid)]
    rows.sort(key=lambda i: -float(data[i, 1]))            # sorted() is stable
    rows = rows[:topk]
    kept = []
    for i in rows:
        if all(_iou(data[k, 2:], data[i, 2:], t) <= np.float32(thresh)
               or (by_class and int(data[k, 0]) != int(data[i, 0])) for k in kept):
            kept.append(i)
    return kept


@pytest.mark.parametrize("thresh, valid, topk, by_class", [
    (0.5, 0.0, 400, False), (0.3, 0.2, 400, True), (0.45, 0.0, 50, True)])
def test_box_nms_is_greedy_suppression(thresh, valid, topk, by_class):
    rng = np.random.RandomState(7)
    data = boxes_cases._detections(rng, 1, 400, classes=3, clusters=20, ties=False)[0]
    data = data.astype(np.float32)
    kwargs = {"overlap_thresh": thresh, "valid_thresh": valid, "topk": topk}
    if by_class:
        kwargs["id_index"] = 0
        data[:, 0] = rng.randint(0, 3, size=len(data))      # no background (-1) ids
    out = C.box_nms(nd.array(data), **kwargs).asnumpy()
    kept = _plain_nms(data, thresh, valid, topk, by_class)
    assert len(kept) > 10
    np.testing.assert_array_equal(out[:len(kept)], data[kept])
    assert (out[len(kept):] == -1).all()


def test_suppression_blocks_do_not_change_the_result():
    rng = np.random.RandomState(3)
    boxes = boxes_cases._corners(rng, (90,), span=0.3).astype(np.float32)
    whole = _boxes._suppress(boxes, None, np.float32(0.3), "corner", block=1000)
    for block in (1, 7, 64):
        np.testing.assert_array_equal(_boxes._suppress(boxes, None, np.float32(0.3), "corner",
                                                       block=block), whole)
    assert 5 < whole.sum() < 85


def _plain_matching(scores, threshold, is_ascend, topk):
    rows, cols = np.full(scores.shape[0], -1), np.full(scores.shape[1], -1)
    flat = scores.ravel()
    order = sorted(range(flat.size), key=lambda i: flat[i] if is_ascend else -flat[i])
    count = 0
    for i in order:
        r, c = divmod(i, scores.shape[1])
        if rows[r] == -1 and cols[c] == -1:
            if (flat[i] < threshold) if is_ascend else (flat[i] > threshold):
                rows[r], cols[c] = c, r
                count += 1
                if 0 < topk < count:
                    break
            else:
                break
    return rows, cols


@pytest.mark.parametrize("is_ascend, threshold, topk", [
    (False, 0.2, -1), (True, 0.7, -1), (False, 0.0, 3), (False, 0.5, 0)])
def test_bipartite_matching_is_the_greedy_loop(is_ascend, threshold, topk):
    rng = np.random.RandomState(11)
    scores = np.round(rng.rand(2, 13, 8), 2).astype(np.float32)     # with ties
    rows, cols = C.bipartite_matching(nd.array(scores), is_ascend=is_ascend,
                                      threshold=threshold, topk=topk)
    for b in range(2):
        want_rows, want_cols = _plain_matching(scores[b], np.float32(threshold), is_ascend,
                                               topk)
        np.testing.assert_array_equal(rows.asnumpy()[b], want_rows)
        np.testing.assert_array_equal(cols.asnumpy()[b], want_cols)
        # chunks of the sorted entries: the same matching
        small = _boxes._match(scores[b].ravel(), 8, np.float32(threshold), is_ascend, topk,
                              chunk=3)
        np.testing.assert_array_equal(small[0], want_rows)
    assert (rows.asnumpy() >= 0).sum() > 2


# ----------------------------------------------------------------------------- gradients
def test_box_nms_gradient_is_finite_differences():
    # (Without a format conversion: MXNet's gradient routes the head gradient through the
    # corner/centre conversion unchanged, which the recorded cases check.)
    rng = np.random.RandomState(5)
    data = boxes_cases._detections(rng, 2, 12, ties=False)
    weights = rng.randn(*data.shape)
    x = nd.array(data, dtype="float64")
    x.attach_grad()
    with autograd.record():
        y = C.box_nms(x, overlap_thresh=0.3, topk=9)
        (y * nd.array(weights, dtype="float64")).sum().backward()
    grad = x.grad.asnumpy()

    def f(values):
        out = C.box_nms(nd.array(values, dtype="float64"), overlap_thresh=0.3,
                        topk=9).asnumpy()
        return (out * weights).sum()
    eps = 1e-6
    numeric = np.zeros_like(data)
    for idx in np.ndindex(*data.shape):
        step = np.zeros_like(data)
        step[idx] = eps
        numeric[idx] = (f(data + step) - f(data - step)) / (2 * eps)
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-6)
    assert (grad == 0).all(axis=-1).any() and (grad != 0).any()


def test_zero_gradient_operators_overwrite_stale_gradients():
    a, b = nd.array(boxes_cases._corners(np.random.RandomState(0), (3,))), nd.ones((2, 4))
    for x in (a, b):
        x.attach_grad()
        x.grad[:] = 7
    with autograd.record():
        y = C.box_iou(a, b)
    y.backward()
    assert (a.grad.asnumpy() == 0).all() and (b.grad.asnumpy() == 0).all()


# ----------------------------------------------------------------------------- invariants
def test_box_iou_invariants():
    rng = np.random.RandomState(2)
    a = boxes_cases._corners(rng, (6,)).astype(np.float64)
    b = boxes_cases._corners(rng, (2, 4)).astype(np.float64)
    ab = C.box_iou(nd.array(a, dtype="float64"), nd.array(b, dtype="float64")).asnumpy()
    ba = C.box_iou(nd.array(b, dtype="float64"), nd.array(a, dtype="float64")).asnumpy()
    assert ab.shape == (6, 2, 4)
    np.testing.assert_array_equal(ab, np.moveaxis(ba, -1, 0))
    np.testing.assert_array_equal(
        np.diag(C.box_iou(nd.array(a), nd.array(a)).asnumpy()), np.ones(6, np.float32))
    def centre(x):
        return np.concatenate([(x[..., :2] + x[..., 2:]) / 2, x[..., 2:] - x[..., :2]], -1)
    via_centre = C.box_iou(nd.array(centre(a), dtype="float64"),
                           nd.array(centre(b), dtype="float64"), format="center").asnumpy()
    np.testing.assert_allclose(via_centre, ab, rtol=1e-12, atol=1e-15)
    assert ((ab > 0) & (ab < 1)).any() and (ab == 0).any()


def test_box_decode_inverts_box_encode():
    rng = np.random.RandomState(4)
    anchors = boxes_cases._corners(rng, (1, 9))
    refs = boxes_cases._corners(rng, (1, 9))
    stds = np.array([0.1, 0.1, 0.2, 0.2])
    targets, masks = C.box_encode(nd.ones((1, 9), dtype="float64"),
                                  nd.array(np.arange(9)[None], dtype="float64"),
                                  nd.array(anchors, dtype="float64"),
                                  nd.array(refs, dtype="float64"),
                                  nd.zeros(4, dtype="float64"), nd.array(stds, dtype="float64"))
    assert (masks.asnumpy() == 1).all()
    back = C.box_decode(targets, nd.array(anchors, dtype="float64"), *stds.astype(np.float32),
                        format="corner").asnumpy()
    np.testing.assert_allclose(back, refs, rtol=1e-6, atol=1e-7)   # stds are float32 in MXNet


def test_out_arguments_and_lists():
    data = nd.array(boxes_cases._detections(np.random.RandomState(1), 1, 6)[0])
    out = nd.zeros(data.shape)
    assert C.box_nms(data, out=out) is out
    np.testing.assert_array_equal(out.asnumpy(), C.box_nms(data).asnumpy())
    rows, cols = nd.zeros(3), nd.zeros(2)
    got = C.bipartite_matching(nd.array([[0.5, 0.6], [0.1, 0.2], [0.3, 0.4]]),
                               threshold=1e-12, out=[rows, cols])
    assert got[0] is rows and got[1] is cols
    assert rows.asnumpy().tolist() == [1, -1, 0] and cols.asnumpy().tolist() == [2, 0]


def test_empty_inputs_give_empty_results():
    assert C.box_iou(nd.zeros((0, 4)), nd.ones((3, 4))).shape == (0, 3)
    assert C.box_nms(nd.zeros((2, 0, 6))).shape == (2, 0, 6)
    assert C.box_nms(nd.zeros((0, 3, 6))).shape == (0, 3, 6)
    rows, cols = C.bipartite_matching(nd.zeros((0, 4)), threshold=0.5)
    assert rows.shape == (0,) and cols.asnumpy().tolist() == [-1] * 4


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("call, error, message", [
    (lambda: C.box_nms(nd.ones((6,))), ValueError, "box_nms: data must have at least 2"),
    (lambda: C.box_nms(nd.ones((2, 4))), ValueError, "at least 5 values"),
    (lambda: C.box_nms(nd.ones((2, 5)), id_index=0, coord_start=1),
     ValueError, "at least 6 values"),
    (lambda: C.box_nms(nd.ones((2, 6)), coord_start=3), ValueError,
     r"box_nms: coord_start \+ 4 must be <= the last axis \(6\), got 7"),
    (lambda: C.box_nms(nd.ones((2, 6)), coord_start=-1), ValueError, "coord_start must be"),
    (lambda: C.box_nms(nd.ones((2, 6)), score_index=3), ValueError, "score_index"),
    (lambda: C.box_nms(nd.ones((2, 6)), score_index=-1), ValueError, "score_index"),
    (lambda: C.box_nms(nd.ones((2, 6)), id_index=1), ValueError, "id_index and score_index"),
    (lambda: C.box_nms(nd.ones((2, 6)), id_index=4), ValueError, "id_index"),
    (lambda: C.box_nms(nd.ones((2, 7)), id_index=7), ValueError, "id_index"),
    (lambda: C.box_nms(nd.ones((2, 6)), in_format="xyxy"), ValueError, "in_format"),
    (lambda: C.box_nms(nd.ones((2, 6)), topk=1.5), TypeError, "topk"),
    (lambda: C.box_nms(nd.ones((2, 6), dtype="int32")), TypeError, "box_nms: data"),
    (lambda: C.box_nms(np.ones((2, 6))), TypeError, "NDArray"),
    (lambda: C.box_iou(nd.ones((4,)), nd.ones((2, 4))), ValueError, "box_iou: lhs"),
    (lambda: C.box_iou(nd.ones((2, 3)), nd.ones((2, 4))), ValueError, "box_iou: lhs"),
    (lambda: C.box_iou(nd.ones((2, 4)), nd.ones((2, 4), dtype="float64")), TypeError,
     "same dtype"),
    (lambda: C.box_iou(nd.ones((2, 4)), nd.ones((2, 4)), format="xywh"), ValueError,
     "format"),
    (lambda: C.bipartite_matching(nd.ones((2, 3))), ValueError, "threshold is required"),
    (lambda: C.bipartite_matching(nd.ones((3,)), threshold=0.1), ValueError, "2 dimensions"),
    (lambda: C.box_decode(nd.ones((2, 3, 4)), nd.ones((2, 3, 4))), ValueError,
     "box_decode: anchors"),
    (lambda: C.box_decode(nd.ones((3, 4)), nd.ones((1, 3, 4))), ValueError,
     "box_decode: data"),
    (lambda: C.box_decode(nd.ones((1, 3, 4)), nd.ones((1, 3, 4)), format="xywh"),
     ValueError, "format"),
    (lambda: C.box_encode(nd.ones((1, 2)), nd.zeros((1, 2)), nd.ones((1, 2, 4)),
                          nd.ones((1, 3, 4)), nd.zeros(2), nd.ones(4)),
     ValueError, r"box_encode: means must have shape \(4,\)"),
    (lambda: C.box_encode(nd.ones((1, 2)), nd.zeros((1, 2), dtype="int32"),
                          nd.ones((1, 2, 4)), nd.ones((1, 3, 4)), nd.zeros(4), nd.ones(4)),
     TypeError, "box_encode: matches"),
    (lambda: C.box_encode(nd.ones((1, 2)), nd.zeros((1, 2)), nd.ones((1, 2, 4)),
                          nd.ones((2, 3, 4)), nd.zeros(4), nd.ones(4)),
     ValueError, "box_encode: refs"),
    (lambda: C.box_encode(nd.ones((2,)), nd.zeros((1, 2)), nd.ones((1, 2, 4)),
                          nd.ones((1, 3, 4)), nd.zeros(4), nd.ones(4)),
     ValueError, "box_encode: samples"),
    (lambda: C.box_encode(nd.array([[1, -1]]), nd.array([[3, 7]]), nd.ones((1, 2, 4)),
                          nd.ones((1, 3, 4)), nd.zeros(4), nd.ones(4)),
     ValueError, r"matches must lie in \[0, 3\)"),
])
def test_bad_arguments_are_refused(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_negative_anchors_may_carry_any_match():
    targets, masks = C.box_encode(nd.array([[1, -1, 0]]), nd.array([[0, -1, 99]]),
                                  nd.array([[[0, 0, 1, 1]] * 3]),
                                  nd.array([[[0, 0, 2, 2]]]), nd.zeros(4), nd.ones(4))
    assert masks.asnumpy()[0, :, 0].tolist() == [1, 0, 0]
    np.testing.assert_allclose(targets.asnumpy()[0, 0], [0.5, 0.5, np.log(2), np.log(2)],
                               rtol=1e-6)
    assert (targets.asnumpy()[0, 1:] == 0).all()
