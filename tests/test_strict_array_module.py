"""The array-module-generic code paths run on a stand-in for CuPy that refuses hidden host
transfers (``standin_xp``), and give the bits they give on NumPy (the values, to float32's last
bits, where the CPU's arithmetic is its own: ``_CPU_OWN_ARITHMETIC``).

No GPU is lent to this project in practice, so nothing else would notice a rule that quietly
pulls a device array to the host (``numpy.asarray``, ``float(x)``, a host array mixed into
device arithmetic): on CuPy that is a synchronising copy per step, or a TypeError.
"""
import numpy
import pytest

from standin_xp import (HostTransfer, NotCupyOperand, StrictArray, module, standin_array_module,
                        to_device)
from trainer_cli import nd
from trainer_cli.kvstore import compression
from trainer_cli.optimizer import create, kernels
from trainer_cli.optimizer.optimizer import Optimizer, PreparedStep, raw_state

# Every optimizer but SGLD, whose noise comes from the device's own random generator (which the
# stand-in has none of); its arithmetic is scaled_grad's, which every other rule runs too.
CONFIGS = {
    "sgd": dict(momentum=0.9, wd=1e-3, clip_gradient=0.5), "sgd_nomom": dict(wd=1e-3),
    "nag": dict(momentum=0.9, wd=1e-3), "signum": dict(momentum=0.9, wd_lh=1e-3, wd=1e-3),
    "signum_nomom": dict(momentum=0.0, wd=1e-3), "dcasgd": dict(momentum=0.9, wd=1e-3),
    "lars": dict(momentum=0.9, wd=1e-3),
    "lbsgd": dict(momentum=0.9, batch_scale=2, updates_per_epoch=2, warmup_epochs=2),
    "adam": dict(wd=1e-3, clip_gradient=0.5), "adamw": dict(wd=1e-2),
    "adagrad": dict(wd=1e-3), "groupadagrad": dict(), "rmsprop": dict(clip_weights=0.8),
    "rmsprop_centered": dict(centered=True), "adadelta": dict(wd=1e-3), "ftrl": dict(wd=1e-3),
    "adamax": dict(wd=1e-3), "nadam": dict(wd=1e-3), "ftml": dict(wd=1e-3),
    "lamb": dict(wd=1e-3, lower_bound=0.1, upper_bound=10.0), "test": dict(),
}
SHAPES = [(3, 4), (5, 2)]


# Host arithmetic of the CPU's own, which a device array leaves to its library: float32 sigmoid,
# tanh, ELU/SELU, softmax and log-softmax take Cephes' exp (``ndarray/_expf``), and BatchNorm's
# channel sums add the batch first (``_bn_kernels.np_channel_sums``), where the device takes its
# library's exp and reduction. These agree to float32's last bits, not bitwise.
_CPU_OWN_ARITHMETIC = {"softmax", "log_softmax", "sigmoid_tanh_softrelu", "elu",
                       "SoftmaxCrossEntropyLoss", "SigmoidBinaryCrossEntropyLoss", "LogisticLoss",
                       "batch_norm", "batch_norm_fixed_gamma"}


def _same_result(host, device, case):
    assert host.dtype == device.dtype and host.shape == device.shape
    if case in _CPU_OWN_ARITHMETIC:
        # Sums of terms of order 1 that cancel (BatchNorm's gradients of a head of ones) keep
        # their rounding as an absolute error.
        atol = 1e-5 if case.startswith("batch_norm") else 1e-7
        numpy.testing.assert_allclose(device, host, rtol=2e-6, atol=atol, err_msg=case)
    else:
        assert host.tobytes() == device.tobytes(), case


def test_every_optimizer_but_sgld_is_covered():
    names = {case.split("_")[0] for case in CONFIGS} | {"ccsgd", "sgld"}
    assert names == set(Optimizer.opt_registry)


