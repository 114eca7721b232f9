"""One implementation's side of ``run_all.py``: runs cases in this process, prints JSON.

    python benchmarks/_worker.py IMPL --threads N --cases a,b [--quick]
    python benchmarks/_worker.py IMPL --threads N --serve       # cases on stdin, JSON lines out

IMPL is ``ours`` (trainer_cli), ``torch`` or ``mxnet``. ``run_all.py`` keeps one served process per
implementation and thread count, with the thread variables already in the environment (NumPy's
BLAS, MKL and OpenMP read them once, when they load), and sends the cases in turn. MXNet's side runs
under the MXNet virtualenv's interpreter, so nothing here imports trainer_cli or torch at module
level, and the code must run on MXNet's old NumPy (< 1.24) as well.

The Gluon cases are written once over the ``(gluon, nd, autograd)`` modules and run unchanged on
trainer_cli and MXNet: the comparison is the same user code with the import line swapped.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))


# ----------------------------------------------------------------------------- timing
def _clocked(fn, number, sync):
    """Wall and process-CPU seconds of ``number`` calls of ``fn``, then ``sync()``."""
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(number):
        fn()
    sync()
    return time.perf_counter() - start, time.process_time() - cpu


class Timing:
    def __init__(self, quick: bool):
        self.quick = quick
        self.repeats = 3 if quick else 7
        self.batch_seconds = 0.05 if quick else 0.25

    # Every figure is taken on two clocks: wall time (what a user waits) and this process's CPU
    # time, which a machine shared with other work disturbs far less (for one thread it is what
    # the wall time would be on an idle machine; for several it adds the threads up).
    def rate(self, step, sync=lambda: None, warmup=None, min_batch=3, repeats=None):
        """Median steps/s of ``step`` over ``repeats`` batches sized to ``batch_seconds`` (at
        least ``min_batch`` steps each: 1 for steps of a second, so a round stays short)."""
        for _ in range(warmup if warmup is not None else (20 if self.quick else 100)):
            step()
        sync()
        # Calibrate the batch size on a short run, so slow and fast implementations are timed
        # over comparable wall time.
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < self.batch_seconds / 5 or n < min_batch:
            step()
            n += 1
        sync()
        per_step = (time.perf_counter() - start) / n
        batch = max(min_batch, int(self.batch_seconds / per_step))
        rates, cpu_rates = [], []
        for _ in range(repeats or self.repeats):
            wall, cpu = _clocked(step, batch, sync)
            rates.append(batch / wall)
            cpu_rates.append(batch / max(cpu, 1e-9))
        return {"value": statistics.median(rates), "samples": rates,
                "cpu_value": statistics.median(cpu_rates), "batch": batch}

    def seconds(self, fn, sync=lambda: None, warmup=2):
        """Median time of one ``fn()`` call (for calls of milliseconds or more)."""
        for _ in range(warmup):
            fn()
        sync()
        repeats = 5 if self.quick else 15
        times, cpu_times = [], []
        for _ in range(repeats):
            wall, cpu = _clocked(fn, 1, sync)
            times.append(wall)
            cpu_times.append(cpu)
        return {"value": statistics.median(times), "samples": times,
                "cpu_value": statistics.median(cpu_times)}

    def per_call_us(self, fn, number=None, sync=lambda: None):
        """Median microseconds per call of a very short ``fn`` (loops of ``number`` calls)."""
        number = number or (5000 if self.quick else 20000)
        fn()
        sync()
        samples, cpu_samples = [], []
        for _ in range(self.repeats):
            wall, cpu = _clocked(fn, number, sync)
            samples.append(wall / number * 1e6)
            cpu_samples.append(cpu / number * 1e6)
        return {"value": statistics.median(samples), "samples": samples,
                "cpu_value": statistics.median(cpu_samples)}


# ----------------------------------------------------------------------------- implementations
class Gluon:
    """trainer_cli or MXNet behind the same names."""

    def __init__(self, impl):
        self.impl = impl
        if impl == "mxnet":
            import mxnet as mx
            from mxnet import autograd, gluon, nd, optimizer
            from mxnet import initializer
            self.sync = mx.nd.waitall
            self.version = mx.__version__
        else:
            import trainer_cli
            from trainer_cli import autograd, gluon, initializer, nd, optimizer
            self.sync = lambda: None
            self.version = getattr(trainer_cli, "__version__", "dev")
        self.autograd, self.gluon, self.nd, self.optimizer = autograd, gluon, nd, optimizer
        self.initializer = initializer

    def perceptron_step(self):
        """The tutorial's perceptron (lr 0.1 instead of 1, so that thousands of steps stay finite)."""
        gluon, nd, autograd = self.gluon, self.nd, self.autograd
        loss = gluon.loss.L2Loss()
        net = gluon.nn.Dense(1, in_units=4)    # its weights exist before a step (check_step)
        net.initialize()
        net.hybridize()         # as an MXNet user would: MXNet then runs a CachedOp
        batch_size = 8
        X = nd.random.uniform(shape=(batch_size, 4))
        y = nd.random.uniform(shape=(batch_size,))
        trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})

        def step():
            with autograd.record():
                l = loss(net(X), y)
            l.backward()
            trainer.step(batch_size)
        return _with_weights(step, lambda: [p.data().asnumpy() for p in
                                            net.collect_params().values()])

    def mlp_step(self, batch_size, optimizer, optimizer_params, ctx=None):
        """The MLP's training step, on ``ctx`` (default: the current context)."""
        import numpy as np
        gluon, nd = self.gluon, self.nd
        net = gluon.nn.HybridSequential()
        net.add(gluon.nn.Dense(256, activation="relu", in_units=784),
                gluon.nn.Dense(256, activation="relu", in_units=256),
                gluon.nn.Dense(10, in_units=256))
        net.initialize(ctx=ctx)
        net.hybridize()         # a cached plan here, a CachedOp in MXNet
        rng = np.random.RandomState(0)
        X = nd.array(rng.uniform(size=(batch_size, 784)).astype(np.float32), ctx=ctx)
        y = nd.array(rng.randint(0, 10, size=batch_size).astype(np.float32), ctx=ctx)
        return self._train_step(net, X, y, batch_size, optimizer_params, optimizer)

    def _train_step(self, net, X, y, batch_size, optimizer_params, optimizer="sgd"):
        """A classifier's step: softmax cross-entropy, backward, ``trainer.step``."""
        gluon, autograd = self.gluon, self.autograd
        loss = gluon.loss.SoftmaxCrossEntropyLoss()
        trainer = gluon.Trainer(net.collect_params(), optimizer, optimizer_params)

        def step():
            with autograd.record():
                l = loss(net(X), y)
            l.backward()
            trainer.step(batch_size)
        return _with_weights(step, lambda: [p.data().asnumpy() for p in
                                            net.collect_params().values()])

    def lenet_step(self, batch_size=64):
        """LeNet-style: two 3x3 convolutions with ReLU, each followed by 2x2 max pooling, then
        Dense(128, relu) and Dense(10); 1x28x28 images, SGD with momentum."""
        import numpy as np
        nn, nd = self.gluon.nn, self.nd
        net = nn.Sequential()
        net.add(nn.Conv2D(32, 3, activation="relu", in_channels=1), nn.MaxPool2D(2),
                nn.Conv2D(64, 3, activation="relu", in_channels=32), nn.MaxPool2D(2),
                nn.Dense(128, activation="relu", in_units=64 * 5 * 5), nn.Dense(10, in_units=128))
        net.initialize()
        rng = np.random.RandomState(0)
        X = nd.array(rng.uniform(size=(batch_size, 1, 28, 28)).astype(np.float32))
        y = nd.array(rng.randint(0, 10, size=batch_size).astype(np.float32))
        return self._train_step(net, X, y, batch_size, {"learning_rate": 0.01, "momentum": 0.9})

    def cifar_step(self, batch_size=32):
        """Four Conv2D(64, 3, padding 1, no bias) + BatchNorm + ReLU blocks, global average
        pooling and Dense(10); 3x32x32 images, SGD with momentum."""
        import numpy as np
        nn, nd = self.gluon.nn, self.nd
        net = nn.Sequential()
        for cin in (3, 64, 64, 64):
            net.add(nn.Conv2D(64, 3, padding=1, use_bias=False, in_channels=cin),
                    nn.BatchNorm(in_channels=64), nn.Activation("relu"))
        net.add(nn.GlobalAvgPool2D(), nn.Dense(10, in_units=64))
        net.initialize()
        rng = np.random.RandomState(0)
        X = nd.array(rng.uniform(size=(batch_size, 3, 32, 32)).astype(np.float32))
        y = nd.array(rng.randint(0, 10, size=batch_size).astype(np.float32))
        return self._train_step(net, X, y, batch_size, {"learning_rate": 0.01, "momentum": 0.9})

    def resnet18_cifar_step(self, batch_size=32):
        """ResNet-18, CIFAR variant (3x3 stem convolution with BatchNorm and ReLU, no max pooling),
        built from the model zoo's BasicBlockV1 as a Gluon user would: four stages of two blocks
        (64, 128, 256, 512 channels; stride 2 and a 1x1 downsampling shortcut where a stage
        starts smaller), global average pooling, Dense(10); 3x32x32 images, SGD with momentum."""
        import numpy as np
        nn, nd = self.gluon.nn, self.nd
        block = self.gluon.model_zoo.vision.BasicBlockV1
        net = nn.HybridSequential()
        net.add(nn.Conv2D(64, 3, padding=1, use_bias=False, in_channels=3),
                nn.BatchNorm(in_channels=64), nn.Activation("relu"))
        cin = 64
        for channels, stride in RESNET18_STAGES:
            net.add(block(channels, stride, downsample=stride != 1 or cin != channels,
                          in_channels=cin),
                    block(channels, 1, in_channels=channels))
            cin = channels
        net.add(nn.GlobalAvgPool2D(), nn.Dense(10, in_units=cin))
        net.initialize()
        rng = np.random.RandomState(0)
        X = nd.array(rng.uniform(size=(batch_size, 3, 32, 32)).astype(np.float32))
        y = nd.array(rng.randint(0, 10, size=batch_size).astype(np.float32))
        net(X)      # the blocks' BatchNorms learn their channel counts on the first call
        return self._train_step(net, X, y, batch_size, {"learning_rate": 0.01, "momentum": 0.9})

    def book_step(self, name, batch_size):
        """A training step of a "Dive into Deep Learning" chapter's network (``_book_nets``), as
        the book's MXNet edition trains it: Xavier initialization, imperative blocks (no
        hybridize), softmax cross-entropy, plain SGD at the book's learning rate; random
        one-channel images of the book's size."""
        import numpy as np
        import _book_nets
        side, lr = _book_nets.BOOK_NETS[name]
        net = _book_nets.gluon_net(name, self.gluon, self.nd)
        net.initialize(self.initializer.Xavier())
        rng = np.random.RandomState(0)
        X = self.nd.array(rng.uniform(size=(batch_size, 1, side, side)).astype(np.float32))
        y = self.nd.array(rng.randint(0, 10, size=batch_size).astype(np.float32))
        net(X)      # deferred shapes
        return self._train_step(net, X, y, batch_size, {"learning_rate": lr})

    def mobilenet_step(self, batch_size):
        """The model zoo's ``mobilenet0_5`` (MobileNet v1, widths halved: depthwise 3x3 and 1x1
        convolutions, each with BatchNorm and ReLU; 1000 classes) on 3x160x160 images, SGD with
        momentum."""
        import numpy as np
        nd = self.nd
        net = self.gluon.model_zoo.vision.mobilenet0_5()
        net.initialize()
        rng = np.random.RandomState(0)
        X = nd.array(rng.uniform(size=(batch_size, 3, 160, 160)).astype(np.float32))
        y = nd.array(rng.randint(0, 1000, size=batch_size).astype(np.float32))
        net(X)      # deferred shapes
        return self._train_step(net, X, y, batch_size, {"learning_rate": 0.01, "momentum": 0.9})

    def resnet18_predict(self, batch_size):
        """The model zoo's ``resnet18_v1`` (ImageNet: 7x7 stride-2 stem, max pooling, 1000
        classes) on ``batch_size`` 3x224x224 images, outside ``autograd.record()`` (predict
        mode, no tape)."""
        import numpy as np
        nd = self.nd
        net = self.gluon.model_zoo.vision.resnet18_v1()
        net.initialize()
        rng = np.random.RandomState(0)
        X = nd.array(rng.uniform(size=(batch_size, 3, 224, 224)).astype(np.float32))
        return _predictor(lambda: net(X).asnumpy())

    def optimizer_step(self, name, params, n_params, n_tensors):
        """The optimizer alone, as gluon.Trainer runs it: its updater on the Parameters' data and
        gradient arrays, all indices in one call (which is also what lets MXNet aggregate)."""
        import numpy as np
        rng = np.random.RandomState(0)
        size = n_params // n_tensors
        weights, grads = [], []
        for i in range(n_tensors):
            param = self.gluon.Parameter("w%d" % i, shape=(size,))
            param.initialize()
            param.set_data(self.nd.array(rng.standard_normal(size).astype(np.float32)))
            param.grad()[:] = self.nd.array(rng.standard_normal(size).astype(np.float32))
            weights.append(param.data())
            grads.append(param.grad())
        updater = self.optimizer.get_updater(self.optimizer.create(name, **params))
        indices = list(range(n_tensors))
        return _with_weights(lambda: updater(indices, grads, weights),
                             lambda: [w.asnumpy() for w in weights],
                             lambda: [g.asnumpy() for g in grads], rule="mxnet")

    def op_in_record(self):
        a = self.nd.ones((8, 4))
        a.attach_grad()
        b = self.nd.ones((8, 4))
        scope = self.autograd.record()
        return a, b, scope


