"""MXNet names that Gluon code outside the library imports, found by running MXNet 1.9.1's own
Gluon examples (example/gluon/) with their imports swapped: the type tuples of ``mx.base``
(style_transfer), ``gluon.loss._apply_weighting`` / ``_reshape_like`` with MXNet's signatures
(embedding_learning's MarginLoss), and ``nd._internal``'s element-wise aliases (tree_lstm).
Expected values were printed by the real MXNet 1.9.1."""
import json

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import autograd, gluon, nd
from trainer_cli.base import NotInTrainerCLIError


def test_base_type_tuples_classify_as_mxnet_does():
    from trainer_cli.base import integer_types, numeric_types, string_types
    # (value, is numeric, is integer, is string) from mxnet.base's tuples
    cases = [(1, True, True, False), (1.5, True, False, False), (True, True, True, False),
             (np.float16(1), True, False, False), (np.int8(1), True, False, False),
             (np.int32(1), True, True, False), (np.int64(1), True, True, False),
             (np.uint8(1), True, False, False), (np.bool_(True), True, False, False),
             ("a", False, False, True), (b"a", False, False, False),
             (nd.ones((1,)), False, False, False), (None, False, False, False),
             (1j, False, False, False)]
    for value, numeric, integer, string in cases:
        assert isinstance(value, numeric_types) is numeric, value
        assert isinstance(value, integer_types) is integer, value
        assert isinstance(value, string_types) is string, value
    assert mx.base.numeric_types is numeric_types
    with pytest.raises(AttributeError, match="no attribute 'long_types'"):
        mx.base.long_types  # noqa: B018


class _WeightedL1(gluon.loss.Loss):
    """A loss written as code outside MXNet writes one, through MXNet's private helpers."""

    def __init__(self, weight=2.0, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):  # noqa: N803
        label = gluon.loss._reshape_like(F, label, pred)
        loss = F.abs(label - pred)
        loss = gluon.loss._apply_weighting(F, loss, self._weight, sample_weight)
        return F.mean(loss, axis=self._batch_axis, exclude=True)


@pytest.mark.parametrize("hybridize", [False, True])
def test_loss_helpers_with_mxnet_signatures(hybridize):
    loss = _WeightedL1()
    if hybridize:
        loss.hybridize()
    pred = nd.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]])
    pred.attach_grad()
    with autograd.record():
        out = loss(pred, nd.array([1.0, 0.0, 2.5, 1.0, 1.0, -1.0]), nd.array([[1.0], [0.5]]))
    out.backward()
    np.testing.assert_array_equal(out.asnumpy(), np.float32([1.3333333730697632, 0.5]))
    np.testing.assert_array_equal(pred.grad.asnumpy(), np.float32(
        [[-0.6666666865348816] * 3, [0.3333333432674408, -0.3333333432674408, 0.3333333432674408]]))


def test_loss_helpers_direct_calls_and_symbols():
    from trainer_cli.gluon.loss import _apply_weighting, _reshape_like
    values = nd.array([[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(
        _apply_weighting(nd, values, 0.5, nd.array([[2.0], [3.0]])).asnumpy(),
        [[1.0, 2.0], [4.5, 6.0]])
    assert _apply_weighting(nd, values) is values
    with pytest.raises(AssertionError, match="weight must be a number"):
        _apply_weighting(nd, values, nd.array([2.0]))
    np.testing.assert_array_equal(_reshape_like(nd, nd.arange(6), nd.zeros((2, 3))).asnumpy(),
                                  [[0, 1, 2], [3, 4, 5]])
    # Given MXNet's symbol module, they build MXNet's graph nodes.
    ops = lambda s: [n["op"] for n in json.loads(s.tojson())["nodes"]]  # noqa: E731
    assert ops(_reshape_like(mx.sym, mx.sym.var("x"), mx.sym.var("y"))) == [
        "null", "null", "reshape_like"]
    assert ops(_apply_weighting(mx.sym, mx.sym.var("x"), 2.0, mx.sym.var("w"))) == [
        "null", "null", "broadcast_mul", "_mul_scalar"]


def test_internal_elementwise_aliases():
    from trainer_cli.ndarray import _internal
    a, b = nd.array([1.0, 2.0, 6.0]), nd.array([4.0, 8.0, 3.0])
    expected = {"_plus": [5, 10, 9], "_add": [5, 10, 9], "_Plus": [5, 10, 9],
                "_minus": [-3, -6, 3], "_sub": [-3, -6, 3], "_Minus": [-3, -6, 3],
                "_mul": [4, 16, 18], "_Mul": [4, 16, 18],
                "_div": [0.25, 0.25, 2], "_Div": [0.25, 0.25, 2]}
    for name, values in expected.items():
        assert getattr(nd._internal, name) is getattr(_internal, name)
        np.testing.assert_array_equal(getattr(nd._internal, name)(a, b, name="n").asnumpy(),
                                      np.float32(values))
    # tree_lstm's cell: next_h = _internal._mul(out_gate, tanh(next_c), name=...), recorded
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad()
    with autograd.record():
        y = nd._internal._mul(x, nd.tanh(x), name="out")
    y.backward()
    np.testing.assert_allclose(y.asnumpy(), [0.7615941762924194, 1.9280551671981812,
                                             2.9851644039154053], rtol=1e-7)
    np.testing.assert_allclose(x.grad.asnumpy(), [1.1815685033798218, 1.1053292751312256,
                                                  1.0246527194976807], rtol=1e-6)


def test_other_internal_names_say_they_are_absent():
    with pytest.raises(NotInTrainerCLIError, match=r"mx\.nd\._internal\._square_sum.*_plus"):
        nd._internal._square_sum  # noqa: B018
    assert not hasattr(nd._internal, "_rnn_param_concat")


def test_internal_aliases_in_a_hybridized_block_export_mxnets_graph(tmp_path):
    class Block(gluon.HybridBlock):
        def hybrid_forward(self, F, x, y):  # noqa: N803
            return F._internal._mul(F._internal._plus(x, y, name="p"), F._internal._minus(x, y),
                                    name="m")

    block = Block(prefix="b_")
    block.initialize()
    block.hybridize()
    out = block(nd.array([1.0, 2.0]), nd.array([3.0, 5.0]))
    np.testing.assert_array_equal(out.asnumpy(), [-8.0, -21.0])
    block.export(str(tmp_path / "b"))
    graph = json.loads((tmp_path / "b-symbol.json").read_text())
    # MXNet 1.9.1's export of the same block: the aliases record their operators' own names
    assert [(n["op"], n["name"], n["inputs"]) for n in graph["nodes"]] == [
        ("null", "data0", []), ("null", "data1", []),
        ("elemwise_add", "b_p", [[0, 0, 0], [1, 0, 0]]),
        ("elemwise_sub", "b__minus0", [[0, 0, 0], [1, 0, 0]]),
        ("elemwise_mul", "b_m", [[2, 0, 0], [3, 0, 0]])]
    assert graph["heads"] == [[4, 0, 0]]


def test_elementwise_operators_broadcast_where_mxnet_refuses():
    # A listed deviation (docs/compat.md): one rule for elemwise_* and broadcast_*.
    a, b = nd.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]), nd.array([[10.0, 20.0, 30.0]])
    for name, want in (("elemwise_add", a.asnumpy() + b.asnumpy()),
                       ("elemwise_div", a.asnumpy() / b.asnumpy())):
        np.testing.assert_array_equal(getattr(nd, name)(a, b).asnumpy(), want)
    np.testing.assert_array_equal(nd._internal._mul(a, b).asnumpy(), a.asnumpy() * b.asnumpy())
