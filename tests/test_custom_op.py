"""``mx.operator`` and ``nd.Custom``: Python custom operators run as MXNet 1.9.1 runs them.

The recorded cases (tests/data/mxnet_custom_op/custom_op.npz, from the real MXNet by the same
``custom_op_cases.record``) give each op's outputs, gradients, auxiliary states, what its
forward saw, Gluon blocks calling ``F.Custom`` trained for two steps (hybridized and not), the
graphs they export (the same JSON, byte for byte) and what a ``SymbolBlock`` importing them
computes. The other tests check the protocol independently of the recorded bits (a finite
difference, how often backward runs, what backward is handed) and the errors."""
import os
import sys
import warnings

import numpy as np
import pytest

import replay
import trainer_cli as mx
from trainer_cli import autograd, nd
from trainer_cli.base import MXNetError, NotInTrainerCLIError, ShapeError
from trainer_cli.ndarray.custom import Custom
from trainer_cli.operator import CustomOpError
from trainer_cli.symbol import MXNetSymbolError

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_custom_op")
sys.path.insert(0, HERE)
import custom_op_cases  # noqa: E402


RECORDED = dict(np.load(os.path.join(HERE, "custom_op.npz")))
with warnings.catch_warnings():
    warnings.simplefilter("ignore")     # re-registering the cases' ops warns, as in MXNet
    OURS = custom_op_cases.record(mx)

# Where the ops' bodies call nd operators that agree with MXNet's to rounding only, so the
# results do too (the Custom machinery adds no arithmetic of its own): mean over an axis and
# sigmoid in float32 (last-ulp differences), float16 sums (MXNet accumulates them otherwise),
# a float64 sum of squares, Dense (MXNet's runs through oneDNN). With the variable's
# grad_req='add' MXNet hands backward the gradient buffer with req 'add' and the op adds into
# it; here backward writes a fresh buffer that is then added: the same terms, another order.
TOLERANT = {
    "runmean/": 1e-6, "mimo_net": 1e-6, "rbm": 1e-6, "softmax_net": 1e-6,
    "addgrad/accumulated": 1e-6, "mimo_float16/": 2e-3, "mimo_float64/": 1e-13,
}


def _tolerance(name):
    for prefix, rtol in TOLERANT.items():
        if name.startswith(prefix):
            return rtol
    return None


def test_every_recorded_case_is_here():
    assert sorted(OURS) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(k for k in RECORDED if _tolerance(k) is None))
def test_each_case_is_mxnets_bits(name):
    replay.same_bits(OURS[name], RECORDED[name])


@pytest.mark.parametrize("name", sorted(k for k in RECORDED if _tolerance(k) is not None))
def test_cases_through_rounding_ops_are_mxnets_to_rounding(name):
    want = RECORDED[name]
    got = replay.same_layout(OURS[name], want)
    if want.dtype.kind == "f":
        rtol = _tolerance(name)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(np.abs(want).max(), 1))
    else:
        np.testing.assert_array_equal(got, want)


def test_exported_graphs_are_mxnets_json():
    keys = [k for k in RECORDED if k.endswith("/symbol_json")]
    assert len(keys) == 3
    for key in keys:
        assert str(OURS[key]) == str(RECORDED[key])
    graph = mx.sym.load_json(str(RECORDED["mimo_net/symbol_json"]))
    assert graph.list_auxiliary_states() == ["mimo_net_mean"]
    assert graph.list_arguments() == ["data", "mimo_net_weight"]


# ----------------------------------------------------------------------------- protocol
class _Log:
    calls = []


@mx.operator.register("t_probe")
class _ProbeProp(mx.operator.CustomOpProp):
    """Two arguments, two outputs (the second never written), a string keyword argument."""

    def __init__(self, scale="1", need_top_grad="True"):
        super().__init__(need_top_grad=need_top_grad == "True")
        _Log.calls.append(("init", scale))
        self.scale = float(scale)

    def list_arguments(self):
        return ["data", "other"]

    def list_outputs(self):
        return ["out", "unwritten"]

    def infer_shape(self, in_shape):
        _Log.calls.append(("infer_shape", in_shape))
        return in_shape, [in_shape[0], in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        _Log.calls.append(("create", ctx, shapes, dtypes))
        return _Probe(self.scale)


class _Probe(mx.operator.CustomOp):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, is_train, req, in_data, out_data, aux):
        _Log.calls.append(("forward", is_train, req, autograd.is_recording(),
                           mx.current_context()))
        self.assign(out_data[0], req[0], in_data[0] * self.scale + in_data[1])

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        _Log.calls.append(("backward", req, [g.asnumpy().copy() for g in in_grad],
                           [type(g).__name__ for g in out_grad]))
        top = out_grad[0] if out_grad[0].shape else nd.ones(in_data[0].shape)
        self.assign(in_grad[0], req[0], top * self.scale)
        self.assign(in_grad[1], req[1], top)


