"""``nd.random``'s own draws: arrays drawn from the seedable per-device generators of
``trainer_cli.random``. ``nd.random`` (random.py) offers them beside ``sampling``'s, which build
on them: two modules that import this one, not each other."""
from __future__ import annotations

import numpy

from .. import random as _random
from ..context import Context, current_context
from .ndarray import NDArray, _wrap, _xp_of

__all__ = ["uniform", "normal", "randn", "randint", "shuffle", "exponential", "poisson", "gamma",
           "multinomial", "bernoulli"]


def _shape(shape):
    """A ``shape`` argument (None, an int or a sequence) as a tuple."""
    if shape is None:
        return ()
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _setup(shape, ctx, dtype):
    ctx = current_context() if ctx is None else Context(ctx)
    return ctx, _shape(shape) or (1,), numpy.dtype(numpy.float32 if dtype is None else dtype)


def _finish(data, ctx, out):
    if out is not None:
        out._data[...] = data
        return out
    return _wrap(data, ctx)


def _only_name(fn, kwargs):
    """MXNet's operators take ``name`` (meaningless outside a Symbol) and refuse any other
    argument they do not know; so do these."""
    unknown = sorted(set(kwargs) - {"name"})
    if unknown:
        raise TypeError("%s() got an unexpected keyword argument %r" % (fn, unknown[0]))


def _unit(gen, size):
    """Uniform draws in [0, 1) from a NumPy Generator or a CuPy RandomState."""
    return gen.random(size) if hasattr(gen, "random") else gen.random_sample(size)


def _per_element(fn, params, shape, dtype, out):
    """MXNet's ``_sample_*`` operators: distribution parameters given as NDArrays (all of one
    shape) draw one sample per element, ``shape`` more per element; the result has the
    parameters' shape followed by ``shape``, their dtype and their device. ``fn(arrays, size,
    gen, xp)`` draws from the parameters' values broadcast against ``size``."""
    if not all(isinstance(p, NDArray) for p in params):
        raise TypeError("Distribution parameters must all have the same type: NDArrays or "
                        "numbers, got %s" % ", ".join(type(p).__name__ for p in params))
    first = params[0]
    if any(tuple(p.shape) != tuple(first.shape) for p in params):
        raise ValueError("distribution parameters of different shapes: %s"
                         % [tuple(p.shape) for p in params])
    extra = _shape(shape)
    size = tuple(first.shape) + extra
    ctx = first.context
    dtype = numpy.dtype(first.dtype if dtype is None else dtype)
    with ctx.device_scope():
        values = [p._data.astype(numpy.float64).reshape(tuple(p.shape) + (1,) * len(extra))
                  for p in params]
        data = fn(values, size, _random.generator(ctx), _xp_of(first._data)).astype(dtype)
    return _finish(data, ctx, out)


