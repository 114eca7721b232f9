"""hybridize(): a hybridized block runs from a cached plan with the same bits as the imperative
path (forward, every parameter's gradient, several Trainer steps), and runs imperatively where a
plan cannot hold it."""
import numpy as np
import pytest

import trainer_cli
from trainer_cli import autograd, gluon, nd
from trainer_cli import initializer as mx_init
from trainer_cli.gluon import nn
from trainer_cli.gluon.block import reset_name_counters


def _data(shape, seed=0):
    return nd.array(np.random.RandomState(seed).uniform(-1, 1, size=shape).astype(np.float32))


def _mlp():
    net = nn.HybridSequential()
    net.add(nn.Dense(16, activation="relu", in_units=6), nn.Dropout(0.3),
            nn.Dense(8, activation="tanh", in_units=16), nn.BatchNorm(in_channels=8),
            nn.Activation("sigmoid"), nn.Dense(3, in_units=8))
    return net


def _cnn():
    net = nn.HybridSequential()
    net.add(nn.Conv2D(4, 3, padding=1, activation="relu", in_channels=2),
            nn.BatchNorm(in_channels=4), nn.Activation("relu"), nn.MaxPool2D(2),
            nn.Conv2D(3, 3, in_channels=4, activation="tanh"),   # two ops in one step
            nn.Dropout(0.25), nn.Flatten(),
            nn.Dense(5, activation="relu"), nn.Dense(2))
    return net


def _train(make, x, hybridize, steps=3, train_mode=True, with_input_grad=False, dtype=None):
    """Forward outputs, input and parameter gradients and parameter values over ``steps``
    Trainer steps of a fresh ``make()`` net (same names, initial weights and random stream),
    cast to ``dtype`` when given."""
    reset_name_counters()
    trainer_cli.random.seed(7)
    net = make()
    net.initialize()
    if dtype is not None:
        net.cast(dtype)
    # A first call settles deferred shapes (and, hybridized, records the graph imperatively).
    with autograd.predict_mode():
        net(x)
    if hybridize:
        net.hybridize(static_alloc=True)
        net(x)
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    seen = []
    for _ in range(steps):
        xi = x.copy()
        if with_input_grad:
            xi.attach_grad()
        with autograd.record(train_mode=train_mode):
            out = net(xi)
            loss = (out * out).sum()
        loss.backward()
        trainer.step(x.shape[0])
        seen.append(out.asnumpy())
        if with_input_grad:
            seen.append(xi.grad.asnumpy())
        for p in net.collect_params().values():
            if p.grad_req != "null":
                seen.append(p.grad().asnumpy())
            seen.append(p.data().asnumpy())
    with autograd.predict_mode():
        seen.append(net(x).asnumpy())
    return net, seen


def _assert_bitwise(a, b):
    assert len(a) == len(b)
    for i, (u, v) in enumerate(zip(a, b)):
        assert u.dtype == v.dtype and np.array_equal(u, v), "array %d differs" % i


@pytest.mark.parametrize("make, shape", [(_mlp, (5, 6)), (_cnn, (3, 2, 6, 6))])
@pytest.mark.parametrize("train_mode", [True, False])
def test_plan_is_bitwise_the_imperative_path(make, shape, train_mode):
    x = _data(shape)
    _, eager = _train(make, x, False, train_mode=train_mode, with_input_grad=True)
    net, hybrid = _train(make, x, True, train_mode=train_mode, with_input_grad=True)
    assert net._plan is not None        # the calls above ran from a plan
    _assert_bitwise(eager, hybrid)


def test_plan_records_one_node_for_the_whole_block():
    net = _mlp()
    net.initialize()
    x = _data((4, 6))
    net.hybridize()
    net(x)
    with autograd.record():
        out = net(x)
    params = [p.data() for p in net.collect_params().values() if p.grad_req != "null"]
    node = out._node
    # The block's input and its trained parameters, nothing recorded per layer on the tape.
    assert node.inputs[0] is x and {id(p) for p in node.inputs[1:]} == {id(p) for p in params}


def test_a_new_batch_size_and_inference_run_from_the_plan():
    x, x2 = _data((5, 6)), _data((2, 6), seed=1)
    _, eager = _train(_mlp, x, False)
    net, hybrid = _train(_mlp, x, True)
    _assert_bitwise(eager, hybrid)
    reset_name_counters()
    trainer_cli.random.seed(7)
    twin = _mlp()
    twin.initialize()
    for p, q in zip(twin.collect_params().values(), net.collect_params().values()):
        p.set_data(q.data())
    outs = []
    for block in (net, twin):
        trainer_cli.random.seed(11)         # the same Dropout masks on both
        with autograd.record():
            outs.append(block(x2).asnumpy())
        with autograd.predict_mode():
            outs.append(block(x2).asnumpy())
    assert net._plan is not None and twin._plan is None
    _assert_bitwise(outs[:2], outs[2:])