def test_forward_sees_strings_ints_and_a_paused_recording():
    del _Log.calls[:]
    x, y = nd.array([[1.0, 2.0]]), nd.array([[3.0, 4.0]])
    outs = Custom(x, y, op_type="t_probe", scale=2, name="ignored")
    assert [c[0] for c in _Log.calls] == ["init", "infer_shape", "create", "forward"]
    assert _Log.calls[0] == ("init", "2")
    assert _Log.calls[1] == ("infer_shape", [[1, 2], [1, 2]])
    assert _Log.calls[2][1] == mx.cpu() and _Log.calls[2][2:] == ([[1, 2], [1, 2]], [0, 0])
    is_train, req, recording, ctx = _Log.calls[3][1:]
    assert is_train == 0 and type(is_train) is int and req == ["write", "write"]
    assert recording is False and ctx == mx.cpu()
    assert outs[0].asnumpy().tolist() == [[5.0, 8.0]]
    # MXNet leaves an output forward does not write uninitialised; here it is zeros.
    assert outs[1].asnumpy().tolist() == [[0.0, 0.0]]
    with autograd.record():
        Custom(x, y, op_type="t_probe")
    assert _Log.calls[-1][1] == 1 and _Log.calls[-1][3] is False
    if hasattr(nd, "Custom"):
        assert nd.Custom(x, y, op_type="t_probe")[0].asnumpy().tolist() == [[4.0, 6.0]]


def test_backward_runs_once_with_mxnets_req_and_zeroed_in_grad():
    x, y = nd.array([[1.0, 2.0]]), nd.array([[3.0, 4.0]])
    x.attach_grad()
    del _Log.calls[:]
    with autograd.record():
        a, b = Custom(x, y, op_type="t_probe", scale=3)
        loss = (a * 2).sum() + (b * 5).sum()
    loss.backward()
    backward = [c for c in _Log.calls if c[0] == "backward"]
    assert len(backward) == 1
    req, in_grad, out_grad_types = backward[0][1:]
    assert req == ["write", "null"]        # y needs no gradient
    assert all((g == 0).all() for g in in_grad)
    assert out_grad_types == ["NDArray", "NDArray"]
    assert x.grad.asnumpy().tolist() == [[6.0, 6.0]]


def test_need_top_grad_false_hands_no_out_grad():
    x, y = nd.array([[1.0, 2.0]]), nd.array([[3.0, 4.0]])
    x.attach_grad()
    y.attach_grad()
    del _Log.calls[:]
    with autograd.record():
        a, _ = Custom(x, y, op_type="t_probe", scale=3, need_top_grad=False)
        head = a * 7
    head.backward()
    backward = [c for c in _Log.calls if c[0] == "backward"][0]
    assert backward[1] == ["write", "write"]
    assert backward[3] == ["_NotDeclared", "_NotDeclared"]
    # The head gradient (7) does not reach backward, as in MXNet.
    assert x.grad.asnumpy().tolist() == [[3.0, 3.0]]
    assert y.grad.asnumpy().tolist() == [[1.0, 1.0]]


