"""The layers of ``bench_layers.py``: one forward and backward pass each, written for ours (Gluon
layers and ``nd`` operators under ``autograd.record()``) and for PyTorch (``torch.nn`` modules
and functions, ``backward`` with a head of ones); the same shapes and float32 data.

    python benchmarks/_layer_cases.py ours|torch ROUNDS REPEATS THREADS CASE...

prints one JSON object: ``{case: [ms per pass, one per round]}`` (the best of ``REPEATS`` passes
each round, by the process's CPU time on one thread, else the wall clock). Imports nothing of
the other side: each runs in a clean process of its own."""
from __future__ import annotations

import json
import sys
import time

import numpy as np

# name -> (description, input shapes, our builder, PyTorch builder); a builder takes the input
# arrays (float32, from one seeded generator) and returns the pass to time.
CASES = {}


def case(name, what, shapes):
    def register(pair):
        CASES[name] = (what, shapes) + pair
        return pair
    return register


def _ours_layer(make):
    def build(xs):
        from trainer_cli import autograd, nd
        layer = make()
        layer.initialize()
        x = nd.array(xs[0])
        x.attach_grad()

        def run():
            with autograd.record():
                y = layer(x)
            y.backward()
            return y
        return run
    return build


def _ours_op(fn):
    def build(xs):
        from trainer_cli import autograd, nd
        arrays = [nd.array(a) for a in xs]
        for a in arrays:
            a.attach_grad()

        def run():
            with autograd.record():
                y = fn(nd, *arrays)
            y.backward()
            return y
        return run
    return build


def _torch_pass(make_module=None, fn=None):
    def build(xs):
        import torch
        module = make_module(torch.nn) if make_module is not None else None
        tensors = [torch.tensor(a, requires_grad=True) for a in xs]

        def run():
            y = module(tensors[0]) if module is not None else fn(torch, *tensors)
            y.backward(torch.ones_like(y))
            for t in tensors:
                t.grad = None
            return y
        return run
    return build


def _gluon(name, *args, **kwargs):
    def make():
        from trainer_cli.gluon import nn
        return getattr(nn, name)(*args, **kwargs)
    return make


N4 = (16, 64, 32, 32)       # a million values
case("gelu", "GELU, 16x64x32x32", [N4])((
    _ours_layer(_gluon("GELU")), _torch_pass(lambda nn: nn.GELU())))
case("leaky_relu", "LeakyReLU(0.1), 16x64x32x32", [N4])((
    _ours_layer(_gluon("LeakyReLU", 0.1)), _torch_pass(lambda nn: nn.LeakyReLU(0.1))))
case("prelu", "PReLU, 64 channels, 16x64x32x32", [N4])((
    _ours_layer(_gluon("PReLU", in_channels=64)), _torch_pass(lambda nn: nn.PReLU(64))))
case("elu", "ELU, 16x64x32x32", [N4])((
    _ours_layer(_gluon("ELU")), _torch_pass(lambda nn: nn.ELU())))
case("swish", "Swish / SiLU, 16x64x32x32", [N4])((
    _ours_layer(_gluon("Swish")), _torch_pass(lambda nn: nn.SiLU())))
case("sigmoid", "Activation('sigmoid'), 16x64x32x32", [N4])((
    _ours_layer(_gluon("Activation", "sigmoid")), _torch_pass(lambda nn: nn.Sigmoid())))
case("tanh", "Activation('tanh'), 16x64x32x32", [N4])((
    _ours_layer(_gluon("Activation", "tanh")), _torch_pass(lambda nn: nn.Tanh())))
case("layer_norm", "LayerNorm(512), 32x35x512", [(32, 35, 512)])((
    _ours_layer(_gluon("LayerNorm", in_channels=512)),
    _torch_pass(lambda nn: nn.LayerNorm(512))))
case("instance_norm", "InstanceNorm, 32 channels, 16x32x32x32", [(16, 32, 32, 32)])((
    _ours_layer(_gluon("InstanceNorm", in_channels=32)),
    _torch_pass(lambda nn: nn.InstanceNorm2d(32, affine=True))))
