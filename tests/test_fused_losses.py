"""L2Loss and SoftmaxCrossEntropyLoss record one tape node on their common path; the loss and
its gradient are bitwise those of the op-by-op form they replace."""
import numpy
import pytest

from trainer_cli import autograd, nd
from trainer_cli.gluon import loss as gloss
from trainer_cli.ndarray import ops as F


def _grad_and_loss(fn, pred_raw):
    pred = nd.array(pred_raw, dtype=pred_raw.dtype)
    pred.attach_grad()
    with autograd.record():
        out = fn(pred)
    out.backward()
    return out.asnumpy(), pred.grad.asnumpy(), out._node is not None


def _same_bits(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    numpy.testing.assert_array_equal(a.view(numpy.uint8), b.view(numpy.uint8))


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("pred_shape,label_shape,batch_axis,weight", [
    ((8, 1), (8,), 0, 1.0),
    ((8, 3), (8, 3), 0, 1.0),
    ((4, 5, 2), (4, 10), 0, 3.0),
    ((6, 4), (6, 4), 1, 0.25),
    ((7,), (7,), 0, 1.0),
])
def test_l2_loss_matches_the_op_by_op_form(dtype, pred_shape, label_shape, batch_axis, weight):
    rng = numpy.random.default_rng(0)
    pred_raw = rng.standard_normal(pred_shape).astype(dtype)
    label = nd.array(rng.standard_normal(label_shape).astype(dtype), dtype=dtype)
    fused = gloss.L2Loss(weight=weight, batch_axis=batch_axis)

    def generic(pred):
        lab = label if label.shape == pred.shape else F.reshape(label, pred.shape)
        return F.mean(F.square(lab - pred) * (weight / 2), axis=batch_axis, exclude=True)

    got_loss, got_grad, got_node = _grad_and_loss(lambda p: fused(p, label), pred_raw)
    want_loss, want_grad, _ = _grad_and_loss(generic, pred_raw)
    assert got_node
    _same_bits(got_loss, want_loss)
    _same_bits(got_grad, want_grad)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("shape,axis,batch_axis", [
    ((16, 10), -1, 0),
    ((3, 5, 4), 1, 0),
    ((2, 3, 7), -1, 1),
])
def test_softmax_ce_loss_matches_the_op_by_op_form(dtype, shape, axis, batch_axis):
    rng = numpy.random.default_rng(1)
    pred_raw = (rng.standard_normal(shape) * 5).astype(dtype)
    label_shape = tuple(n for i, n in enumerate(shape) if i != axis % len(shape))
    # Out-of-range indices are clipped, as MXNet's pick does.
    label = nd.array(rng.integers(-1, shape[axis] + 1, size=label_shape).astype(numpy.float32))
    fused = gloss.SoftmaxCrossEntropyLoss(axis=axis, batch_axis=batch_axis)

    def generic(pred):
        picked = -F.pick(F.log_softmax(pred, axis=axis), label, axis=axis, keepdims=True)
        return F.mean(picked, axis=batch_axis, exclude=True)

    got_loss, got_grad, got_node = _grad_and_loss(lambda p: fused(p, label), pred_raw)
    want_loss, want_grad, _ = _grad_and_loss(generic, pred_raw)
    assert got_node
    _same_bits(got_loss, want_loss)
    _same_bits(got_grad, want_grad)


def test_fused_losses_record_nothing_for_constants():
    pred = nd.array([[0.5, 1.5]])
    label = nd.array([1.0])
    with autograd.record():
        assert gloss.SoftmaxCrossEntropyLoss()(pred, label)._node is None
        assert gloss.L2Loss()(pred, nd.array([[1.0, 2.0]]))._node is None


def test_l2_loss_with_a_recorded_label_takes_the_general_path():
    pred = nd.array([[0.5], [1.5]])
    label = nd.array([1.0, 3.0])
    pred.attach_grad()
    label.attach_grad()
    with autograd.record():
        out = gloss.L2Loss()(pred, label)
    out.backward()
    numpy.testing.assert_allclose(label.grad.asnumpy(), [0.5, 1.5])
    numpy.testing.assert_allclose(pred.grad.asnumpy(), [[-0.5], [-1.5]])