def test_multi_output_gradient_is_a_finite_difference():
    rng = np.random.RandomState(0)
    a0, b0 = rng.randn(3, 4), rng.randn(4)
    w0, w1 = rng.randn(3, 4), rng.randn(3)

    def loss_of(a, b):
        prod, sumsq, _ = Custom(nd.array(a, dtype="float64"), nd.array(b, dtype="float64"),
                                op_type="tc_mimo", scale=1.5)
        return float((prod.asnumpy() * w0).sum() + (sumsq.asnumpy() * w1).sum())

    a, b = nd.array(a0, dtype="float64"), nd.array(b0, dtype="float64")
    a.attach_grad()
    b.attach_grad()
    with autograd.record():
        prod, sumsq, arg = Custom(a, b, op_type="tc_mimo", scale=1.5)
        loss = (prod * nd.array(w0, dtype="float64")).sum() \
            + (sumsq * nd.array(w1, dtype="float64")).sum()
    loss.backward()
    assert arg.dtype == np.int32 and sumsq.shape == (3,)
    eps = 1e-6
    for x0, grad, which in ((a0, a.grad.asnumpy(), 0), (b0, b.grad.asnumpy(), 1)):
        numeric = np.zeros_like(x0)
        for i in np.ndindex(x0.shape):
            up, down = x0.copy(), x0.copy()
            up[i] += eps
            down[i] -= eps
            args_up = (up, b0) if which == 0 else (a0, up)
            args_down = (down, b0) if which == 0 else (a0, down)
            numeric[i] = (loss_of(*args_up) - loss_of(*args_down)) / (2 * eps)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_aux_state_is_updated_in_place_and_gets_no_gradient():
    x = nd.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]])
    mean = nd.zeros((3,))
    mean.attach_grad()
    x.attach_grad()
    with autograd.record():
        y = Custom(x, mean, op_type="tc_runmean", momentum=0.5)
    y.backward()
    assert mean.asnumpy().tolist() == [1.0, 1.5, 2.0]     # 0.5 * 0 + 0.5 * column means
    assert mean.grad.asnumpy().tolist() == [0.0, 0.0, 0.0]
    assert x.grad.asnumpy().tolist() == [[1.0] * 3] * 2
    Custom(x, mean, op_type="tc_runmean", momentum=0.5)   # predict mode: not updated
    assert mean.asnumpy().tolist() == [1.0, 1.5, 2.0]


def test_out_argument_receives_the_outputs():
    x, y = nd.array([[1.0, 2.0]]), nd.array([[3.0, 4.0]])
    o0, o1 = nd.ones((1, 2)), nd.ones((1, 2))
    got = Custom(x, y, op_type="t_probe", out=[o0, o1])
    assert got[0] is o0 and got[1] is o1
    assert o0.asnumpy().tolist() == [[4.0, 6.0]] and o1.asnumpy().tolist() == [[0.0, 0.0]]


# ----------------------------------------------------------------------------- errors
@mx.operator.register("t_bad")
class _BadProp(mx.operator.CustomOpProp):
    def __init__(self, mode="ok"):
        super().__init__(need_top_grad=True)
        self.mode = mode

    def infer_shape(self, in_shape):
        if self.mode == "inshape":
            return [[9, 9]], [in_shape[0]], []
        if self.mode == "entries":
            return in_shape, [in_shape[0], in_shape[0]], []
        if self.mode == "outshape":
            return in_shape, [[3, 3]], []
        return in_shape, [in_shape[0]], []

    def infer_type(self, in_type):
        if self.mode == "intype":
            return [np.float64], [np.float64], []
        return super().infer_type(in_type)

    def create_operator(self, ctx, shapes, dtypes):
        if self.mode == "create":
            raise KeyError("no such thing")
        return _Bad(self.mode)


class _Bad(mx.operator.CustomOp):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, is_train, req, in_data, out_data, aux):
        if self.mode == "raise":
            raise RuntimeError("boom in forward")
        if self.mode == "replace":
            out_data[0] = in_data[0] * 2
            return
        self.assign(out_data[0], req[0], in_data[0] * 2)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        if self.mode == "braise":
            raise ValueError("boom in backward")
        self.assign(in_grad[0], req[0], out_grad[0] * 2)


def test_unknown_or_missing_op_type_is_mxnets_message():
    x = nd.ones((2, 2))
    with pytest.raises(MXNetError, match="Cannot find custom operator nosuch"):
        Custom(x, op_type="nosuch")
    with pytest.raises(ValueError, match="Cannot find custom operator nosuch"):
        Custom(x, op_type="nosuch")
    with pytest.raises(ValueError, match="Required argument `op_type` is missing"):
        Custom(x)


