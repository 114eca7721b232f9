"""gluon.Parameter, Constant and ParameterDict against MXNet 1.9's semantics."""

import numpy as np
import pytest

import trainer_cli
from trainer_cli import autograd, cpu, gluon, nd
from trainer_cli import initializer as init
from trainer_cli.gluon.block import reset_name_counters
from trainer_cli.gluon.parameter import DeferredInitializationError


@pytest.fixture(autouse=True)
def _fresh_names():
    reset_name_counters()
    trainer_cli.random.seed(0)


def _backward_through(param, ctx=None, scale=1.0):
    """Record ``sum(scale * w)`` for the copy on ``ctx`` and back-propagate: grad becomes ``scale``."""
    with autograd.record():
        loss = (param.data(ctx) * scale).sum()
    loss.backward()


# ------------------------------------------------------------------------------ standalone use
def test_standalone_parameter_lifecycle(ctx):
    p = gluon.Parameter("w", shape=(2, 3), dtype="float32")
    assert p.name == "w" and p.shape == (2, 3) and p.grad_req == "write"
    assert p.lr_mult == 1.0 and p.wd_mult == 1.0
    p.initialize(ctx=ctx)
    w = p.data()
    assert w.shape == (2, 3) and w.dtype == np.float32 and w.context == ctx
    assert p.list_ctx() == [ctx]
    assert np.abs(w.asnumpy()).max() <= 0.07  # MXNet's default Uniform(0.07)
    np.testing.assert_array_equal(p.grad().asnumpy(), np.zeros((2, 3), np.float32))
    assert p.grad().context == ctx

    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    p.set_data(nd.array(value, ctx=ctx))
    np.testing.assert_array_equal(p.data().asnumpy(), value)
    assert p.data() is w, "set_data must write into the existing buffer"

    _backward_through(p, scale=3.0)
    np.testing.assert_array_equal(p.grad().asnumpy(), np.full((2, 3), 3.0, np.float32))
    p.zero_grad()
    np.testing.assert_array_equal(p.grad().asnumpy(), np.zeros((2, 3), np.float32))
    assert [a.shape for a in p.list_data()] == [(2, 3)]
    assert [g.shape for g in p.list_grad()] == [(2, 3)]


def test_int_shape_and_repr():
    p = gluon.Parameter("bias", shape=4)
    assert p.shape == (4,)
    assert "bias" in repr(p) and "(4,)" in repr(p)


def test_set_data_accepts_numpy_and_works_inside_record():
    p = gluon.Parameter("w", shape=(2,))
    p.initialize()
    with autograd.record():
        p.set_data(np.array([1.0, 2.0]))
    np.testing.assert_array_equal(p.data().asnumpy(), [1.0, 2.0])
    with pytest.raises(AssertionError):
        p.set_data(nd.zeros((3,)))


def test_errors_before_initialize():
    p = gluon.Parameter("w", shape=(2, 3))
    for access in (p.data, p.grad, p.list_data, p.list_grad, p.list_ctx):
        with pytest.raises(RuntimeError) as info:
            access()
        assert not isinstance(info.value, DeferredInitializationError)
        assert "w" in str(info.value)
    with pytest.raises(RuntimeError):
        p.set_data(nd.zeros((2, 3)))
    with pytest.raises(ValueError):
        p.reset_ctx(cpu(1))
    p.zero_grad()  # a no-op before initialization, as in MXNet


def test_unknown_shape_needs_deferred_init():
    with pytest.raises(ValueError, match="invalid shape"):
        gluon.Parameter("w", shape=(2, 0)).initialize()


def test_deferred_init_raises_until_shape_is_known():
    p = gluon.Parameter("w", shape=(2, 0), allow_deferred_init=True, init=init.One())
    p.initialize(ctx=[cpu(0), cpu(1)])
    assert p.list_ctx() == [cpu(0), cpu(1)]
    for access in (p.data, p.grad, p.list_data):
        with pytest.raises(DeferredInitializationError):
            access()
    p.reset_ctx(cpu(2))
    assert p.list_ctx() == [cpu(2)]
    p.shape = (2, 5)
    p._finish_deferred_init()
    assert p.list_ctx() == [cpu(2)]
    np.testing.assert_array_equal(p.data().asnumpy(), np.ones((2, 5), np.float32))


