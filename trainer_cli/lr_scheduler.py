"""Learning-rate schedules of MXNet 1.9, as pure functions of the update count.

MXNet's schedulers are stateful: every call may decay ``base_lr`` in place, so a schedule can only
be read by stepping through it. Here each ``__call__(n)`` is a closed form of ``n`` that returns
what MXNet returns at ``n`` after being called with the counts leading up to ``n`` (the optimizer
calls it with ``num_update`` = 1, 2, 3, ...). Calling in any order is therefore safe, and
``trainer lr`` can preview a schedule without touching the one a run uses.

The attributes keep MXNet's names and can be read and set (``base_lr``, ``warmup_steps``,
``warmup_final_lr``, ``step``, ``factor``, ``max_update``, ``base_lr_orig``...). ``base_lr`` is the
undecayed base: an optimizer's ``learning_rate`` overwrites it, as in MXNet, while
``warmup_final_lr`` and Poly/Cosine's ``base_lr_orig`` keep the value given at construction.
"""
from __future__ import annotations

import math

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler", "create", "from_dict"]


class LRScheduler:
    """Base class: optional warmup from ``warmup_begin_lr`` to ``base_lr`` over ``warmup_steps``."""

    # Constructor arguments, in order; ``to_dict`` writes them and ``from_dict`` passes them back.
    _params = ("base_lr", "warmup_steps", "warmup_begin_lr", "warmup_mode")
    # Attributes an optimizer or a user may change after construction; saved as they are.
    _attrs = ("base_lr", "warmup_final_lr")

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int):
            raise ValueError("warmup_steps must be an int, got %r" % (warmup_steps,))
        if warmup_begin_lr > base_lr:
            raise ValueError("Base lr has to be higher than warmup_begin_lr")
        if warmup_steps < 0:
            raise ValueError("Warmup steps has to be positive or 0")
        if warmup_mode not in ("linear", "constant"):
            raise ValueError("Supports only linear and constant modes of warmup")
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update):
        assert num_update < self.warmup_steps
        if self.warmup_mode == "linear":
            increase = (self.warmup_final_lr - self.warmup_begin_lr) \
                * float(num_update) / float(self.warmup_steps)
            return self.warmup_begin_lr + increase
        return self.warmup_begin_lr

    def __call__(self, num_update):
        raise NotImplementedError("must override this")

    # ------------------------------------------------------------------ description
    def to_dict(self) -> dict:
        """``{"class", "params", "attrs"}``: enough for ``from_dict`` to rebuild this exact schedule."""
        params = {name: _jsonable(getattr(self, name)) for name in self._params}
        # The constructor's base_lr is the one warmup still ramps to (an override may have moved base_lr).
        params["base_lr"] = self.warmup_final_lr
        attrs = {name: _jsonable(getattr(self, name)) for name in self._attrs}
        return {"class": type(self).__name__, "params": params, "attrs": attrs}

    def __repr__(self):
        args = ", ".join("%s=%r" % (n, getattr(self, n)) for n in self._params)
        return "%s(%s)" % (type(self).__name__, args)


class FactorScheduler(LRScheduler):
    """``base_lr * factor**k`` where ``k = ceil(n/step) - 1`` decays have happened, floored at
    ``stop_factor_lr`` once decaying (MXNet decays while ``n > count + step``, from ``count = 0``,
    so warmup steps count towards the first decay)."""

    _params = ("step", "factor", "stop_factor_lr") + LRScheduler._params

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise ValueError("Factor must be no more than 1 to make lr reduce")
        if factor < 0:
            raise ValueError("Factor must be non-negative, got %r" % (factor,))
        self.step = step
        self.factor = factor
        self.stop_factor_lr = stop_factor_lr

    def num_decays(self, num_update):
        return max(0, math.ceil(num_update / self.step) - 1)

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        k = self.num_decays(num_update)
        if k == 0:
            return self.base_lr
        return max(self.base_lr * self.factor ** k, self.stop_factor_lr)


class MultiFactorScheduler(LRScheduler):
    """``base_lr * factor**(number of steps s with s < n)``: at ``n == s`` the old rate still holds."""

    _params = ("step", "factor") + LRScheduler._params

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, (list, tuple)) or len(step) < 1:
            raise ValueError("step must be a non-empty list of update counts, got %r" % (step,))
        for i, s in enumerate(step):
            if i != 0 and step[i] <= step[i - 1]:
                raise ValueError("Schedule step must be an increasing integer list")
            if s < 1:
                raise ValueError("Schedule step must be greater or equal than 1 round")
        if factor > 1.0:
            raise ValueError("Factor must be no more than 1 to make lr reduce")
        self.step = list(step)
        self.factor = factor

    def num_decays(self, num_update):
        return sum(1 for s in self.step if s < num_update)

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        return self.base_lr * self.factor ** self.num_decays(num_update)