class Torch:
    def __init__(self, threads=None):
        import torch
        if threads is not None:
            torch.set_num_threads(threads)
        self.torch = torch
        self.version = torch.__version__
        self.sync = lambda: None

    def perceptron_step(self):
        torch = self.torch
        torch.manual_seed(0)
        net = torch.nn.Linear(4, 1)
        X, y = torch.rand(8, 4), torch.rand(8, 1)
        # What a PyTorch user writes: F.mse_loss (the batch mean of the squared error) and
        # loss.backward(). Gluon's L2Loss is half the squared error and trainer.step(8) averages
        # it over the batch, so the same update needs half the learning rate here.
        opt = torch.optim.SGD(net.parameters(), lr=0.1 / 2)
        mse_loss = torch.nn.functional.mse_loss

        def step():
            opt.zero_grad()
            mse_loss(net(X), y).backward()
            opt.step()
        return _with_weights(step, lambda: _torch_arrays(net.parameters()))

    def mlp_step(self, batch_size, optimizer, optimizer_params, device="cpu"):
        torch = self.torch
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                  torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                  torch.nn.Linear(256, 10)).to(device)
        criterion = torch.nn.CrossEntropyLoss()
        X = torch.rand(batch_size, 784, device=device)
        y = torch.randint(0, 10, (batch_size,), device=device)
        if optimizer == "sgd":
            opt = torch.optim.SGD(net.parameters(), lr=optimizer_params["learning_rate"],
                                  momentum=optimizer_params.get("momentum", 0.0))
        else:
            opt = torch.optim.Adam(net.parameters(), lr=optimizer_params["learning_rate"])

        # Idiomatic PyTorch: a mean loss and the optimizer's default (eager) implementation.
        def step():
            opt.zero_grad()
            criterion(net(X), y).backward()
            opt.step()
        return _with_weights(step, lambda: _torch_arrays(net.parameters()))

    def _train_step(self, net, X, y, lr=0.01, momentum=0.9):
        torch = self.torch
        criterion = torch.nn.CrossEntropyLoss()
        opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)

        def step():
            opt.zero_grad()
            criterion(net(X), y).backward()
            opt.step()
        return _with_weights(step, lambda: _torch_arrays(net.parameters()))

    def lenet_step(self, batch_size=64):
        torch = self.torch
        nn = torch.nn
        torch.manual_seed(0)
        net = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                            nn.Linear(64 * 5 * 5, 128), nn.ReLU(), nn.Linear(128, 10))
        return self._train_step(net, torch.rand(batch_size, 1, 28, 28),
                                torch.randint(0, 10, (batch_size,)))

    def cifar_step(self, batch_size=32):
        torch = self.torch
        nn = torch.nn
        torch.manual_seed(0)
        layers = []
        for cin in (3, 64, 64, 64):
            layers += [nn.Conv2d(cin, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64),
                       nn.ReLU()]
        net = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
        return self._train_step(net, torch.rand(batch_size, 3, 32, 32),
                                torch.randint(0, 10, (batch_size,)))

    def resnet18_cifar_step(self, batch_size=32):
        torch = self.torch
        torch.manual_seed(0)
        return self._train_step(_torch_resnet18(torch.nn, stem="cifar", classes=10),
                                torch.rand(batch_size, 3, 32, 32),
                                torch.randint(0, 10, (batch_size,)))

    def book_step(self, name, batch_size):
        import _book_nets
        torch = self.torch
        torch.manual_seed(0)
        side, lr = _book_nets.BOOK_NETS[name]
        net = _book_nets.torch_net(name, torch)
        for m in net.modules():     # the book's Xavier initialization
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
                torch.nn.init.xavier_uniform_(m.weight)
        return self._train_step(net, torch.rand(batch_size, 1, side, side),
                                torch.randint(0, 10, (batch_size,)), lr=lr, momentum=0.0)

    def mobilenet_step(self, batch_size):
        torch = self.torch
        torch.manual_seed(0)
        return self._train_step(_torch_mobilenet(torch.nn, 0.5, 1000),
                                torch.rand(batch_size, 3, 160, 160),
                                torch.randint(0, 1000, (batch_size,)))

    def resnet18_predict(self, batch_size):
        torch = self.torch
        torch.manual_seed(0)
        net = _torch_resnet18(torch.nn, stem="imagenet", classes=1000).eval()
        X = torch.rand(batch_size, 3, 224, 224)

        def predict():
            with torch.no_grad():
                return net(X).numpy()
        return _predictor(predict)

    def optimizer_step(self, name, params, n_params, n_tensors):
        torch = self.torch
        gen = torch.Generator().manual_seed(0)
        size = n_params // n_tensors
        ps = [torch.nn.Parameter(torch.randn(size, generator=gen)) for _ in range(n_tensors)]
        for p in ps:
            p.grad = torch.randn(size, generator=gen)
        if name == "adam":
            opt = torch.optim.Adam(ps, lr=params["learning_rate"], fused=True)
        else:
            opt = torch.optim.SGD(ps, lr=params["learning_rate"], momentum=params["momentum"],
                                  fused=True)
        return _with_weights(opt.step, lambda: _torch_arrays(ps),
                             lambda: _torch_arrays(p.grad for p in ps), rule="torch")

    def op_in_record(self):
        a = self.torch.ones(8, 4, requires_grad=True)
        b = self.torch.ones(8, 4)
        return a, b, None


