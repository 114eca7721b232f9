"""gluon.contrib.estimator against real MXNet 1.9.1's (tests/data/mxnet_estimator/, written by
make_estimator_golden.py there): the same weights and metric values after ``fit`` by epochs, by
batches and with early stopping; checkpoints in the project's formats, rotated and resumed."""
import os
import warnings

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import gluon, nd
from trainer_cli.gluon.contrib.estimator import (CheckpointHandler, EarlyStoppingHandler,
                                                 Estimator, LoggingHandler)

G = numpy.load(os.path.join(os.path.dirname(__file__), "data", "mxnet_estimator",
                            "estimator_golden.npz"), allow_pickle=False)


def _net():
    net = gluon.nn.Dense(3, in_units=4)
    net.initialize()
    net.weight.set_data(nd.array(G["w0"]))
    net.bias.set_data(nd.array(G["b0"]))
    return net


def _loader(name):
    return gluon.data.DataLoader(gluon.data.ArrayDataset(nd.array(G[name + "_x"]),
                                                         nd.array(G[name + "_y"])),
                                 batch_size=4, shuffle=False)


def _estimator(optimizer, lr, **kwargs):
    net = _net()
    trainer = gluon.Trainer(net.collect_params(), optimizer, {"learning_rate": lr})
    est = Estimator(net, gluon.loss.SoftmaxCrossEntropyLoss(), trainer=trainer, **kwargs)
    est.logger.disabled = True
    return est


def _check(est, key):
    # float32 rounding of the updates (lr up to 2.0) leaves a few 1e-6 on weights of size ~1
    numpy.testing.assert_allclose(est.net.weight.data().asnumpy(), G[key + "_w"], rtol=1e-5,
                                  atol=1e-5)
    numpy.testing.assert_allclose(est.net.bias.data().asnumpy(), G[key + "_b"], rtol=1e-5,
                                  atol=1e-5)
    numpy.testing.assert_allclose([m.get()[1] for m in est.train_metrics], G[key + "_train"],
                                  rtol=1e-5)
    numpy.testing.assert_allclose([m.get()[1] for m in est.val_metrics], G[key + "_val"],
                                  rtol=1e-5)


def test_fit_by_epochs_with_validation_is_mxnets():
    est = _estimator("sgd", 0.5)
    est.fit(_loader("train"), val_data=_loader("val"), epochs=2)
    _check(est, "epochs")
    assert [m.get()[0] for m in est.train_metrics + est.val_metrics] == G["epochs_names"].tolist()


def test_fit_by_batches_is_mxnets():
    est = _estimator("adam", 0.1, train_metrics=[mx.metric.Accuracy(), mx.metric.CrossEntropy()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)      # -log of a negative logit, as MXNet
        est.fit(_loader("train"), batches=5)
    _check(est, "batches")


def test_early_stopping_is_mxnets():
    est = _estimator("sgd", 2.0)
    stop = EarlyStoppingHandler(monitor=est.val_metrics[1], patience=1, mode="min")
    est.fit(_loader("train"), val_data=_loader("val"), epochs=30, event_handlers=[stop])
    _check(est, "early")
    assert stop.stopped_epoch == int(G["early_stopped_epoch"])


def test_checkpoints_rotate_resume_and_keep_the_best(tmp_path, capsys):
    est = _estimator("sgd", 0.5)
    ckpt = CheckpointHandler(str(tmp_path), model_prefix="m", monitor=est.val_metrics[0],
                             save_best=True, max_checkpoints=2)
    est.fit(_loader("train"), val_data=_loader("val"), epochs=3, event_handlers=[ckpt])
    files = sorted(os.listdir(tmp_path))
    assert files == ["m-best.params", "m-best.states", "m-epoch1batch6.params",
                     "m-epoch1batch6.states", "m-epoch2batch9.params", "m-epoch2batch9.states"]
    for name in files:                       # the project's formats: npz, never pickle
        with open(tmp_path / name, "rb") as f:
            assert f.read(2) == b"PK"
    # a fresh run resumes from the latest checkpoint: the weights after 3 of 4 epochs, then 1
    resumed = _estimator("sgd", 0.5)
    ckpt2 = CheckpointHandler(str(tmp_path), model_prefix="m", resume_from_checkpoint=True)
    resumed.fit(_loader("train"), val_data=_loader("val"), epochs=4, event_handlers=[ckpt2])
    straight = _estimator("sgd", 0.5)
    straight.fit(_loader("train"), val_data=_loader("val"), epochs=4)
    numpy.testing.assert_array_equal(resumed.net.weight.data().asnumpy(),
                                     straight.net.weight.data().asnumpy())
    assert "m-epoch3batch12.params" in os.listdir(tmp_path)      # MXNet numbers on


def test_logging_and_bad_arguments(capsys):
    est = _estimator("sgd", 0.5)
    est.logger.disabled = False
    est.fit(_loader("train"), epochs=1, event_handlers=[LoggingHandler(log_interval=2,
                                                                       metrics=est.train_metrics)])
    out = capsys.readouterr().out
    assert "Training begin: using optimizer SGD" in out and "[Epoch 0][Batch 2][Samples 12]" in out
    with pytest.raises(ValueError, match="exactly one type of iteration"):
        est.fit(_loader("train"), epochs=1, batches=2)
    with pytest.raises(ValueError, match="DataLoader"):
        est.fit([1, 2], epochs=1)
    with pytest.raises(ValueError, match="loss must be a Loss"):
        Estimator(_net(), "l2")
    with pytest.raises(ValueError, match="outside of the known"):
        est.fit(_loader("train"), epochs=1,
                event_handlers=[LoggingHandler(metrics=[mx.metric.Accuracy()])])
    with pytest.raises(ValueError, match="log_interval"):
        LoggingHandler(log_interval="batch")
