"""``nd.softmax(data, length, use_length=True)``: MXNet 1.9.1's masked softmax, values and input
gradients against the real library (tests/data/mxnet_nd/softmax_length.json, written by
make_softmax_length.py there), and the arguments MXNet refuses."""
import json
import os

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import autograd, gluon, nd

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = json.load(open(os.path.join(HERE, "data", "mxnet_nd", "softmax_length.json")))["cases"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "%s-axis%d-t%s" % (c["shape"], c["axis"],
                                                                         c["temperature"]))
def test_masked_softmax_is_mxnets(case):
    shape = tuple(case["shape"])
    x = nd.array(np.arange(np.prod(shape)).reshape(shape) / 4 - 1)
    head = nd.array(np.cos(np.arange(np.prod(shape))).reshape(shape))
    x.attach_grad()
    kwargs = {} if case["temperature"] is None else {"temperature": case["temperature"]}
    with autograd.record():
        y = nd.softmax(x, nd.array(case["lengths"], dtype="int32"), axis=case["axis"],
                       use_length=True, **kwargs)
    y.backward(head)
    np.testing.assert_allclose(y.asnumpy(), case["value"], rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(x.grad.asnumpy(), case["grad"], rtol=1e-5, atol=1e-7)


def test_the_length_input_positional_keyword_and_hybridized():
    x = nd.array(np.arange(8).reshape(2, 4) / 4)
    lengths = nd.array([2, 3], dtype="int32")
    want = nd.softmax(x, length=lengths, use_length=True).asnumpy()
    np.testing.assert_array_equal(nd.softmax(x, lengths, -1, use_length=True).asnumpy(), want)
    assert want[0, 2:].tolist() == [0, 0] and want[1, 3] == 0

    class Masked(gluon.HybridBlock):
        def hybrid_forward(self, F, x, lengths):
            return F.softmax(x, lengths, axis=-1, use_length=True)

    block = Masked()
    block.hybridize()
    np.testing.assert_array_equal(block(x, lengths).asnumpy(), want)


def test_what_mxnet_refuses_is_refused():
    x = nd.array(np.arange(8).reshape(2, 4) / 4)
    with pytest.raises(TypeError, match="integer"):
        nd.softmax(x, nd.array([2, 3]), use_length=True)          # float lengths
    with pytest.raises(TypeError, match="one input"):
        nd.softmax(x, nd.array([2, 3], dtype="int32"))            # a length without use_length
    with pytest.raises(mx.base.MXNetError, match="lanes"):
        nd.softmax(x, nd.array([2, 3, 1], dtype="int32"), use_length=True)
    with pytest.raises(TypeError):
        nd.log_softmax(x, length=nd.array([2, 3], dtype="int32"))
    with pytest.raises(TypeError):
        nd.softmax(x, no_such_argument=3)                         # not swallowed
