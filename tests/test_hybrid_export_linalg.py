"""``F.linalg.*`` in a hybrid_forward: a hybridized block records MXNet 1.9.1's ``_linalg_*``
nodes (its export is MXNet's file, text for text), and ``gluon.SymbolBlock`` runs MXNet's own
export of the same network with ``nd.linalg`` to its outputs (tests/export_linalg_cases.py;
recorded by tests/data/hybrid_export/linalg/make_linalg_golden.py)."""
import os

import numpy as np
import pytest

import trainer_cli as mx
from trainer_cli import gluon, nd, sym

import export_linalg_cases as cases

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "hybrid_export", "linalg")
IO = np.load(os.path.join(HERE, "linalg-io.npz"))


def _net():
    net = cases.linalg_net(mx)
    net.initialize()
    net(nd.array(IO["x"]), nd.array(IO["a"]))
    cases.set_weights(net, nd)
    return net


def test_export_writes_mxnets_file_and_the_same_numbers(tmp_path):
    net = _net()
    eager = [o.asnumpy() for o in net(nd.array(IO["x"]), nd.array(IO["a"]))]
    net.hybridize()
    outs = [o.asnumpy() for o in net(nd.array(IO["x"]), nd.array(IO["a"]))]
    for got, want, before in zip(outs, (IO["out%d" % i] for i in range(4)), eager):
        np.testing.assert_array_equal(got, before)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    net.export(str(tmp_path / "linalg"))
    with open(tmp_path / "linalg-symbol.json") as f, \
            open(os.path.join(HERE, "linalg-symbol.json")) as g:
        assert f.read() == g.read()


def test_symbolblock_runs_mxnets_export():
    block = gluon.SymbolBlock.imports(os.path.join(HERE, "linalg-symbol.json"), ["data0", "data1"],
                                      os.path.join(HERE, "linalg-0000.params"))
    outs = block(nd.array(IO["x"]), nd.array(IO["a"]))
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out.asnumpy(), IO["out%d" % i], rtol=1e-5, atol=1e-5)


def test_linalg_namespace_records_mxnets_nodes_and_refuses_others():
    # MXNet 1.9.1 writes this node for the same call: op, name and attributes.
    a, b = sym.var("a"), sym.var("b")
    text = sym.linalg.gemm2(a, b, transpose_a=True).tojson()
    assert ('"op": "_linalg_gemm2", \n      "name": "gemm20", \n      "attrs": {"transpose_a": '
            '"True"}' in text)
    assert len(sym.linalg.slogdet(a).list_outputs()) == 2
    with pytest.raises(AttributeError, match="nd.linalg"):
        sym.linalg.qr
