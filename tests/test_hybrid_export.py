"""hybridize/export/SymbolBlock against real MXNet 1.9.1: tests/data/hybrid_export holds, for each network
of tests/export_cases.py, MXNet's own export and its output (make_export_golden.py). Our export
of the same network must be MXNet's files byte for byte, and SymbolBlock.imports of MXNet's files
must give MXNet's output."""
from __future__ import annotations

import hashlib
import json
import re
import os

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import autograd, gluon, nd
from trainer_cli import symbol as sym
from trainer_cli.symbol.naming import NameManager
from trainer_cli.gluon import nn

from export_cases import CASES, ZOO, build, build_zoo, set_weights

HERE = os.path.join(os.path.dirname(__file__), "data", "hybrid_export")


def golden(name):
    with np.load(os.path.join(HERE, name + "-io.npz"), allow_pickle=False) as f:
        return f["x"], f["out"]


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


@pytest.mark.parametrize("name", CASES)
def test_export_writes_mxnets_files_and_hybridize_changes_no_number(name, tmp_path):
    x, expected = golden(name)
    net, _ = build(name, mx)
    net.initialize()
    net.hybridize(static_alloc=True, static_shape=True)
    net(nd.array(x))
    set_weights(net, mx)
    out = net(nd.array(x)).asnumpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)

    plain, _ = build(name, mx)
    plain.initialize()
    plain(nd.array(x))
    set_weights(plain, mx)
    np.testing.assert_array_equal(plain(nd.array(x)).asnumpy(), out)

    net.export(str(tmp_path / name), epoch=3)
    assert read(tmp_path / (name + "-symbol.json")) == read(os.path.join(HERE, name + "-symbol.json"))
    assert read(tmp_path / (name + "-0003.params")) == read(os.path.join(HERE, name + "-0000.params"))


@pytest.mark.parametrize("name", sorted(ZOO))
def test_model_zoo_exports_mxnets_files(name, tmp_path):
    from trainer_cli.gluon.block import name_counters_kept, reset_name_counters
    with name_counters_kept():
        reset_name_counters()   # the generator built each network first in its process
        net, x = build_zoo(name, mx)
    net.initialize()
    net(nd.array(x))
    set_weights(net, mx)
    net.hybridize()
    net(nd.array(x))
    net.export(str(tmp_path / "zoo"))
    with open(os.path.join(HERE, "model_zoo-sha256.json")) as f:
        expected = json.load(f)[name]
    assert [hashlib.sha256(read(tmp_path / ("zoo" + suffix))).hexdigest()
            for suffix in ("-symbol.json", "-0000.params")] == expected


