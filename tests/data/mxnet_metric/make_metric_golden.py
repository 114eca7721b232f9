"""Values of real MXNet 1.9.1's metrics, for tests/test_metric_mxnet.py.

Run in a venv with MXNet 1.9.1:  python make_metric_golden.py
Writes metric_golden.npz (arrays only; read with allow_pickle=False) beside this script: the
inputs (three batches) and, per case, the metric's value after each batch.
"""
import os

import numpy as np
import mxnet as mx
from mxnet import nd

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    rng = np.random.RandomState(5)
    out = {}
    for b in range(3):
        logits = rng.randn(8, 2).astype(np.float32)
        probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
        out["probs%d" % b] = probs.astype(np.float32)
        out["label%d" % b] = rng.randint(0, 2, size=8).astype(np.float32)
        probs4 = rng.rand(6, 4).astype(np.float32)
        out["probs4_%d" % b] = (probs4 / probs4.sum(1, keepdims=True)).astype(np.float32)
        out["label4_%d" % b] = rng.randint(0, 4, size=6).astype(np.float32)
        out["reg_pred%d" % b] = rng.randn(7).astype(np.float32)
        out["reg_label%d" % b] = (out["reg_pred%d" % b] * 0.5 + rng.randn(7)).astype(np.float32)
        out["loss%d" % b] = rng.rand(5).astype(np.float32) * 3

    # Regression batches of 7, 7 and 3 samples (a short last batch), and 2-column predictions
    # for 1-D labels (MXNet broadcasts the difference).
    rng2 = np.random.RandomState(7)
    for b, size in enumerate((7, 7, 3)):
        out["regs_pred%d" % b] = rng2.randn(size).astype(np.float32)
        out["regs_label%d" % b] = rng2.randn(size).astype(np.float32)
        out["regs_pred2_%d" % b] = rng2.randn(size, 2).astype(np.float32)

    # Class indices of up to 5 classes for the 4-class labels (a confusion matrix that grows).
    rng3 = np.random.RandomState(9)
    for b in range(3):
        out["idx5_%d" % b] = rng3.randint(0, 5, size=6).astype(np.float32)

    def run(key, metric, lab, pred):
        values = []
        for b in range(3):
            metric.update([nd.array(out[lab % b])], [nd.array(out[pred % b])])
            name, value = metric.get()
            values.append(value)
        out["v_" + key] = np.array(values, dtype=np.float64)

    run("mcc", mx.metric.create("mcc"), "label%d", "probs%d")
    run("mcc_micro", mx.metric.MCC(average="micro"), "label%d", "probs%d")
    run("pcc", mx.metric.create("pcc"), "label%d", "probs%d")
    run("pcc_4", mx.metric.PCC(), "label4_%d", "probs4_%d")
    run("pcc_indices", mx.metric.PCC(), "label4_%d", "idx5_%d")   # class indices, growing
    run("nll", mx.metric.create("nll_loss"), "label4_%d", "probs4_%d")
    run("pearson", mx.metric.create("pearsonr"), "reg_label%d", "reg_pred%d")
    run("pearson_micro", mx.metric.PearsonCorrelation(average="micro"), "reg_label%d",
        "reg_pred%d")
    run("perplexity", mx.metric.Perplexity(ignore_label=None), "label4_%d", "probs4_%d")
    run("perplexity_ignore", mx.metric.Perplexity(ignore_label=2), "label4_%d", "probs4_%d")
    run("loss", mx.metric.Loss(), "label%d", "loss%d")
    for name in ("mae", "mse", "rmse"):
        run(name, mx.metric.create(name), "reg_label%d", "reg_pred%d")
        run(name + "_short", mx.metric.create(name), "regs_label%d", "regs_pred%d")
        run(name + "_columns", mx.metric.create(name), "regs_label%d", "regs_pred2_%d")
    run("f1", mx.metric.create("f1"), "label%d", "probs%d")
    run("f1_micro", mx.metric.F1(average="micro"), "label%d", "probs%d")

    def feval(label, pred):
        return float(np.abs(label - pred).sum()), label.size
    run("custom", mx.metric.create(feval), "reg_label%d", "reg_pred%d")
    run("np", mx.metric.np(lambda label, pred: float(((label - pred) ** 2).mean())),
        "reg_label%d", "reg_pred%d")
    comp = mx.metric.create(["acc", "ce", mx.metric.MCC()])
    values = []
    for b in range(3):
        comp.update([nd.array(out["label%d" % b])], [nd.array(out["probs%d" % b])])
        values.append(comp.get()[1])
    out["v_composite"] = np.array(values, dtype=np.float64)
    out["composite_names"] = np.array(comp.get()[0])
    out["custom_name"] = np.array([mx.metric.create(feval).name,
                                   mx.metric.np(lambda a, b: 0.0).name])
    np.savez(os.path.join(HERE, "metric_golden.npz"), **out)


if __name__ == "__main__":
    main()
