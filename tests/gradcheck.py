"""Finite-difference gradient checks for anything built on ``nd`` and ``autograd``.

``check_grad(fn, *arrays)`` runs ``fn`` on float64 copies of ``arrays`` inside ``autograd.record()``,
back-propagates a fixed random head gradient through every output, and compares each input's
gradient with central finite differences of the same projected scalar. Layers and losses reuse it::

    from gradcheck import check_grad
    check_grad(lambda x, w: nd.dot(x, w), x_np, w_np)
    check_grad(lambda x: net(x), x_np, params=net.collect_params().values())
"""
from __future__ import annotations

import numpy as np

import trainer_cli
from trainer_cli import autograd, nd
from trainer_cli.ndarray import NDArray

__all__ = ["check_grad", "numeric_grad", "to_nd"]


def to_nd(value, ctx=None, dtype=np.float64):
    """A float64 NDArray on ``ctx`` from a numpy array, list or NDArray."""
    ctx = ctx or trainer_cli.cpu()
    if isinstance(value, NDArray):
        return value.astype(dtype).as_in_context(ctx)
    return nd.array(np.asarray(value), ctx=ctx, dtype=dtype)


def _outputs(result):
    outs = [result] if isinstance(result, NDArray) else list(result)
    return [o for o in outs if np.issubdtype(np.dtype(o.dtype), np.floating)]


def _projected(fn, args, heads, train_mode):
    """sum_i <out_i, head_i> in float64, evaluated without recording."""
    with autograd.pause(train_mode=train_mode):
        outs = _outputs(fn(*args))
    return sum(float((o.asnumpy().astype(np.float64) * h).sum()) for o, h in zip(outs, heads))


def numeric_grad(fn, args, variables, heads, eps=1e-6, train_mode=True):
    """Central differences of the projected output with respect to each of ``variables`` (NDArrays)."""
    grads = []
    for var in variables:
        data = var._data
        grad = np.zeros(data.shape, dtype=np.float64)
        for idx in np.ndindex(*data.shape):
            orig = data[idx].item()
            data[idx] = orig + eps
            up = _projected(fn, args, heads, train_mode)
            data[idx] = orig - eps
            down = _projected(fn, args, heads, train_mode)
            data[idx] = orig
            grad[idx] = (up - down) / (2 * eps)
        grads.append(grad)
    return grads


def check_grad(fn, *arrays, ctx=None, wrt=None, params=(), rtol=1e-6, atol=1e-7, eps=1e-6,
               train_mode=True, seed=0):
    """Assert that autograd's gradients of ``fn(*arrays)`` match finite differences.

    ``arrays``: numpy arrays / lists / NDArrays, converted to float64 NDArrays on ``ctx``; other
    values (ints, tuples, None) are passed through unchanged. ``wrt``: indices of the converted
    arrays to differentiate (default: all of them); the rest are passed as constants, e.g. integer
    indices. ``params``: extra leaf NDArrays or gluon Parameters (their data on ``ctx``) that ``fn``
    closes over, differentiated as well. ``train_mode`` is the mode both passes run in. Returns
    the analytic gradients as numpy arrays, inputs first, then params.
    """
    ctx = ctx or trainer_cli.cpu()
    args, converted = [], []
    for i, a in enumerate(arrays):
        if isinstance(a, (np.ndarray, list, NDArray)):
            args.append(to_nd(a, ctx))
            converted.append(i)
        else:
            args.append(a)
    wrt = converted if wrt is None else list(wrt)
    variables = [args[i] for i in wrt]
    for v in variables:
        v.attach_grad()
    for p in params:
        if isinstance(p, NDArray):
            p.attach_grad()
            variables.append(p)
            continue
        # A gluon Parameter keeps its own gradient buffer: write into it, from zero.
        p.zero_grad()
        variables.append(p.data(ctx))

    with autograd.record(train_mode=train_mode):
        outs = _outputs(fn(*args))
    assert outs, "fn returned no floating-point output"
    rng = np.random.RandomState(seed)
    heads = [rng.uniform(-1.0, 1.0, size=o.shape) for o in outs]
    autograd.backward(outs, head_grads=[nd.array(h, ctx=ctx, dtype=o.dtype) for h, o in zip(heads, outs)])
    analytic = [v.grad.asnumpy().astype(np.float64) for v in variables]

    numeric = numeric_grad(fn, args, variables, heads, eps=eps, train_mode=train_mode)
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        assert a.shape == n.shape, "gradient %d has shape %s, expected %s" % (k, a.shape, n.shape)
        scale = max(1.0, float(np.abs(n).max(initial=0.0)))
        np.testing.assert_allclose(a, n, rtol=rtol, atol=atol * scale,
                                   err_msg="gradient of input %d does not match finite differences" % k)
    return analytic