def _updates(case, device, steps=4, dtype=numpy.float32):
    """``steps`` updates of two tensors by the optimizer ``case`` on raw arrays: NumPy's, or the
    stand-in's (``device``), through the same phases as the Updater's."""
    rng = numpy.random.default_rng(0)
    weights = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = [[(2 * rng.standard_normal(s)).astype(dtype) for s in SHAPES]
             for _ in range(steps)]
    name = case.split("_")[0]
    opt = create(name, rescale_grad=0.5, **CONFIGS[case])
    states = [raw_state(opt.create_state_multi_precision(i, nd.array(w)))
              for i, w in enumerate(weights)]
    move = to_device if device else numpy.copy
    ws = [move(w) for w in weights]
    states = [_map_state(move, s) for s in states]
    for step_grads in grads:
        gs = [move(g) for g in step_grads]
        if opt.plans_ahead:
            plans = opt._plan([0, 1], ws, gs)
            opt._steps(PreparedStep(ws, gs, states), plans)
        else:
            opt.update([0, 1], ws, gs, states)
    return [w.get() if device else w for w in ws]


def _map_state(move, state):
    if state is None:
        return None
    if isinstance(state, tuple):
        return tuple(_map_state(move, s) for s in state)
    return move(state)


@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
@pytest.mark.parametrize("case", list(CONFIGS))
def test_optimizer_rules_make_no_hidden_host_transfer(monkeypatch, case, dtype):
    """Also for float64 weights, whose rules take their parameters through float32 (MXNet's),
    in scalars CuPy must accept."""
    standin_array_module(monkeypatch)
    expected = _updates(case, device=False, dtype=dtype)
    got = _updates(case, device=True, dtype=dtype)
    for a, b in zip(expected, got):
        assert a.dtype == b.dtype == dtype
        assert a.tobytes() == b.tobytes()


def test_fused_rules_on_the_stand_in_take_their_numpy_body(monkeypatch):
    standin_array_module(monkeypatch)
    w = to_device(numpy.ones(1 << 15, numpy.float32))
    assert not kernels.cuda_handles(w, w)
    assert not kernels.Kernel.fits(w, w)


@pytest.mark.parametrize("kind", ["2bit", "1bit"])
def test_compression_makes_no_hidden_host_transfer(monkeypatch, kind):
    """Quantize with residual, then dequantize, on both array modules."""
    standin_array_module(monkeypatch)
    rng = numpy.random.default_rng(1)
    grad = (rng.standard_normal(1000) * 0.6).astype(numpy.float32)
    grad[:6] = [0.0, -0.0, 0.5, -0.5, numpy.inf, -numpy.inf]
    residual = (rng.standard_normal(1000) * 0.1).astype(numpy.float32)
    comp = compression.GradientCompression({"type": kind, "threshold": 0.5})
    results = []
    for move in (numpy.copy, to_device):
        r = move(residual)
        packed = comp.quantize(move(grad), r)
        out = comp.dequantize(packed, grad.size)
        results.append([x.get() if isinstance(x, StrictArray) else x for x in (packed, r, out)])
    for a, b in zip(*results):
        assert a.dtype == b.dtype
        numpy.testing.assert_array_equal(a.view(numpy.uint8), b.view(numpy.uint8))


def test_the_stand_in_refuses_what_cupy_refuses():
    x = to_device(numpy.arange(4, dtype=numpy.float32))
    for hidden in (numpy.asarray, float, bool, lambda a: a.tolist(), list,
                   lambda a: a + numpy.ones(4, numpy.float32), lambda a: float(a.sum())):
        with pytest.raises(HostTransfer):
            hidden(x if hidden is not float else x[0])
    class Derived(numpy.float64):
        pass
    with pytest.raises(NotCupyOperand):
        x * Derived(2.0)
    assert (x * 2).sum().item() == 12.0 and module.asnumpy(x).tolist() == [0, 1, 2, 3]
    assert type(module.zeros(3)) is StrictArray and type(x.sum()) is StrictArray