RESNET18_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))     # (channels, first stride)


def _torch_resnet18(nn, stem, classes):
    """ResNet-18 as torchvision writes it, in plain torch.nn: ``stem`` "imagenet" (7x7 stride-2
    convolution, BatchNorm, ReLU, 3x3 stride-2 max pooling) or "cifar" (3x3 convolution,
    BatchNorm, ReLU)."""

    class BasicBlock(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.downsample = None
            if stride != 1 or cin != cout:
                self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                                nn.BatchNorm2d(cout))

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + identity)

    if stem == "cifar":
        layers = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True)]
    else:
        layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                  nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for channels, stride in RESNET18_STAGES:
        layers += [BasicBlock(cin, channels, stride), BasicBlock(channels, channels, 1)]
        cin = channels
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def _torch_mobilenet(nn, multiplier, classes):
    """MobileNet v1 as the Gluon model zoo builds it, in plain torch.nn: a 3x3 stride-2 stem,
    thirteen depthwise-separable pairs (3x3 depthwise, then 1x1), each convolution followed by
    BatchNorm and ReLU, global average pooling, a linear layer."""
    def conv_bn(cin, cout, kernel=1, stride=1, groups=1):
        return [nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]

    def scaled(values):
        return [int(v * multiplier) for v in values]
    dw_channels = scaled([32, 64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024])
    channels = scaled([64] + [128] * 2 + [256] * 2 + [512] * 6 + [1024] * 2)
    strides = [1, 2] * 3 + [1] * 5 + [2, 1]
    layers = conv_bn(3, int(32 * multiplier), 3, 2)
    for dwc, c, stride in zip(dw_channels, channels, strides):
        layers += conv_bn(dwc, dwc, 3, stride, groups=dwc) + conv_bn(dwc, c)
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels[-1], classes)]
    return nn.Sequential(*layers)


