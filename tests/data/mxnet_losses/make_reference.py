"""Makes ``reference.npz``: MXNet 1.9.1's values and input gradients for the Gluon losses that
tests/test_losses_more.py checks. Run with the real MXNet (``/tmp/mxvenv/bin/python``, see
DEVELOPERS.md); the file it writes is committed.

Each case ``NAME`` stores ``NAME/in<i>`` (the float32 inputs, in call order), ``NAME/extra<k>`` (further positional arrays), ``NAME/head`` (the
head gradient), ``NAME/out`` (the loss) and ``NAME/grad<i>`` (the gradient of every input that
is differentiated). The loss's arguments per case are in ``CASES`` in the test module too.
"""
import os
import sys

import numpy as np
import mxnet as mx
from mxnet import autograd, gluon, nd

rng = np.random.RandomState(16)
out = {}


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def signs(*shape):
    return np.where(rng.uniform(size=shape) < 0.5, -1.0, 1.0).astype(np.float32)


def case(name, loss, inputs, diff, extra=None):
    """``inputs``: numpy arrays in call order; ``diff``: indices to differentiate; ``extra``:
    further positional arguments after them (None or arrays, not differentiated)."""
    arrays = [nd.array(a, dtype=a.dtype) for a in inputs]
    for i in diff:
        arrays[i].attach_grad()
    rest = [None if v is None else nd.array(v, dtype=v.dtype) for v in (extra or [])]
    if not diff:        # MXNet cannot record this loss: its value only
        res = loss(*arrays, *rest)
    else:
        with autograd.record():
            res = loss(*arrays, *rest)
        head = rng.uniform(0.5, 1.5, size=res.shape).astype(np.float32)
        res.backward(nd.array(head))
        out["%s/head" % name] = head
    for i, a in enumerate(inputs):
        out["%s/in%d" % (name, i)] = a
    for k, v in enumerate(extra or []):
        if v is not None:
            out["%s/extra%d" % (name, k)] = v
    out["%s/out" % name] = res.asnumpy()
    for i in diff:
        out["%s/grad%d" % (name, i)] = arrays[i].grad.asnumpy()


L = gluon.loss
p = f32(4, 5)
logp = nd.log_softmax(nd.array(f32(4, 5))).asnumpy()
prob = nd.softmax(nd.array(f32(4, 5))).asnumpy()
case("kl_logits", L.KLDivLoss(), [logp, prob], [0])
case("kl_softmax", L.KLDivLoss(from_logits=False), [f32(4, 5), prob], [0])
case("kl_axis0_w", L.KLDivLoss(from_logits=False, axis=0, weight=0.5), [f32(3, 4), nd.softmax(nd.array(f32(3, 4)), axis=0).asnumpy()], [0])
case("kl_sample_weight", L.KLDivLoss(), [logp, prob], [0], [f32(4, 1, lo=0, hi=1)])
case("kl_batch1_3d", L.KLDivLoss(batch_axis=1), [f32(2, 3, 4, lo=-3, hi=0), f32(2, 3, 4, lo=0.01, hi=1)], [0, 1])
case("hinge", L.HingeLoss(), [f32(4, 5), signs(4, 5)], [0])
case("hinge_margin_w", L.HingeLoss(margin=0.5, weight=2.0), [f32(3, 2, 2), signs(3, 4)], [0], [f32(3, 1, 1, lo=0, hi=1)])
case("sq_hinge", L.SquaredHingeLoss(), [f32(4, 5), signs(4, 5)], [0])
case("sq_hinge_margin", L.SquaredHingeLoss(margin=2, batch_axis=1), [f32(3, 4), signs(3, 4)], [0, 1])
case("logistic_signed", L.LogisticLoss(), [f32(4, 5, lo=-30, hi=30), signs(4, 5)], [0])
case("logistic_binary", L.LogisticLoss(label_format="binary", weight=0.3), [f32(4, 5), (signs(4, 5) > 0).astype(np.float32)], [0, 1])
case("triplet", L.TripletLoss(), [f32(4, 5), f32(4, 5), f32(4, 5)], [0, 1, 2])
case("triplet_margin_w", L.TripletLoss(margin=3.0, weight=0.7), [f32(3, 2, 3), f32(3, 6), f32(3, 2, 3)], [0, 1, 2])
case("poisson_logits", L.PoissonNLLLoss(), [f32(4, 3), rng.poisson(2.0, size=(4, 3)).astype(np.float32)], [0])
# compute_full multiplies in place (``stirling_factor *= ...``), which MXNet refuses inside
# autograd.record(): only its value can be taken. A zero target gives NaN there (0 * log 0).
case("poisson_prob_full", L.PoissonNLLLoss(from_logits=False, compute_full=True),
     [f32(4, 3, lo=0.1, hi=4), rng.poisson(3.0, size=(4, 3)).astype(np.float32) + 1], [])
