"""Each loss against a direct NumPy transcription of MXNet 1.9's definition, and its gradient
against finite differences (float64)."""
import numpy as np
import pytest

from trainer_cli import gluon, nd
from trainer_cli.gluon import loss as gloss

from gradcheck import check_grad

RNG = np.random.RandomState(7)


def _mean_except(loss, batch_axis=0):
    axes = tuple(i for i in range(loss.ndim) if i != batch_axis)
    return loss.mean(axis=axes) if axes else loss


def _softplus(x):
    return np.logaddexp(x, 0)


def _log_softmax(x, axis):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def _run(loss_fn, ctx, *arrays, dtype="float64"):
    args = [None if a is None else nd.array(a, ctx=ctx, dtype=dtype) for a in arrays]
    out = loss_fn(*args)
    assert out.context == ctx
    return out.asnumpy()


# ------------------------------------------------------------------------------ values
def test_l2_loss(ctx):
    pred, label = RNG.randn(4, 3), RNG.randn(4, 3)
    want = _mean_except(0.5 * (label - pred) ** 2)
    np.testing.assert_allclose(_run(gloss.L2Loss(), ctx, pred, label), want, rtol=1e-12)
    np.testing.assert_allclose(_run(gloss.L2Loss(weight=3.0), ctx, pred, label), 3 * want,
                               rtol=1e-12)
    # A label of another shape with the same size is reshaped like pred.
    np.testing.assert_allclose(_run(gloss.L2Loss(), ctx, pred[:, :1], label[:, 0]),
                               0.5 * (label[:, 0] - pred[:, 0]) ** 2, rtol=1e-12)


def test_l2_loss_float32_default(ctx):
    pred = nd.array(RNG.rand(8, 1), ctx=ctx)
    label = nd.array(RNG.rand(8), ctx=ctx)
    out = gloss.L2Loss()(pred, label)
    assert out.dtype == np.float32 and out.shape == (8,)
    want = 0.5 * (label.asnumpy() - pred.asnumpy()[:, 0]) ** 2
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-6)


def test_sample_weight_broadcasts_and_batch_axis(ctx):
    pred, label = RNG.randn(4, 3, 2), RNG.randn(4, 3, 2)
    sw = RNG.rand(4, 1, 1)
    want = _mean_except(0.5 * (label - pred) ** 2 * sw)
    np.testing.assert_allclose(_run(gloss.L2Loss(), ctx, pred, label, sw), want, rtol=1e-12)
    sw_col = RNG.rand(1, 3, 1)
    want = _mean_except(np.abs(label - pred) * sw_col * 2.0)
    np.testing.assert_allclose(_run(gloss.L1Loss(weight=2.0), ctx, pred, label, sw_col), want,
                               rtol=1e-12)
    want = _mean_except(np.abs(label - pred), batch_axis=1)
    out = _run(gloss.L1Loss(batch_axis=1), ctx, pred, label)
    assert out.shape == (3,)
    np.testing.assert_allclose(out, want, rtol=1e-12)


def test_l1_loss(ctx):
    pred, label = RNG.randn(5, 2), RNG.randn(5, 2)
    np.testing.assert_allclose(_run(gloss.L1Loss(), ctx, pred, label),
                               _mean_except(np.abs(label - pred)), rtol=1e-12)


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_ce_sparse(ctx, axis):
    pred = RNG.randn(4, 5, 3) if axis == 1 else RNG.randn(4, 5)
    classes = pred.shape[axis]
    label_shape = pred.shape[:1] + pred.shape[2:] if axis == 1 else (4,)
    label = RNG.randint(0, classes, size=label_shape).astype(np.float64)
    logp = _log_softmax(pred, axis)
    picked = np.take_along_axis(logp, np.expand_dims(label.astype(int), axis), axis=axis)
    want = _mean_except(-picked)
    out = _run(gloss.SoftmaxCrossEntropyLoss(axis=axis), ctx, pred, label)
    np.testing.assert_allclose(out, want, rtol=1e-12)
    assert out.shape == (4,)
    from_logits = _run(gloss.SoftmaxCrossEntropyLoss(axis=axis, from_logits=True), ctx, logp, label)
    np.testing.assert_allclose(from_logits, want, rtol=1e-12)


