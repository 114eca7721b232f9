"""LR schedulers: MXNet 1.9.1's values, its unit-test expectations, and purity."""
from __future__ import annotations

import json
import math
import random

import pytest

from trainer_cli import lr_scheduler as L

from golden import GOLDEN_DIR as GOLDEN


# ---------------------------------------------------------------------- MXNet's stateful classes
class _MXBase:
    """A transcription of MXNet 1.9.1's stateful schedulers, the reference for purity tests."""

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        self.base_lr, self.warmup_steps = base_lr, warmup_steps
        self.warmup_final_lr, self.warmup_begin_lr = base_lr, warmup_begin_lr
        self.warmup_mode = warmup_mode

    def warm(self, n):
        if self.warmup_mode == "linear":
            return self.warmup_begin_lr + (self.warmup_final_lr - self.warmup_begin_lr) \
                * float(n) / float(self.warmup_steps)
        return self.warmup_begin_lr


class MXFactor(_MXBase):
    def __init__(self, step, factor=1, stop_factor_lr=1e-8, **kw):
        super().__init__(**kw)
        self.step, self.factor, self.stop_factor_lr, self.count = step, factor, stop_factor_lr, 0

    def __call__(self, n):
        if n < self.warmup_steps:
            return self.warm(n)
        while n > self.count + self.step:
            self.count += self.step
            self.base_lr *= self.factor
            if self.base_lr < self.stop_factor_lr:
                self.base_lr = self.stop_factor_lr
        return self.base_lr


class MXMultiFactor(_MXBase):
    def __init__(self, step, factor=1, **kw):
        super().__init__(**kw)
        self.step, self.factor, self.cur = step, factor, 0

    def __call__(self, n):
        if n < self.warmup_steps:
            return self.warm(n)
        while self.cur <= len(self.step) - 1:
            if n > self.step[self.cur]:
                self.cur += 1
                self.base_lr *= self.factor
            else:
                return self.base_lr
        return self.base_lr


class MXPoly(_MXBase):
    def __init__(self, max_update, pwr=2, final_lr=0, **kw):
        super().__init__(**kw)
        self.power, self.base_lr_orig, self.max_update, self.final_lr = pwr, self.base_lr, \
            max_update, final_lr
        self.max_steps = max_update - self.warmup_steps

    def __call__(self, n):
        if n < self.warmup_steps:
            return self.warm(n)
        if n <= self.max_update:
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * \
                pow(1 - float(n - self.warmup_steps) / float(self.max_steps), self.power)
        return self.base_lr


class MXCosine(_MXBase):
    def __init__(self, max_update, final_lr=0, **kw):
        super().__init__(**kw)
        self.base_lr_orig, self.max_update, self.final_lr = self.base_lr, max_update, final_lr
        self.max_steps = max_update - self.warmup_steps

    def __call__(self, n):
        if n < self.warmup_steps:
            return self.warm(n)
        if n <= self.max_update:
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * \
                (1 + math.cos(math.pi * (n - self.warmup_steps) / self.max_steps)) / 2
        return self.base_lr


MX = {"FactorScheduler": MXFactor, "MultiFactorScheduler": MXMultiFactor,
      "PolyScheduler": MXPoly, "CosineScheduler": MXCosine}

CASES = [
    ("FactorScheduler", dict(step=3, factor=0.7, base_lr=0.5)),
    ("FactorScheduler", dict(step=2, factor=0.5, stop_factor_lr=0.05, base_lr=1.0, warmup_steps=5,
                             warmup_begin_lr=0.1)),
    ("FactorScheduler", dict(step=1, factor=0.9, base_lr=2.0, warmup_steps=3,
                             warmup_mode="constant", warmup_begin_lr=0.3)),
    ("MultiFactorScheduler", dict(step=[2, 9, 10, 30], factor=0.3, base_lr=1.0)),
    ("MultiFactorScheduler", dict(step=[4, 12], factor=0.5, base_lr=1.0, warmup_steps=6)),
    ("PolyScheduler", dict(max_update=25, base_lr=0.8, pwr=3, final_lr=0.05, warmup_steps=4,
                           warmup_begin_lr=0.1)),
    ("PolyScheduler", dict(max_update=10, base_lr=1.0, pwr=0.5)),
    ("CosineScheduler", dict(max_update=17, base_lr=1.0, final_lr=0.2, warmup_steps=3)),
    ("CosineScheduler", dict(max_update=5, base_lr=1.0)),
]


