"""A Trainer's kept step (``gluon.trainer._KeptStep``, SGD's ``_steps_again`` on small tensors)
gives the bits of the general path, step after step, through everything that may change
between two steps; and it falls back to the general path whenever something did."""
import numpy as np
import pytest

from trainer_cli import _jit, autograd, gluon, lr_scheduler, nd
from trainer_cli.gluon import trainer as trainer_module
from trainer_cli.gluon.trainer import StaleGradientError
from trainer_cli.optimizer import kernels, sgd
from trainer_cli.optimizer.sgd import SGD

STEPS = 40


def _model(kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "perceptron":
        body = gluon.nn.Dense(1, in_units=4, prefix="body_")
    else:   # six tensors: two of the SGD's chunks of four
        body = gluon.nn.HybridSequential(prefix="body_")
        with body.name_scope():
            body.add(gluon.nn.Dense(5, activation="relu", in_units=4),
                     gluon.nn.Dense(1, in_units=5))
    side = gluon.nn.Dense(2, in_units=4, prefix="side_")
    params = gluon.ParameterDict()
    for block in (body, side):
        block.initialize()
        params.update(block.collect_params())
    for p in params.values():
        p.set_data(nd.array(rng.standard_normal(p.shape).astype(np.float32)))
    x = nd.array(rng.standard_normal((8, 4)).astype(np.float32))
    y = nd.array(rng.standard_normal((8, 1)).astype(np.float32))
    return body, side, params, x, y


def _backward(body, side, x, y, with_side=True):
    loss = gluon.loss.L2Loss()
    with autograd.record():
        out = loss(body(x), y).sum()
        if with_side:
            out = out + (side(x) * 0.1).sum()
    out.backward()


def _train(kind, options, tmp_path, optimizer="sgd"):
    """Train ``STEPS`` steps with changes between them; every parameter's bits after each step,
    the states' at the end, and how many steps were kept ones."""
    body, side, params, x, y = _model(kind, 0)
    trainer = gluon.Trainer(params, optimizer, dict(options))
    plist = list(params.values())
    seen, kept = [], 0
    for i in range(STEPS):
        batch, ignore, with_side = 8, False, True
        if i == 5 and "lr_scheduler" not in options:
            trainer.set_learning_rate(0.05)
        if i == 8:
            trainer.optimizer.wd = 2e-3
        if i == 10:
            plist[0].lr_mult = 0.5
        if i == 12:
            plist[1].wd_mult = 0.0
        if i == 14:
            plist[-1].grad_req = "null"
        if i == 17:
            plist[-1].grad_req = "write"
        if i == 20:
            trainer.save_states(str(tmp_path / "states"))
        if i == 23:
            trainer.load_states(str(tmp_path / "states"))
        if i in (25, 26):
            batch = 4
        if i == 28:
            trainer.optimizer.wd = -0.0     # equal to 0.0, other bits
        if i == 29:
            trainer.optimizer.wd = 0.0
        if i == 31:
            with_side, ignore = False, True     # the side's gradients are stale
        if i == 33:
            trainer.optimizer.rescale_grad = 0.5    # the Trainer's scale stays
        if i == 35:
            plist[0].set_data(plist[0].data() * 0.5)
        _backward(body, side, x, y, with_side=with_side)
        before = trainer._kept_step
        # update() is step() without a kvstore (the runner calls it).
        (trainer.update if i % 3 == 2 else trainer.step)(batch, ignore_stale_grad=ignore)
        kept += before is not None and trainer._kept_step is before
        seen.append([p.data().asnumpy().view(np.uint32).copy() for p in plist])
        if i == 37:     # no backward since the last step: raises, changing nothing
            with pytest.raises(StaleGradientError):
                trainer.step(batch)
            seen.append([p.data().asnumpy().view(np.uint32).copy() for p in plist])
    states = {k: v.view(np.uint8).copy() for k, v in trainer.states_arrays().items()
              if isinstance(v, np.ndarray)}
    return seen, states, kept, trainer._optimizer.num_update


OPTIONS = [
    {"learning_rate": 0.1},
    # Not SGD: the kept Trainer step runs the Updater's two phases (update_again falls back).
    ("adam", {"learning_rate": 0.01, "wd": 1e-3}),
    {"learning_rate": 0.1, "momentum": 0.9, "wd": 1e-3, "clip_gradient": 0.5},
    {"momentum": 0.5, "lr_scheduler": lr_scheduler.FactorScheduler(step=3, factor=0.7,
                                                                   base_lr=0.2)},
]


@pytest.mark.parametrize("fused", [False, True], ids=["numpy", "kernels"])
@pytest.mark.parametrize("kind", ["perceptron", "mlp"])
@pytest.mark.parametrize("options", OPTIONS)
def test_kept_steps_give_the_general_paths_bits(monkeypatch, tmp_path, kind, options, fused):
    if fused:
        # numba loaded (as the runner loads it): the tiny tensors step in one kernel group.
        monkeypatch.delenv("TRAINER_NO_NUMBA", raising=False)
        monkeypatch.setattr(_jit, "_numba", None)
        assert _jit.warm_up() and kernels.enabled()
    else:
        monkeypatch.setattr(kernels, "enabled", lambda: False)     # NumPy bodies
    ran_again = []
    steps_again = SGD._steps_again

    def counted(self, *args):
        done = steps_again(self, *args)
        ran_again.append(done)
        return done
    monkeypatch.setattr(SGD, "_steps_again", counted)
    small_runs = []
    run_small = sgd._run_small
    monkeypatch.setattr(sgd, "_run_small", lambda *a: small_runs.append(1) or run_small(*a))
    optimizer, options = options if isinstance(options, tuple) else ("sgd", options)
    with np.errstate(all="ignore"):
        fast = _train(kind, _fresh(options), tmp_path, optimizer)
        with monkeypatch.context() as general:
            # The path as it was: no kept Trainer step, each small tensor's _sgd_numpy.
            general.setattr(trainer_module._KeptStep, "after", classmethod(lambda *a: None))
            general.setattr(sgd, "_small_steps", lambda step, plans, rest, *a: rest)
            reference = _train(kind, _fresh(options), tmp_path, optimizer)
    assert len(fast[0]) == len(reference[0]) == STEPS + 1
    for i, (a, b) in enumerate(zip(fast[0], reference[0])):
        for k, (x, y) in enumerate(zip(a, b)):
            assert np.array_equal(x, y), "step %d, parameter %d" % (i, k)
    assert fast[1].keys() == reference[1].keys()
    for key in fast[1]:
        assert np.array_equal(fast[1][key], reference[1][key]), key
    assert fast[3] == reference[3]
    # Most steps ran kept; every change above made at least one step take the general path.
    assert reference[2] == 0
    assert STEPS // 2 < fast[2] < STEPS - 8
    assert ran_again.count(True) == (fast[2] if optimizer == "sgd" else 0)
    # Kernel groups took every tensor, or the NumPy bodies ran every step.
    if fused:
        assert not small_runs
    elif optimizer == "sgd":
        assert len(small_runs) >= fast[2]


def _fresh(options):
    """The options with a new scheduler (a scheduler keeps state between runs)."""
    found = dict(options)
    if "lr_scheduler" in found:
        found["lr_scheduler"] = lr_scheduler.FactorScheduler(step=3, factor=0.7, base_lr=0.2)
    return found


def test_a_kept_step_is_dropped_when_states_are_replaced(monkeypatch):
    monkeypatch.setattr(kernels, "enabled", lambda: False)
    body, side, params, x, y = _model("perceptron", 1)
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.1, "momentum": 0.9})
    for _ in range(2):
        _backward(body, side, x, y)
        trainer.step(8)
    kept = trainer._kept_step
    updater = trainer._updaters[0]
    assert kept is not None and updater.serves_again(kept.prepared)
    updater.states[0] = updater.states[0] + 0   # another state object for index 0
    assert not updater.serves_again(kept.prepared)
    _backward(body, side, x, y)
    trainer.step(8)                             # the general path, which keeps a new one
    assert trainer._kept_step is not kept and trainer._kept_step is not None
    assert trainer._kept_step.prepared is not kept.prepared