def test_softmax_ce_dense_labels_and_weights(ctx):
    pred = RNG.randn(6, 4)
    label = RNG.rand(6, 4)
    label /= label.sum(axis=1, keepdims=True)
    sw = RNG.rand(6, 1)
    want = -(_log_softmax(pred, -1) * label).sum(axis=-1) * sw[:, 0] * 0.5
    fn = gloss.SoftmaxCrossEntropyLoss(sparse_label=False, weight=0.5)
    np.testing.assert_allclose(_run(fn, ctx, pred, label, sw), want, rtol=1e-12)
    assert gloss.SoftmaxCELoss is gloss.SoftmaxCrossEntropyLoss


def test_softmax_ce_integer_labels_float32(ctx):
    pred = nd.array(RNG.randn(3, 4), ctx=ctx)
    label = nd.array([0, 3, 1], ctx=ctx, dtype="int32")
    out = gloss.SoftmaxCrossEntropyLoss()(pred, label)
    logp = _log_softmax(pred.asnumpy().astype(np.float64), -1)
    np.testing.assert_allclose(out.asnumpy(), -logp[np.arange(3), [0, 3, 1]], rtol=1e-6)
    assert out.dtype == np.float32


@pytest.mark.parametrize("with_pos_weight", [False, True])
def test_sigmoid_bce_from_logits(ctx, with_pos_weight):
    pred = RNG.randn(4, 3) * 3
    label = (RNG.rand(4, 3) > 0.5).astype(np.float64)
    pos_weight = RNG.rand(1, 3) + 0.5
    p = 1 / (1 + np.exp(-pred))
    if with_pos_weight:
        want = -(pos_weight * label * np.log(p) + (1 - label) * np.log(1 - p))
        out = _run(gloss.SigmoidBinaryCrossEntropyLoss(), ctx, pred, label, None, pos_weight)
    else:
        want = -(label * np.log(p) + (1 - label) * np.log(1 - p))
        out = _run(gloss.SigmoidBCELoss(), ctx, pred, label)
    np.testing.assert_allclose(out, _mean_except(want), rtol=1e-10)


def test_sigmoid_bce_from_logits_is_stable(ctx):
    pred = np.array([[-800.0, 800.0, 0.0]])
    label = np.array([[1.0, 0.0, 1.0]])
    out = _run(gloss.SigmoidBCELoss(), ctx, pred, label)
    np.testing.assert_allclose(out, [(800.0 + 800.0 + np.log(2)) / 3], rtol=1e-12)
    out32 = gloss.SigmoidBCELoss()(nd.array(pred, ctx=ctx), nd.array(label, ctx=ctx))
    assert np.isfinite(out32.asnumpy()).all()


@pytest.mark.parametrize("with_pos_weight", [False, True])
def test_sigmoid_bce_from_sigmoid(ctx, with_pos_weight):
    prob = RNG.rand(5, 2) * 0.98 + 0.01
    label = RNG.rand(5, 2)
    eps = 1e-12
    pos_weight = np.array([[2.0, 0.5]])
    fn = gloss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=True, weight=1.5)
    if with_pos_weight:
        want = -(np.log(prob + eps) * label * pos_weight + np.log(1 - prob + eps) * (1 - label))
        out = _run(fn, ctx, prob, label, None, pos_weight)
    else:
        want = -(np.log(prob + eps) * label + np.log(1 - prob + eps) * (1 - label))
        out = _run(fn, ctx, prob, label)
    np.testing.assert_allclose(out, _mean_except(1.5 * want), rtol=1e-12)


@pytest.mark.parametrize("rho", [1.0, 0.3, 2.5])
def test_huber_loss(ctx, rho):
    pred, label = RNG.randn(6, 4) * 2, RNG.randn(6, 4) * 2
    diff = np.abs(label - pred)
    want = np.where(diff > rho, diff - 0.5 * rho, 0.5 / rho * diff ** 2)
    np.testing.assert_allclose(_run(gloss.HuberLoss(rho=rho), ctx, pred, label),
                               _mean_except(want), rtol=1e-12)


def test_weight_must_be_a_number():
    with pytest.raises(TypeError):
        gloss.L1Loss(weight="heavy")(nd.ones((2, 1)), nd.ones((2, 1)))
    out = gloss.L1Loss(weight=np.float32(2.0))(nd.ones((2, 1)), nd.zeros((2, 1)))
    np.testing.assert_array_equal(out.asnumpy(), [2.0, 2.0])


