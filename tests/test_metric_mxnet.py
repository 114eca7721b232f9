"""MXNet's metrics for Python code (MCC, NLL, PearsonCorrelation, Perplexity, Loss, CustomMetric,
np(), CompositeEvalMetric, create with lists and callables) against real MXNet 1.9.1's values
(tests/data/mxnet_metric/metric_golden.npz, written by make_metric_golden.py there)."""
import os

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import nd

G = numpy.load(os.path.join(os.path.dirname(__file__), "data", "mxnet_metric",
                            "metric_golden.npz"), allow_pickle=False)


def _run(metric, lab, pred):
    values = []
    for b in range(3):
        metric.update([nd.array(G[lab % b])], [nd.array(G[pred % b])])
        values.append(metric.get()[1])
    return values


def feval(label, pred):
    return float(numpy.abs(label - pred).sum()), label.size


CASES = [
    ("mcc", lambda: mx.metric.create("mcc"), "label%d", "probs%d"),
    ("mcc_micro", lambda: mx.metric.MCC(average="micro"), "label%d", "probs%d"),
    ("pcc", lambda: mx.metric.create("pcc"), "label%d", "probs%d"),
    ("pcc_4", lambda: mx.metric.PCC(), "label4_%d", "probs4_%d"),
    ("pcc_indices", lambda: mx.metric.PCC(), "label4_%d", "idx5_%d"),
    ("nll", lambda: mx.metric.create("nll_loss"), "label4_%d", "probs4_%d"),
    ("pearson", lambda: mx.metric.create("pearsonr"), "reg_label%d", "reg_pred%d"),
    ("pearson_micro", lambda: mx.metric.PearsonCorrelation(average="micro"), "reg_label%d",
     "reg_pred%d"),
    ("perplexity", lambda: mx.metric.Perplexity(ignore_label=None), "label4_%d", "probs4_%d"),
    ("perplexity_ignore", lambda: mx.metric.Perplexity(ignore_label=2), "label4_%d",
     "probs4_%d"),
    ("loss", lambda: mx.metric.Loss(), "label%d", "loss%d"),
    ("custom", lambda: mx.metric.create(feval), "reg_label%d", "reg_pred%d"),
    ("np", lambda: mx.metric.np(lambda label, pred: float(((label - pred) ** 2).mean())),
     "reg_label%d", "reg_pred%d"),
    # MXNet's regression metrics average each update's value (a short last batch weighs as much
    # as a full one; RMSE is the mean of each update's root), and broadcast 1-D labels against
    # 2-column predictions.
    *[(name + suffix, (lambda name=name: mx.metric.create(name)), lab, pred)
      for name in ("mae", "mse", "rmse")
      for suffix, lab, pred in (("", "reg_label%d", "reg_pred%d"),
                                ("_short", "regs_label%d", "regs_pred%d"),
                                ("_columns", "regs_label%d", "regs_pred2_%d"))],
    ("f1", lambda: mx.metric.create("f1"), "label%d", "probs%d"),
    ("f1_micro", lambda: mx.metric.F1(average="micro"), "label%d", "probs%d"),
]


@pytest.mark.parametrize("key,make,lab,pred", CASES, ids=[c[0] for c in CASES])
def test_metric_values_are_mxnets(key, make, lab, pred):
    numpy.testing.assert_allclose(_run(make(), lab, pred), G["v_" + key], rtol=1e-6)


def test_create_list_makes_a_composite_with_mxnets_values():
    comp = mx.metric.create(["acc", "ce", mx.metric.MCC()])
    assert isinstance(comp, mx.metric.CompositeEvalMetric) and len(comp.metrics) == 3
    values = []
    for b in range(3):
        comp.update([nd.array(G["label%d" % b])], [nd.array(G["probs%d" % b])])
        names, vals = comp.get()
        values.append(vals)
    numpy.testing.assert_allclose(values, G["v_composite"], rtol=1e-6)
    # MXNet names cross-entropy "cross-entropy"; here it is "cross_entropy" (docs/compat.md)
    assert names[0] == str(G["composite_names"][0]) and names[2] == str(G["composite_names"][2])
    assert [n for n, _ in comp.get_name_value()] == names
    assert comp.get_metric(0) is comp.metrics[0]
    state = comp.get_state()
    comp.reset()
    assert numpy.isnan(comp.get()[1][0])
    comp.set_state(state)
    numpy.testing.assert_allclose(comp.get()[1], G["v_composite"][-1], rtol=1e-6)


def test_custom_metric_names_and_create_rules():
    assert [mx.metric.create(feval).name, mx.metric.np(lambda a, b: 0.0).name] == \
        G["custom_name"].tolist()
    acc = mx.metric.Accuracy()
    assert mx.metric.create(acc) is acc
    assert isinstance(mx.metric.create(mx.metric.MCC), mx.metric.MCC)
    assert mx.metric.create("nll_loss").name == "nll-loss"
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        mx.metric.create("nope")
    with pytest.raises(ValueError, match="does not match"):
        mx.metric.create("mcc").update([nd.zeros(2)], [])
    # a config's metric names stay the runner's own
    assert "mcc" not in mx.metric.names() and "loss" not in mx.metric.names()


def test_register_and_alias_make_a_programs_metric_by_name(monkeypatch):
    monkeypatch.setattr(mx.metric, "_REGISTERED", {})    # this test's names end with it
    @mx.metric.register
    @mx.metric.alias("half_acc", "ha")
    class HalfAccuracy(mx.metric.EvalMetric):
        def __init__(self, name="half_acc"):
            super().__init__(name)

        def update(self, labels, preds):
            self.sum_metric += 0.5
            self.num_inst += 1

    for name in ("halfaccuracy", "HalfAccuracy", "half_acc", "HA"):
        assert isinstance(mx.metric.create(name), HalfAccuracy)
    with pytest.warns(UserWarning, match="overriding existing metric"):
        mx.metric.register(HalfAccuracy, "acc")
    assert isinstance(mx.metric.create("acc"), HalfAccuracy)
    assert "acc" not in mx.metric.names() and "accuracy" in mx.metric.names()
    with pytest.raises(TypeError, match="subclass of EvalMetric"):
        mx.metric.register(dict)


def test_pcc_keeps_its_confusion_matrix_across_a_checkpoint():
    first = mx.metric.PCC()
    _run(first, "label4_%d", "probs4_%d")
    again = mx.metric.PCC()
    again.set_state(first.get_state())
    assert again.get() == first.get()
    assert numpy.isnan(mx.metric.PCC().get()[1])