# ----------------------------------------------------------------------------- checks
# Before a case is timed, its step is checked once: a benchmark of a step that does nothing (or
# fills the weights with NaN) would measure nothing. The outcome goes into the case's result
# ("check"), and so into results.json; a failed check fails the case instead of timing it.

class CheckFailed(AssertionError):
    pass


def _with_weights(step, weights, grads=None, rule=None):
    """``step`` carrying how to read its weights (and, for an optimizer-only step, its gradients
    and whose rule the reference follows) as host arrays."""
    try:
        step.weights, step.grads, step.rule = weights, grads, rule
    except AttributeError:      # a bound method (torch's opt.step) takes no attributes
        bound = step

        def step():
            return bound()
        step.weights, step.grads, step.rule = weights, grads, rule
    return step


def _predictor(predict):
    """An inference step: ``predict()`` returns the outputs as a host array (which also waits for
    MXNet's asynchronous engine); ``step.check()`` is its check before timing."""
    def step():
        predict()
    step.check = lambda: check_predict(predict)
    step.outputs = predict
    return step


def check_predict(predict):
    """An inference step's check: its outputs are finite, differ between images (they depend on
    the input), and a second call gives the same numbers (predict mode: no batch statistics, no
    running averages updated)."""
    import numpy as np
    first, second = predict(), predict()
    check = {"finite": bool(np.isfinite(first).all()),
             "depends_on_input": bool(len(first) == 1 or np.ptp(first, axis=0).max() > 0),
             "repeatable": bool(np.array_equal(first, second))}
    failed = [k for k, ok in check.items() if not ok]
    if failed:
        raise CheckFailed("the inference step failed its check before timing (%s): %s"
                          % (", ".join(failed), json.dumps(check)))
    return check