def _golden():
    return json.loads((GOLDEN / "lr_schedulers.json").read_text())


def _golden_cases():
    return [s["name"] for s in _golden()["spec"]["schedulers"]]


@pytest.mark.parametrize("name", _golden_cases())
def test_golden_schedulers(name):
    data = _golden()
    spec = next(s for s in data["spec"]["schedulers"] if s["name"] == name)
    sched = L.from_dict({"class": spec["class"], "params": spec["params"]})
    expected = data["result"][name]
    got = [sched(n) for n in range(data["spec"]["num_updates"] + 1)]
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-15)
    # the same values in any order
    order = list(range(len(expected)))
    random.Random(0).shuffle(order)
    assert [sched(n) for n in order] == pytest.approx([expected[n] for n in order], rel=1e-12,
                                                      abs=1e-15)


def test_mxnet_unit_expectations():
    sched = L.FactorScheduler(step=100, factor=0.1, base_lr=1.0, warmup_steps=20,
                              warmup_begin_lr=0.1, warmup_mode="constant", stop_factor_lr=1e-4)
    assert sched(0) == 0.1
    assert sched(21) == 1.0
    assert sched(101) == pytest.approx(0.1)
    assert sched(201) == pytest.approx(0.01)
    assert sched(1000) == pytest.approx(1e-4)

    sched = L.MultiFactorScheduler(step=[15, 25], factor=0.1, base_lr=0.1, warmup_steps=10,
                                   warmup_begin_lr=0.05, warmup_mode="linear")
    assert sched(5) == pytest.approx(0.075)
    assert sched(15) == pytest.approx(0.1)
    assert sched(16) == pytest.approx(0.01)
    assert sched(26) == pytest.approx(0.001)

    sched = L.PolyScheduler(max_update=1000, base_lr=3, final_lr=0, warmup_steps=100,
                            warmup_begin_lr=0, pwr=2)
    assert sched(50) == pytest.approx(1.5)
    assert sched(100) == pytest.approx(3)
    assert sched(1000) == pytest.approx(0)

    sched = L.CosineScheduler(max_update=1000, base_lr=3, final_lr=0.1)
    assert sched(0) == pytest.approx(3)
    assert sched(1000) == pytest.approx(0.1)
    assert sched(500) > 1.5


def test_factor_closed_form():
    sched = L.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
    assert [sched(n) for n in range(7)] == [1.0, 1.0, 1.0, 0.5, 0.5, 0.25, 0.25]


@pytest.mark.parametrize("cls,params", CASES)
def test_pure_equals_mxnet_for_increasing_counts(cls, params):
    ours = getattr(L, cls)(**params)
    reference = MX[cls](**params)
    values = {n: reference(n) for n in range(60)}        # the optimizer's sequence: 0, 1, 2, ...
    assert [ours(n) for n in range(60)] == pytest.approx([values[n] for n in range(60)],
                                                         rel=1e-12, abs=1e-15)
    rng = random.Random(1)
    order = list(range(60))
    rng.shuffle(order)
    assert [ours(n) for n in order] == pytest.approx([values[n] for n in order], rel=1e-12,
                                                     abs=1e-15)
    if cls in ("FactorScheduler", "MultiFactorScheduler"):
        # any increasing sequence, gaps included, gives MXNet's values
        for _ in range(5):
            seq = sorted(rng.sample(range(200), 25))
            fresh = MX[cls](**params)
            assert [ours(n) for n in seq] == pytest.approx([fresh(n) for n in seq], rel=1e-12,
                                                           abs=1e-15)


def test_calls_do_not_change_the_schedule():
    sched = L.FactorScheduler(step=1, factor=0.5, base_lr=1.0)
    assert sched(10) == 0.5 ** 9
    assert sched(2) == 0.5 and sched.base_lr == 1.0


def test_poly_cosine_past_max_update():
    poly = L.PolyScheduler(max_update=10, base_lr=1.0, final_lr=0.1)
    assert poly(20) == pytest.approx(0.1)        # MXNet: base_lr when called first at 20 (see docs)
    assert poly(10) == pytest.approx(0.1)
    cos = L.CosineScheduler(max_update=10, base_lr=1.0, final_lr=0.1)
    assert cos(11) == pytest.approx(0.1)
    # never inside the decay window: MXNet returns base_lr after warmup
    short = L.PolyScheduler(max_update=3, base_lr=1.0, warmup_steps=5)
    assert short(7) == 1.0
    zero = L.CosineScheduler(max_update=4, base_lr=1.0, warmup_steps=4, final_lr=0.2)
    assert zero(3) == 0.75 and zero(4) == 0.2 and zero(9) == 0.2


