"""``Trainer.step`` with some gradients not written since the last step (MXNet's rules): an error
before anything changes, or, with ``ignore_stale_grad``, an update of the fresh ones only."""
import numpy as np
import pytest

from trainer_cli import autograd, gluon, nd
from trainer_cli.gluon.trainer import StaleGradientError


def _two_layers():
    first = gluon.nn.Dense(3, in_units=4, prefix="first_")
    second = gluon.nn.Dense(2, in_units=4, prefix="second_")
    params = gluon.ParameterDict()
    for layer in (first, second):
        layer.initialize()
        params.update(layer.collect_params())
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.5, "momentum": 0.9})
    return first, second, trainer


def _backward(*layers):
    x = nd.array(np.arange(8, dtype=np.float32).reshape(2, 4) / 8)
    with autograd.record():
        loss = sum(layer(x).sum() for layer in layers)
    loss.backward()


def _weights(*layers):
    return [p.data().asnumpy().copy() for layer in layers for p in (layer.weight, layer.bias)]


def test_a_stale_gradient_raises_before_any_parameter_changes():
    first, second, trainer = _two_layers()
    _backward(first, second)
    trainer.step(2)
    _backward(first)                                # second's gradients are now stale
    before = _weights(first, second)
    with pytest.raises(StaleGradientError, match="second_"):
        trainer.step(2)
    for a, b in zip(before, _weights(first, second)):
        np.testing.assert_array_equal(a, b)
    # first's gradients were not consumed by the failed step: they still count as fresh.
    trainer.step(2, ignore_stale_grad=True)
    assert not np.array_equal(before[0], first.weight.data().asnumpy())


def test_ignore_stale_grad_updates_only_the_fresh_parameters():
    first, second, trainer = _two_layers()
    _backward(first, second)
    trainer.step(2)
    index = {p.name: i for i, p in enumerate(trainer._params)}
    counts = dict(trainer._optimizer._index_update_count)
    _backward(first)
    grad = first.weight.grad().asnumpy().copy()
    before = _weights(first, second)
    momentum = trainer._updaters[0].states[index[first.weight.name]].asnumpy().copy()
    trainer.step(2, ignore_stale_grad=True)
    after = _weights(first, second)
    # MXNet's rule (the state is the negative velocity): mom = 0.9*mom - lr*g/2; w += mom.
    mom = np.float32(0.9) * momentum - np.float32(0.5) * (grad * np.float32(0.5))
    np.testing.assert_allclose(after[0], before[0] + mom, rtol=1e-6)
    for a, b in zip(before[2:], after[2:]):         # second: untouched
        np.testing.assert_array_equal(a, b)
    new_counts = trainer._optimizer._index_update_count
    stepped = {name for name in index if new_counts[index[name]] != counts[index[name]]}
    assert stepped == {first.weight.name, first.bias.name}
