"""Pieces of MXNet 1.9.1's own Python tutorials that failed here: each test states what the
real MXNet 1.9.1 does (the expected values were printed by it)."""
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as spsp

import trainer_cli as mx
from trainer_cli import autograd, gluon, nd

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_script_leaving_a_worker_dataloader_in_its_globals_exits():
    # The gotchas / crash-course tutorials: a module-level DataLoader(num_workers=...) is
    # collected at interpreter exit, when its pool can no longer be closed on a new thread.
    script = textwrap.dedent("""
        import numpy as np
        from trainer_cli import gluon, nd
        data = nd.array(np.arange(64, dtype=np.float32).reshape(32, 2))
        loader = gluon.data.DataLoader(gluon.data.ArrayDataset(data, nd.zeros(32)),
                                       batch_size=8, num_workers=2)
        threads = gluon.data.DataLoader(gluon.data.ArrayDataset(data), batch_size=8,
                                        num_workers=2, thread_pool=True)
        print(sum(float(x.sum().asscalar()) for x, _ in loader),
              sum(float(x.sum().asscalar()) for x in threads))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [_REPO] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["2016.0", "2016.0"]


def test_trainer_init_kvstore_as_mxnet():
    # learning_rate_finder.md calls trainer._init_kvstore() before any step.
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize(mx.init.One())
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
    assert trainer._kv_initialized is False
    trainer._init_kvstore()
    assert trainer._kv_initialized is True
    assert trainer._kvstore is None and trainer._update_on_kvstore is None
    local = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5}, kvstore="local")
    local._init_kvstore()
    assert local._kv_initialized is True and local._kvstore is None
    with autograd.record():
        y = net(nd.ones((4, 3))).sum()
    y.backward()
    trainer.step(4)
    assert net.weight.data().asnumpy().tolist() == [[0.5] * 3, [0.5] * 3]


def test_sparse_array_from_scipy_csr_matrix():
    # sparse/csr.md: mx.nd.sparse.array(scipy_csr). Unsorted, duplicated column ids are
    # summed into a copy; the caller's matrix is left as given; the dtype is kept.
    c = spsp.csr_matrix((np.array([1., 2., 3., 4.]), np.array([2, 0, 2, 1]),
                         np.array([0, 3, 3, 4])), shape=(3, 4))
    d = nd.sparse.array(c)
    assert isinstance(d, nd.sparse.CSRNDArray)
    assert d.dtype == np.float64 and d.shape == (3, 4) and d.context == mx.cpu(0)
    assert d.data.asnumpy().tolist() == [2.0, 4.0, 4.0]
    assert d.indices.asnumpy().tolist() == [0, 2, 1]
    assert d.indptr.asnumpy().tolist() == [0, 2, 2, 3]
    assert d.indices.dtype == np.int64 and d.indptr.dtype == np.int64
    assert d.asnumpy().tolist() == [[2.0, 0.0, 4.0, 0.0], [0.0] * 4, [0.0, 4.0, 0.0, 0.0]]
    assert c.indices.tolist() == [2, 0, 2, 1] and c.data.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert nd.sparse.array(c, dtype="float32").dtype == np.float32
    ints = nd.sparse.array(spsp.csr_matrix(np.eye(2, dtype=np.int32)))
    assert ints.dtype == np.int32 and ints.asnumpy().tolist() == [[1, 0], [0, 1]]


@pytest.mark.parametrize("source", [spsp.coo_matrix(np.eye(2)), np.ones((2, 2))])
def test_sparse_array_refuses_other_sources(source):
    # MXNet: ValueError ('Unexpected source_array type: ', coo_matrix) / ('Please use
    # mx.nd.array ...', ndarray)
    with pytest.raises(ValueError, match="source_array"):
        nd.sparse.array(source)


def test_constant_initializer_of_an_array_dumps_as_lists():
    # custom_layer_beginners.md: init=mx.init.Constant(scales.asnumpy()) on a hybridized block.
    assert mx.init.Constant(np.array([2.], dtype=np.float32)).dumps() == \
        '["constant", {"value": [2.0]}]'
    assert mx.init.Constant(nd.array([[1, 2], [3, 4]])).dumps() == \
        '["constant", {"value": [[1.0, 2.0], [3.0, 4.0]]}]'
    assert mx.init.Constant(3).dumps() == '["constant", {"value": 3}]'
    assert mx.init.Constant(0.5).dumps() == '["constant", {"value": 0.5}]'


def test_constant_initializer_dumps_a_list_and_dumps_again():
    # extend/custom_layer.md passes scales.asnumpy().tolist(): MXNet 1.9.1 fails there (its
    # dumps() calls .asnumpy() on the list) and on a second dumps() of an array value; here
    # both give the JSON the first call gives (docs/compat.md).
    init = mx.init.Constant([2.0])
    assert init.dumps() == init.dumps() == '["constant", {"value": [2.0]}]'
    init = mx.init.Constant(nd.array([2.0]))
    assert init.dumps() == init.dumps() == '["constant", {"value": [2.0]}]'
    # MXNet: TypeError: Object of type float32 is not JSON serializable
    assert mx.init.Constant(np.float32(2)).dumps() == '["constant", {"value": 2.0}]'


def test_hybridized_block_with_array_constant_init_runs_and_exports(tmp_path):
    class Scale(gluon.HybridBlock):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            with self.name_scope():
                self.scales = self.params.get(
                    "scales", shape=(1,), init=mx.init.Constant(nd.array([2]).asnumpy()))

        def hybrid_forward(self, F, x, scales):
            return F.broadcast_mul(x, scales)

    net = Scale(prefix="l_")
    net.initialize()
    net.hybridize()
    assert net(nd.array([1, 2, 3])).asnumpy().tolist() == [2.0, 4.0, 6.0]
    net.export(str(tmp_path / "scale"))
    graph = json.loads((tmp_path / "scale-symbol.json").read_text())
    inits = [n.get("attrs", {}).get("__init__") for n in graph["nodes"] if n["op"] == "null"]
    assert inits == [None, '["constant", {"value": [2.0]}]']


def test_parameter_repr_shows_the_dtype_as_given():
    # custom-layer.md prints parameters: MXNet shows the dtype as it was given.
    assert repr(gluon.Parameter("w", shape=(2, 3))) == \
        "Parameter w (shape=(2, 3), dtype=<class 'numpy.float32'>)"
    assert repr(gluon.Parameter("w", shape=(2, 3), dtype="float32")) == \
        "Parameter w (shape=(2, 3), dtype=float32)"
    assert repr(gluon.Parameter("w", shape=(2, 3), dtype=np.float16)) == \
        "Parameter w (shape=(2, 3), dtype=<class 'numpy.float16'>)"
    p = gluon.Parameter("w", shape=(2, 3))
    p.initialize()
    p.cast("float16")
    assert repr(p) == "Parameter w (shape=(2, 3), dtype=float16)"
    params = gluon.ParameterDict("b_")
    params.get("x", shape=(1,))
    assert repr(params) == "b_ (\n  Parameter b_x (shape=(1,), dtype=<class 'numpy.float32'>)\n)"
    dense = gluon.nn.Dense(3, in_units=2, prefix="d_")
    assert repr(dense.weight) == "Parameter d_weight (shape=(3, 2), dtype=float32)"
    assert repr(gluon.Constant("c", nd.array([1, 2]))) == \
        "Constant c (shape=(2,), dtype=<class 'numpy.float32'>)"


def test_shape_is_known_as_mxnet():
    # MXNet 1.9.1's answers outside its NumPy shape mode (printed by the real library).
    from trainer_cli.gluon.utils import shape_is_known
    assert [shape_is_known(s) for s in (None, (), (2, 3), (2, 0), (0,), (1,))] == \
        [False, False, True, False, False, True]
    with pytest.raises(ValueError, match="less than 0"):
        shape_is_known((2, -1))
