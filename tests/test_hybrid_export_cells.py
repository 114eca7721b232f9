"""Recurrent cells unrolled inside a HybridBlock, against real MXNet 1.9.1: tests/data/hybrid_export
holds MXNet's own export of each network of export_cases.CELL_CASES and its output
(make_export_golden.py). Our export must be MXNet's files byte for byte, and SymbolBlock.imports of
MXNet's files (begin states recorded with batch size 0) must give MXNet's output."""
from __future__ import annotations

import os

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import gluon, nd
from trainer_cli import symbol as sym

from export_cases import CELL_CASES, build_cell, build_language_model, set_weights

HERE = os.path.join(os.path.dirname(__file__), "data", "hybrid_export")


def golden(name):
    with np.load(os.path.join(HERE, name + "-io.npz"), allow_pickle=False) as f:
        inputs = tuple(f["x%d" % i] for i in range(len(f.files) - 1))
        return inputs, f["out"]


def read(path):
    with open(path, "rb") as f:
        return f.read()


@pytest.mark.parametrize("name", CELL_CASES)
def test_unrolled_cells_export_mxnets_files(name, tmp_path):
    inputs, expected = golden(name)
    net, _ = build_cell(name, mx)
    net.initialize()
    net.hybridize()
    net(*[nd.array(x) for x in inputs])
    set_weights(net, mx)
    out = net(*[nd.array(x) for x in inputs]).asnumpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    net.export(str(tmp_path / name))
    assert read(tmp_path / (name + "-symbol.json")) == read(os.path.join(HERE, name + "-symbol.json"))
    assert read(tmp_path / (name + "-0000.params")) == read(os.path.join(HERE, name + "-0000.params"))


@pytest.mark.parametrize("name", CELL_CASES)
def test_symbolblock_runs_mxnets_cell_exports(name):
    inputs, expected = golden(name)
    names = ["data"] if len(inputs) == 1 else ["data%d" % i for i in range(len(inputs))]
    block = gluon.SymbolBlock.imports(os.path.join(HERE, name + "-symbol.json"), names,
                                      os.path.join(HERE, name + "-0000.params"))
    out = block(*[nd.array(x) for x in inputs]).asnumpy()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
    # Another batch size: the begin states take it from the data.
    batch_axis = build_cell(name, mx)[0]._layout.find("N")
    wider = [np.concatenate([x, x], axis=batch_axis if i == 0 else 0)
             for i, x in enumerate(inputs)]
    out2 = block(*[nd.array(x) for x in wider]).asnumpy()
    np.testing.assert_allclose(out2[:len(expected)], expected, rtol=1e-5, atol=1e-6)


def test_zeros_whose_batch_nothing_fixes_are_refused(tmp_path):
    data = sym.var("data")
    both = sym.Group([sym.elemwise_add(sym.relu(sym.zeros(shape=(0, 3), name="s")), data)])
    both.save(str(tmp_path / "ok-symbol.json"))
    block = gluon.SymbolBlock.imports(str(tmp_path / "ok-symbol.json"), ["data"])
    np.testing.assert_array_equal(block(nd.ones((4, 3))).asnumpy(), np.ones((4, 3)))
    lonely = sym.Group([sym.elemwise_add(sym.relu(sym.zeros(shape=(0, 3), name="s")),
                                         sym.zeros(shape=(0, 3), name="t")), data])
    lonely.save(str(tmp_path / "lonely-symbol.json"))
    block = gluon.SymbolBlock.imports(str(tmp_path / "lonely-symbol.json"), ["data"])
    with pytest.raises(sym.MXNetSymbolError, match="unknown \\(0\\) dimensions"):
        block(nd.ones((4, 3)))
    through = sym.Group([sym.elemwise_add(sym.reshape(sym.zeros(shape=(0, 3), name="s"),
                                                      shape=(-1, 3)), data)])
    through.save(str(tmp_path / "through-symbol.json"))
    block = gluon.SymbolBlock.imports(str(tmp_path / "through-symbol.json"), ["data"])
    with pytest.raises(sym.MXNetSymbolError, match="\\(Reshape\\).*through operator 'Reshape'"):
        block(nd.ones((4, 3)))


def test_a_cell_stepped_in_hybrid_forward_records_without_disturbing_the_eager_run(tmp_path):
    rnn = gluon.rnn

    class Step(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.cell = rnn.ZoneoutCell(rnn.LSTMCell(3, input_size=4), 0.3, 0.3)

        def hybrid_forward(self, F, x):
            states = self.cell.begin_state(batch_size=2, func=F.zeros)
            outs = []
            for t in range(2):
                out, states = self.cell(F.reshape(F.slice_axis(x, axis=1, begin=t, end=t + 1),
                                                  (0, -1)), states)
                outs.append(out)
            return F.concat(*outs, dim=1)

    net = Step(prefix="step_")
    net.initialize(mx.init.Xavier())
    x = nd.array(np.random.RandomState(0).uniform(-1, 1, (2, 2, 4)))
    eager = net(x).asnumpy()
    net.cell.reset()
    net.hybridize()
    np.testing.assert_array_equal(net(x).asnumpy(), eager)   # the recording left the cell alone
    net.export(str(tmp_path / "step"))
    graph = sym.load(str(tmp_path / "step-symbol.json"))
    names = [n for n in graph.get_internals().list_outputs() if n.endswith("_out_output")]
    assert names == ["step_lstm0_t0_out_output", "step_lstm0_t1_out_output"]
    block = gluon.SymbolBlock.imports(str(tmp_path / "step-symbol.json"), ["data"],
                                      str(tmp_path / "step-0000.params"))
    np.testing.assert_allclose(block(x).asnumpy(), eager, rtol=1e-6, atol=1e-7)


def test_inputs_and_outputs_nested_in_lists_export_as_mxnet_flattens_them(tmp_path):
    with np.load(os.path.join(HERE, "lm_states-io.npz"), allow_pickle=False) as f:
        x, h, c = f["x0"], f["x1"], f["x2"]
        expected = [f["out0"], f["out1"], f["out2"]]
    net, _ = build_language_model(mx)
    net.initialize()
    net.hybridize()
    net(nd.array(x), [nd.array(h), nd.array(c)])
    set_weights(net, mx)
    scores, states = net(nd.array(x), [nd.array(h), nd.array(c)])
    assert isinstance(states, list) and len(states) == 2
    for got, want in zip([scores] + states, expected):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)
    net.export(str(tmp_path / "lm"))
    assert read(tmp_path / "lm-symbol.json") == read(os.path.join(HERE, "lm_states-symbol.json"))
    assert read(tmp_path / "lm-0000.params") == read(os.path.join(HERE, "lm_states-0000.params"))
    block = gluon.SymbolBlock.imports(os.path.join(HERE, "lm_states-symbol.json"),
                                      ["data0", "data1", "data2"],
                                      os.path.join(HERE, "lm_states-0000.params"))
    outs = block(nd.array(x), nd.array(h), nd.array(c))
    for got, want in zip(outs, expected):
        np.testing.assert_allclose(got.asnumpy(), want, rtol=1e-5, atol=1e-6)