def _torch_arrays(tensors):
    return [t.detach().cpu().numpy().copy() for t in tensors]


def reference_step(name, params, weights, grads, rule):
    """One step of the textbook rule from fresh states, in float64: SGD with momentum (MXNet's
    and PyTorch's first step are both ``w - lr*g``) or Adam (``w - lr*g/(|g| + eps')``, where
    MXNet's eps' is eps/sqrt(1 - beta2), its rate folding the bias corrections, and PyTorch's is
    eps)."""
    import numpy as np
    lr = params["learning_rate"]
    out = []
    for w, g in zip(weights, grads):
        w, g = w.astype(np.float64), g.astype(np.float64)
        if name == "sgd":
            out.append(w - lr * g)
        elif name == "adam":
            beta1, beta2, eps = params.get("beta1", 0.9), params.get("beta2", 0.999), \
                params.get("epsilon", 1e-8)
            m, v = (1 - beta1) * g, (1 - beta2) * g * g
            if rule == "torch":
                out.append(w - lr * (m / (1 - beta1)) / (np.sqrt(v / (1 - beta2)) + eps))
            else:
                lr_t = lr * np.sqrt(1 - beta2) / (1 - beta1)
                out.append(w - lr_t * m / (np.sqrt(v) + eps))
        else:
            raise ValueError("no reference rule for %r" % name)
    return out


