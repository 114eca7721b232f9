"""Small cases in the style of "The Straight Dope" (the MXNet Gluon book), written once against
MXNet's API: ``record(mx)`` runs them with the module given (``mxnet`` or ``trainer_cli``) and
returns their numbers by name.

    /work/mxvenv/bin/python tests/data/mxnet_straight_dope/make_straight_dope_records.py

records ``straight_dope.npz``; tests/test_straight_dope.py replays them with trainer_cli."""
import importlib

import numpy as np


def toy_ssd(mx, out):
    """The book's SSD chapter: the contributed operators imported by module path
    (``from mxnet.contrib.ndarray import MultiBoxPrior``), a class and a box predictor over one
    feature map, the training targets, a focal and a smooth-L1 loss with their gradients, and
    the detections."""
    contrib = importlib.import_module(mx.__name__ + ".contrib.ndarray")
    nd, autograd = mx.nd, mx.autograd
    rng = np.random.RandomState(7)
    x = nd.array(rng.rand(2, 3, 8, 8).astype(np.float32))
    num_anchors, num_classes = 4, 2
    w_cls = nd.array(rng.randn(num_anchors * (num_classes + 1), 3, 3, 3).astype(np.float32) * 0.1)
    w_box = nd.array(rng.randn(num_anchors * 4, 3, 3, 3).astype(np.float32) * 0.1)
    labels = nd.array(np.array([[[0, 0.1, 0.1, 0.5, 0.6], [1, 0.5, 0.4, 0.9, 0.9]],
                                [[1, 0.2, 0.3, 0.7, 0.8], [-1, -1, -1, -1, -1]]], np.float32))
    for w in (w_cls, w_box):
        w.attach_grad()

    def flatten_prediction(pred):
        return nd.flatten(nd.transpose(pred, axes=(0, 2, 3, 1)))

    anchors = contrib.MultiBoxPrior(x, sizes=[0.3, 0.5], ratios=[1, 2, 0.5])
    with autograd.record():
        cls = flatten_prediction(nd.Convolution(x, w_cls, kernel=(3, 3), pad=(1, 1),
                                                num_filter=w_cls.shape[0], no_bias=True))
        box = flatten_prediction(nd.Convolution(x, w_box, kernel=(3, 3), pad=(1, 1),
                                                num_filter=w_box.shape[0], no_bias=True))
        cls = cls.reshape((0, -1, num_classes + 1))
        box_target, box_mask, cls_target = contrib.MultiBoxTarget(
            anchors, labels, nd.transpose(cls, axes=(0, 2, 1)))
        prob = nd.softmax(cls)
        pt = nd.pick(prob, cls_target, axis=-1, keepdims=True)
        focal = nd.mean(-0.25 * (1 - pt) ** 2 * nd.log(pt), axis=0, exclude=True)
        smooth = nd.mean(nd.smooth_l1((box - box_target) * box_mask, scalar=1.0), axis=0,
                         exclude=True)
        loss = focal + smooth
    loss.backward()
    probs = nd.SoftmaxActivation(nd.transpose(cls, (0, 2, 1)), mode="channel")
    det = contrib.MultiBoxDetection(probs, box, anchors, force_suppress=True, clip=False)
    for name, value in (("anchors", anchors), ("box_target", box_target), ("box_mask", box_mask),
                        ("cls_target", cls_target), ("loss", loss), ("grad_cls", w_cls.grad),
                        ("grad_box", w_box.grad), ("detections", det)):
        out["toy_ssd/" + name] = value.asnumpy()


def diverging_sgd(mx, out):
    """The book's SGD chapter with too large a learning rate: a Dense(1) regression whose
    squared loss overflows within a few steps, so the gradients and weights become inf and then
    NaN (MXNet gives them silently, without NumPy's RuntimeWarnings)."""
    nd, autograd, gluon = mx.nd, mx.autograd, mx.gluon
    rng = np.random.RandomState(3)
    X = nd.array(rng.randn(200, 2).astype(np.float32))
    y = 2 * X[:, 0] - 3.4 * X[:, 1] + 4.2
    net = gluon.nn.Dense(1, in_units=2)
    net.initialize()
    net.weight.set_data(nd.array(rng.randn(1, 2).astype(np.float32)))
    net.bias.set_data(nd.array(rng.randn(1).astype(np.float32)))
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 5})
    square_loss = gluon.loss.L2Loss()
    weights, losses = [], []
    for i in list(range(0, 200, 10)) * 4:
        with autograd.record():
            loss = square_loss(net(X[i:i + 10]), y[i:i + 10])
        loss.backward()
        trainer.step(10)
        weights.append(np.concatenate([net.weight.data().asnumpy().ravel(),
                                       net.bias.data().asnumpy()]))
        losses.append(square_loss(net(X), y).mean().asnumpy())
    out["diverging_sgd/weights"] = np.stack(weights)
    out["diverging_sgd/losses"] = np.stack(losses)


