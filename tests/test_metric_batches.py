"""``EvalMetric.update_batches``: the runner hands a log window's batches to each metric at once;
the sums must be the bits of one ``update`` per batch, in order (a resumed run's metrics are
compared bitwise with an uninterrupted one's)."""
import numpy
import pytest

from trainer_cli import metric, nd


def _batches(seed, sizes, classes, dtype, logits=True):
    rng = numpy.random.default_rng(seed)
    out = []
    for n in sizes:
        label = rng.integers(0, classes, size=n).astype(numpy.float32)
        pred = rng.standard_normal((n, classes)) * (5.0 if logits else 1.0)
        if not logits:
            pred = numpy.exp(pred) / numpy.exp(pred).sum(axis=1, keepdims=True)
        out.append((label, nd.array(pred.astype(dtype), dtype=dtype)))
    return out


def _one_by_one(m, batches):
    for label, pred in batches:
        m.update([label], [pred])
    return m.sum_metric, m.num_inst


@pytest.mark.parametrize("make", [
    lambda: metric.Accuracy(), lambda: metric.CrossEntropy(),
    lambda: metric.CrossEntropy(from_logits=True), lambda: metric.Perplexity(),
    lambda: metric.TopKAccuracy(top_k=2)], ids=["acc", "ce", "ce_logits", "ppl", "top2"])
@pytest.mark.parametrize("classes", [2, 4, 10, 37])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_update_batches_gives_the_bits_of_one_update_per_batch(make, classes, dtype):
    sizes = [32] * 24 + [7]         # a log window with a short last batch
    batches = _batches(classes, sizes, classes, dtype, logits=True)
    if isinstance(make(), metric.CrossEntropy) and not make().from_logits:
        batches = _batches(classes, sizes, classes, dtype, logits=False)
    want = _one_by_one(make(), batches)
    m = make()
    m.update_batches(batches)
    assert (m.sum_metric, m.num_inst) == want
    assert numpy.float64(m.sum_metric).tobytes() == numpy.float64(want[0]).tobytes()


@pytest.mark.parametrize("sizes", [[32] * 25, [3] * 40, [8] * 9, [129] * 6, [1000] * 4, [1] * 5],
                         ids=["32", "3", "8", "129", "1000", "1"])
@pytest.mark.parametrize("from_logits", [False, True])
def test_cross_entropy_of_equal_batches_sums_each_batch_as_one_update(sizes, from_logits):
    """Equal batch sizes take one 2-D row sum: still each batch's own pairwise sum."""
    batches = _batches(len(sizes), sizes, 5, "float32", logits=from_logits)
    make = lambda: metric.CrossEntropy(from_logits=from_logits)  # noqa: E731
    want = _one_by_one(make(), batches)
    m = make()
    m.update_batches(metric.Batches(batches))
    assert numpy.float64(m.sum_metric).tobytes() == numpy.float64(want[0]).tobytes()
    assert m.num_inst == want[1]


def test_batches_of_other_widths_fall_back_to_one_update_each():
    a = _batches(1, [5], 3, "float32")
    b = _batches(2, [4], 6, "float32")
    want = _one_by_one(metric.CrossEntropy(from_logits=True), a + b)
    m = metric.CrossEntropy(from_logits=True)
    m.update_batches(a + b)
    assert (m.sum_metric, m.num_inst) == want


def test_the_runner_hands_outputs_over_early_enough_and_wherever_the_sums_are_the_same(
        monkeypatch):
    """The runner's accumulator keeps a log window's outputs only up to PENDING_BYTES (large
    per-pixel outputs must not pile up); where it hands them over changes no bit."""
    from trainer_cli.run import state
    batches = _batches(7, [16] * 30, 5, "float32")

    def run():
        acc = state.Accumulator({"acc": metric.Accuracy(),
                                 "ce": metric.CrossEntropy(from_logits=True)})
        most = 0
        for label, pred in batches:
            acc.add_outputs([(label, pred)])
            most = max(most, len(acc._pending))
        return acc.values("train_"), acc.get_state(), most

    whole = run()
    monkeypatch.setattr(state, "PENDING_BYTES", 3 * 16 * 5 * 4)   # about three batches
    small = run()
    assert small[2] <= 3 < whole[2]
    import json
    assert json.dumps(small[:2], sort_keys=True) == json.dumps(whole[:2], sort_keys=True)
    want = _one_by_one(metric.CrossEntropy(from_logits=True), batches)
    assert whole[1]["metrics"]["ce"]["sum_metric"] == want[0]