@pytest.mark.parametrize("make", [
    lambda: L.FactorScheduler(step=0),
    lambda: L.FactorScheduler(step=1, factor=1.5),
    lambda: L.FactorScheduler(step=1, factor=-0.5),
    lambda: L.FactorScheduler(step=1, base_lr=0.1, warmup_begin_lr=0.2),
    lambda: L.FactorScheduler(step=1, warmup_steps=-1),
    lambda: L.FactorScheduler(step=1, warmup_steps=1.5),
    lambda: L.FactorScheduler(step=1, warmup_mode="cubic"),
    lambda: L.MultiFactorScheduler(step=[3, 3]),
    lambda: L.MultiFactorScheduler(step=[0, 3]),
    lambda: L.MultiFactorScheduler(step=[]),
    lambda: L.MultiFactorScheduler(step=5),
    lambda: L.MultiFactorScheduler(step=[2], factor=2),
    lambda: L.PolyScheduler(max_update=0),
    lambda: L.PolyScheduler(max_update=2.5),
    lambda: L.CosineScheduler(max_update=0),
])
def test_validation_errors(make):
    with pytest.raises(ValueError):
        make()


def test_base_class_needs_override():
    with pytest.raises(NotImplementedError):
        L.LRScheduler()(1)


@pytest.mark.parametrize("cls,params", CASES)
def test_to_dict_round_trip(cls, params):
    sched = getattr(L, cls)(**params)
    sched.base_lr = 0.123          # as an optimizer's learning_rate would
    d = json.loads(json.dumps(sched.to_dict()))
    again = L.from_dict(d)
    assert type(again) is type(sched)
    assert again.to_dict() == sched.to_dict()
    assert [again(n) for n in range(40)] == [sched(n) for n in range(40)]


@pytest.mark.parametrize("name,cls", [("factor", L.FactorScheduler),
                                      ("FactorScheduler", L.FactorScheduler),
                                      ("MULTIFACTOR", L.MultiFactorScheduler),
                                      ("multi_factor", L.MultiFactorScheduler),
                                      ("poly", L.PolyScheduler), ("Cosine", L.CosineScheduler),
                                      ("cosinescheduler", L.CosineScheduler)])
def test_create_by_name(name, cls):
    params = {"step": [3]} if cls is L.MultiFactorScheduler else \
        {"step": 3} if cls is L.FactorScheduler else {"max_update": 10}
    assert type(L.create(name, **params)) is cls


def test_create_unknown_name():
    with pytest.raises(ValueError, match="valid names: cosine, factor, multifactor, poly"):
        L.create("exponential")
    with pytest.raises(ValueError, match="class"):
        L.from_dict({"params": {}})


def test_attributes_readable_and_settable():
    sched = L.PolyScheduler(max_update=10, base_lr=1.0, pwr=2, warmup_steps=2)
    assert (sched.power, sched.pwr, sched.max_steps, sched.base_lr_orig) == (2, 2, 8, 1.0)
    sched.max_update = 18
    assert sched.max_steps == 16
    sched.warmup_final_lr = 2.0
    assert sched(1) == pytest.approx(1.0)


@pytest.mark.parametrize("name,extra", [("PolyScheduler", {"pwr": 2}), ("CosineScheduler", {})])
@pytest.mark.parametrize("mode", ["linear", "constant"])
def test_decay_of_no_length_after_warmup_holds_final_lr(name, extra, mode):
    # max_update == warmup_steps: MXNet 1.9.1 divides 0 by 0 at n == max_update (ZeroDivisionError,
    # checked on MXNet); here the warmup is MXNet's and the rate is final_lr from there on
    # (docs/compat.md).
    kw = dict(max_update=5, base_lr=1.0, final_lr=0.1, warmup_steps=5, warmup_begin_lr=0.02,
              warmup_mode=mode, **extra)
    ours, theirs = getattr(L, name)(**kw), MX[name](**kw)
    assert [ours(n) for n in range(5)] == [theirs(n) for n in range(5)]
    with pytest.raises(ZeroDivisionError):
        theirs(5)
    assert [ours(n) for n in (5, 6, 50)] == [0.1, 0.1, 0.1]