def test_deferred_init_resolved_at_first_forward():
    net = gluon.nn.Dense(3)
    net.initialize()
    assert net.weight.shape == (3, 0)
    with pytest.raises(DeferredInitializationError):
        net.weight.data()
    out = net(nd.ones((2, 7)))
    assert out.shape == (2, 3)
    assert net.weight.shape == (3, 7) and net.weight.data().shape == (3, 7)
    np.testing.assert_array_equal(net.bias.data().asnumpy(), np.zeros(3, np.float32))


def test_set_data_while_deferred_is_used_at_first_forward():
    net = gluon.nn.Dense(2, use_bias=False)
    net.initialize()
    w = np.array([[1.0, 2.0, 3.0], [0.0, -1.0, 0.5]], np.float32)
    net.weight.set_data(nd.array(w))
    x = np.array([[1.0, 1.0, 2.0]], np.float32)
    np.testing.assert_allclose(net(nd.array(x)).asnumpy(), x @ w.T)


def test_forward_without_initialize_is_a_runtime_error():
    net = gluon.nn.Dense(2, in_units=3)
    with pytest.raises(RuntimeError, match="not been initialized"):
        net(nd.ones((1, 3)))


def test_initialize_twice_warns_and_force_reinit_redraws():
    p = gluon.Parameter("w", shape=(50,))
    p.initialize()
    first = p.data().asnumpy()
    with pytest.warns(UserWarning, match="already initialized"):
        p.initialize()
    np.testing.assert_array_equal(p.data().asnumpy(), first)
    p.initialize(force_reinit=True)
    assert not np.array_equal(p.data().asnumpy(), first)


# ------------------------------------------------------------------------------ contexts
def test_copies_per_context_are_independent():
    p = gluon.Parameter("w", shape=(3,), init=init.Constant(2.0))
    p.initialize(ctx=[cpu(0), cpu(1)])
    assert p.list_ctx() == [cpu(0), cpu(1)]
    a, b = p.list_data()
    assert a.context == cpu(0) and b.context == cpu(1)
    assert p.data(cpu(1)) is b
    a[:] = 5.0
    np.testing.assert_array_equal(b.asnumpy(), [2.0, 2.0, 2.0])
    with cpu(1):
        assert p.data() is b  # several copies: data() picks the current context's
    assert p.data() is a
    with pytest.raises(RuntimeError, match="cpu\\(3\\)"):
        p.data(cpu(3))
    grads = p.list_grad()
    assert [g.context for g in grads] == [cpu(0), cpu(1)]
    assert grads[0] is not grads[1]

    p.set_data(nd.array([1.0, 2.0, 3.0]))
    for copy in p.list_data():
        np.testing.assert_array_equal(copy.asnumpy(), [1.0, 2.0, 3.0])


def test_fresh_grad_flag_per_copy():
    p = gluon.Parameter("w", shape=(2,))
    p.initialize(ctx=[cpu(0), cpu(1)])
    assert [d._fresh_grad for d in p.list_data()] == [False, False]
    _backward_through(p, cpu(1))
    assert [d._fresh_grad for d in p.list_data()] == [False, True]
    np.testing.assert_array_equal(p.grad(cpu(1)).asnumpy(), [1.0, 1.0])
    np.testing.assert_array_equal(p.grad(cpu(0)).asnumpy(), [0.0, 0.0])
    # The Trainer clears the flag after an update; it must be writable from Python.
    p.list_data()[1]._fresh_grad = False
    assert not p.data(cpu(1))._fresh_grad
    _backward_through(p, cpu(0))
    p.zero_grad()
    assert p.data(cpu(0))._fresh_grad, "zero_grad does not touch the flag (MXNet)"
    p.grad_req = "add"  # re-created gradient buffers start stale
    assert [d._fresh_grad for d in p.list_data()] == [False, False]