def check_step(step, sync, optimizer=None):
    """Run ``step`` once: the weights must change and stay finite; with ``optimizer`` (``(name,
    params)``, an optimizer-only step from fresh states) they must equal ``reference_step``'s
    within float32 rounding."""
    import numpy as np
    before = step.weights()
    grads = step.grads() if optimizer is not None else None
    step()
    sync()
    after = step.weights()
    check = {"changes_weights": any(not np.array_equal(a, b) for a, b in zip(before, after)),
             "finite": all(bool(np.isfinite(a).all()) for a in after)}
    if optimizer is not None:
        want = reference_step(optimizer[0], optimizer[1], before, grads, step.rule)
        # Relative to the size of the operands (the weight and its step), which is what
        # float32 rounding is relative to; a weight near zero makes no false alarm.
        err = max(float(np.max(np.abs(a - w) / (np.abs(b) + np.abs(w - b) + 1e-30)))
                  for a, w, b in zip(after, want, before))
        check["reference_rule"] = "%s (%s)" % (optimizer[0], step.rule)
        check["max_rel_error"] = err
        check["matches_reference"] = err <= 1e-4     # float32 rounding, incl. MXNet's bias terms
    failed = [k for k in ("changes_weights", "finite", "matches_reference")
              if check.get(k) is False]
    if failed:
        raise CheckFailed("the step failed its check before timing (%s): %s"
                          % (", ".join(failed), json.dumps(check)))
    return check


def report_check(name, step, sync=lambda: None, optimizer=None):
    """``check_step`` for a standalone script: the outcome is printed (stderr, beside the
    script's progress) and returned for the script's report; a failed check raises CheckFailed,
    so the script stops before timing a step that does nothing."""
    check = check_step(step, sync, optimizer)
    print("check %s: %s" % (name, json.dumps(check)), file=sys.stderr, flush=True)
    return check


def check_loop(name, step, weights, sync=lambda: None):
    """``report_check`` for a script's own loop: ``step()`` runs one training step and
    ``weights()`` returns the weights as host arrays."""
    return report_check(name, _with_weights(step, weights), sync)


def _host(array):
    import numpy as np
    return np.asarray(array.get() if hasattr(array, "get") else array)   # cupy's .get()


def check_round_trip(quantize, dequantize, grad, threshold, levels):
    """A gradient codec's check before timing: from a zero residual, the decoded values must be
    ``levels`` only and not all zero, and decoded plus the residual left must give the gradient
    back (error feedback loses nothing) within float32 rounding."""
    import numpy as np
    residual = grad * 0
    packed = quantize(grad, residual, threshold)
    decoded = _host(dequantize(packed, grad.size, threshold))
    g, r = _host(grad).astype(np.float64), _host(residual).astype(np.float64)
    err = float(np.max(np.abs(decoded + r - g) / (np.abs(g) + abs(threshold) + 1)))
    check = {"levels_only": bool(np.isin(decoded, np.float32(levels)).all()),
             "sends_something": bool(np.any(decoded != 0)),
             "max_rel_error": err, "round_trip": err <= 1e-6}
    failed = [k for k in ("levels_only", "sends_something", "round_trip") if not check[k]]
    if failed:
        raise CheckFailed("the codec failed its check before timing (%s): %s"
                          % (", ".join(failed), json.dumps(check)))
    return check


def gluon_weights(block):
    """A Gluon block's weights as host arrays (ours or MXNet's), for ``check_step``."""
    return lambda: [p.data().asnumpy() for p in block.collect_params().values()]


