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
    ((8, 1), (8,), 0, -1.0),        # zero differences give -0.0 losses; NaN and subnormals too
    ((7,), (7,), 0, -3.0),
])
def test_l2_loss_matches_the_op_by_op_form(dtype, pred_shape, label_shape, batch_axis, weight):
    rng = numpy.random.default_rng(0)
    pred_raw = rng.standard_normal(pred_shape).astype(dtype)
    label_raw = rng.standard_normal(label_shape).astype(dtype)
    if weight < 0:
        flat_pred, flat_label = pred_raw.reshape(-1), label_raw.reshape(-1)
        flat_pred[:3] = flat_label[:3]
        flat_pred[3] = numpy.nan
        flat_pred[4] = flat_label[4] + numpy.finfo(dtype).smallest_subnormal
    label = nd.array(label_raw, dtype=dtype)
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


# ----------------------------------------------------------------------------- numba kernels
def _ce_step(scores, labels, head, kernels):
    """SoftmaxCrossEntropyLoss forward and backward on raw arrays (in their layout); kernels on
    or off."""
    from trainer_cli import cpu
    from trainer_cli.ndarray import _loss_kernels
    from trainer_cli.ndarray.interop import wrap
    pred = wrap(scores.copy(order="K"), cpu())
    pred.attach_grad()
    saved = _loss_kernels.MIN_SIZE
    _loss_kernels.MIN_SIZE = 16 if kernels else 1 << 60
    try:
        with autograd.record():
            out = gloss.SoftmaxCrossEntropyLoss()(pred, nd.array(labels, dtype=labels.dtype))
        with numpy.errstate(all="ignore"):
            out.backward(nd.array(head, dtype=head.dtype))
    finally:
        _loss_kernels.MIN_SIZE = saved
    return out.asnumpy(), pred.grad.asnumpy()


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("shape", [(8, 10), (64, 10), (33, 128), (100, 3), (9, 2), (12, 129),
                                   (11, 1000), (10, 4099), (10, 10000)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_softmax_ce_kernels_give_the_numpy_bits(dtype, shape, order):
    pytest.importorskip("numba")
    rng = numpy.random.RandomState(3)
    batch, classes = shape
    scores = (rng.standard_normal(shape) * rng.choice([1, 10, 100], size=shape)).astype(dtype)
    scores[0] = 0
    scores[1, 0] = 1e30                 # a certain class: logp exactly 0, a loss of (+)0
    scores[2] = -numpy.inf
    scores[2, 1] = 0
    scores[3, 0] = numpy.nan
    if batch > 9:
        scores[9, :2] = [-0.0, 0.0]     # a largest value that is a zero of both signs
        scores[9, 2:] = -numpy.abs(scores[9, 2:])
    labels = rng.randint(-2, classes + 2, size=batch).astype(numpy.float32)
    labels[1] = 0
    labels[4:8] = [numpy.nan, numpy.inf, 1.9, -0.5]   # cast and clipped as pick does
    head = rng.standard_normal(batch).astype(dtype)
    head[5] = -0.0
    head[6:8] = [numpy.inf, numpy.nan]  # a row's one-hot sum made and added (0 * inf is NaN)
    scores = numpy.asarray(scores, order=order)     # F: a Dense layer's transposed product
    with numpy.errstate(all="ignore"):
        reference = _ce_step(scores, labels, head, kernels=False)
        fused = _ce_step(scores, labels, head, kernels=True)
    for a, b in zip(reference, fused):
        _same_bits(a, b)


def test_softmax_ce_kernels_run_on_a_classifier_batch(monkeypatch):
    pytest.importorskip("numba")
    from trainer_cli import _jit
    from trainer_cli.ndarray import _loss_kernels
    monkeypatch.setattr(_jit, "_numba", None)
    monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
    calls = []
    for name in ("_forward", "_backward"):
        kernel = getattr(_loss_kernels, name)
        monkeypatch.setattr(_loss_kernels, name,
                            lambda *a, _k=kernel, _n=name: (calls.append(_n), _k(*a))[1])
    scores = numpy.random.RandomState(0).standard_normal((64, 10)).astype(numpy.float32)
    _ce_step(scores, numpy.arange(64, dtype=numpy.float32) % 10,
             numpy.ones(64, numpy.float32), kernels=True)
    assert calls == ["_forward", "_backward"]
    monkeypatch.setattr(_jit, "_numba", None)
    pred = nd.array(scores[:8])             # 80 scores, below the default MIN_SIZE
    pred.attach_grad()
    with autograd.record():
        out = gloss.SoftmaxCrossEntropyLoss()(pred, nd.zeros(8))
    out.backward()
    assert _jit._numba is None              # small batches never load numba


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_log_softmax_parts_are_numpys_up_to_the_sign_of_a_zero(dtype, monkeypatch):
    pytest.importorskip("numba")
    from trainer_cli import _jit
    from trainer_cli.ndarray import _act_kernels, _loss_kernels
    # The kernel itself is under test, also in a run that turns numba off for everything else.
    monkeypatch.setattr(_jit, "_numba", None)
    monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
    column_loops = []       # float32 scores by columns: shift, exp and sums in one loop
    real = _loss_kernels._shift_exp_sums_cols
    monkeypatch.setattr(_loss_kernels, "_shift_exp_sums_cols",
                        lambda *a: column_loops.append(1) or real(*a))
    rng = numpy.random.RandomState(5)
    for trial in range(300):
        batch, classes = rng.randint(1, 20), rng.randint(1, _loss_kernels._fc_kernels._BLOCK + 1)
        scores = (rng.standard_normal((batch, classes)) * rng.choice([1e-3, 1, 1e3])).astype(dtype)
        mask = rng.rand(batch, classes) < rng.rand()
        scores[mask] = rng.choice([0.0, -0.0, -numpy.inf, numpy.inf, numpy.nan, -1.0],
                                  size=mask.sum())
        for layout in (scores, numpy.asfortranarray(scores)):
            with numpy.errstate(all="ignore"):
                want_shifted = layout - layout.max(axis=1, keepdims=True)
                # float32's exponentials are Cephes', as _log_softmax_raw takes them.
                e = (_act_kernels.np_exp_or_zero(want_shifted) if dtype == numpy.float32
                     else numpy.exp(want_shifted))
                want_log_sum = numpy.log(e.sum(axis=1, keepdims=True))
                shifted, log_sum = _loss_kernels.log_softmax_parts(layout)
            _same_bits(log_sum, want_log_sum)
            numpy.testing.assert_array_equal(shifted, want_shifted)     # -0.0 == 0.0, NaN == NaN
            assert shifted.flags.c_contiguous == want_shifted.flags.c_contiguous
    assert bool(column_loops) == (dtype == numpy.float32)