case("group_norm", "GroupNorm, 4 groups, 16x64x16x16", [(16, 64, 16, 16)])((
    _ours_layer(_gluon("GroupNorm", 4)), _torch_pass(lambda nn: nn.GroupNorm(4, 64))))
case("batch_norm", "BatchNorm (training), 64 channels, 16x64x32x32", [N4])((
    _ours_layer(_gluon("BatchNorm", in_channels=64)),
    _torch_pass(lambda nn: nn.BatchNorm2d(64))))
case("upsampling", "nearest upsampling x2, 16x64x16x16", [(16, 64, 16, 16)])((
    _ours_op(lambda nd, x: nd.UpSampling(x, scale=2, sample_type="nearest")),
    _torch_pass(lambda nn: nn.Upsample(scale_factor=2, mode="nearest"))))
case("softmax", "softmax over the last axis, 32x35x1000", [(32, 35, 1000)])((
    _ours_op(lambda nd, x: nd.softmax(x, axis=-1)),
    _torch_pass(fn=lambda torch, x: torch.softmax(x, -1))))
case("log_softmax", "log_softmax over the last axis, 32x35x1000", [(32, 35, 1000)])((
    _ours_op(lambda nd, x: nd.log_softmax(x, axis=-1)),
    _torch_pass(fn=lambda torch, x: torch.log_softmax(x, -1))))
case("batch_dot", "batch_dot 32x35x64 by 32x64x35", [(32, 35, 64), (32, 64, 35)])((
    _ours_op(lambda nd, a, b: nd.batch_dot(a, b)),
    _torch_pass(fn=lambda torch, a, b: torch.bmm(a, b))))
case("conv_transpose", "Conv2DTranspose 64->32, 4x4 stride 2, 16x64x16x16", [(16, 64, 16, 16)])((
    _ours_layer(_gluon("Conv2DTranspose", 32, 4, strides=2, padding=1, in_channels=64)),
    _torch_pass(lambda nn: nn.ConvTranspose2d(64, 32, 4, 2, 1))))
case("depthwise_conv", "depthwise Conv2D 3x3, 64 channels, 8x64x56x56", [(8, 64, 56, 56)])((
    _ours_layer(_gluon("Conv2D", 64, 3, padding=1, groups=64, in_channels=64)),
    _torch_pass(lambda nn: nn.Conv2d(64, 64, 3, padding=1, groups=64))))
case("dilated_conv", "Conv2D 3x3 dilation 2, 32->32, 16x32x32x32", [(16, 32, 32, 32)])((
    _ours_layer(_gluon("Conv2D", 32, 3, padding=2, dilation=2, in_channels=32)),
    _torch_pass(lambda nn: nn.Conv2d(32, 32, 3, padding=2, dilation=2))))
case("conv3d", "Conv3D 8->16, 3x3x3, 8x8x8x8x8", [(8, 8, 8, 8, 8)])((
    _ours_layer(_gluon("Conv3D", 16, 3, padding=1, in_channels=8)),
    _torch_pass(lambda nn: nn.Conv3d(8, 16, 3, padding=1))))


def main(argv):
    side, rounds, repeats, threads = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
    names = argv[4:] or list(CASES)
    if side == "torch":
        import torch
        torch.set_num_threads(threads)
    clock = time.process_time if threads == 1 else time.perf_counter
    rng = np.random.default_rng(0)
    runs = {}
    for name in names:
        _, shapes, ours, torch_build = CASES[name]
        xs = [rng.uniform(-1, 1, size=s).astype(np.float32) for s in shapes]
        run = (ours if side == "ours" else torch_build)(xs)
        y = run()
        values = y.asnumpy() if side == "ours" else y.detach().numpy()
        if not np.isfinite(values).all():
            raise SystemExit("%s: %s gave non-finite values" % (side, name))
        runs[name] = run
    times = {name: [] for name in names}
    for _ in range(rounds):
        for name in names:
            run = runs[name]
            best = float("inf")
            for _ in range(repeats):
                start = clock()
                run()
                best = min(best, clock() - start)
            times[name].append(best * 1e3)
    print(json.dumps(times))


if __name__ == "__main__":
    main(sys.argv[1:])