def test_reset_ctx_keeps_the_average_value():
    p = gluon.Parameter("w", shape=(2,))
    p.initialize(ctx=[cpu(0), cpu(1)])
    p.data(cpu(0))[:] = 1.0
    p.data(cpu(1))[:] = 3.0
    p.reset_ctx([cpu(2), cpu(3)])
    assert p.list_ctx() == [cpu(2), cpu(3)]
    for copy in p.list_data():
        np.testing.assert_array_equal(copy.asnumpy(), [2.0, 2.0])
    assert p.grad(cpu(3)).context == cpu(3)
    with pytest.raises(RuntimeError):
        p.data(cpu(0))
    with autograd.record():
        p.reset_ctx(cpu(0))  # must not be recorded into a graph
    assert p.data()._node is None


# ------------------------------------------------------------------------------ grad_req
def test_grad_req_write_overwrites_and_add_accumulates():
    p = gluon.Parameter("w", shape=(2,))
    p.initialize()
    _backward_through(p, scale=2.0)
    _backward_through(p, scale=2.0)
    np.testing.assert_array_equal(p.grad().asnumpy(), [2.0, 2.0])

    q = gluon.Parameter("v", shape=(2,), grad_req="add")
    q.initialize()
    _backward_through(q, scale=2.0)
    _backward_through(q, scale=3.0)
    np.testing.assert_array_equal(q.grad().asnumpy(), [5.0, 5.0])
    q.zero_grad()
    _backward_through(q, scale=1.0)
    np.testing.assert_array_equal(q.grad().asnumpy(), [1.0, 1.0])


def test_grad_req_null():
    p = gluon.Parameter("w", shape=(2,), grad_req="null")
    p.initialize()
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        p.grad()
    with pytest.raises(RuntimeError, match="grad_req='null'"):
        p.list_grad()
    p.zero_grad()
    x = nd.ones((2,))
    x.attach_grad()
    with autograd.record():
        loss = (p.data() * x).sum()
    loss.backward()
    np.testing.assert_array_equal(x.grad.asnumpy(), p.data().asnumpy())
    assert not p.data()._fresh_grad


def test_changing_grad_req_after_initialize():
    p = gluon.Parameter("w", shape=(2,))
    p.initialize()
    _backward_through(p, scale=4.0)
    p.grad_req = "add"  # fresh zero buffers, now accumulating
    np.testing.assert_array_equal(p.grad().asnumpy(), [0.0, 0.0])
    _backward_through(p)
    _backward_through(p)
    np.testing.assert_array_equal(p.grad().asnumpy(), [2.0, 2.0])
    p.grad_req = "null"
    with pytest.raises(RuntimeError):
        p.grad()
    p.grad_req = "write"
    np.testing.assert_array_equal(p.grad().asnumpy(), [0.0, 0.0])
    _backward_through(p, scale=5.0)
    np.testing.assert_array_equal(p.grad().asnumpy(), [5.0, 5.0])


def test_invalid_grad_req_and_non_differentiable():
    with pytest.raises(AssertionError):
        gluon.Parameter("w", grad_req="sometimes")
    with pytest.raises(ValueError):  # the same error is a ValueError as well
        gluon.Parameter("w", grad_req="sometimes")
    p = gluon.Parameter("w", shape=(1,), differentiable=False)
    assert p.grad_req == "null"
    p.grad_req = "write"
    assert p.grad_req == "null"


def test_lr_mult_and_wd_mult():
    p = gluon.Parameter("w", shape=(1,), lr_mult=2.0, wd_mult=0.0)
    assert (p.lr_mult, p.wd_mult) == (2.0, 0.0)
    net = gluon.nn.Dense(2, in_units=2)
    net.collect_params().setattr("lr_mult", 0.5)
    net.collect_params(".*bias").setattr("wd_mult", 0.0)
    assert net.weight.lr_mult == net.bias.lr_mult == 0.5
    assert (net.weight.wd_mult, net.bias.wd_mult) == (1.0, 0.0)