_LOGGING_SCRIPT = """
import logging, os, sys
import %s as mx
open('t10k-labels-idx1-ubyte.gz', 'wb').close()
print(os.path.basename(mx.test_utils.download('http://data.mxnet.io/data/mnist/t10k-labels-idx1-ubyte.gz')))
print(len(logging.getLogger().handlers), logging.getLogger().level)
logging.basicConfig(level=logging.INFO)
logging.info('after basicConfig')
logging.warning('a warning')
"""


def download_logging(mx, out):
    """``test_utils.download`` of a file already there (as ``get_mnist()`` in the book's GAN
    chapters): what a fresh program then prints, on stdout and stderr, when it goes on to
    ``logging.basicConfig(level=logging.INFO)`` and logs."""
    import os
    import subprocess
    import sys
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, MXNET_ENGINE_TYPE="NaiveEngine")
        done = subprocess.run([sys.executable, "-c", _LOGGING_SCRIPT % mx.__name__], cwd=tmp,
                              capture_output=True, text=True, timeout=120, env=env)
    # MXNet's engine announces itself on stderr, a C++ log line that is no logging record.
    stderr = [line for line in done.stderr.splitlines() if "engine.cc" not in line]
    out["download_logging/returncode"] = np.array(done.returncode)
    out["download_logging/stdout"] = np.array(done.stdout.splitlines())
    out["download_logging/stderr"] = np.array(stderr)


def batchnorm_axis_out_of_range(mx, out):
    """The book's time-series chapter: a BatchNorm (deferred, ``axis=1``) given a 1-D batch.
    MXNet's deferred initialization fails with a ValueError that names the operator and its
    check (its timestamp and source path left out here)."""
    import re
    messages, kinds = [], []
    for axis in (1, 3, -3):
        net = mx.gluon.nn.BatchNorm(axis=axis, center=False, prefix="bn_")
        net.initialize()
        try:
            net(mx.nd.ones((4,)))
            messages.append("")
            kinds.append(0)
        except Exception as exc:  # noqa: BLE001 - which one is the point
            messages.append(re.sub(r"\[\d\d:\d\d:\d\d\] \S+\.cc:\d+: ", "",
                                   str(exc).split("\n")[0]))
            kinds.append(int(isinstance(exc, ValueError)) + 2 * int(isinstance(exc, IndexError)))
    out["batchnorm_axis/messages"] = np.array(messages)
    out["batchnorm_axis/is_value_error"] = np.array(kinds)


def loss_totals(mx, out):
    """The book's training loops total their losses in Python from ``asscalar()``: a running
    sum divided by a float, a moving average, a per-epoch mean, as the loops print them."""
    nd = mx.nd
    rng = np.random.RandomState(11)
    # Multiples of 1/8: every sum and mean of a batch is exact in float32, whatever order the
    # reduction adds in; only the Python arithmetic on the scalars can round differently.
    batches = [nd.array(rng.randint(0, 24, 8).astype(np.float32) / 8) for _ in range(25)]
    cumulative, moving, correct = 0, 0.0, 0.0
    for i, loss in enumerate(batches):
        cumulative += nd.sum(loss).asscalar()
        curr = nd.mean(loss).asscalar()
        moving = curr if i == 0 else 0.99 * moving + 0.01 * curr
        correct += nd.sum(loss > 1.5).asscalar()
    num_batches = 200 / 7
    half = nd.array([2.5], dtype="float16").asscalar()
    values = [cumulative / num_batches, moving, correct / 200, cumulative, half * 3, 1 - half]
    out["loss_totals/printed"] = np.array(["Epoch %s. Loss: %s" % (k, v)
                                           for k, v in enumerate(values)])
    out["loss_totals/types"] = np.array([type(v).__name__ for v in values])
    out["loss_totals/values"] = np.array(values, dtype=np.float64)


def asscalar_shapes(mx, out):
    """``asscalar()`` of one-element arrays of one, two and three axes (a one-sample prediction
    of a Dense layer is (1, 1)): what it returns, printed, and what float() and sums make of it."""
    printed, floats = [], []
    for shape in ((1,), (1, 1), (1, 1, 1)):
        value = (mx.nd.ones(shape) * 2.5).asscalar()
        total = 0.5 + value
        # NumPy's own type under it (trainer_cli returns subclasses: numpy1_scalar, one_element)
        kind = next(c for c in type(value).__mro__ if c.__module__ == "numpy")
        printed.append("%s|%s|%s|%s" % (kind.__name__, getattr(value, "shape", ()),
                                        str(value), str(total)))
        floats.append(float(value))
    out["asscalar_shapes/printed"] = np.array(printed)
    out["asscalar_shapes/floats"] = np.array(floats)


CASES = [toy_ssd, diverging_sgd, download_logging, batchnorm_axis_out_of_range, loss_totals,
         asscalar_shapes]


def record(mx):
    out = {}
    for case in CASES:
        case(mx, out)
    return out