# Losses: forward and backward through autograd on stand-in arrays, bitwise as on NumPy. (CTCLoss
# copies the scores to the host on purpose for its dynamic program, and SDMLLoss builds its
# targets on the context's device: neither is generic array code.)
_TWO_ARRAY_LOSSES = ["SoftmaxCrossEntropyLoss", "L2Loss", "L1Loss", "SigmoidBinaryCrossEntropyLoss",
                     "HuberLoss", "HingeLoss", "SquaredHingeLoss", "LogisticLoss", "KLDivLoss",
                     "PoissonNLLLoss"]
_THREE_ARRAY_LOSSES = ["TripletLoss", "CosineEmbeddingLoss"]


def _loss_run(name, inputs, device):
    from trainer_cli import gluon
    return _autograd_run(getattr(gluon.loss, name)(), inputs[:1], inputs[1:], device)


@pytest.mark.parametrize("name", _TWO_ARRAY_LOSSES + _THREE_ARRAY_LOSSES)
def test_losses_make_no_hidden_host_transfer(monkeypatch, name):
    standin_array_module(monkeypatch)
    rng = numpy.random.default_rng(7)
    pred = rng.standard_normal((4, 5)).astype(numpy.float32)
    if name == "SoftmaxCrossEntropyLoss":
        inputs = [pred, rng.integers(0, 5, 4).astype(numpy.float32)]
    elif name == "CosineEmbeddingLoss":
        inputs = [pred, rng.standard_normal((4, 5)).astype(numpy.float32),
                  numpy.array([1, -1, 1, -1], dtype=numpy.float32)]
    elif name in _THREE_ARRAY_LOSSES:
        inputs = [pred] + [rng.standard_normal((4, 5)).astype(numpy.float32) for _ in range(2)]
    else:
        inputs = [pred, numpy.abs(rng.standard_normal((4, 5))).astype(numpy.float32)]
    expected = _loss_run(name, inputs, device=False)
    got = _loss_run(name, inputs, device=True)
    for a, b in zip(expected, got):
        _same_result(a, b, name)


# Convolution, pooling and normalization layers: forward and backward on stand-in arrays, bitwise
# as on NumPy. Each case: the op on NDArrays, the arrays that get gradients, and constant arrays
# on the same device (BatchNorm's moving statistics, whose update is compared too).
def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(numpy.float32)


def _layer_cases():
    from trainer_cli import nd
    from trainer_cli.ndarray import nn as ndnn
    rng = numpy.random.default_rng(3)
    x = _f32(rng, 2, 3, 6, 6)
    # 576 column rows (per group): the output gradient in the transposed layout.
    wide, wide_groups = _f32(rng, 2, 64, 5, 4), _f32(rng, 2, 128, 4, 4)
    assert 64 * 9 >= ndnn.TRANSPOSED_GRAD_ROWS
    stats = [numpy.zeros(3, numpy.float32), numpy.ones(3, numpy.float32)]
    return {
        "conv": (lambda a, w, b: nd.Convolution(a, w, b, kernel=(3, 3), num_filter=4, pad=(1, 1)),
                 [x, _f32(rng, 4, 3, 3, 3), _f32(rng, 4)], []),
        "conv_relu_wide_groups": (
            lambda a, w, b: ndnn._convolution(a, w, b, (3, 3), (1, 2), None, (1, 1), 6, 2, None,
                                              True),
            [wide_groups, _f32(rng, 6, 64, 3, 3), _f32(rng, 6)], []),
        "conv_wide": (lambda a, w, b: nd.Convolution(a, w, b, kernel=(3, 3), num_filter=5,
                                                     pad=(1, 1)),
                      [wide, _f32(rng, 5, 64, 3, 3), _f32(rng, 5)], []),
        "conv_stride_dilate": (lambda a, w: nd.Convolution(a, w, kernel=(3, 3), num_filter=4,
                                                           stride=(2, 1), dilate=(2, 1),
                                                           pad=(1, 2), no_bias=True),
                               [x, _f32(rng, 4, 3, 3, 3)], []),
        "conv1d": (lambda a, w: nd.Convolution(a, w, kernel=(3,), num_filter=4, no_bias=True),
                   [x[:, :, 0], _f32(rng, 4, 3, 3)], []),
        "deconv": (lambda a, w: nd.Deconvolution(a, w, kernel=(3, 3), num_filter=4, stride=(2, 2),
                                                 no_bias=True), [x, _f32(rng, 3, 4, 3, 3)], []),
        "max_pool": (lambda a: nd.Pooling(a, kernel=(2, 2), stride=(2, 2), pool_type="max"),
                     [x], []),
        "max_pool_padded": (lambda a: nd.Pooling(a, kernel=(3, 3), stride=(2, 2), pad=(1, 1),
                                                 pool_type="max"), [x], []),
        "avg_pool": (lambda a: nd.Pooling(a, kernel=(3, 3), stride=(1, 1), pad=(1, 1),
                                          pool_type="avg"), [x], []),
        "global_max_pool": (lambda a: nd.Pooling(a, global_pool=True, pool_type="max",
                                                 kernel=(1, 1)), [x], []),
        "batch_norm": (lambda a, g, b, m, v: nd.BatchNorm(a, g, b, m, v, fix_gamma=False),
                       [x, _f32(rng, 3), _f32(rng, 3)], stats),
        "batch_norm_fixed_gamma": (lambda a, g, b, m, v: nd.BatchNorm(a, g, b, m, v),
                                   [x, _f32(rng, 3), _f32(rng, 3)], stats),
        "layer_norm": (lambda a, g, b: nd.LayerNorm(a, g, b, axis=-1),
                       [x, _f32(rng, 6), _f32(rng, 6)], []),
        "prelu": (lambda a, g: nd.LeakyReLU(a, g, act_type="prelu"), [x, _f32(rng, 3)], []),
        "elu": (lambda a: nd.LeakyReLU(a, act_type="elu", slope=0.3), [x], []),
    }