def test_loss_is_a_block():
    fn = gluon.loss.L2Loss()
    assert isinstance(fn, gluon.HybridBlock)
    assert list(fn.collect_params().keys()) == []
    fn.hybridize()
    np.testing.assert_array_equal(fn(nd.ones((2, 1)), nd.zeros((2, 1))).asnumpy(), [0.5, 0.5])


# ------------------------------------------------------------------------------ gradients
def _away_from(x, points, margin=0.05):
    """Move entries of ``x`` off the kinks of |.| and Huber (finite differences straddle them)."""
    x = x.copy()
    for p in points:
        near = np.abs(x - p) < margin
        x[near] += 2 * margin
    return x


GRAD_CASES = {
    "l2": (lambda: gloss.L2Loss(weight=0.7), False),
    "l2_batch_axis": (lambda: gloss.L2Loss(batch_axis=1), False),
    "l1": (lambda: gloss.L1Loss(), False),
    "softmax_ce_sparse": (lambda: gloss.SoftmaxCrossEntropyLoss(), True),
    "softmax_ce_axis1": (lambda: gloss.SoftmaxCrossEntropyLoss(axis=1), True),
    "softmax_ce_dense": (lambda: gloss.SoftmaxCrossEntropyLoss(sparse_label=False), False),
    "softmax_ce_logits": (lambda: gloss.SoftmaxCrossEntropyLoss(from_logits=True), True),
    "sigmoid_bce": (lambda: gloss.SigmoidBCELoss(), False),
    "sigmoid_bce_prob": (lambda: gloss.SigmoidBCELoss(from_sigmoid=True), False),
    "huber": (lambda: gloss.HuberLoss(rho=0.5), False),
}


@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_loss_gradients_match_finite_differences(case):
    make, sparse = GRAD_CASES[case]
    fn = make()
    rng = np.random.RandomState(3)
    pred = rng.randn(3, 4)
    if case == "sigmoid_bce_prob":
        pred = rng.rand(3, 4) * 0.8 + 0.1
    if sparse:
        axis = 1 if case == "softmax_ce_axis1" else -1
        label = rng.randint(0, pred.shape[axis], size=(3,)).astype(np.float64)
    else:
        label = rng.rand(3, 4)
    if case in ("l1", "huber"):
        pred = _away_from(pred - label, [0.0, 0.5, -0.5]) + label
    sw = rng.rand(3, 1)
    # pred and sample_weight are differentiated; the label is a constant input.
    check_grad(lambda p, y, w: fn(p, y, w), pred, label, sw, wrt=[0, 2])


def test_sigmoid_bce_pos_weight_gradient():
    rng = np.random.RandomState(4)
    pred, label = rng.randn(3, 4), (rng.rand(3, 4) > 0.5) * 1.0
    pos_weight = rng.rand(1, 4) + 0.5
    fn = gloss.SigmoidBCELoss()
    check_grad(lambda p, y, pw: fn(p, y, None, pw), pred, label, pos_weight, wrt=[0, 2])


def test_softmax_ce_with_the_class_axis_before_the_batch_axis():
    # MXNet picks with keepdims=True, so the batch axis stays where it is when the class axis
    # comes first (a mutant picking without keepdims averaged over the wrong axis).
    from trainer_cli import autograd
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    y = rng.integers(0, 5, (4, 3))
    logp = x - np.log(np.exp(x).sum(axis=0, keepdims=True))
    want = -np.take_along_axis(logp, y[None], axis=0)[0].mean(axis=1)
    pred = nd.array(x)
    pred.attach_grad()
    with autograd.record():
        loss = gloss.SoftmaxCrossEntropyLoss(axis=0, batch_axis=1)(pred, nd.array(y))
    loss.backward()
    np.testing.assert_allclose(loss.asnumpy(), want, rtol=1e-5)
    onehot = (np.arange(5)[:, None, None] == y[None]).astype(np.float32)
    np.testing.assert_allclose(pred.grad.asnumpy(), (np.exp(logp) - onehot) / 3, rtol=1e-5,
                               atol=1e-7)