def test_bad_inputs_are_refused():
    x = nd.ones((2, 2))
    with pytest.raises(ValueError, match=r"'t_probe' takes 2 inputs \(arguments \['data', "
                                         r"'other'\], then auxiliary states \[\]\), got 1"):
        Custom(x, op_type="t_probe")
    with pytest.raises(TypeError, match="input 1 \\(other\\) must be an NDArray, got ndarray"):
        Custom(x, np.ones((2, 2)), op_type="t_probe")
    with pytest.raises(ValueError, match="all inputs must be on one device"):
        Custom(x, nd.ones((2, 2), ctx=mx.cpu(1)), op_type="t_probe")
    with pytest.raises(CustomOpError, match=r"_ProbeProp\(\*\*.*\) raised TypeError"):
        Custom(x, x, op_type="t_probe", unknown_option=1)


def test_shape_and_type_inconsistencies_name_the_operator():
    x = nd.ones((2, 2))
    with pytest.raises(ShapeError, match=r"'t_bad': input 'data' has shape \(2, 2\) but "
                                         r"infer_shape gives \(9, 9\).*Provided = \[2,2\]"):
        Custom(x, op_type="t_bad", mode="inshape")
    with pytest.raises(CustomOpError, match="expecting 1 entries in returned output shapes, got 2"):
        Custom(x, op_type="t_bad", mode="entries")
    with pytest.raises(ValueError, match="has dtype float32 but infer_type gives float64"):
        Custom(x, op_type="t_bad", mode="intype")
    with pytest.raises(ShapeError, match=r"input 'running_mean' has shape \(4,\) but "
                                         r"infer_shape gives \(2,\)"):
        Custom(x, nd.zeros((4,)), op_type="tc_runmean")
    with pytest.raises(ValueError, match="'running_mean' has dtype float64 but infer_type gives "
                                         "float32 .*Provided = float64"):
        Custom(x, nd.zeros((2,), dtype="float64"), op_type="tc_runmean")
    # The default storage rule refuses sparse inputs, with MXNet's message.
    with pytest.raises(CustomOpError, match="Default infer_storage_type implementation doesnt "
                                            "allow non default stypes"):
        Custom(x.tostype("row_sparse"), op_type="custom_op")
    # The output infer_shape declares is not what forward assigns.
    with pytest.raises(CustomOpError, match="'t_bad': forward raised ValueError") as info:
        Custom(x, op_type="t_bad", mode="outshape")
    assert isinstance(info.value.__cause__, ValueError)


def test_exceptions_in_the_ops_methods_propagate_naming_op_and_method():
    x = nd.ones((2, 2))
    with pytest.raises(CustomOpError, match="'t_bad': forward raised RuntimeError: boom in "
                                            "forward") as info:
        Custom(x, op_type="t_bad", mode="raise")
    assert isinstance(info.value.__cause__, RuntimeError)
    with pytest.raises(CustomOpError, match="'t_bad': create_operator raised KeyError"):
        Custom(x, op_type="t_bad", mode="create")
    with pytest.raises(CustomOpError, match=r"forward replaced out_data\[0\] instead of writing"):
        Custom(x, op_type="t_bad", mode="replace")
    x.attach_grad()
    with autograd.record():
        y = Custom(x, op_type="t_bad", mode="braise")
    with pytest.raises(CustomOpError, match="'t_bad': backward raised ValueError: boom in "
                                            "backward"):
        y.backward()
    # Recording and training are back as they were.
    assert not autograd.is_recording() and not autograd.is_training()


def test_second_order_gradient_names_the_operator():
    x = nd.ones((2, 2))
    x.attach_grad()
    with autograd.record():
        y = Custom(x, op_type="tc_addgrad")
    with pytest.raises(NotImplementedError, match="recorded by nd.Custom\\(op_type='tc_addgrad'"):
        autograd.grad(y, x, create_graph=True)


def test_undeclared_out_grad_says_why():
    @mx.operator.register("t_reads_top")
    class Prop(mx.operator.CustomOpProp):
        def __init__(self):
            super().__init__(need_top_grad=False)

        def create_operator(self, ctx, shapes, dtypes):
            class Op(mx.operator.CustomOp):
                def forward(self, is_train, req, in_data, out_data, aux):
                    self.assign(out_data[0], req[0], in_data[0])

                def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
                    self.assign(in_grad[0], req[0], out_grad[0] * 2)
            return Op()

    x = nd.ones((2,))
    x.attach_grad()
    with autograd.record():
        y = Custom(x, op_type="t_reads_top")
    with pytest.raises(CustomOpError, match=r"out_grad\[0\] is not available in backward: "
                                            "the prop's declare_backward_dependency"):
        y.backward()


