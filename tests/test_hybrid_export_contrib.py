"""Blocks calling MXNet's contrib operators (F.contrib.*) hybridized, exported and imported,
against real MXNet 1.9.1: tests/data/hybrid_export/contrib holds MXNet's own export of each
network of export_contrib_cases.CASES and its inputs and outputs (make_contrib_golden.py). Our
export must be MXNet's files byte for byte, SymbolBlock.imports of MXNet's files must give
MXNet's outputs, and the hybridized forward the eager one's."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import autograd, gluon, nd
from trainer_cli import symbol as sym
from trainer_cli.symbol.naming import NameManager

from export_contrib_cases import CASES, build, input_names, set_weights

HERE = os.path.join(os.path.dirname(__file__), "data", "hybrid_export", "contrib")


def golden(name):
    with np.load(os.path.join(HERE, name + "-io.npz"), allow_pickle=False) as f:
        count = sum(1 for k in f.files if k.startswith("x"))
        return (tuple(f["x%d" % i] for i in range(count)),
                [f["out%d" % i] for i in range(len(f.files) - count)])


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def as_list(out):
    return [o.asnumpy() for o in out] if isinstance(out, (list, tuple)) else [out.asnumpy()]


def check(outs, expected):
    # The contrib operators reproduce MXNet's rounding (tests/test_nd_contrib.py), but the
    # convolutions and dense layers before them sum in another order than oneDNN's kernels:
    # float32 last-bit differences (at most 1.8e-7 here), which the operators carry on.
    assert len(outs) == len(expected)
    for out, want in zip(outs, expected):
        assert out.dtype == want.dtype and out.shape == want.shape
        np.testing.assert_allclose(out, want, rtol=1e-6, atol=5e-7)


def ready(name, hybridize):
    inputs, _ = golden(name)
    net, _ = build(name, mx)
    net.initialize()
    if hybridize:
        net.hybridize()
    net(*[nd.array(x) for x in inputs])
    set_weights(net, mx)
    return net, inputs


@pytest.mark.parametrize("name", CASES)
def test_export_writes_mxnets_files_and_hybridize_changes_no_number(name, tmp_path):
    inputs, expected = golden(name)
    net, _ = ready(name, hybridize=True)
    outs = as_list(net(*[nd.array(x) for x in inputs]))
    check(outs, expected)

    plain, _ = ready(name, hybridize=False)
    for eager, hybrid in zip(as_list(plain(*[nd.array(x) for x in inputs])), outs):
        np.testing.assert_array_equal(eager, hybrid)

    net.export(str(tmp_path / name))
    assert read(tmp_path / (name + "-symbol.json")) == read(os.path.join(HERE, name + "-symbol.json"))
    assert read(tmp_path / (name + "-0000.params")) == read(os.path.join(HERE, name + "-0000.params"))


@pytest.mark.parametrize("name", CASES)
def test_symbolblock_imports_mxnets_export(name):
    inputs, expected = golden(name)
    block = gluon.SymbolBlock.imports(os.path.join(HERE, name + "-symbol.json"),
                                      input_names(inputs),
                                      os.path.join(HERE, name + "-0000.params"))
    outs = block(*[nd.array(x) for x in inputs])
    check(as_list(outs), expected)
    # The graph our eager block computes, node for node: the same numbers.
    plain, _ = ready(name, hybridize=False)
    for eager, imported in zip(as_list(plain(*[nd.array(x) for x in inputs])), as_list(outs)):
        np.testing.assert_array_equal(imported, eager)


@pytest.mark.parametrize("name", CASES)
def test_loaded_contrib_graphs_write_back_the_same_text(name):
    text = read(os.path.join(HERE, name + "-symbol.json"), "r")
    graph = sym.load_json(text)
    assert graph.tojson() == text
    mxnet_graph = json.loads(text)
    assert len(graph.list_outputs()) == len(mxnet_graph["heads"])


def test_imported_graph_trains_as_the_eager_block():
    # Gradients through the interleaved attention products, arange_like, quadratic and the
    # straight-through and gradient-multiplier ops: the imported graph's equal the eager block's.
    inputs, _ = golden("attention")
    block = gluon.SymbolBlock.imports(os.path.join(HERE, "attention-symbol.json"), "data",
                                      os.path.join(HERE, "attention-0000.params"))
    plain, _ = ready("attention", hybridize=False)
    grads = []
    for net in (block, plain):
        with autograd.record():
            loss = (net(nd.array(inputs[0])) * nd.arange(24).reshape((1, 1, 24))).sum()
        loss.backward()
        grads.append({name.split("_", 1)[1]: p.grad().asnumpy()
                      for name, p in net.collect_params().items()})
    assert sorted(grads[0]) == sorted(grads[1])
    for key, value in grads[0].items():
        assert np.abs(value).sum() > 0
        np.testing.assert_array_equal(value, grads[1][key])


def test_batchnorm_relu_updates_running_statistics_when_imported():
    inputs, _ = golden("bn_relu")
    block = gluon.SymbolBlock.imports(os.path.join(HERE, "bn_relu-symbol.json"), "data",
                                      os.path.join(HERE, "bn_relu-0000.params"))
    plain, _ = ready("bn_relu", hybridize=False)
    for net in (block, plain):
        data = nd.array(inputs[0])
        data.attach_grad()
        with autograd.record():
            out = net(data)
        out.backward()          # MXNet's CPU updates the running statistics in the backward
    ours = {k.split("_", 2)[2]: p.data().asnumpy() for k, p in block.collect_params().items()}
    theirs = {k.split("_", 2)[2]: p.data().asnumpy() for k, p in plain.collect_params().items()}
    moved = 0
    for key, value in ours.items():
        np.testing.assert_array_equal(value, theirs[key])
        if key.endswith("running_mean"):
            moved += int(np.abs(value).max() > 0.15)   # seeded within +-0.1
    assert moved >= 1


def test_contrib_namespace_records_mxnets_nodes():
    with NameManager():
        data = sym.var("data")
        nms = sym.contrib.box_nms(data, overlap_thresh=0.3, topk=2)
        nms2 = sym.contrib.box_non_maximum_suppression(data)
        target = sym.contrib.MultiBoxTarget(data, data, data)
        bn = sym.contrib.BatchNormWithReLU(data, *[sym.var(n) for n in "gbmv"],
                                           output_mean_var=True)
        roi = sym.ROIPooling(data, data, pooled_size=(2, 2), spatial_scale=1.0)
        out = sym.Group([nms, nms2, target, bn, roi])
    assert out.list_outputs() == [
        "box_nms0_output0", "box_non_maximum_suppression0_output0",
        "multiboxtarget0_loc_target", "multiboxtarget0_loc_mask", "multiboxtarget0_cls_target",
        "batchnormwithrelu0_output", "batchnormwithrelu0_mean", "batchnormwithrelu0_var",
        "roipooling0_output"]
    graph = json.loads(out.tojson())
    ops = [(n["op"], n.get("attrs")) for n in graph["nodes"] if n["op"] != "null"]
    assert ops[0] == ("_contrib_box_nms", {"overlap_thresh": "0.3", "topk": "2"})
    assert ops[1] == ("_contrib_box_nms", None)
    assert [op for op, _ in ops[2:]] == ["_contrib_MultiBoxTarget", "_contrib_BatchNormWithReLU",
                                         "ROIPooling"]
    # Outputs per node as MXNet counts them (box_nms and ROIPooling keep a hidden one,
    # BatchNormWithReLU a fourth), and its statistics are auxiliary states.
    assert np.diff(graph["node_row_ptr"]).tolist() == [1, 2, 2, 3, 1, 1, 1, 1, 4, 2]
    assert out.list_auxiliary_states() == ["m", "v"]


def test_contrib_namespace_refuses_what_it_cannot_record():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_op'"):
        sym.contrib.no_such_op
    with pytest.raises(AttributeError, match="records a subgraph"):
        sym.contrib.foreach
    with pytest.raises(TypeError, match="contrib.box_iou takes at most 1 arguments"):
        sym.contrib.box_iou(sym.var("a"), sym.var("b"), "corner", 1)

    class Loop(gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            out, _ = F.contrib.foreach(lambda d, s: (d * 2, s), x, [])
            return out

    net = Loop()
    net.hybridize()
    np.testing.assert_array_equal(net(nd.ones((2, 3))).asnumpy(), np.full((2, 3), 2, np.float32))
    with pytest.raises(RuntimeError, match="foreach"):
        net.export("unused")


def test_symbolblock_names_a_node_it_cannot_run():
    text = read(os.path.join(HERE, "detections-symbol.json"), "r")
    bad = text.replace('"_contrib_box_iou"', '"_contrib_box_iou_v2"')
    graph = sym.load_json(bad)
    with pytest.raises(sym.MXNetSymbolError, match="_contrib_box_iou_v2"):
        gluon.SymbolBlock(graph, [sym.var("data")])
