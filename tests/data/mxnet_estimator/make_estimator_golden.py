"""Real MXNet 1.9.1's ``gluon.contrib.estimator`` on a tiny classifier, for
tests/test_estimator.py.

Run in a venv with MXNet 1.9.1:  python make_estimator_golden.py
Writes estimator_golden.npz (arrays only; read with allow_pickle=False) beside this script:
the data, the starting weights, and per case the weights and metric values after ``fit``.
"""
import os
import warnings

import numpy as np
import mxnet as mx
from mxnet import gluon, nd
from mxnet.gluon.contrib.estimator import Estimator, EarlyStoppingHandler

HERE = os.path.dirname(os.path.abspath(__file__))
warnings.simplefilter("ignore")


def make(out):
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize()
    net.weight.set_data(nd.array(out["w0"]))
    net.bias.set_data(nd.array(out["b0"]))
    return net


def loader(out, name):
    return gluon.data.DataLoader(gluon.data.ArrayDataset(nd.array(out[name + "_x"]),
                                                         nd.array(out[name + "_y"])),
                                 batch_size=4, shuffle=False)


def record(out, key, est):
    out[key + "_w"] = est.net.weight.data().asnumpy()
    out[key + "_b"] = est.net.bias.data().asnumpy()
    out[key + "_train"] = np.array([m.get()[1] for m in est.train_metrics])
    out[key + "_val"] = np.array([m.get()[1] for m in est.val_metrics])
    out[key + "_names"] = np.array([m.get()[0] for m in est.train_metrics + est.val_metrics])


def main():
    rng = np.random.RandomState(9)
    out = {"train_x": rng.randn(12, 4).astype(np.float32),
           "train_y": rng.randint(0, 3, size=12).astype(np.float32),
           "val_x": rng.randn(8, 4).astype(np.float32),
           "val_y": rng.randint(0, 3, size=8).astype(np.float32),
           "w0": (rng.randn(3, 4) * 0.3).astype(np.float32),
           "b0": (rng.randn(3) * 0.1).astype(np.float32)}
    loss = gluon.loss.SoftmaxCrossEntropyLoss()

    net = make(out)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    est = Estimator(net, loss, trainer=trainer)
    est.fit(loader(out, "train"), val_data=loader(out, "val"), epochs=2)
    record(out, "epochs", est)

    net = make(out)
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})
    est = Estimator(net, loss, train_metrics=[mx.metric.Accuracy(), mx.metric.CrossEntropy()],
                    trainer=trainer)
    est.fit(loader(out, "train"), batches=5)
    record(out, "batches", est)

    net = make(out)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 2.0})
    est = Estimator(net, loss, trainer=trainer)
    stop = EarlyStoppingHandler(monitor=est.val_metrics[1], patience=1, mode="min")
    est.fit(loader(out, "train"), val_data=loader(out, "val"), epochs=30, event_handlers=[stop])
    record(out, "early", est)
    out["early_stopped_epoch"] = np.array(stop.stopped_epoch)
    np.savez(os.path.join(HERE, "estimator_golden.npz"), **out)


if __name__ == "__main__":
    main()
