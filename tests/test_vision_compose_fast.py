"""Compose runs a chain of NumPy-level transforms on the NumPy image: the same bits and random
draws as calling each block in turn, and the block-by-block path wherever a hook, a hybridized
block or another transform is in the way."""
import random

import numpy
import pytest

from trainer_cli import nd
from trainer_cli import random as tc_random
from trainer_cli.gluon.data.vision import transforms as T

MEAN, STD = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)


def _images(count=12, seed=0):
    rng = numpy.random.default_rng(seed)
    return [nd.array(rng.integers(0, 256, (int(rng.integers(8, 40)), int(rng.integers(8, 40)), 3),
                                  dtype=numpy.uint8), dtype=numpy.uint8) for _ in range(count)]


def _pipelines():
    return [
        [T.RandomResizedCrop(24), T.RandomFlipLeftRight(), T.ToTensor(), T.Normalize(MEAN, STD)],
        [T.Resize(20), T.CenterCrop(16), T.RandomFlipTopBottom(), T.ToTensor(),
         T.Normalize(0.5, 0.25)],
        [T.RandomResizedCrop((20, 12), scale=(0.3, 1.0), interpolation=2), T.ToTensor()],
    ]


def _one_by_one(blocks, x):
    for block in blocks:
        x = block(x)
    return x


@pytest.mark.parametrize("which", range(3))
def test_chain_gives_the_bits_and_draws_of_block_by_block(which):
    blocks = _pipelines()[which]
    compose = T.Compose(blocks)
    assert T._host_chain(compose) is not None
    for seed in range(3):
        outs = []
        for run in (lambda x: compose(x), lambda x: _one_by_one(blocks, x)):
            random.seed(seed)
            tc_random.seed(seed)
            made = [run(x) for x in _images()]
            # Where each random stream was left: the next draws.
            made += [random.random(), float(nd.random.uniform(0, 1, shape=(1,)).asscalar())]
            outs.append(made)
        fast, slow = outs
        for a, b in zip(fast[:-2], slow[:-2]):
            assert a.dtype == b.dtype and a.shape == b.shape and a.context == b.context
            assert a.asnumpy().tobytes() == b.asnumpy().tobytes()
        assert fast[-2:] == slow[-2:]      # the random streams left where block calls leave them


def test_a_hook_or_a_hybridized_block_takes_the_block_path():
    seen = []
    flip = T.RandomFlipLeftRight()
    compose = T.Compose([T.Resize(10), flip, T.ToTensor()])
    flip.register_forward_hook(lambda block, args, out: seen.append(out.shape))
    assert T._host_chain(compose) is None
    assert compose(_images(1)[0]).shape == (3, 10, 10) and seen == [(10, 10, 3)]
    hybrid = T.Compose([T.Resize(10), T.ToTensor()])
    hybrid.hybridize()
    assert T._host_chain(hybrid) is None
    assert hybrid(_images(1)[0]).shape == (3, 10, 10)


def test_other_transforms_and_arrays_take_the_block_path():
    compose = T.Compose([T.Resize(10), T.RandomBrightness(0.2), T.ToTensor()])
    assert T._host_chain(compose) is None
    assert compose(_images(1)[0]).shape == (3, 10, 10)
    chain = T.Compose([T.Resize(10), T.ToTensor()])
    with pytest.raises(ValueError, match="NDArray"):
        chain(numpy.zeros((12, 12, 3), dtype=numpy.uint8))   # as calling the blocks: NDArrays


def test_an_error_in_the_chain_names_its_block():
    compose = T.Compose([T.ToTensor(), T.Normalize((0.5, 0.5), (0.2, 0.2))])
    with pytest.raises(ValueError, match="2 values for an input of 3 channels") as info:
        compose(_images(1)[0])
    assert "Normalize" in info.value.failed_block