# ------------------------------------------------------------------------------ dtypes
def test_float64_parameter(ctx):
    p = gluon.Parameter("w", shape=(3,), dtype="float64")
    p.initialize(ctx=ctx)
    assert p.data().dtype == np.float64 and p.grad().dtype == np.float64
    p.set_data(nd.array([1e-12, 1.0, 2.0], ctx=ctx, dtype="float64"))
    assert p.data().asnumpy()[0] == 1e-12  # not rounded through float32
    _backward_through(p, scale=1.0 / 3.0)
    np.testing.assert_array_equal(p.grad().asnumpy(), np.full(3, 1.0 / 3.0))


def test_float64_dense_forward_and_backward(ctx):
    net = gluon.nn.Dense(3, dtype="float64", in_units=4)
    net.initialize(ctx=ctx)
    assert net.weight.data().dtype == np.float64 and net.bias.data().dtype == np.float64
    x = np.random.RandomState(0).randn(5, 4)
    with autograd.record():
        out = net(nd.array(x, ctx=ctx, dtype="float64"))
    out.backward()
    assert out.dtype == np.float64
    w = net.weight.data().asnumpy()
    # float64 tolerances: a float32 path anywhere would be off by ~1e-8.
    np.testing.assert_allclose(out.asnumpy(), x @ w.T + net.bias.data().asnumpy(), rtol=1e-13,
                               atol=1e-13)
    np.testing.assert_allclose(net.weight.grad().asnumpy(), np.ones((5, 3)).T @ x, rtol=1e-13,
                               atol=1e-13)
    assert net.weight.grad().dtype == np.float64


def test_cast_to_float64_keeps_values_and_gradients():
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    with autograd.record():
        net(nd.ones((1, 3))).sum().backward()
    w32, g32 = net.weight.data().asnumpy(), net.weight.grad().asnumpy()
    net.cast("float64")
    assert net.weight.dtype == "float64"     # as given (MXNet)
    assert net.weight.data().dtype == np.float64 and net.weight.grad().dtype == np.float64
    np.testing.assert_array_equal(net.weight.data().asnumpy(), w32.astype(np.float64))
    np.testing.assert_array_equal(net.weight.grad().asnumpy(), g32.astype(np.float64))
    with autograd.record():
        out = net(nd.ones((1, 3), dtype="float64"))
    out.backward()
    assert out.dtype == np.float64 and net.bias.grad().dtype == np.float64
    assert net.weight.data()._fresh_grad

    deferred = gluon.nn.Dense(2)
    deferred.cast("float64")  # before the shape is known: applies at the first forward
    deferred.initialize()
    deferred(nd.ones((1, 3), dtype="float64"))
    assert deferred.weight.data().dtype == np.float64


# ------------------------------------------------------------------------------ Constant
def test_constant():
    c = gluon.Constant("c", [[1.0, 2.0], [3.0, 4.0]])
    assert c.grad_req == "null" and c.shape == (2, 2)
    c.initialize()
    np.testing.assert_array_equal(c.data().asnumpy(), [[1, 2], [3, 4]])
    with pytest.warns(UserWarning):
        c.grad_req = "write"
    assert c.grad_req == "null"
    with pytest.raises(RuntimeError):
        c.grad()
    assert repr(c).startswith("Constant c")

    pd = gluon.ParameterDict("net_")
    const = pd.get_constant("k", [1.0, 2.0])
    assert const.name == "net_k" and pd.get_constant("k") is const
    with pytest.raises(KeyError):
        pd.get_constant("missing")