def _autograd_run(fn, with_grads, constants, device):
    """``fn``'s output, the gradients of ``with_grads`` and the arrays ``constants`` after one
    forward and backward, on the stand-in (``device``) or on NumPy."""
    from trainer_cli import autograd, cpu
    from trainer_cli.ndarray.interop import grad_buffer, raw, wrap

    move = to_device if device else numpy.copy
    arrays = [wrap(move(a), cpu()) for a in with_grads]
    fixed = [wrap(move(a), cpu()) for a in constants]
    for a in arrays:
        a.attach_grad()
    with autograd.record():
        out = fn(*arrays, *fixed)
    out.backward()
    got = [raw(out)] + [raw(grad_buffer(a)) for a in arrays] + [raw(a) for a in fixed]
    return [g.get() if device else g for g in got]


@pytest.mark.parametrize("case", list(_layer_cases()))
def test_layers_make_no_hidden_host_transfer(monkeypatch, case):
    standin_array_module(monkeypatch)
    from trainer_cli.ndarray import nn as ndnn
    # The wide cases' few positions take the transposed gradient layout too.
    monkeypatch.setattr(ndnn, "TRANSPOSED_GRAD_POSITIONS", 1)
    fn, with_grads, constants = _layer_cases()[case]
    runs = [_autograd_run(fn, with_grads, constants, device) for device in (False, True)]
    for a, b in zip(*runs):
        _same_result(a, b, case)