# ----------------------------------------------------------------------------- module
def test_operator_module_is_mxnets():
    import trainer_cli.operator as op
    assert mx.operator is op
    assert "Custom" in op.get_all_registered_operators()
    assert "FullyConnected" in op.get_all_registered_operators()
    with pytest.raises(NotInTrainerCLIError, match="NumpyOp"):
        op.NumpyOp
    with pytest.raises(TypeError, match="subclass of CustomOpProp"):
        op.register("t_not_a_prop")(object)
    with pytest.warns(UserWarning, match="overriding existing custom operator t_twice"):
        op.register("t_twice")(op.CustomOpProp)
        op.register("t_twice")(op.CustomOpProp)
    # The default prop: one argument, one output of its shape, an op that writes nothing.
    assert Custom(nd.ones((2, 3)), op_type="custom_op").asnumpy().tolist() == [[0.0] * 3] * 2
    assign = op.CustomOp().assign
    dst = nd.ones((2,))
    assign(dst, "add", nd.array([1.0, 2.0]))
    assign(dst, "null", nd.array([9.0, 9.0]))
    assert dst.asnumpy().tolist() == [2.0, 3.0]
    assign(dst, "inplace", nd.array([5.0, 6.0]))
    assert dst.asnumpy().tolist() == [5.0, 6.0]


# ----------------------------------------------------------------------------- symbols
def test_symbol_custom_records_mxnets_node():
    data = mx.sym.var("data")
    s = mx.sym.Custom(data, op_type="tc_runmean", momentum=0.5, name="rm")
    assert s.list_arguments() == ["data"]
    assert s.list_auxiliary_states() == ["rm_running_mean"]
    assert s.list_outputs() == ["rm_output"]
    m = mx.sym.Custom(a=data, op_type="tc_mimo", scale=2)
    assert m.list_arguments() == ["data", "custom0_b"]
    assert m.list_outputs() == ["custom0_prod", "custom0_sumsq", "custom0_argmax"]
    assert m.list_attr() == {"op_type": "tc_mimo", "scale": "2"}
    with pytest.raises(MXNetSymbolError, match="Cannot find custom operator nosuch"):
        mx.sym.Custom(data, op_type="nosuch")
    with pytest.raises(MXNetSymbolError, match="no input named"):
        mx.sym.Custom(data, wrong=data, op_type="tc_runmean")


def test_symbol_block_runs_custom_nodes_and_refuses_unregistered_ones(tmp_path):
    data = mx.sym.var("data")
    s = mx.sym.Custom(data, mx.sym.var("w"), op_type="tc_mimo", scale=2, name="m")
    block = mx.gluon.SymbolBlock(s[0] + 1, [data])
    weight = block.collect_params()["w"]
    weight.shape = (2,)
    weight.initialize()
    weight.set_data(nd.array([1.0, 2.0]))
    got = block(nd.array([[1.0, 1.0], [2.0, 3.0]]))
    assert got.asnumpy().tolist() == [[3.0, 5.0], [5.0, 13.0]]
    text = s.tojson().replace("tc_mimo", "t_never_registered")
    with pytest.raises(MXNetSymbolError, match="Cannot find custom operator t_never_registered"):
        mx.gluon.SymbolBlock(mx.sym.load_json(text), [mx.sym.var("data")])


def test_hybridized_block_with_custom_trains_like_the_eager_one():
    def run(hybrid):
        class Net(mx.gluon.HybridBlock):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                with self.name_scope():
                    self.fc = mx.gluon.nn.Dense(3, in_units=4)

            def hybrid_forward(self, F, x, label):
                return F.Custom(self.fc(x), label, op_type="tc_softmax")

        net = Net(prefix="n_")
        net.initialize(mx.init.Constant(0.1))
        if hybrid:
            net.hybridize()
        trainer = mx.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5})
        x = nd.array(np.arange(8, dtype=np.float32).reshape(2, 4) / 8)
        label = nd.array([0, 2])
        for _ in range(2):
            with autograd.record():
                out = net(x, label)
            out.backward()
            trainer.step(2)
        return net.fc.weight.data().asnumpy(), getattr(net, "_cached_graph", None)

    eager, _ = run(False)
    hybrid, graph = run(True)
    np.testing.assert_array_equal(eager, hybrid)
    assert not np.allclose(eager, 0.1)          # the op's gradient reached the weights
    assert graph is not None and not isinstance(graph, Exception)
