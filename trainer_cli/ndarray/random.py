"""``nd.random``: arrays drawn from the seedable per-device generators of ``trainer_cli.random``
(the draws in ``_draws``; the negative binomials and the ``*_like`` forms with the ``sample_*``
ops in ``sampling``)."""
from __future__ import annotations

# MXNet's nd.random module has these two names too (its own imports).
from ..context import current_context  # noqa: F401
from .ndarray import NDArray  # noqa: F401
from ._draws import (uniform, normal, randn, randint, shuffle, exponential, poisson, gamma,
                     multinomial, bernoulli)
from .sampling import (negative_binomial, generalized_negative_binomial, uniform_like,
                       normal_like, exponential_like, gamma_like, poisson_like,
                       negative_binomial_like, generalized_negative_binomial_like)

__all__ = ["uniform", "normal", "randn", "randint", "shuffle", "exponential", "poisson", "gamma",
           "multinomial", "bernoulli", "negative_binomial", "generalized_negative_binomial",
           "uniform_like", "normal_like", "exponential_like", "gamma_like", "poisson_like",
           "negative_binomial_like", "generalized_negative_binomial_like"]