class _Branchy(gluon.HybridBlock):
    """A user's block with a Python branch on the data: a plan cannot hold it."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.body = nn.HybridSequential()
            self.body.add(nn.Dense(4, in_units=3), nn.Activation("tanh"))

    def hybrid_forward(self, F, x):
        y = self.body(x)
        if float(x.sum().asscalar()) > 0:
            return F.relu(y)
        return y * 2


def test_a_block_the_plan_cannot_hold_runs_imperatively_and_right():
    net = _Branchy()
    net.initialize()
    net.hybridize()
    for sign in (1.0, -1.0, 1.0):
        x = _data((2, 3)) * 0 + sign
        with autograd.record():
            out = net(x)
        out.backward()
        dense = net.body[0]
        w, b = dense.weight.data().asnumpy(), dense.bias.data().asnumpy()
        want = np.tanh(x.asnumpy() @ w.T + b)
        want = np.maximum(want, 0) if sign > 0 else want * 2
        np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-6)
    assert net._plan is None
    # Its child, hybridized with it, runs from a plan of its own inside.
    assert net.body._plan is not None


def test_hooks_make_the_block_run_imperatively_until_detached():
    net = _mlp()
    net.initialize()
    net.hybridize()
    x = _data((4, 6))
    net(x)
    net(x)
    assert net._plan is not None
    calls = []
    handle = net[2].register_forward_hook(lambda block, args, out: calls.append(out.shape))
    with autograd.predict_mode():
        net(x)
    assert calls == [(4, 8)] and net._plan is None
    handle.detach()
    with autograd.predict_mode():
        net(x)
    assert calls == [(4, 8)] and net._plan is not None


def test_grad_req_add_falls_back_and_accumulates():
    results = []
    for hybridize in (False, True):
        reset_name_counters()
        trainer_cli.random.seed(3)
        net = nn.HybridSequential()
        net.add(nn.Dense(4, activation="relu", in_units=3), nn.Dense(2, in_units=4))
        net.initialize()
        if hybridize:
            net.hybridize()
            net(_data((2, 3)))
        net.collect_params().setattr("grad_req", "add")
        for seed in (0, 1):
            with autograd.record():
                out = net(_data((2, 3), seed))
            out.backward()
        if hybridize:
            assert net._plan is None
        results.append([p.grad().asnumpy() for p in net.collect_params().values()])
    _assert_bitwise(*results)


def test_plan_reads_live_parameters_set_data_and_cast():
    net = nn.HybridSequential()
    net.add(nn.Dense(3, in_units=2))
    net.initialize()
    net.hybridize()
    x = _data((2, 2))
    net(x)
    net(x)
    net[0].weight.set_data(nd.ones((3, 2)))
    net[0].bias.set_data(nd.zeros((3,)))
    want = x.asnumpy().sum(axis=1, keepdims=True) * np.ones((1, 3), np.float32)
    np.testing.assert_array_equal(net(x).asnumpy(), want)
    net.cast("float64")
    out = net(x.astype("float64"))
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.asnumpy(), want, rtol=1e-6)
    net.initialize(mx_init.Constant(0.5), force_reinit=True)
    np.testing.assert_allclose(net(x.astype("float64")).asnumpy(), want * 0.5, rtol=1e-6)  # bias keeps its own init, zeros


def test_retain_graph_backward_twice_matches_imperative():
    grads = []
    for hybridize in (False, True):
        reset_name_counters()
        trainer_cli.random.seed(5)
        net = _mlp()
        net.initialize()
        x = _data((4, 6))
        if hybridize:
            net.hybridize()
            net(x)
        with autograd.record():
            out = net(x)
        out.backward(retain_graph=True)
        first = [p.grad().asnumpy() for p in net.collect_params().values() if p.grad_req != "null"]
        out.backward()
        grads.append(first + [p.grad().asnumpy() for p in net.collect_params().values()
                              if p.grad_req != "null"])
    _assert_bitwise(*grads)


def test_hybridize_false_runs_imperatively_again():
    net = _mlp()
    net.initialize()
    net.hybridize()
    x = _data((3, 6))
    net(x)
    with autograd.record():
        planned = net(x)
    assert len(planned._node.inputs) > 2
    net.hybridize(False)
    with autograd.record():
        eager = net(x)
    # The imperative tape's last node is the last Dense's own: (data, weight, bias).
    assert len(eager._node.inputs) == 3


def test_differentiating_a_plan_twice_is_refused_with_a_clear_error():
    net = nn.HybridSequential(prefix="twice_")
    net.add(nn.Dense(3, activation="tanh", in_units=2), nn.Dense(1, in_units=3))
    net.initialize()
    net.hybridize()
    x = nd.ones((2, 2))
    net(x)
    x.attach_grad()
    with autograd.record():
        y = net(x)
        with pytest.raises(NotImplementedError, match="'twice'.*hybridize\\(False\\)"):
            autograd.grad(y, [x], create_graph=True)
    net.hybridize(False)
    with autograd.record():
        y = net(x)
        gx = autograd.grad(y, [x], create_graph=True)[0]
    assert gx.shape == (2, 2)


def test_the_runner_hybridizes_by_default_with_the_same_bits(tmp_path, monkeypatch):
    from run_helpers import SMALL, final_arrays, metric_rows, no_fsync, write_config, \
        assert_bitwise_equal
    from trainer_cli.gluon import cached_plan
    from trainer_cli.run import start_run
    no_fsync(monkeypatch)
    planned = []
    run = cached_plan._Plan.run
    monkeypatch.setattr(cached_plan._Plan, "run",
                        lambda self, x: planned.append(1) or run(self, x))
    text = SMALL.replace("args: {hidden: [16], classes: 3}",
                         "args: {hidden: [16, 8], classes: 3, dropout: 0.2}")
    dirs = {}
    for hybridize in ("true", "false"):
        del planned[:]
        done = start_run(write_config(tmp_path, text, name="h%s.yaml" % hybridize),
                         ["epochs=1", "model.hybridize=%s" % hybridize],
                         run_root=tmp_path / hybridize)
        dirs[hybridize] = done.summary["run_dir"]
        assert bool(planned) == (hybridize == "true")
    params, states = final_arrays(dirs["true"])
    params_eager, states_eager = final_arrays(dirs["false"])
    assert_bitwise_equal(params, params_eager)
    assert_bitwise_equal(states, states_eager)
    assert metric_rows(dirs["true"]) == metric_rows(dirs["false"])


def test_an_error_inside_a_plan_names_the_layer():
    net = nn.HybridSequential(prefix="named_")
    with net.name_scope():
        net.add(nn.Dense(4, activation="relu", in_units=3), nn.Dense(2, in_units=4))
    net.initialize()
    net.hybridize()
    net(_data((2, 3)))
    with pytest.raises(Exception) as info:
        net(_data((2, 5)))
    assert "named_dense0" in info.value.failed_block and "(2, 5)" in info.value.failed_block


def _shared():
    shared = nn.Dense(4, activation="relu", in_units=4)
    net = nn.HybridSequential()
    net.add(shared, nn.Activation("tanh"), shared, nn.BatchNorm(in_channels=4), shared,
            nn.Dense(2, in_units=4))
    return net


def test_a_layer_used_three_times_sums_its_gradients_as_imperatively():
    x = _data((3, 4))
    _, eager = _train(_shared, x, False, with_input_grad=True)
    net, hybrid = _train(_shared, x, True, with_input_grad=True)
    assert net._plan is not None
    _assert_bitwise(eager, hybrid)


# Every layer the plan holds, each in a block of its own with a second step after it, so that
# a layer whose forward reads something the plan does not pass on shows here, not in a model.
_EVERY_LAYER = {
    "Dense": (lambda: nn.Dense(4, activation="relu"), (3, 5)),
    "Activation": (lambda: nn.Activation("softrelu"), (3, 5)),
    "ELU": (lambda: nn.ELU(0.7), (3, 5)),
    "GELU": (lambda: nn.GELU(), (3, 5)),
    "LeakyReLU": (lambda: nn.LeakyReLU(0.1), (3, 5)),
    "PReLU": (lambda: nn.PReLU(), (3, 5)),
    "SELU": (lambda: nn.SELU(), (3, 5)),
    "Swish": (lambda: nn.Swish(1.5), (3, 5)),
    "Flatten": (lambda: nn.Flatten(), (3, 2, 2)),
    "Identity": (lambda: nn.Identity(), (3, 5)),
    "Dropout": (lambda: nn.Dropout(0.4), (3, 5)),
    "Dropout(0)": (lambda: nn.Dropout(0.0), (3, 5)),
    "BatchNorm": (lambda: nn.BatchNorm(), (4, 3, 2)),
    "BatchNormReLU": (lambda: nn.BatchNormReLU(), (4, 3, 2, 2)),
    "GroupNorm": (lambda: nn.GroupNorm(num_groups=2), (2, 4, 3)),
    "InstanceNorm": (lambda: nn.InstanceNorm(), (2, 3, 4)),
    "LayerNorm": (lambda: nn.LayerNorm(), (3, 5)),
    "Conv1D": (lambda: nn.Conv1D(3, 2, strides=2, padding=1), (2, 2, 7)),
    "Conv2D": (lambda: nn.Conv2D(3, 3, padding=1, groups=1, activation="relu"), (2, 2, 5, 5)),
    "Conv3D": (lambda: nn.Conv3D(2, 2), (1, 2, 3, 4, 4)),
    "Conv1DTranspose": (lambda: nn.Conv1DTranspose(2, 3, strides=2), (2, 3, 4)),
    "Conv2DTranspose": (lambda: nn.Conv2DTranspose(2, 3, strides=2, output_padding=1),
                        (2, 3, 3, 3)),
    "Conv3DTranspose": (lambda: nn.Conv3DTranspose(2, 2), (1, 2, 2, 3, 3)),
    "MaxPool1D": (lambda: nn.MaxPool1D(2), (2, 3, 6)),
    "MaxPool2D": (lambda: nn.MaxPool2D(3, 2, padding=1), (2, 3, 5, 5)),
    "MaxPool3D": (lambda: nn.MaxPool3D(2, ceil_mode=True), (1, 2, 3, 5, 4)),
    "AvgPool1D": (lambda: nn.AvgPool1D(3, 1, padding=1), (2, 3, 6)),
    "AvgPool2D": (lambda: nn.AvgPool2D(2, count_include_pad=False, padding=1), (2, 3, 4, 5)),
    "AvgPool3D": (lambda: nn.AvgPool3D(2), (1, 2, 4, 4, 4)),
    "GlobalMaxPool1D": (lambda: nn.GlobalMaxPool1D(), (2, 3, 5)),
    "GlobalMaxPool2D": (lambda: nn.GlobalMaxPool2D(), (2, 3, 4, 5)),
    "GlobalMaxPool3D": (lambda: nn.GlobalMaxPool3D(), (1, 2, 3, 4, 2)),
    "GlobalAvgPool1D": (lambda: nn.GlobalAvgPool1D(), (2, 3, 5)),
    "GlobalAvgPool2D": (lambda: nn.GlobalAvgPool2D(), (2, 3, 4, 5)),
    "GlobalAvgPool3D": (lambda: nn.GlobalAvgPool3D(), (1, 2, 3, 4, 2)),
    "ReflectionPad2D": (lambda: nn.ReflectionPad2D(1), (2, 2, 3, 4)),
}


def _planned_layer_classes():
    """The names of the layer classes a plan holds as steps of their own."""
    from trainer_cli.gluon import cached_plan
    from trainer_cli.gluon.block import HybridBlock
    found, todo = set(), [HybridBlock]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    names = set()
    for cls in found:
        if cls.__name__.startswith("_") or not cls.__module__.startswith("trainer_cli.gluon.nn"):
            continue
        declared = (cached_plan._owner(cls, "hybrid_forward").__dict__.get("_plan_step"),
                    cached_plan._owner(cls, "forward").__dict__.get("_plan_step"))
        if "op" in declared or "dense" in declared:
            names.add(cls.__name__)
    return names


def test_the_sweep_covers_every_layer_the_plan_holds():
    assert _planned_layer_classes() == {name.split("(")[0] for name in _EVERY_LAYER}


@pytest.mark.filterwarnings("ignore:Accumulating with float16")
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("train_mode", [True, False])
@pytest.mark.parametrize("name", sorted(_EVERY_LAYER))
def test_every_layer_the_plan_holds_runs_it_bitwise(name, train_mode, dtype):
    factory, shape = _EVERY_LAYER[name]

    def make():
        net = nn.HybridSequential()
        net.add(factory(), nn.Activation("tanh"))
        return net
    x = _data(shape).astype(dtype)
    _, eager = _train(make, x, False, train_mode=train_mode, with_input_grad=True, dtype=dtype)
    net, hybrid = _train(make, x, True, train_mode=train_mode, with_input_grad=True, dtype=dtype)
    assert net._plan is not None, name
    _assert_bitwise(eager, hybrid)
    assert eager[0].dtype == dtype and eager[1].dtype == dtype     # output, input gradient


@pytest.mark.parametrize("passing_on", [nn.Identity, lambda: nn.Dropout(0.0)])
def test_a_layer_that_hands_its_input_on_passes_the_gradient_to_the_layers_before(passing_on):
    def make():
        net = nn.HybridSequential()
        net.add(nn.Dense(4, in_units=3), passing_on(), nn.Dense(2, in_units=4))
        return net
    x = _data((5, 3))
    _, eager = _train(make, x, False, with_input_grad=True)
    net, hybrid = _train(make, x, True, with_input_grad=True)
    assert net._plan is not None
    _assert_bitwise(eager, hybrid)