# ----------------------------------------------------------------------------- cases
N_PARAMS, N_TENSORS = 10_000_000, 200
MLP_CASES = {
    "mlp_sgd_b64": (64, "sgd", {"learning_rate": 0.1, "momentum": 0.9}),
    "mlp_adam_b512": (512, "adam", {"learning_rate": 0.001}),
}
OPT_CASES = {
    "opt_adam_10m": ("adam", {"learning_rate": 0.001}),
    "opt_sgd_mom_10m": ("sgd", {"learning_rate": 0.01, "momentum": 0.9}),
}


_built = {}
_checks = {}


def _build(case, make, sync, optimizer=None):
    # Built once per process: a served worker measures a case in several rounds on one model.
    # The first build is checked (check_step, or an inference step's own check) before anything
    # is timed.
    if case not in _built:
        step = make()
        _checks[case] = step.check() if hasattr(step, "check") else \
            check_step(step, sync, optimizer)
        _built[case] = step
    return _built[case]


CNN_CASES = {"lenet_b64": "lenet_step", "cifar_conv4_b32": "cifar_step"}
# Steps of a tenth of a second to seconds: one warm-up step and batches of one step, so that a
# round of three implementations stays within a minute or so.
HEAVY_CASES = {"resnet18_cifar_b32": lambda lib: lib.resnet18_cifar_step(32),
               "resnet18_224_predict_b1": lambda lib: lib.resnet18_predict(1),
               "resnet18_224_predict_b16": lambda lib: lib.resnet18_predict(16),
               "book_alexnet_b32": lambda lib: lib.book_step("alexnet", 32),
               "book_googlenet_b32": lambda lib: lib.book_step("googlenet", 32),
               "book_resnet_b32": lambda lib: lib.book_step("resnet", 32),
               "mobilenet0_5_b8": lambda lib: lib.mobilenet_step(8)}


def run_case(case, lib, timing):
    if case in HEAVY_CASES:
        step = _build(case, lambda: HEAVY_CASES[case](lib), lib.sync)
        return dict(timing.rate(step, lib.sync, warmup=1, min_batch=1,
                                repeats=2 if timing.quick else 3),
                    unit="steps/s", check=_checks[case])
    if case in CNN_CASES:
        step = _build(case, getattr(lib, CNN_CASES[case]), lib.sync)
        return dict(timing.rate(step, lib.sync, warmup=3 if timing.quick else 10),
                    unit="steps/s", check=_checks[case])
    if case == "perceptron":
        step = _build(case, lib.perceptron_step, lib.sync)
        return dict(timing.rate(step, lib.sync), unit="steps/s", check=_checks[case])
    if case in MLP_CASES:
        step = _build(case, lambda: lib.mlp_step(*MLP_CASES[case]), lib.sync)
        return dict(timing.rate(step, lib.sync, warmup=5 if timing.quick else 20),
                    unit="steps/s", check=_checks[case])
    if case in OPT_CASES:
        name, params = OPT_CASES[case]
        fn = _build(case, lambda: lib.optimizer_step(name, params, N_PARAMS, N_TENSORS),
                    lib.sync, optimizer=(name, params))
        out = timing.seconds(fn, lib.sync)
        out = {"value": out["value"] * 1e3, "samples": [t * 1e3 for t in out["samples"]],
               "cpu_value": out["cpu_value"] * 1e3, "check": _checks[case]}
        if isinstance(lib, Gluon) and lib.impl == "ours":
            from trainer_cli.optimizer import kernels
            out["fused_kernels"] = kernels.enabled()
        return dict(out, unit="ms")
    if case == "op_overhead":
        return op_overhead(lib, timing)
    if case == "compression":
        return compression(timing)
    if case == "memory":
        return memory(lib)
    if case in PEAK_CASES:
        return peak_rss(lib, *PEAK_CASES[case])
    raise ValueError("unknown case %r" % case)


def op_overhead(lib, timing):
    """An elementwise multiply of two 8x4 float32 arrays, one of them recorded, against NumPy."""
    import numpy as np
    a, b, scope = lib.op_in_record()
    if scope is not None:
        scope.__enter__()
    try:
        op = timing.per_call_us(lambda: a * b, sync=lib.sync)
    finally:
        if scope is not None:
            scope.__exit__(None, None, None)
    an, bn = np.ones((8, 4), np.float32), np.ones((8, 4), np.float32)
    bare = timing.per_call_us(lambda: an * bn)
    return {"value": op["value"] - bare["value"], "unit": "us", "op_us": op["value"],
            "numpy_us": bare["value"], "samples": op["samples"],
            "cpu_value": op["cpu_value"] - bare["cpu_value"], "cpu_op_us": op["cpu_value"],
            "cpu_numpy_us": bare["cpu_value"]}