@pytest.mark.parametrize("classes", [1, 2, 4, 10, metric.FEW_CLASSES, metric.FEW_CLASSES + 1, 65])
def test_nll_of_logits_is_the_whole_log_softmax_picked(classes):
    """Each row's -log p(label) from logits has the bits of the full float64 log-softmax, picked:
    few classes reduced column by column (each row's maximum, and its sum of exponentials added
    left to right: NumPy's own row sums for fewer than 8 classes), more along the rows; NaN and
    infinite logits give what the full computation gives."""
    rng = numpy.random.default_rng(classes)
    pred = (rng.standard_normal((300, classes)) * rng.choice([1e-3, 1.0, 30.0], (300, 1)))
    pred = pred.astype(numpy.float32)
    pred[7, 0], pred[8, -1], pred[9, 0] = numpy.nan, numpy.inf, -numpy.inf
    label = rng.integers(0, classes, 300)
    label[8] = classes - 1                     # the infinite logit's own row and class
    wide = pred.astype(numpy.float64)
    with numpy.errstate(invalid="ignore"):
        shifted = wide - wide.max(axis=1, keepdims=True)
        if classes <= metric.FEW_CLASSES:
            total = numpy.exp(shifted[:, :1])
            for k in range(1, classes):
                total = total + numpy.exp(shifted[:, k:k + 1])
        else:
            total = numpy.exp(shifted).sum(axis=1, keepdims=True)
        expect = -(shifted - numpy.log(total))[numpy.arange(300), label]
        got = metric._nll_of_logits(pred, label)
        if classes < 8:
            numpy.testing.assert_array_equal(total, numpy.exp(shifted).sum(axis=1, keepdims=True))
    assert got.shape == expect.shape and got.dtype == numpy.float64
    numpy.testing.assert_array_equal(numpy.isnan(got), numpy.isnan(expect))
    assert numpy.isnan(got[7]) and numpy.isnan(got[8])
    same = ~numpy.isnan(expect)
    assert (got[same].view(numpy.int64) == expect[same].view(numpy.int64)).all()


@pytest.mark.parametrize("block_values", [1, 65 * 7, 65 * 300])
def test_nll_of_wide_logits_is_the_same_in_any_blocks(monkeypatch, block_values):
    """Wide logits are worked in blocks of rows (a bounded float64 temporary): one row per block,
    blocks that leave a partial last one, or one block give the same bits."""
    rng = numpy.random.default_rng(3)
    pred = (rng.standard_normal((300, 65)) * 20).astype(numpy.float32)
    label = rng.integers(0, 65, 300)
    whole = numpy.float64(pred)
    shifted = whole - whole.max(axis=1, keepdims=True)
    expect = -(shifted - numpy.log(numpy.exp(shifted).sum(axis=1, keepdims=True)))[
        numpy.arange(300), label]
    monkeypatch.setattr(metric, "_BLOCK_VALUES", block_values)
    got = metric._nll_of_logits(pred, label)
    assert (got.view(numpy.int64) == expect.view(numpy.int64)).all()


def test_an_output_as_large_as_the_pending_limit_is_read_in_place_and_in_order(monkeypatch):
    """An output that alone reaches PENDING_BYTES goes to the metrics at once, read where it
    lies (no host copy of a word model's logits), after the smaller ones before it: the sums
    are those of one update per batch."""
    from trainer_cli.ndarray import NDArray
    from trainer_cli.run import state
    small = _batches(11, [16] * 3, 37, "float32")
    large = _batches(12, [400], 37, "float32")
    batches = small[:2] + large + small[2:]
    want = _one_by_one(metric.Perplexity(from_logits=True), batches)
    monkeypatch.setattr(state, "PENDING_BYTES", 400 * 37 * 4)
    acc = state.Accumulator({"ppl": metric.Perplexity(from_logits=True)})
    copied = []
    real = NDArray.asnumpy

    def counted(self):
        copied.append(self.shape)
        return real(self)

    monkeypatch.setattr(NDArray, "asnumpy", counted)
    for label, pred in batches:
        acc.add_outputs([(label, pred)])
    assert copied == [(16, 37)] * 3 and len(acc._pending) == 1    # the last small one
    acc.values("train_")
    got = acc.metrics["ppl"]
    assert (got.sum_metric, got.num_inst) == want


def _losses(loss_fn, batches):
    """Each batch's summed per-sample losses, as the runner's loop sums them."""
    from trainer_cli.run.loop import _loss_sum
    return [_loss_sum(loss_fn(pred, nd.array(label))) for label, pred in batches]


