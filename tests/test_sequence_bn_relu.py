"""A sequence's BatchNorm and the ReLU after it run as one op.

``Sequential`` / ``HybridSequential`` (and a hybridized one's cached plan) call
``BatchNorm._forward_relu`` (``contrib.BatchNormWithReLU``: one pass over the data, one node
when recorded) in place of the two layers. What the user sees must not change: the bits of the
two calls, forward and backward, moving statistics included, the hooks of either layer seeing
what they saw, deferred shapes, subclasses and errors naming the layer that failed.
"""
import numpy as np
import pytest

from trainer_cli import autograd, nd
from trainer_cli.gluon import nn
from trainer_cli.gluon.model_zoo import vision
from trainer_cli.ndarray import contrib as nd_contrib


def _counted(monkeypatch):
    """The calls of the fused op, counted."""
    calls = []
    fused = nd_contrib.BatchNormWithReLU

    def counting(*args, **kwargs):
        calls.append(args[0].shape)
        return fused(*args, **kwargs)
    monkeypatch.setattr(nd.contrib, "BatchNormWithReLU", counting)
    return calls


def _randomize_statistics(net, seed=0):
    rng = np.random.default_rng(seed)
    for name, p in net.collect_params().items():
        r = rng.random(p.shape, dtype=np.float32)
        if name.endswith(("running_mean", "beta")):
            p.set_data(nd.array(r * 0.4 - 0.2))
        elif name.endswith(("running_var", "gamma")):
            p.set_data(nd.array(r + 0.5))


def _net(kind=nn.HybridSequential, bn=nn.BatchNorm, act="relu"):
    net = kind()
    net.add(nn.Conv2D(6, 3, padding=1), bn(), nn.Activation(act), nn.Conv2D(4, 3), bn(),
            nn.Activation(act), nn.Dense(3))
    net.initialize()
    return net


def _x(shape=(2, 3, 40, 40), seed=1):
    return nd.array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _one_by_one(net, x):
    for block in net._children.values():
        x = block(x)
    return x


def _identity_hook(block, args, out):
    return None


@pytest.mark.parametrize("kind", [nn.HybridSequential, nn.Sequential])
@pytest.mark.parametrize("hybridize", [False, True])
def test_predicting_fuses_each_pair_with_the_bits_of_the_two_calls(monkeypatch, kind, hybridize):
    calls = _counted(monkeypatch)
    net = _net(kind)
    x = _x()
    net(x)
    _randomize_statistics(net)
    if hybridize:
        net.hybridize()
    expect = _one_by_one(net, x).asnumpy()
    del calls[:]
    got = net(x).asnumpy()
    assert calls == [(2, 6, 40, 40), (2, 4, 38, 38)]
    assert got.tobytes() == expect.tobytes()


def test_the_model_zoos_resnet_predicts_the_unfused_bits(monkeypatch):
    """A hook on every BatchNorm keeps the layers apart: the network's output is the same."""
    calls = _counted(monkeypatch)
    net = vision.resnet18_v1(classes=10)
    net.initialize()
    x = _x((1, 3, 64, 64))
    net(x)
    _randomize_statistics(net)
    del calls[:]
    fused = net(x).asnumpy()
    assert len(calls) == 9              # the stem and the first BatchNorm of each block
    bns = []
    net.apply(lambda b: bns.append(b) if type(b) is nn.BatchNorm else None)
    handles = [b.register_forward_hook(_identity_hook) for b in bns]
    del calls[:]
    apart = net(x).asnumpy()
    assert calls == []
    assert np.isfinite(fused).all() and fused.tobytes() == apart.tobytes()
    for handle in handles:
        handle.detach()
    assert net(x).asnumpy().tobytes() == fused.tobytes() and len(calls) == 9


@pytest.mark.parametrize("where", ["bn pre", "bn", "relu pre", "relu"])
def test_a_hook_on_either_layer_sees_what_it_saw(monkeypatch, where):
    calls = _counted(monkeypatch)
    net = _net()
    x = _x()
    net(x)
    bn, relu = net[1], net[2]
    seen = []
    block = bn if where.startswith("bn") else relu
    if where.endswith("pre"):
        handle = block.register_forward_pre_hook(lambda b, args: seen.append(args[0].asnumpy()))
    else:
        handle = block.register_forward_hook(lambda b, args, out: seen.append(out.asnumpy()))
    out = net(x).asnumpy()
    assert len(seen) == 1 and calls == [(2, 4, 38, 38)]     # the second pair only
    if where == "bn":
        assert (seen[0] < 0).any()                  # the BatchNorm's output, before the ReLU
    handle.detach()
    del calls[:]
    assert net(x).asnumpy().tobytes() == out.tobytes() and len(calls) == 2


