"""Dense's bias and ReLU, its ReLU mask with the bias's gradient, and SoftmaxCrossEntropyLoss on
the GPU, in one CUDA launch each (``ndarray/_fc_cuda.py``, ``ndarray/_loss_cuda.py``): an MLP's
training step on gpu(0) takes them, gives the CPU's numbers to float rounding, and its
hybridized step gives the bits of the eager one. The kernels' sources are also compiled on the
host (test_cuda_on_host.py)."""
from __future__ import annotations

import numpy
import pytest

import trainer_cli
from trainer_cli import autograd, cpu, gluon, gpu, nd

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(trainer_cli.num_gpus() == 0, reason="no GPU visible to CuPy")]


def _train(ctx, hybridize, steps=5, labels_dtype=numpy.float32):
    rng = numpy.random.RandomState(0)
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(32, activation="relu", in_units=20),
            gluon.nn.Dense(16, activation="relu", in_units=32), gluon.nn.Dense(10, in_units=16))
    net.initialize(trainer_cli.initializer.Xavier(), ctx=ctx)
    for p, value in zip(net.collect_params().values(), _weights()):
        p.set_data(nd.array(value, ctx=ctx))
    if hybridize:
        net.hybridize()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    losses = []
    for _ in range(steps):
        X = nd.array(rng.standard_normal((24, 20)).astype(numpy.float32), ctx=ctx)
        y = nd.array(rng.randint(0, 10, 24).astype(labels_dtype), ctx=ctx)
        with autograd.record():
            loss = loss_fn(net(X), y)
        loss.backward()
        trainer.step(24)
        losses.append(loss.asnumpy())
    return losses, [p.data().asnumpy() for p in net.collect_params().values()]


def _weights():
    rng = numpy.random.RandomState(1)
    shapes = [(32, 20), (32,), (16, 32), (16,), (10, 16), (10,)]
    return [(rng.standard_normal(s) * 0.3).astype(numpy.float32) for s in shapes]


@pytest.mark.parametrize("labels_dtype", [numpy.float32, numpy.int64])
def test_mlp_step_on_the_gpu_takes_the_fused_kernels_and_matches_the_cpu(labels_dtype):
    from trainer_cli.ndarray import _fc_cuda, _loss_cuda
    want_losses, want = _train(cpu(0), False, labels_dtype=labels_dtype)
    got_losses, got = _train(gpu(0), False, labels_dtype=labels_dtype)
    assert any(k[0] == "forward" for k in _loss_cuda._kernels)
    assert any(k[0] == "backward" for k in _loss_cuda._kernels)
    assert "bias_relu" in _fc_cuda._kernels and ("bias_grad", "f") in _fc_cuda._kernels
    for a, b in zip(got_losses, want_losses):
        numpy.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)
    for a, b in zip(got, want):
        numpy.testing.assert_allclose(a, b, rtol=2e-5, atol=1e-6)


def test_hybridized_mlp_step_on_the_gpu_gives_the_eager_bits():
    eager_losses, eager = _train(gpu(0), False)
    plan_losses, plan = _train(gpu(0), True)
    for a, b in zip(eager_losses + eager, plan_losses + plan):
        assert a.tobytes() == b.tobytes()


def test_softmax_ce_on_the_gpu_clips_labels_and_keeps_nan():
    scores = numpy.array([[1.0, 2.0, 3.0], [0.5, numpy.nan, 0.0], [2.0, 2.0, 2.0]], numpy.float32)
    labels = numpy.array([7.0, 0.0, numpy.nan], numpy.float32)
    results = []
    for ctx in (cpu(0), gpu(0)):
        x = nd.array(scores, ctx=ctx)
        x.attach_grad()
        with autograd.record():
            loss = gluon.loss.SoftmaxCrossEntropyLoss()(x, nd.array(labels, ctx=ctx))
        loss.backward()
        results.append((loss.asnumpy(), x.grad.asnumpy()))
    (want_loss, want_grad), (loss, grad) = results
    assert numpy.array_equal(numpy.isnan(loss), numpy.isnan(want_loss))
    assert numpy.array_equal(numpy.isnan(grad), numpy.isnan(want_grad))
    numpy.testing.assert_allclose(loss, want_loss, rtol=2e-6)
    numpy.testing.assert_allclose(grad, want_grad, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("relu", [True, False])
@pytest.mark.parametrize("dtype", [numpy.float32, numpy.float64])
def test_dense_mask_and_bias_gradient_kernel_on_the_gpu(relu, dtype):
    """One launch: the mask ``g * (out > 0)`` bit for bit as CuPy computes it, each unit's batch
    added in order from +0.0 (NumPy's ``add.accumulate`` down the batch, on the host), into the
    bias's gradient buffer when one is given."""
    import cupy
    from trainer_cli.ndarray import _fc_cuda
    rng = numpy.random.default_rng(4)
    g = cupy.asarray(rng.standard_normal((37, 11)).astype(dtype))
    out = cupy.asarray(rng.standard_normal((37, 11)).astype(dtype))
    buf = cupy.zeros(11, dtype)
    masked, sums = _fc_cuda.relu_bias_grad(g, out, relu, True, buf)
    assert sums is buf
    want = g * (out > 0) if relu else g
    assert masked.get().tobytes() == want.get().tobytes()
    host = numpy.concatenate([numpy.zeros((1, 11), dtype), want.get()])
    assert buf.get().tobytes() == numpy.add.accumulate(host, axis=0)[-1].tobytes()
    assert _fc_cuda.relu_bias_grad(g, out, relu, False) is None      # no bias: not this kernel


def test_embedding_ids_and_run_starts_kernels_on_the_gpu():
    """The ids cast and clipped in one launch as ``astype(int64)``, ``maximum``, ``minimum`` make
    them on the GPU (NaN and huge values included), and the run starts of sorted ids."""
    import cupy
    from trainer_cli.ndarray import _rows_cuda
    ids = cupy.asarray(numpy.array([0, 2.7, -3, 9, 12, numpy.nan, 1e30, -1e30, 5], numpy.float32))
    want = ids.astype(numpy.int64)
    cupy.maximum(want, 0, out=want)
    cupy.minimum(want, 9, out=want)
    assert _rows_cuda.table_rows(ids, 10).get().tolist() == want.get().tolist()
    keys = cupy.asarray(numpy.array([4, 1, 4, 4, 0, 9, 1], numpy.int64))
    order, ordered, starts = _rows_cuda._groups(keys)
    assert ordered.get().tolist() == [0, 1, 1, 4, 4, 4, 9]
    assert starts.get().tolist() == [0, 1, 3, 6]
    assert order.get().tolist() == [4, 1, 6, 0, 2, 3, 5]          # stable