# ------------------------------------------------------------------------------ ParameterDict
def test_parameter_dict_get_prefix_and_shape_merging():
    pd = gluon.ParameterDict("block_")
    assert pd.prefix == "block_"
    w = pd.get("weight", shape=(3, 0), allow_deferred_init=True)
    assert w.name == "block_weight" and "block_weight" in pd
    assert pd.get("weight") is w
    assert pd.get("weight", shape=(0, 5)) is w
    assert w.shape == (3, 5)  # unknown dimensions filled from either side
    with pytest.raises(AssertionError, match="shape"):
        pd.get("weight", shape=(4, 5))
    with pytest.raises(AssertionError, match="grad_req"):
        pd.get("weight", grad_req="null")
    assert pd.get("weight", dtype=np.float32, lr_mult=1.0) is w  # same dtype spelled differently
    b = pd.get("bias", shape=(3,))
    assert pd.get("bias", init="zeros").init == "zeros"  # an unset attribute is filled in
    assert b.init == "zeros"


def test_parameter_dict_shared():
    shared = gluon.ParameterDict("a_")
    w = shared.get("w", shape=(1,))
    pd = gluon.ParameterDict("a_", shared=shared)
    assert pd.get("w") is w and list(pd.keys()) == ["a_w"]


def test_parameter_dict_update():
    a, b = gluon.ParameterDict("x_"), gluon.ParameterDict("x_")
    wa, wb = a.get("w", shape=(1,)), b.get("w", shape=(1,))
    other = gluon.ParameterDict("x_")
    other.get("v", shape=(1,))
    c = gluon.ParameterDict()
    c.update(a)
    c.update(a)  # the same objects again are fine
    assert c["x_w"] is wa
    b._params["x_u"] = gluon.Parameter("x_u", shape=(1,))
    with pytest.raises(AssertionError, match="x_w"):
        c.update(b)
    assert list(c.keys()) == ["x_w"], "a failed update leaves the dict unchanged"
    assert wb is not wa


def test_parameter_dict_initialize_zero_grad_and_order():
    pd = gluon.ParameterDict("n_")
    names = ["zeta", "alpha", "mid"]
    for name in names:
        pd.get(name + "_weight", shape=(2, 2))
    assert list(pd.keys()) == ["n_zeta_weight", "n_alpha_weight", "n_mid_weight"]  # insertion order
    assert [p.name for p in pd.values()] == list(pd)
    assert len(pd) == 3
    pd.initialize(init.One(), ctx=[cpu(0), cpu(1)])
    assert set(pd.list_ctx()) == {cpu(0), cpu(1)}
    for p in pd.values():
        np.testing.assert_array_equal(p.data(cpu(1)).asnumpy(), np.ones((2, 2)))
        for ctx in (cpu(0), cpu(1)):
            _backward_through(p, ctx)
    pd.zero_grad()
    for p in pd.values():
        for g in p.list_grad():
            np.testing.assert_array_equal(g.asnumpy(), np.zeros((2, 2)))
    pd.setattr("grad_req", "null")
    assert all(p.grad_req == "null" for p in pd.values())
    pd.zero_grad()  # skips parameters without gradients
    assert "n_mid_weight" in repr(pd)


def test_select_uses_re_match():
    net = gluon.nn.Sequential()
    with net.name_scope():
        net.add(gluon.nn.Dense(2, in_units=2), gluon.nn.Dense(1, in_units=2))
    everything = net.collect_params()
    assert list(everything.keys()) == ["sequential0_dense0_weight", "sequential0_dense0_bias",
                                       "sequential0_dense1_weight", "sequential0_dense1_bias"]
    assert list(net.collect_params("weight").keys()) == []  # anchored at the start
    assert list(net.collect_params(".*weight").keys()) == ["sequential0_dense0_weight",
                                                          "sequential0_dense1_weight"]
    assert list(net.collect_params("sequential0_dense1").keys()) == ["sequential0_dense1_weight",
                                                                    "sequential0_dense1_bias"]
    assert list(everything.select(".*bias").keys()) == ["sequential0_dense0_bias",
                                                        "sequential0_dense1_bias"]
    assert net.collect_params(".*weight|.*bias").keys() == everything.keys()