def _twins(monkeypatch):
    """Two nets of the same parameters; the second runs its layers one by one."""
    nets = []
    for _ in range(2):
        net = _net()
        net(_x())
        nets.append(net)
    _randomize_statistics(nets[0])
    for a, b in zip(nets[0].collect_params().values(), nets[1].collect_params().values()):
        b.set_data(a.data())
    return nets


@pytest.mark.parametrize("hybridize", [False, True])
@pytest.mark.parametrize("train_mode", [True, False])
def test_recorded_pairs_give_the_two_layers_outputs_gradients_and_statistics(monkeypatch,
                                                                            train_mode,
                                                                            hybridize):
    """Recorded (training mode: batch statistics, moving ones updated by the backward pass;
    predict mode: moving statistics), one node for the pair, eager or as a step of the cached
    plan: the output, the input's and every parameter's gradient and the moving statistics
    are the two layers' bits."""
    calls = _counted(monkeypatch)
    fused, apart = _twins(monkeypatch)
    if hybridize:
        fused.hybridize()
        fused(_x())         # records the graph export would write
        fused(_x())         # makes the plan (predict mode: the statistics stay)
        assert fused._plan is not None
    head = _x((2, 3), seed=7)
    results = []
    for net, run in ((fused, lambda x: net(x)), (apart, lambda x: _one_by_one(apart, x))):
        x = _x()
        x.attach_grad()
        del calls[:]
        with autograd.record(train_mode=train_mode):
            out = run(x)
        out.backward(head)
        results.append([out, x.grad] + [p.grad() if p.grad_req != "null" else p.data()
                                         for p in net.collect_params().values()])
        assert len(calls) == (2 if net is fused else 0)
    for a, b in zip(*results):
        assert a.asnumpy().tobytes() == b.asnumpy().tobytes()
    assert (results[0][1].asnumpy() != 0).any()


def test_training_mode_without_recording_normalizes_by_the_batch(monkeypatch):
    _counted(monkeypatch)
    net = _net()
    x = _x()
    net(x)
    _randomize_statistics(net)
    with autograd.train_mode():
        got = net(x).asnumpy()
        expect = _one_by_one(net, x).asnumpy()
    assert got.tobytes() == expect.tobytes()
    assert got.tobytes() != net(x).asnumpy().tobytes()     # predict mode: moving statistics


def test_deferred_shapes_are_found_by_the_first_call_then_pairs_fuse(monkeypatch):
    calls = _counted(monkeypatch)
    net = _net()
    x = _x()
    first = net(x).asnumpy()
    assert net[1].gamma.shape == (6,)
    second = net(x).asnumpy()
    assert first.tobytes() == second.tobytes() and len(calls) >= 2


@pytest.mark.parametrize("bn,act", [(nn.BatchNormReLU, "relu"), (nn.BatchNorm, "tanh")])
def test_other_layers_are_not_fused(monkeypatch, bn, act):
    """A BatchNorm subclass computes its own way (BatchNormReLU calls the fused op itself, once
    per layer), another activation is not a ReLU."""
    calls = _counted(monkeypatch)
    net = _net(bn=bn, act=act)
    x = _x()
    net(x)
    _randomize_statistics(net)
    del calls[:]
    got = net(x).asnumpy()
    assert len(calls) == (2 if bn is nn.BatchNormReLU else 0)
    assert got.tobytes() == _one_by_one(net, x).asnumpy().tobytes()


def test_an_error_in_the_fused_op_names_the_batchnorm():
    net = nn.HybridSequential()
    net.add(nn.BatchNorm(in_channels=3), nn.Activation("relu"))
    net.initialize()
    with pytest.raises(Exception) as info:
        net(_x((2, 5, 4, 4)))
    assert net[0].name in info.value.failed_block
    assert "(2, 5, 4, 4)" in info.value.failed_block


def test_children_added_later_are_seen(monkeypatch):
    calls = _counted(monkeypatch)
    net = nn.HybridSequential()
    net.add(nn.BatchNorm(in_channels=3))
    net.initialize()
    x = _x((2, 3, 8, 8))
    net(x)
    relu = nn.Activation("relu")
    net.add(relu)
    out = net(x).asnumpy()
    assert len(calls) == 1 and (out >= 0).all() and (out > 0).any()