def uniform(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    _only_name("uniform", kwargs)
    if isinstance(low, NDArray) or isinstance(high, NDArray):
        return _per_element(lambda v, size, gen, xp: v[0] + (v[1] - v[0]) * _unit(gen, size),
                            [low, high], shape, dtype, out)
    ctx, shape, dtype = _setup(shape if out is None else out.shape, ctx, dtype)
    gen = _random.generator(ctx)
    with ctx.device_scope():
        if ctx.is_gpu:
            u = gen.random_sample(shape, dtype=dtype if dtype in (numpy.float32, numpy.float64) else numpy.float64)
        else:
            u = gen.random(shape, dtype=dtype if dtype in (numpy.float32, numpy.float64) else numpy.float64)
        data = (low + (high - low) * u).astype(dtype, copy=False)
    return _finish(data, ctx, out)


def normal(loc=0, scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    _only_name("normal", kwargs)
    if isinstance(loc, NDArray) or isinstance(scale, NDArray):
        return _per_element(lambda v, size, gen, xp: v[0] + v[1] * gen.standard_normal(size),
                            [loc, scale], shape, dtype, out)
    ctx, shape, dtype = _setup(shape if out is None else out.shape, ctx, dtype)
    gen = _random.generator(ctx)
    with ctx.device_scope():
        draw = gen.standard_normal(shape, dtype=dtype if dtype in (numpy.float32, numpy.float64) else numpy.float64)
        data = (loc + scale * draw).astype(dtype, copy=False)
    return _finish(data, ctx, out)


def randn(*shape, loc=0, scale=1, dtype=None, ctx=None):
    return normal(loc, scale, shape, dtype, ctx)


def randint(low, high, shape=None, dtype="int32", ctx=None, out=None):
    ctx, shape, dtype = _setup(shape if out is None else out.shape, ctx, dtype)
    gen = _random.generator(ctx)
    with ctx.device_scope():
        if ctx.is_gpu:
            data = gen.randint(low, high, size=shape).astype(dtype)
        else:
            data = gen.integers(low, high, size=shape, dtype=dtype)
    return _finish(data, ctx, out)


def exponential(scale=1, shape=None, dtype=None, ctx=None, out=None):
    if isinstance(scale, NDArray):
        return _per_element(lambda v, size, gen, xp: gen.exponential(1.0, size) * v[0],
                            [scale], shape, dtype, out)
    ctx, shape, dtype = _setup(shape if out is None else out.shape, ctx, dtype)
    with ctx.device_scope():
        data = _random.generator(ctx).exponential(scale, size=shape).astype(dtype)
    return _finish(data, ctx, out)


def poisson(lam=1, shape=None, dtype=None, ctx=None, out=None):
    if isinstance(lam, NDArray):
        return _per_element(lambda v, size, gen, xp: gen.poisson(xp.broadcast_to(v[0], size)),
                            [lam], shape, dtype, out)
    ctx, shape, dtype = _setup(shape if out is None else out.shape, ctx, dtype)
    with ctx.device_scope():
        data = _random.generator(ctx).poisson(lam, size=shape).astype(dtype)
    return _finish(data, ctx, out)


def gamma(alpha=1, beta=1, shape=None, dtype=None, ctx=None, out=None):
    if isinstance(alpha, NDArray) or isinstance(beta, NDArray):
        return _per_element(
            lambda v, size, gen, xp: gen.gamma(xp.broadcast_to(v[0], size)) * v[1],
            [alpha, beta], shape, dtype, out)
    ctx, shape, dtype = _setup(shape if out is None else out.shape, ctx, dtype)
    with ctx.device_scope():
        data = _random.generator(ctx).gamma(alpha, beta, size=shape).astype(dtype)
    return _finish(data, ctx, out)


def bernoulli(prob=0.5, shape=None, dtype=None, ctx=None, out=None):
    if out is not None:     # the draws land in ``out`` (not the uniform values behind them)
        shape, dtype, ctx = out.shape, out.dtype, out.context
    drawn = uniform(0, 1, shape, dtype, ctx) < prob
    return drawn if out is None else _finish(drawn._data, ctx, out)


def multinomial(data, shape=None, get_prob=False, dtype="int32"):
    """Draw category indices from the probability rows of ``data`` (CPU generator).

    ``get_prob=True`` returns ``[samples, log_likelihoods]`` as MXNet does: the second array,
    of ``samples``' shape and ``data``'s dtype, holds ``log(data[..., sample])`` (the data as
    given, not renormalized), recorded under ``autograd.record()`` so that a reward passed as
    its head gradient reaches ``data`` (``reward / data`` at each drawn category)."""
    probs = data.asnumpy()
    flat = probs.reshape(-1, probs.shape[-1])
    n = 1 if shape is None else int(numpy.prod(shape))
    gen = _random.generator(None)
    draws = numpy.stack([gen.choice(flat.shape[1], size=n, p=row / row.sum()) for row in flat])
    out_shape = probs.shape[:-1] + (() if shape is None else ((shape,) if isinstance(shape, int) else tuple(shape)))
    from .creation import array
    samples = array(draws.reshape(out_shape or (1,)), ctx=data.context, dtype=dtype)
    if not get_prob:
        return samples
    from . import ops
    rows, k = flat.shape
    spread = ops.broadcast_to(data.reshape((rows, 1, k)), (rows, n, k))
    picked = ops.pick(spread, array(draws, ctx=data.context, dtype="int64"), axis=-1)
    return [samples, ops.log(picked).reshape(samples.shape)]


def shuffle(data, **kwargs):
    """A copy of ``data`` with its first axis randomly permuted."""
    ctx = data.context
    perm = _random.generator(None).permutation(data.shape[0])
    return data[perm.tolist()] if ctx.is_gpu else _wrap(data._data[perm], ctx)