def test_parameter_dict_save_and_load(tmp_path):
    net = gluon.nn.Dense(2, in_units=3, prefix="model_")
    net.initialize()
    path = str(tmp_path / "dict.params")
    net.collect_params().save(path, strip_prefix="model_")
    assert sorted(np.load(path, allow_pickle=False).files) == ["bias", "weight"]
    with pytest.raises(ValueError, match="strip"):
        net.collect_params().save(path + "x", strip_prefix="other_")

    clone = gluon.nn.Dense(2, in_units=3, prefix="model_")
    clone.collect_params().load(path, restore_prefix="model_")
    np.testing.assert_array_equal(clone.weight.data().asnumpy(), net.weight.data().asnumpy())
    assert clone.weight.list_ctx() == [cpu(0)]
    with pytest.raises(AssertionError, match="restore_prefix"):
        clone.collect_params().load(path, restore_prefix="else_")
    with pytest.raises(AssertionError, match="model_weight|weight"):
        gluon.nn.Dense(2, in_units=3, prefix="model_").collect_params().load(path)


def test_load_checks_dtype_unless_cast(tmp_path):
    src = gluon.nn.Dense(2, in_units=3)
    src.initialize()
    path = str(tmp_path / "f32.params")
    src.save_parameters(path)
    dst = gluon.nn.Dense(2, in_units=3, dtype="float64")
    with pytest.raises(AssertionError, match="dtype"):
        dst.load_parameters(path)
    dst.load_parameters(path, cast_dtype=True)
    assert dst.weight.data().dtype == np.float64
    np.testing.assert_array_equal(dst.weight.data().asnumpy(), src.weight.data().asnumpy())
    saved = gluon.nn.Dense(2, in_units=3, dtype="float64")
    saved.load_parameters(path, cast_dtype=True, dtype_source="saved")
    assert saved.weight.data().dtype == np.float32


def test_load_onto_other_contexts(tmp_path):
    src = gluon.nn.Dense(2, in_units=3)
    src.initialize()
    path = str(tmp_path / "p.params")
    src.save_parameters(path)
    dst = gluon.nn.Dense(2, in_units=3)
    dst.load_parameters(path, ctx=[cpu(1), cpu(2)])
    assert dst.weight.list_ctx() == [cpu(1), cpu(2)]
    with pytest.raises(AssertionError, match="previously initialized"):
        dst.load_parameters(path, ctx=cpu(0))
    dst.load_parameters(path, ctx=[cpu(2), cpu(1)])  # the same set of contexts is fine
    deferred = gluon.nn.Dense(2)
    deferred.initialize(ctx=cpu(3))
    deferred.load_parameters(path)  # shape and contexts come from the file and initialize()
    assert deferred.weight.shape == (2, 3) and deferred.weight.list_ctx() == [cpu(3)]


def test_reduce_of_equal_copies_is_exact_on_three_devices():
    """Saving three identical copies writes their value, not (a+a+a)/3 rounded in float32."""
    import numpy as np
    from trainer_cli import cpu, gluon, nd

    value = np.array([0.1, 1 / 3, 7.7, -2.9], dtype=np.float32)
    p = gluon.Parameter("w", shape=(4,))
    p.initialize(ctx=[cpu(0), cpu(1), cpu(2)])
    p.set_data(nd.array(value))
    assert np.array_equal(p._reduce().asnumpy(), value)
    p.data(cpu(1))[:] = nd.array(value * 2)
    np.testing.assert_allclose(p._reduce().asnumpy(), value * 4 / 3, rtol=1e-6)


def test_parameter_arrays_share_a_single_host_copy_only_when_asked():
    """A checkpoint written before the next update takes the live arrays (no copy of a large
    model in the training thread); the default gives copies that training cannot change."""
    from trainer_cli.ndarray.interop import raw

    net = gluon.nn.Dense(3, in_units=2)
    net.initialize()
    live = {k: raw(p.data()) for k, p in net._collect_params_with_prefix().items()}
    shared = net.parameter_arrays(copy=False)
    copied = net.parameter_arrays()
    assert sorted(shared) == sorted(live) == sorted(copied)
    for key, array in live.items():
        assert shared[key] is array
        assert not np.shares_memory(copied[key], array)
        np.testing.assert_array_equal(copied[key], array)
    two = gluon.nn.Dense(3, in_units=2)
    two.initialize(ctx=[cpu(0), cpu(1)])
    for key, param in two._collect_params_with_prefix().items():
        value = two.parameter_arrays(copy=False)[key]
        assert all(not np.shares_memory(value, raw(d)) for d in param.list_data())


