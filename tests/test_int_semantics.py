"""Integer arrays through nd's operators give MXNet 1.9.1's numbers and dtypes (recorded in
tests/data/mxnet_nd/int_semantics.json from the cases of int_semantics.py)."""
import json
import os
import sys

import numpy as np
import pytest

import trainer_cli
from trainer_cli import nd
from trainer_cli.ndarray.integers import IntegerDivisionByZero

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data", "mxnet_nd"))
import int_semantics  # noqa: E402

RECORDED = json.load(open(os.path.join(HERE, "data", "mxnet_nd", "int_semantics.json")))["cases"]
# sigmoid negates its integer input before exp in MXNet's kernel, and -(-2**31) wraps to -2**31:
# sigmoid(INT_MIN) is 1 there; here 1/(1+exp(-x)) in float32 gives 0.
_DIFFERS = {("int32 sigmoid(x)", 6)}


@pytest.fixture(scope="module")
def replayed():
    return int_semantics.run_all(trainer_cli)


def test_every_case_was_recorded(replayed):
    assert sorted(replayed) == sorted(RECORDED)


@pytest.mark.parametrize("key", sorted(RECORDED))
def test_integer_array_matches_mxnet(key, replayed):
    got, want = replayed[key], RECORDED[key]
    assert got["dtype"] == want["dtype"], key
    for i, (g, w) in enumerate(zip(got["values"], want["values"])):
        if (key, i) not in _DIFFERS:
            assert g == w, "%s [%d]: %s, MXNet %s (all: %s)" % (key, i, g, w, got["values"])


def test_integer_division_by_zero_is_an_error_not_a_crash():
    x = nd.array([1, 2, 3], dtype="int32")
    with pytest.raises(IntegerDivisionByZero, match="cast to a floating dtype"):
        x / 0
    with pytest.raises(ZeroDivisionError):
        x / nd.array([1, 0, 1], dtype="int32")
    assert (x.astype("float32") / 0).asnumpy().tolist() == [np.inf] * 3