class _DecayToFinal(LRScheduler):
    """Poly and Cosine: decay from ``base_lr_orig`` to ``final_lr`` between the end of warmup and
    ``max_update``, then hold the last value (MXNet stops updating ``base_lr`` past ``max_update``;
    the optimizer reaches ``max_update`` one count at a time, so the last value is the one at
    ``max_update``)."""

    _attrs = LRScheduler._attrs + ("base_lr_orig",)

    def __init__(self, max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if isinstance(max_update, bool) or not isinstance(max_update, int):
            raise ValueError("max_update must be an int, got %r" % (max_update,))
        if max_update < 1:
            raise ValueError("maximum number of updates must be strictly positive")
        self.base_lr_orig = base_lr
        self.max_update = max_update
        self.final_lr = final_lr

    @property
    def max_steps(self):
        return self.max_update - self.warmup_steps

    def _shape(self, fraction):
        """The remaining share of (base_lr_orig - final_lr) at ``fraction`` of the decay."""
        raise NotImplementedError

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if self.max_update < self.warmup_steps:
            # Never in the decay window: MXNet never computes a value and returns base_lr.
            return self.base_lr
        n = min(num_update, self.max_update)
        if self.max_steps == 0:
            return self.final_lr      # a decay of zero length (MXNet divides by zero here)
        return self.final_lr + (self.base_lr_orig - self.final_lr) * self._shape(
            float(n - self.warmup_steps) / float(self.max_steps))


class PolyScheduler(_DecayToFinal):
    """``final + (orig - final) * (1 - (n - warmup)/(max_update - warmup))**pwr``."""

    _params = ("max_update", "base_lr", "pwr", "final_lr", "warmup_steps", "warmup_begin_lr",
               "warmup_mode")

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        self.power = pwr

    @property
    def pwr(self):
        return self.power

    def _shape(self, fraction):
        return pow(1 - fraction, self.power)


class CosineScheduler(_DecayToFinal):
    """``final + (orig - final) * (1 + cos(pi * (n - warmup)/(max_update - warmup))) / 2``."""

    _params = ("max_update", "base_lr", "final_lr", "warmup_steps", "warmup_begin_lr",
               "warmup_mode")

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(max_update, base_lr, final_lr, warmup_steps, warmup_begin_lr, warmup_mode)

    def __call__(self, num_update):
        # Written out (not via _shape) to keep MXNet's operation order: (orig-final)*(1+cos)/2.
        if num_update < self.warmup_steps or self.max_update < self.warmup_steps \
                or self.max_steps == 0:
            return super().__call__(num_update)
        n = min(num_update, self.max_update)
        return self.final_lr + (self.base_lr_orig - self.final_lr) * \
            (1 + math.cos(math.pi * (n - self.warmup_steps) / self.max_steps)) / 2


_CLASSES = {cls.__name__: cls for cls in
            (FactorScheduler, MultiFactorScheduler, PolyScheduler, CosineScheduler)}


def _key(name):
    key = str(name).lower().replace("_", "").replace("-", "")
    return key[:-len("scheduler")] if key.endswith("scheduler") else key


_BY_KEY = {_key(n): cls for n, cls in _CLASSES.items()}


def create(name, **params) -> LRScheduler:
    """A scheduler by name: 'factor', 'FactorScheduler', 'multifactor', 'poly', 'cosine' (any case)."""
    cls = lookup(name)
    if cls is None:
        raise ValueError("unknown lr scheduler %r; valid names: %s" % (name, ", ".join(names())))
    return cls(**params)


def names() -> list:
    """The scheduler names ``create`` takes, sorted (class names work too)."""
    return sorted(_BY_KEY)


def lookup(name):
    """The scheduler class of ``name`` (as ``create`` reads it), or None."""
    return _BY_KEY.get(_key(name))


def from_dict(d: dict) -> LRScheduler:
    """Rebuild a scheduler from ``to_dict()`` output (or ``{"class": ..., "params": {...}}``)."""
    if not isinstance(d, dict) or "class" not in d:
        raise ValueError("a scheduler description needs a 'class' key, got %r" % (d,))
    params = dict(d.get("params") or {})
    sched = create(d["class"], **params)
    for name, value in (d.get("attrs") or {}).items():
        if name not in sched._attrs:
            raise ValueError("unknown attribute %r for %s" % (name, type(sched).__name__))
        setattr(sched, name, value)
    return sched


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value