def _flags_of(monkeypatch, module, name):
    """The last argument (the ReLU flag) of each call of ``module.name``."""
    flags = []
    real = getattr(module, name)

    def counting(*args):
        flags.append(args[-1])
        return real(*args)
    monkeypatch.setattr(module, name, counting)
    return flags


def _same_parameters(make, x, hybridize):
    """Two nets made by ``make``, the second holding the first's parameters; the first
    hybridized (and its plan made) when asked."""
    nets = [make() for _ in range(2)]
    for net in nets:
        net(x)
    for a, b in zip(nets[0].collect_params().values(), nets[1].collect_params().values()):
        b.set_data(a.data())
    if hybridize:
        nets[0].hybridize()
        nets[0](x)          # records the graph export would write
        nets[0](x)          # makes the plan
    return nets


def _recorded_whole_and_apart(nets, shape, flags, check_flags):
    """The first net called whole and the second layer by layer, recorded, backward: their
    outputs, input gradients and parameter gradients have the same bits; ``check_flags(net,
    flags)`` sees each run's flags."""
    results = []
    for net, run in ((nets[0], nets[0]), (nets[1], lambda v: _one_by_one(nets[1], v))):
        xv = _x(shape)
        xv.attach_grad()
        del flags[:]
        with autograd.record():
            out = run(xv)
        out.backward()
        check_flags(net is nets[0], list(flags))
        results.append([out, xv.grad] + [p.grad() for p in net.collect_params().values()])
    for a, b in zip(*results):
        assert a.asnumpy().tobytes() == b.asnumpy().tobytes()


def _conv_net(kind, relu_of_its_own=False):
    net = kind()
    net.add(nn.Conv2D(5, 3, padding=1, activation="relu" if relu_of_its_own else None))
    if not relu_of_its_own:
        net.add(nn.Activation("relu"))
    net.add(nn.MaxPool2D(2), nn.Conv2D(4, 3), nn.Activation("relu"), nn.Dense(3))
    net.initialize()
    return net


@pytest.mark.parametrize("kind", [nn.HybridSequential, nn.Sequential])
@pytest.mark.parametrize("hybridize", [False, True])
def test_a_convolution_takes_the_relu_after_it_as_activation_relu_does(monkeypatch, kind,
                                                                       hybridize):
    """Conv2D then Activation('relu') in a sequence: the ReLU-fused convolution that
    ``Conv2D(activation='relu')`` runs (the max pooling after it masking the gradient once),
    with the bits of the two layers, forward and backward."""
    from trainer_cli.gluon.nn import conv_layers
    fused_calls = _flags_of(monkeypatch, conv_layers._nn, "_convolution")
    nets = _same_parameters(lambda: _conv_net(kind), _x((2, 3, 20, 20)), hybridize)

    def check(whole, flags):
        assert flags == ([True, True] if whole else [False, False])
    _recorded_whole_and_apart(nets, (2, 3, 20, 20), fused_calls, check)
    del fused_calls[:]
    own = _conv_net(kind, relu_of_its_own=True)
    own(_x((2, 3, 20, 20)))
    assert fused_calls[:1] == [True]         # activation='relu': the layer's own fused op


@pytest.mark.parametrize("hybridize", [False, True])
def test_a_dense_takes_the_relu_after_it_as_activation_relu_does(monkeypatch, hybridize):
    """Dense then Activation('relu'): the ReLU-fused FullyConnected of ``Dense(activation=
    'relu')`` (in a plan: the Dense step with its ReLU), the bits of the two layers."""
    from trainer_cli.gluon.nn import basic_layers
    relu_flags = _flags_of(monkeypatch, basic_layers._ops, "_fully_connected")

    def make():
        net = nn.HybridSequential()
        net.add(nn.Dense(16), nn.Activation("relu"), nn.Dense(8, use_bias=False),
                nn.Activation("relu"), nn.Dense(3))
        net.initialize()
        return net
    nets = _same_parameters(make, _x((4, 10)), hybridize)
    if hybridize:
        assert [step.relu for step in nets[0]._plan.steps] == [True, True, False]

    def check(whole, flags):
        if not (hybridize and whole):       # a plan's Dense steps are not this op
            assert flags == ([True, True, False] if whole else [False] * 3)
    _recorded_whole_and_apart(nets, (4, 10), relu_flags, check)
