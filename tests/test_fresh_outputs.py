"""Which results share memory with their source: as in MXNet 1.9.1 (recorded in
tests/data/mxnet_nd/views.json), and no operator's output shares memory with its inputs, so
writing into either never changes the other (every sample of the op registry)."""
import json
import os
import sys

import numpy as np
import pytest

import trainer_cli
from trainer_cli import autograd, nd

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data", "mxnet_nd"))
sys.path.insert(0, HERE)
import op_registry as reg  # noqa: E402
import views  # noqa: E402

RECORDED = json.load(open(os.path.join(HERE, "data", "mxnet_nd", "views.json")))["cases"]


def test_every_case_was_recorded():
    assert sorted(RECORDED) == sorted(views.CASES)


@pytest.mark.parametrize("case", sorted(views.CASES))
def test_a_result_shares_memory_exactly_where_mxnets_does(case):
    x = views._source(trainer_cli)
    views._write(views.CASES[case](trainer_cli, x))
    assert x.asnumpy().ravel().tolist() == RECORDED[case]


# An op whose sample passes ``out=`` positionally writes into that input by design.
_WRITES_INTO_AN_INPUT = {"onehot_encode"}


def _outputs(res):
    if isinstance(res, nd.NDArray):
        return [res]
    return [r for r in res if isinstance(r, nd.NDArray)] if isinstance(res, (list, tuple)) else []


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("name", sorted(n for n in reg.SAMPLES if n not in _WRITES_INTO_AN_INPUT))
def test_no_operator_output_shares_memory_with_an_input(name):
    sample = reg.SAMPLES[name]
    raw = sample.make(sample.dtypes[0])
    inputs = [nd.array(a, dtype=a.dtype) for a in raw]
    with autograd.train_mode() if sample.train else autograd.predict_mode():
        res = sample.call(nd, *inputs)
    for out in _outputs(res):
        if out.stype != "default":
            continue
        for i, x in enumerate(inputs):
            if x.stype == "default":
                assert not np.shares_memory(out._data, x._data), "%s: output shares input %d" % (
                    name, i)