@pytest.mark.parametrize("shape", [(32,), (4, 25)], ids=["rows", "sequences"])
def test_cross_entropy_and_perplexity_of_the_loss_are_the_losses_step_sums(shape):
    """With the loss softmax cross-entropy of class indices, the cross-entropy and perplexity
    of logits take the step's summed losses (times the labels per sample) instead of reading the
    outputs again: the float64 computation's values to float32's precision, counted per label,
    the outputs never copied."""
    from trainer_cli.gluon.loss import SoftmaxCrossEntropyLoss
    from trainer_cli.run import state

    rng = numpy.random.default_rng(5)
    batches = []
    for _ in range(6):
        label = rng.integers(0, 31, size=shape).astype(numpy.float32)
        pred = (rng.standard_normal(shape + (31,)) * 3).astype(numpy.float32)
        batches.append((label, nd.array(pred)))
    loss_fn = SoftmaxCrossEntropyLoss()
    exact = {"ce": metric.CrossEntropy(from_logits=True), "ppl": metric.Perplexity(from_logits=True)}
    for label, pred in batches:
        for m in exact.values():
            m.update([label], [pred])
    acc = state.Accumulator({"ce": metric.CrossEntropy(from_logits=True),
                             "ppl": metric.Perplexity(from_logits=True),
                             "acc": metric.Accuracy(axis=-1)}, loss_fn)
    for (label, pred), total in zip(batches, _losses(loss_fn, batches)):
        acc.add_loss(total, pred.shape[0])
        acc.add_outputs([(label, pred)], total)
    # Accuracy counts 2-D scores at once (one compiled pass); sequences' outputs are kept for it.
    if acc.metrics["acc"]._count_host(batches[0][0], batches[0][1].asnumpy()) is not None:
        assert acc._pending == [] and acc.metrics["acc"].num_inst == 6 * shape[0]
    else:
        assert len(acc._pending) == 6 and list(acc._pending_for) == ["acc"]
    values = acc.values("train_")
    plain = metric.Accuracy(axis=-1)
    for label, pred in batches:
        plain.update([label], [pred])
    assert values["train_acc"] == plain.get()[1]
    for name, m in exact.items():
        got = acc.metrics[name]
        assert got.num_inst == m.num_inst == 6 * numpy.prod(shape)
        assert got.sum_metric == pytest.approx(m.sum_metric, rel=2e-7)
        assert values["train_" + name] == pytest.approx(m.get()[1], rel=2e-7)
    assert values["train_ppl"] == pytest.approx(numpy.exp(values["train_loss"]), rel=1e-12)
    want = metric.Accuracy(axis=-1)
    for label, pred in batches:
        want.update([label], [pred])
    assert acc.metrics["acc"].get() == want.get()
    alone = state.Accumulator({"ppl": metric.Perplexity(from_logits=True)}, loss_fn)
    for (label, pred), total in zip(batches, _losses(loss_fn, batches)):
        alone.add_outputs([(label, pred)], total)
    assert alone._pending == []                 # no output copied
    assert alone.values("v")["vppl"] == values["train_ppl"]


def test_a_metric_the_loss_is_not_reads_the_outputs_and_nothing_is_counted_twice():
    """Metrics the loss does not equal (a weighted loss, an ignored label, probabilities), and
    steps whose outputs have no row per label (float16 logits here), go through the outputs;
    outputs kept for all metrics are handed over before a step whose loss the others take."""
    from trainer_cli.gluon.loss import SoftmaxCrossEntropyLoss
    from trainer_cli.run import state

    plain = SoftmaxCrossEntropyLoss()
    assert state.loss_is_metric(plain, metric.Perplexity(from_logits=True))
    assert not state.loss_is_metric(SoftmaxCrossEntropyLoss(weight=2.0),
                                    metric.Perplexity(from_logits=True))
    assert not state.loss_is_metric(plain, metric.Perplexity(ignore_label=0, from_logits=True))
    assert not state.loss_is_metric(plain, metric.CrossEntropy())
    assert not state.loss_is_metric(SoftmaxCrossEntropyLoss(axis=1), metric.CrossEntropy(
        from_logits=True))
    batches = _batches(3, [16] * 4, 7, "float32")
    halves = _batches(4, [16] * 2, 7, "float16")
    order = [batches[0], halves[0], batches[1], batches[2], halves[1], batches[3]]
    exact = metric.CrossEntropy(from_logits=True)
    acc = state.Accumulator({"ce": metric.CrossEntropy(from_logits=True)}, plain)
    for (label, pred), total in zip(order, _losses(plain, order)):
        exact.update([label], [pred])
        acc.add_outputs([(label, pred)], total)
    acc.values("x")
    got = acc.metrics["ce"]
    assert got.num_inst == exact.num_inst == 6 * 16
    assert got.sum_metric == pytest.approx(exact.sum_metric, rel=1e-6)