def _op_cases():
    from trainer_cli import nd
    rng = numpy.random.default_rng(4)
    a, b = (rng.random((3, 4)) + 0.5).astype(numpy.float32), (rng.random((3, 4)) + 0.5).astype(
        numpy.float32)
    return {
        "fully_connected_relu": (lambda x, w, c: nd.Activation(
            nd.FullyConnected(x, w, c, num_hidden=5), act_type="relu"), [a, _f32(rng, 5, 4),
                                                                         _f32(rng, 5)]),
        "softmax": (lambda x: nd.softmax(x, axis=-1), [a]),
        "log_softmax": (lambda x: nd.log_softmax(x, axis=-1), [a]),
        "sigmoid_tanh_softrelu": (lambda x: nd.sigmoid(x) * nd.tanh(x) + nd.Activation(
            x, act_type="softrelu"), [a]),
        "dot": (lambda x, y: nd.dot(x, y.T), [a, b]),
        "batch_dot": (lambda x, y: nd.batch_dot(x.reshape((1, 3, 4)), y.reshape((1, 3, 4)),
                                                transpose_b=True), [a, b]),
        "pow_div": (lambda x, y: x ** y / y, [a, b]),
        "max_min": (lambda x: nd.max(x, axis=1) + nd.min(x, axis=1), [a]),
        "norm": (lambda x: nd.norm(x), [a]),
        "sum_mean": (lambda x: nd.sum(x, axis=1) * nd.mean(x, axis=1), [a]),
        "exp_log_sqrt": (lambda x: nd.log(nd.exp(x)) + nd.sqrt(x), [a]),
        "concat": (lambda x, y: nd.concat(x, y, dim=1), [a, b]),
        "stack": (lambda x, y: nd.stack(x, y, axis=1), [a, b]),
        "slice_transpose": (lambda x: nd.transpose(nd.slice_axis(x, axis=1, begin=1, end=3)),
                            [a]),
        "clip_where_maximum": (lambda x, y: nd.where(x > y, nd.clip(x, 0.7, 1.2),
                                                     nd.maximum(x, y)), [a, b]),
        "pick": (lambda x: nd.pick(x, x[:, 0] * 0 + 1, axis=1), [a]),
        "broadcast_abs_sign": (lambda x: nd.broadcast_to(x[0:1], shape=(3, 4)) * nd.abs(x - 1)
                               * nd.sign(x - 1), [a]),
        "reshape_expand_squeeze": (lambda x, y: nd.squeeze(nd.expand_dims(
            nd.reshape_like(x, y), axis=0), axis=0), [a, b]),
        "tile_repeat_flip": (lambda x: nd.flip(nd.repeat(nd.tile(x, reps=(1, 2)), repeats=2,
                                                         axis=0), axis=1), [a]),
        "sort_topk": (lambda x: nd.sort(x, axis=1, is_ascend=False) * nd.topk(
            x, k=4, ret_typ="value") + nd.topk(x, axis=0, k=2, ret_typ="mask") * x, [a]),
        "round_rint_mod": (lambda x: nd.round(x * 3) + nd.rint(x * 3) + x % 0.3 + 2.0 % x, [a]),
        "lp_pool": (lambda x: nd.Pooling(x.reshape((1, 3, 4)), kernel=(2,), pool_type="lp",
                                         p_value=3), [a]),
    }


@pytest.mark.parametrize("case", list(_op_cases()))
def test_ops_make_no_hidden_host_transfer(monkeypatch, case):
    standin_array_module(monkeypatch)
    fn, inputs = _op_cases()[case]
    runs = [_autograd_run(fn, inputs, [], device) for device in (False, True)]
    for a, b in zip(*runs):
        _same_result(a, b, case)



@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_bilinear_sampler_makes_no_hidden_host_transfer(monkeypatch, dtype):
    """The sampler's forward and both gradients on the stand-in: the NumPy bits, no transfer."""
    from trainer_cli.ndarray import spatial
    standin_array_module(monkeypatch)
    rng = numpy.random.default_rng(2)
    data = rng.standard_normal((2, 3, 4, 5)).astype(dtype)
    grid = (rng.uniform(-1.3, 1.3, (2, 2, 3, 6))).astype(dtype)
    head = rng.standard_normal((2, 3, 3, 6)).astype(dtype)
    want = [spatial._forward(data, grid, numpy), *spatial._backward(head, data, grid, True,
                                                                     True, numpy)]
    got = [spatial._forward(to_device(data), to_device(grid), module),
           *spatial._backward(to_device(head), to_device(data), to_device(grid), True, True,
                              module)]
    for a, b in zip(want, got):
        b = numpy.ascontiguousarray(b.get())
        assert b.dtype == dtype
        assert numpy.ascontiguousarray(a).tobytes() == b.tobytes()