case("poisson_full_zero_target", L.PoissonNLLLoss(compute_full=True),
     [f32(2, 3), np.array([[0, 1, 2], [3, 0, 5]], np.float32)], [])
case("poisson_w_sw", L.PoissonNLLLoss(weight=2.0), [f32(4, 3), rng.poisson(2.0, size=(4, 3)).astype(np.float32)], [0],
     [f32(4, 1, lo=0, hi=1)])
case("cosine", L.CosineEmbeddingLoss(), [f32(5, 4), f32(5, 4), signs(5)], [0, 1])
case("cosine_margin_sw", L.CosineEmbeddingLoss(margin=0.2, weight=1.5), [f32(5, 4), f32(5, 4), signs(5)], [0, 1],
     [f32(5, 1, lo=0, hi=1)])
case("sdml", L.SDMLLoss(), [f32(4, 6), f32(4, 6)], [0, 1])
case("sdml_smooth", L.SDMLLoss(smoothing_parameter=0.1), [f32(5, 3), f32(5, 3)], [0, 1])

# CTC. Gluon's CTCLoss reserves the last class for the blank and pads labels with -1.
T, N, C = 6, 3, 5
lab = np.array([[1, 0, -1, -1], [2, 1, 1, -1], [0, 1, 0, 2]], np.float32)
case("ctc_ntc", L.CTCLoss(), [f32(N, T, C), lab], [0])
case("ctc_tnc_tn", L.CTCLoss(layout="TNC", label_layout="TN"), [f32(T, N, C), lab.T.copy()], [0])
case("ctc_lengths", L.CTCLoss(), [f32(N, T, C), lab, np.array([5, 6, 4], np.float32), np.array([2, 3, 3], np.float32)], [0])
case("ctc_weight", L.CTCLoss(weight=0.5), [f32(N, T, C), lab], [0], [None, None, f32(N, lo=0, hi=1)])
# A label that needs more frames than the sequence has (3 labels + 2 repeats > 4 frames).
case("ctc_impossible", L.CTCLoss(), [f32(2, 4, C), np.array([[1, 1, 1], [0, 1, -1]], np.float32), np.array([4, 4], np.float32)], [0])


# The operator itself: blank_label 'first' pads with 0, labels 1..C-1.
def ctc_op(name, data, label, blank, dlen=None, llen=None):
    args = [nd.array(data)]
    kw = dict(blank_label=blank, use_data_lengths=dlen is not None, use_label_lengths=llen is not None)
    arrays = [data, label]
    x = args[0]
    x.attach_grad()
    extra = [nd.array(label)]
    if dlen is not None:
        extra.append(nd.array(dlen)); arrays.append(dlen)
    if llen is not None:
        extra.append(nd.array(llen)); arrays.append(llen)
    with autograd.record():
        res = nd.CTCLoss(x, *extra, **kw)
    head = rng.uniform(0.5, 1.5, size=res.shape).astype(np.float32)
    res.backward(nd.array(head))
    for i, a in enumerate(arrays):
        out["%s/in%d" % (name, i)] = a
    out["%s/head" % name] = head
    out["%s/out" % name] = res.asnumpy()
    out["%s/grad0" % name] = x.grad.asnumpy()


lab_first = np.array([[2, 1, 0, 0], [3, 2, 2, 0], [1, 2, 1, 3]], np.float32)
ctc_op("ctcop_first", f32(T, N, C), lab_first, "first")
ctc_op("ctcop_first_lengths", f32(T, N, C), lab_first, "first", np.array([6, 5, 6], np.float32), np.array([2, 2, 4], np.float32))
ctc_op("ctcop_last_dlen", f32(T, N, C), lab, "last", np.array([4, 6, 6], np.float32))

dest = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference.npz")
np.savez_compressed(dest, **out)
print("wrote %d arrays to %s (mxnet %s)" % (len(out), dest, mx.__version__), file=sys.stderr)