# ------------------------------------------------------------------------------ issue 16 behaviours
# Each expectation below is what the real MXNet 1.9.1 did with the same code.
class _Scaled(gluon.Block):
    def __init__(self, value=1.0, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.w = self.params.get("w", shape=(2,), init=init.Constant(value))
            self.d = gluon.nn.Dense(2, in_units=2, weight_initializer=init.Xavier(),
                                    bias_initializer="ones")

    def forward(self, x):
        return self.d(x) * self.w.data()


def test_sharing_parameters_whose_children_declare_an_initializer():
    a = _Scaled()
    a.initialize()
    b = _Scaled(params=a.collect_params())  # MXNet: equal initializers are the same setting
    assert b.w is a.w and b.d.weight is a.d.weight
    x = nd.ones((1, 2))
    np.testing.assert_array_equal(b(x).asnumpy(), a(x).asnumpy())
    with pytest.raises(AssertionError, match="attribute 'init'"):
        _Scaled(2.0, params=a.collect_params(), prefix=a.prefix)  # a different initializer
    d = gluon.nn.Dense(2, in_units=2, weight_initializer="xavier")
    with pytest.raises(AssertionError, match="desired 'zeros' vs stored 'xavier'"):
        gluon.nn.Dense(2, in_units=2, weight_initializer="zeros", params=d.collect_params())
    assert init.Constant(1.0) == init.Constant(1.0) != init.Constant(2.0)
    assert init.Xavier() != init.Xavier(magnitude=2) and init.Zero() != "zeros"
    assert init.Constant(np.ones(2)) == init.Constant(np.ones(2)) != init.Constant(np.zeros(2))


def test_setting_dtype_casts_data_and_gradient():
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    with autograd.record():
        net(nd.ones((1, 3))).sum().backward()
    w32 = net.weight.data().asnumpy()
    net.weight.dtype = "float64"
    assert net.weight.dtype == "float64"
    assert net.weight.data().dtype == np.float64 and net.weight.grad().dtype == np.float64
    np.testing.assert_array_equal(net.weight.data().asnumpy(), w32.astype(np.float64))
    np.testing.assert_array_equal(net.weight.grad().asnumpy(), np.ones((2, 3)))


def test_load_with_saved_dtype_casts_initialized_parameters(tmp_path):
    src = gluon.nn.Dense(2, in_units=3)
    src.initialize()
    path = str(tmp_path / "f32.params")
    src.save_parameters(path)
    dst = gluon.nn.Dense(2, in_units=3, dtype="float64")
    dst.initialize()
    dst.load_parameters(path, cast_dtype=True, dtype_source="saved")
    assert dst.weight.dtype == np.float32
    assert dst.weight.data().dtype == np.float32 and dst.weight.grad().dtype == np.float32
    np.testing.assert_array_equal(dst.weight.data().asnumpy(), src.weight.data().asnumpy())
    kept = gluon.nn.Dense(2, in_units=3, dtype="float64")
    kept.initialize()
    kept.load_parameters(path, cast_dtype=True)
    assert kept.weight.dtype == "float64" and kept.weight.data().dtype == np.float64


@pytest.mark.parametrize("key", ["stype", "grad_stype"])
def test_an_invalid_stype_is_a_parameter_error(key):
    from trainer_cli.gluon.parameter import ParameterError
    with pytest.raises(ParameterError, match="%s for Parameter 'w' must be one of 'default', "
                                             "'row_sparse', or 'csr', but got 'bogus'" % key):
        gluon.Parameter("w", **{key: "bogus"})
