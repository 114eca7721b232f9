"""MXNet's other random entry points over ``nd.random``'s draws (``_draws``): the ``sample_*``
ops (one set of draws per element of array-valued parameters), the ``*_like`` forms, the
negative binomials, and the top-level ``nd.random_*`` / ``nd.uniform`` / ``nd.normal`` aliases.

As everywhere in ``nd.random``, the draws come from trainer_cli's generators, not MXNet's
streams (docs/compat.md): shapes, dtypes and distributions are MXNet's, the values are not.
"""
from __future__ import annotations

import numpy

from .. import random as _random
from . import _draws as _rnd
from .ndarray import _wrap

__all__ = [
    "negative_binomial", "generalized_negative_binomial", "uniform_like", "normal_like",
    "exponential_like", "gamma_like", "poisson_like", "negative_binomial_like",
    "generalized_negative_binomial_like", "sample_uniform", "sample_normal", "sample_exponential",
    "sample_gamma", "sample_poisson", "sample_negative_binomial",
    "sample_generalized_negative_binomial", "sample_multinomial",
]


def _draw(ctx, dtype, shape, fn, out):
    """``fn(generator, size)`` with the generator of ``ctx``, as ``dtype``, into ``out`` if given."""
    ctx, shape, dtype = _rnd._setup(shape if out is None else out.shape, ctx, dtype)
    gen = _random.generator(ctx)
    with ctx.device_scope():
        data = fn(gen, shape).astype(dtype)
    return _rnd._finish(data, ctx, out)


def negative_binomial(k=1, p=1, shape=None, dtype=None, ctx=None, out=None):
    """Failures before the ``k``-th success with success probability ``p``."""
    return _draw(ctx, dtype, shape, lambda g, s: g.negative_binomial(k, p, size=s), out)


def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, ctx=None, out=None):
    """Negative binomial with mean ``mu`` and dispersion ``alpha`` (Poisson at ``alpha`` 0)."""
    def fn(g, s):
        if alpha == 0:
            return g.poisson(mu, size=s)
        return g.poisson(g.gamma(1.0 / alpha, alpha * mu, size=s))
    return _draw(ctx, dtype, shape, fn, out)


def _like(fn):
    def like(data, *args, **kwargs):
        return fn(*args, shape=data.shape, dtype=data.dtype, ctx=data.context, **kwargs)
    like.__name__ = fn.__name__ + "_like"
    like.__doc__ = "``%s`` with the shape, dtype and context of ``data``." % fn.__name__
    return like


uniform_like = _like(_rnd.uniform)
normal_like = _like(_rnd.normal)
exponential_like = _like(_rnd.exponential)
gamma_like = _like(_rnd.gamma)
poisson_like = _like(_rnd.poisson)
negative_binomial_like = _like(negative_binomial)
generalized_negative_binomial_like = _like(generalized_negative_binomial)


def _sample(draw, *params, shape=None, dtype=None, out=None):
    """Per element of the parameter arrays, ``shape`` draws: output ``params[0].shape + shape``."""
    first = params[0]
    values = [numpy.asarray(p.asnumpy(), dtype=numpy.float64) for p in params]
    extra = _rnd._shape(shape)
    size = first.shape + extra
    expanded = [v.reshape(v.shape + (1,) * len(extra)) for v in values]
    gen = _random.generator(None)
    data = draw(gen, *expanded, size)
    dtype = numpy.dtype(first.dtype if dtype is None else dtype)
    result = _wrap(first._xp.asarray(data.astype(dtype)), first._ctx)
    if out is not None:
        out._data[...] = result._data
        return out
    return result


def sample_uniform(low, high, shape=None, dtype=None, out=None):
    return _sample(lambda g, lo, hi, s: g.uniform(lo, hi, s), low, high, shape=shape, dtype=dtype, out=out)


def sample_normal(mu, sigma, shape=None, dtype=None, out=None):
    return _sample(lambda g, m, sd, s: g.normal(m, sd, s), mu, sigma, shape=shape, dtype=dtype, out=out)


def sample_exponential(lam, shape=None, dtype=None, out=None):
    """Rate ``lam`` (MXNet's parameter is the rate, NumPy's the scale)."""
    return _sample(lambda g, rate, s: g.exponential(1.0 / rate, s), lam, shape=shape, dtype=dtype, out=out)


def sample_gamma(alpha, beta, shape=None, dtype=None, out=None):
    return _sample(lambda g, a, b, s: g.gamma(a, b, s), alpha, beta, shape=shape, dtype=dtype, out=out)


def sample_poisson(lam, shape=None, dtype=None, out=None):
    return _sample(lambda g, lam_, s: g.poisson(lam_, s), lam, shape=shape, dtype=dtype, out=out)


def sample_negative_binomial(k, p, shape=None, dtype=None, out=None):
    return _sample(lambda g, k_, p_, s: g.negative_binomial(k_, p_, s), k, p, shape=shape,
                   dtype=dtype, out=out)


def sample_generalized_negative_binomial(mu, alpha, shape=None, dtype=None, out=None):
    def draw(g, m, a, s):
        a = numpy.broadcast_to(a, s)
        rate = numpy.where(a == 0, numpy.broadcast_to(m, s),
                           g.gamma(1.0 / numpy.where(a == 0, 1.0, a), a * m, s))
        return g.poisson(rate)
    return _sample(draw, mu, alpha, shape=shape, dtype=dtype, out=out)


def sample_multinomial(data, shape=None, get_prob=False, dtype="int32"):
    return _rnd.multinomial(data, shape=shape, get_prob=get_prob, dtype=dtype)