def compression(timing):
    sys.path.insert(0, HERE)
    import bench_compression
    n = 2_000_000 if timing.quick else 10_000_000
    results = bench_compression.run(n, 5 if timing.quick else 9, 0.5, False, 0)
    return {row["name"]: {"value": row["m_values_per_s"], "unit": "M values/s",
                          "median_ms": row["median_ms"], "check": row["check"]}
            for row in results}


def _rss_kib():
    """(current RSS, peak RSS) of this process in KiB."""
    current = peak = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    current = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    peak = int(line.split()[1])
    except OSError:
        import resource
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return current, peak


def memory(lib, steps=1000):
    """RSS at steps 100 and 1000 of the batch-64 SGD-momentum MLP; growth means per-step garbage
    that something keeps alive. trainer_cli also reports the transient bytes one step allocates."""
    step = lib.mlp_step(*MLP_CASES["mlp_sgd_b64"])
    check = check_step(step, lib.sync)
    marks = {}
    for i in range(1, steps + 1):
        step()
        if i in (100, steps):
            lib.sync()
            marks[i] = _rss_kib()
    (rss100, peak100), (rss_end, peak_end) = marks[100], marks[steps]
    out = {"unit": "MiB", "rss_100_mib": rss100 / 1024 if rss100 else None,
           "rss_end_mib": rss_end / 1024 if rss_end else None,
           "peak_100_mib": peak100 / 1024, "peak_end_mib": peak_end / 1024,
           "value": (peak_end - peak100) / 1024, "check": check}
    if isinstance(lib, Gluon) and lib.impl == "ours":
        import tracemalloc
        # Parameters are what the Trainer was built on: the sum of their sizes in bytes.
        param_bytes = 4 * (784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10)
        tracemalloc.start()
        step()
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        step()
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        out["param_bytes"] = param_bytes
        out["step_transient_bytes"] = peak - base
        out["step_retained_bytes"] = current - base
    return out


PEAK_CASES = {"peak_mlp": (lambda lib: lib.mlp_step(*MLP_CASES["mlp_sgd_b64"]), 300),
              "peak_lenet": (lambda lib: lib.lenet_step(), 40)}


def peak_rss(lib, make, steps):
    """Peak RSS of this (fresh) process over ``steps`` training steps, and its RSS before the
    model was built (the interpreter and the imported library): run as the first case of a new
    worker, the peak is that of the step (parameters, gradients, states, activations) on top."""
    before, _ = _rss_kib()
    step = make(lib)
    check = check_step(step, lib.sync)
    for _ in range(steps - 1):
        step()
    lib.sync()
    _, peak = _rss_kib()
    return {"unit": "MiB", "value": peak / 1024, "before_model_mib": before / 1024,
            "step_mib": (peak - before) / 1024, "steps": steps, "check": check}


def describe_side(impl, lib):
    """This worker's machine, builds, environment and one-op calibration (``_calibrate``), taken
    once the implementation is loaded and its threads are set, before any case runs."""
    import _calibrate
    if isinstance(lib, Torch):
        return _calibrate.describe(impl, torch=lib.torch)
    record = _calibrate.describe(impl, nd=lib.nd)
    record["extra"] = {impl: lib.version}
    return record


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("impl", choices=["ours", "torch", "mxnet"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--cases", help="comma-separated cases to run, then exit")
    parser.add_argument("--serve", action="store_true",
                        help="read one case per line on stdin, answer one JSON line each")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    limiter = None
    try:
        from threadpoolctl import threadpool_limits
        limiter = threadpool_limits(args.threads)
    except ImportError:
        pass
    timing = Timing(args.quick)
    report = {"impl": args.impl, "threads": args.threads, "results": {}, "errors": {}}
    try:
        lib = Torch(args.threads) if args.impl == "torch" else Gluon(args.impl)
        report["version"] = lib.version
        report["side"] = describe_side(args.impl, lib)
    except Exception as exc:        # the peer is not installed or does not load
        report["unavailable"] = "%s: %s" % (type(exc).__name__, exc)
        print(json.dumps(report), flush=True)
        return 0
    if args.serve:
        print(json.dumps(report), flush=True)
        for line in sys.stdin:
            case = line.strip()
            if not case:
                continue
            answer = {"case": case}
            try:
                answer["result"] = run_case(case, lib, timing)
            except Exception:
                answer["error"] = traceback.format_exc(limit=3)
            print(json.dumps(answer), flush=True)
        return 0
    for case in (args.cases or "").split(","):
        if not case:
            continue
        try:
            report["results"][case] = run_case(case, lib, timing)
        except Exception:
            report["errors"][case] = traceback.format_exc(limit=3)
    del limiter
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
