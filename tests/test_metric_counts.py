"""Accuracy's compiled count (``_metric_counts``) against NumPy's calls, which MXNet's Accuracy
makes: the arg-max of each row (first maximum, first NaN), the labels cast to int64, the
comparison summed. Ties, signed zeros, infinities, NaN in scores and labels, fractional, negative
and huge labels."""
import warnings

import numpy
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from trainer_cli import _jit, _metric_counts, metric, nd
from trainer_cli.gluon.loss import SoftmaxCrossEntropyLoss
from trainer_cli.run.state import Accumulator

pytestmark = pytest.mark.skipif(not _jit.enabled(), reason="numba is not available")

_SCORES = [0.0, -0.0, 1.0, -1.0, 2.5, 1e30, -1e30, numpy.inf, -numpy.inf, numpy.nan]
_LABELS = [0, 1, 2, 3, 4, 2.7, -0.5, -1, 3.999, 1e19, -1e19, numpy.inf, -numpy.inf, numpy.nan]


def _numpy_count(pred, label):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)    # NaN / inf cast to int64
        return int((pred.argmax(axis=1).astype(numpy.int64)
                    == label.astype(numpy.int64).reshape(-1)).sum())


@st.composite
def _cases(draw):
    n = draw(st.integers(0, 12))
    c = draw(st.integers(1, 6))
    pred_dtype = draw(st.sampled_from([numpy.float32, numpy.float64]))
    label_dtype = draw(st.sampled_from([numpy.float32, numpy.float64, numpy.int32,
                                        numpy.int64]))
    pred = draw(hnp.arrays(pred_dtype, (n, c), elements=st.sampled_from(_SCORES)))
    if numpy.dtype(label_dtype).kind == "f":
        label = draw(hnp.arrays(label_dtype, n, elements=st.sampled_from(_LABELS)))
    else:
        label = draw(hnp.arrays(label_dtype, n, elements=st.integers(-2, c + 1)))
    layout = draw(st.sampled_from(["C", "F", "strided"]))
    if layout == "F":
        pred = numpy.asfortranarray(pred)
    elif layout == "strided":
        pred = numpy.repeat(pred, 2, axis=1)[:, ::2]
    return pred, label


@settings(max_examples=300, deadline=None)
@given(_cases())
def test_compiled_count_is_numpy_count(case):
    pred, label = case
    _jit.warm_up()
    assert _metric_counts.correct_count(pred, label) == _numpy_count(pred, label)


def test_count_declines_what_it_does_not_cover():
    _jit.warm_up()
    pred = numpy.zeros((4, 3), numpy.float32)
    assert _metric_counts.correct_count(pred.astype(numpy.float16), numpy.zeros(4)) is None
    assert _metric_counts.correct_count(pred, numpy.zeros(4, numpy.uint8)) is None
    assert _metric_counts.correct_count(pred, numpy.zeros(5)) is None
    assert _metric_counts.correct_count(pred, numpy.zeros((4, 1))) is None
    assert _metric_counts.correct_count(numpy.zeros((4, 0), numpy.float32), numpy.zeros(4)) \
        is None


@pytest.mark.parametrize("label_shape", [(9,), (9, 1)])
def test_accuracy_update_counts_as_before(label_shape):
    """``Accuracy.update`` takes the compiled count where it applies: the same sums as NumPy's."""
    _jit.warm_up()
    rng = numpy.random.default_rng(3)
    pred = rng.standard_normal((9, 5)).astype(numpy.float32)
    pred[2, 1] = pred[2, 3] = pred[2].max() + 1       # a tie: the first one counts
    label = rng.integers(0, 5, size=label_shape).astype(numpy.float32)
    label.reshape(-1)[2] = 1
    m = metric.Accuracy()
    m.update([nd.array(label)], [nd.array(pred)])
    assert m._count_host(label, pred) is not None
    assert (m.sum_metric, m.num_inst) == (float(_numpy_count(pred, label)), 9)
    # Predictions of the labels' own shape are classes already: NumPy's comparison, no arg-max.
    same = metric.Accuracy()
    classes = numpy.array([[1.0], [2.0]], numpy.float32)
    assert same._count_host(numpy.array([[1.0], [0.0]]), classes) is None
    same.update([numpy.array([[1.0], [0.0]])], [classes])
    assert (same.sum_metric, same.num_inst) == (1.0, 2)


def test_accumulator_counts_accuracy_at_once_and_keeps_nothing():
    """The runner's step hands one host pair: accuracy is counted then, no output copy kept; the
    values are those of the metric fed the same batches."""
    _jit.warm_up()
    rng = numpy.random.default_rng(5)
    loss = SoftmaxCrossEntropyLoss()
    names = {"accuracy": metric.Accuracy(), "top_k_accuracy": metric.TopKAccuracy(top_k=2)}
    acc = Accumulator(names, loss)
    alone, top = metric.Accuracy(), metric.TopKAccuracy(top_k=2)
    for _ in range(7):
        label = rng.integers(0, 4, size=16).astype(numpy.float32)
        out = nd.array(rng.standard_normal((16, 4)).astype(numpy.float32))
        acc.add_outputs([(label, out)], 1.0)
        alone.update([label], [out])
        top.update([label], [out])
    assert len(acc._pending) == 7 and list(acc._pending_for) == ["top_k_accuracy"]
    assert names["accuracy"].num_inst == 7 * 16     # counted before any read
    values = acc.values("train_")
    assert values["train_accuracy"] == alone.get()[1]
    assert values["train_top_k_accuracy"] == top.get()[1]
    only = Accumulator({"accuracy": metric.Accuracy()}, loss)
    only.add_outputs([(label, out)], 1.0)
    assert only._pending == []