@pytest.mark.parametrize("name", CASES)
def test_symbolblock_imports_mxnets_export(name):
    x, expected = golden(name)
    block = gluon.SymbolBlock.imports(os.path.join(HERE, name + "-symbol.json"), ["data"],
                                      os.path.join(HERE, name + "-0000.params"))
    np.testing.assert_allclose(block(nd.array(x)).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    graph = json.loads(read(os.path.join(HERE, name + "-symbol.json"), "r"))
    variables = [n["name"] for n in graph["nodes"] if n["op"] == "null" and n["name"] != "data"]
    assert sorted(block.collect_params().keys()) == sorted(variables)


def test_symbolblock_trains_its_parameters():
    block = gluon.SymbolBlock.imports(os.path.join(HERE, "mlp-symbol.json"), "data",
                                      os.path.join(HERE, "mlp-0000.params"))
    x, _ = golden("mlp")
    trainer = gluon.Trainer(block.collect_params(), "sgd", {"learning_rate": 0.1})
    before = block(nd.array(x)).asnumpy()
    with autograd.record():
        loss = block(nd.array(x)).sum()
    loss.backward()
    trainer.step(1)
    assert not np.allclose(block(nd.array(x)).asnumpy(), before)


def test_loaded_symbol_writes_back_the_same_text():
    text = read(os.path.join(HERE, "zoo-symbol.json"), "r")
    graph = sym.load_json(text)
    assert graph.tojson() == text
    assert graph.list_outputs() == ["zoo_arithmetic0_broadcast_add0_output"]
    assert "zoo_batchnorm0_running_var" in graph.list_auxiliary_states()
    assert "zoo_batchnorm0_running_var" not in graph.list_arguments()
    assert graph.list_inputs()[0] == "data"


def test_symbol_namespace_records_mxnets_names_and_attributes():
    # Automatic names count per process, as MXNet's do: a fresh manager is a fresh process.
    with NameManager():
        _symbol_names_and_attributes()


def _symbol_names_and_attributes():
    data = sym.var("data")
    weight = sym.Variable("w", shape=(3, 0), dtype="float32", init="zeros")
    fc = sym.FullyConnected(data, weight, num_hidden=3, no_bias=True, name="fc")
    out = sym.Group([sym.relu(fc) * 2, sym.concat(fc, 1 - fc, dim=0), fc.reshape((0, -1))])
    assert out.list_outputs() == ["_mulscalar0_output", "concat0_output", "reshape0_output"]
    nodes = json.loads(out.tojson())["nodes"]
    by_name = {n["name"]: n for n in nodes}
    assert by_name["w"]["attrs"] == {"__shape__": "(3, 0)", "__dtype__": "0", "__init__": "zeros"}
    assert by_name["fc"]["attrs"] == {"no_bias": "True", "num_hidden": "3"}
    assert by_name["_rminusscalar0"]["op"] == "_rminus_scalar"
    assert by_name["concat0"]["attrs"] == {"dim": "0", "num_args": "2"}
    assert by_name["reshape0"]["op"] == "Reshape"
    assert out.list_arguments() == ["data", "w"]


def test_f_functions_run_with_nd():
    class Net(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.w = self.params.get("w", shape=(3, 4), init=mx.init.Constant(0.5))

        def hybrid_forward(self, F, x, w):
            y = F.FullyConnected(x, w, num_hidden=3, no_bias=True, name="fc")
            y = F.Activation(y, act_type="relu", name="act") + F.clip(y, -1, 1)
            y = F.concat(y, F.elemwise_add(y, y), dim=1)
            y = F.broadcast_mul(y, F.softmax(y, axis=-1)) - F.mean(y, axis=1, keepdims=True)
            return F.LeakyReLU(F.reshape(y, shape=(0, -1)), act_type="leaky", slope=0.1)

    net = Net()
    net.initialize()
    x = np.arange(8, dtype=np.float32).reshape(2, 4) / 8 - 0.3
    y = x @ np.full((4, 3), 0.5, np.float32)
    y = np.maximum(y, 0) + np.clip(y, -1, 1)
    y = np.concatenate([y, 2 * y], axis=1)
    soft = np.exp(y - y.max(1, keepdims=True))
    y = y * soft / soft.sum(1, keepdims=True) - y.mean(1, keepdims=True)
    y = np.where(y > 0, y, 0.1 * y)
    out = net(nd.array(x)).asnumpy()
    np.testing.assert_allclose(out, y, rtol=1e-5, atol=1e-6)
    net.hybridize()
    np.testing.assert_array_equal(net(nd.array(x)).asnumpy(), out)


def test_hybridize_is_accepted_everywhere_and_tracing_leaves_hooks_alone(tmp_path):
    net = nn.HybridSequential(prefix="h_")
    with net.name_scope():
        net.add(nn.Dense(3, in_units=2), nn.Dense(1, in_units=3))
    net.initialize(mx.init.Constant(0.1))
    calls = []
    net[0].register_forward_hook(lambda block, args, out: calls.append(type(out).__name__))
    net.hybridize(static_alloc=True, static_shape=True)
    x = nd.ones((2, 2))
    first = net(x).asnumpy()
    net.hybridize(active=False)
    np.testing.assert_array_equal(net(x).asnumpy(), first)
    assert calls == ["NDArray", "NDArray"]
    net.export(str(tmp_path / "h"))   # without a recorded graph: recorded at export
    block = gluon.SymbolBlock.imports(str(tmp_path / "h-symbol.json"), ["data"],
                                      str(tmp_path / "h-0000.params"))
    np.testing.assert_array_equal(block(x).asnumpy(), first)


def test_export_of_a_block_that_cannot_be_recorded_says_why(tmp_path):
    class Eager(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return x * float(x.asnumpy().sum())   # needs values: cannot be a graph

    net = Eager()
    net.hybridize()
    out = net(nd.ones((2,)))
    np.testing.assert_array_equal(out.asnumpy(), [2, 2])
    with pytest.raises(RuntimeError, match="cannot be exported: recording its graph failed"):
        net.export(str(tmp_path / "e"))
    assert not os.path.exists(tmp_path / "e-symbol.json")


def _graph(nodes, heads=((1, 0, 0),), **extra):
    graph = {"nodes": nodes, "arg_nodes": [0], "heads": [list(h) for h in heads],
             "attrs": {"mxnet_version": ["int", 10901]}}
    graph.update(extra)
    return json.dumps(graph)


DATA = {"op": "null", "name": "data", "inputs": []}


@pytest.mark.parametrize("text, message", [
    ("not json", "bad JSON"),
    ("[1, 2]", "top level is not an object"),
    (_graph([DATA, {"op": "relu", "name": "r", "inputs": [[5, 0, 0]]}]), "not an earlier node"),
    (_graph([DATA, {"op": "relu", "name": "r", "inputs": [[0, 3, 0]]}]), "takes output 3"),
    (_graph([DATA, {"op": "relu", "name": "r", "attrs": {"a": 1}, "inputs": [[0, 0, 0]]}]),
     "not an object of strings"),
    (_graph([DATA, {"op": "relu", "name": "r", "inputs": [[0, 0, 0]]}], heads=[(7, 0, 0)]),
     "head 0 refers"),
    ("[" * 100000 + "]" * 100000, "bad JSON"),
])
def test_hostile_symbol_files_are_refused(tmp_path, text, message):
    path = tmp_path / "bad-symbol.json"
    path.write_text(text)
    with pytest.raises(sym.MXNetSymbolError, match=message) as info:
        gluon.SymbolBlock.imports(str(path), ["data"])
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_unknown_operators_are_named_and_attributes_never_run(tmp_path):
    path = tmp_path / "op-symbol.json"
    path.write_text(_graph([DATA, {"op": "_contrib_Mystery", "name": "m0", "inputs": [[0, 0, 0]]}]))
    with pytest.raises(sym.MXNetSymbolError, match="operator '_contrib_Mystery' \\(node 'm0'\\)"):
        gluon.SymbolBlock.imports(str(path), ["data"])
    path.write_text(_graph([DATA, {"op": "Activation", "name": "a0",
                                   "attrs": {"act_type": "__import__('os').system('exit 3')"},
                                   "inputs": [[0, 0, 0]]}]))
    block = gluon.SymbolBlock.imports(str(path), ["data"])
    with pytest.raises(ValueError, match="a0"):
        block(nd.ones((1,)))


def test_attributes_nested_deep_are_text_not_a_recursion(tmp_path):
    path = tmp_path / "deep-symbol.json"
    deep = "(" * 50000 + ")" * 50000
    path.write_text(_graph([DATA, {"op": "Reshape", "name": "r0", "attrs": {"shape": deep},
                                   "inputs": [[0, 0, 0]]}]))
    block = gluon.SymbolBlock.imports(str(path), ["data"])   # was a RecursionError
    with pytest.raises((TypeError, ValueError), match="r0"):
        block(nd.ones((2, 4)))
    # Flat tuples and scalars still read as MXNet wrote them.
    from trainer_cli.gluon.symbol_block import parse_attr
    assert parse_attr("(2, -1)") == (2, -1) and parse_attr("[1.5, None]") == (1.5, None)
    assert parse_attr("((1, 2), (3, 4))") == "((1, 2), (3, 4))" and parse_attr("True") is True


def test_sym_is_no_longer_an_absent_name():
    assert mx.sym is mx.symbol
    assert gluon.SymbolBlock.__module__ == "trainer_cli.gluon.symbol_block"
    with pytest.raises(AttributeError, match="docs/compat.md"):
        mx.sym.simple_bind


def test_channels_last_layers_export_and_run_back(tmp_path):
    net = nn.HybridSequential(prefix="cl_")
    with net.name_scope():
        net.add(nn.Conv2D(4, 3, padding=1, layout="NHWC", activation="relu"),
                nn.MaxPool2D(layout="NHWC"), nn.Conv2DTranspose(2, 2, strides=2, layout="NHWC"),
                nn.AvgPool2D(layout="NHWC"), nn.GlobalAvgPool2D(layout="NHWC"), nn.Flatten())
    net.initialize(mx.init.Xavier())
    net.hybridize()
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (2, 6, 6, 3)))
    expected = net(x).asnumpy()
    net.export(str(tmp_path / "cl"))
    graph = json.loads(read(tmp_path / "cl-symbol.json", "r"))
    assert {n["attrs"]["layout"] for n in graph["nodes"] if n["op"] != "null"
            and "layout" in n.get("attrs", {})} == {"NHWC"}
    block = gluon.SymbolBlock.imports(str(tmp_path / "cl-symbol.json"), ["data"],
                                      str(tmp_path / "cl-0000.params"))
    np.testing.assert_allclose(block(x).asnumpy(), expected, rtol=1e-6, atol=1e-7)


def test_an_imported_symbolblock_exports_the_same_files(tmp_path):
    block = gluon.SymbolBlock.imports(os.path.join(HERE, "conv2d-symbol.json"), ["data"],
                                      os.path.join(HERE, "conv2d-0000.params"))
    assert block.name.startswith("symbolblock")
    block.hybridize()
    block(nd.array(golden("conv2d")[0]))
    block.export(str(tmp_path / "again"))
    assert read(tmp_path / "again-symbol.json") == read(os.path.join(HERE, "conv2d-symbol.json"))
    assert read(tmp_path / "again-0000.params") == read(os.path.join(HERE, "conv2d-0000.params"))


def test_a_block_with_a_constant_exports_it_as_mxnet_does(tmp_path):
    # GluonCV's anchor generators keep their anchors as params.get_constant.
    class Anchored(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.anchor = self.params.get_constant(
                    "anchor_", np.arange(6, dtype=np.float32).reshape(2, 3))
                self.dense = nn.Dense(3, in_units=3)

        def hybrid_forward(self, F, x, anchor):
            return F.broadcast_add(self.dense(x), F.sum(anchor, axis=0, keepdims=True))

    net = Anchored(prefix="b_")
    net.initialize()
    net.hybridize()
    x = nd.ones((2, 3))
    want = net(x).asnumpy()
    net.export(str(tmp_path / "b"))
    graph = json.loads(read(tmp_path / "b-symbol.json", "r"))
    inits = {n["name"]: n.get("attrs", {}).get("__init__") for n in graph["nodes"]
             if n["op"] == "null"}
    # MXNet names the initializer it registers for the constant: Constant_<name>_<id>.
    assert re.fullmatch(r"Constant_b_anchor__\d+", inits["b_anchor_"])
    assert sorted(nd.load(str(tmp_path / "b-0000.params"))) == [
        "arg:b_anchor_", "arg:b_dense0_bias", "arg:b_dense0_weight"]
    block = gluon.SymbolBlock.imports(str(tmp_path / "b-symbol.json"), ["data"],
                                      str(tmp_path / "b-0000.params"))
    np.testing.assert_array_equal(block(x).asnumpy(), want)


def test_an_input_the_graph_does_not_use_is_accepted_with_mxnets_warning(tmp_path):
    class TwoInputs(gluon.HybridBlock):
        def hybrid_forward(self, F, x, unused):
            return F.relu(x)

    net = TwoInputs()
    net.hybridize()
    x = nd.array([[-1.0, 2.0]])
    net(x, nd.zeros((1, 2)))
    net.export(str(tmp_path / "two"))
    with pytest.warns(UserWarning, match="The 1-th input to HybridBlock is not used by any "
                                         "computation. Is this intended"):
        block = gluon.SymbolBlock.imports(str(tmp_path / "two-symbol.json"),
                                          ["data0", "data1"])
    assert block(x, nd.ones((1, 2))).asnumpy().tolist() == [[0.0, 2.0]]
