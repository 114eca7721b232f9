"""``mx.base.MXNetError``: the errors MXNet raises as MXNetError are instances of it (and still of
the built-in type they were); MXNet names trainer_cli lacks say so; one-element arrays convert
to numbers on NumPy 2 as MXNet code expects."""
import subprocess
import sys

import numpy
import pytest

import trainer_cli as mx
from trainer_cli import gluon, nd


def test_base_module_and_top_level_name():
    assert mx.base.MXNetError is mx.MXNetError
    assert issubclass(mx.MXNetError, RuntimeError)       # as MXNet's own class
    from trainer_cli.base import MXNetError
    assert MXNetError is mx.MXNetError


def test_gpu_probe_idiom_falls_back_to_cpu(monkeypatch):
    # The machine may have a GPU; the probe must fail as on a machine without one.
    from trainer_cli import context
    monkeypatch.setattr(context, "num_gpus", lambda: 0)
    monkeypatch.setattr(context, "_import_cupy", lambda: object())
    try:
        nd.zeros((1,), ctx=mx.gpu())
        ctx = mx.gpu()
    except mx.base.MXNetError:
        ctx = mx.cpu()
    assert ctx == mx.cpu()


def test_gpu_probe_without_cupy_is_mxnet_error(monkeypatch):
    from trainer_cli import context
    monkeypatch.setattr(context, "_cupy", None)
    monkeypatch.setitem(sys.modules, "cupy", None)       # import cupy -> ImportError
    with pytest.raises(mx.base.MXNetError, match="CuPy"):
        nd.zeros((1,), ctx=mx.gpu(0))


def _missing_parameter(tmp_path):
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    path = str(tmp_path / "one.params")
    net.save_parameters(path)
    net2 = gluon.nn.HybridSequential()
    net2.add(gluon.nn.Dense(2, in_units=3), gluon.nn.Dense(2, in_units=2))
    net2.initialize()
    net2.load_parameters(path)


def _deferred():
    net = gluon.nn.Dense(2)
    net.initialize()
    net.weight.data()


def _damaged_file(tmp_path):
    path = tmp_path / "bad.params"
    path.write_bytes(b"\x12\x01\x00\x00\x00\x00\x00\x00garbage")
    nd.load(str(path))


def _bad_conv():
    nd.Convolution(nd.ones((1, 3, 4, 4)), nd.ones((2, 2, 3, 3)), no_bias=True, kernel=(3, 3),
                   num_filter=2)


# (what, call, the built-in type it must still be, the message it carries)
ERRORS = [
    ("dot shapes", lambda tmp: nd.dot(nd.ones((2, 3)), nd.ones((2, 3))), ValueError, "dot"),
    ("batch_dot shapes", lambda tmp: nd.batch_dot(nd.ones((2, 2, 3)), nd.ones((2, 2, 3))),
     ValueError, "batch_dot"),
    ("broadcast", lambda tmp: nd.ones((2, 3)) + nd.ones((4, 5)), ValueError, "broadcast"),
    ("broadcast with numpy", lambda tmp: nd.ones((2, 3)) * numpy.ones((4,)), ValueError,
     "broadcast"),
    ("concat", lambda tmp: nd.concat(nd.ones((2, 3)), nd.ones((3, 4)), dim=0), ValueError,
     "concat"),
    ("stack", lambda tmp: nd.stack(nd.ones((2,)), nd.ones((3,))), ValueError, "stack"),
    ("FullyConnected", lambda tmp: nd.FullyConnected(nd.ones((2, 3)), nd.ones((4, 5)),
                                                      nd.ones(4), num_hidden=4),
     ValueError, "FullyConnected"),
    ("Dense on wrong input", lambda tmp: _dense_wrong_input(), ValueError, "FullyConnected"),
    ("Convolution", lambda tmp: _bad_conv(), ValueError, "does not fit"),
    ("split", lambda tmp: nd.split(nd.ones((2, 3)), 2, axis=1), ValueError, "cannot split"),
    ("GroupNorm", lambda tmp: nd.GroupNorm(nd.ones((1, 3, 2, 2)), nd.ones(2), nd.ones(2),
                                           num_groups=2), ValueError, "groups"),
    ("reflect pad", lambda tmp: nd.pad(nd.ones((1, 1, 2, 2)), mode="reflect",
                                       pad_width=(0, 0, 0, 0, 3, 3, 3, 3)), ValueError, "smaller"),
    ("bad stype zeros", lambda tmp: nd.zeros((2, 2), stype="foo"), ValueError, "storage type"),
    ("bad tostype", lambda tmp: nd.zeros((2, 2)).tostype("foo"), ValueError, "storage type"),
    ("rsp to csr", lambda tmp: nd.zeros((2, 2), stype="row_sparse").tostype("csr"), ValueError,
     "cast_storage"),
    ("bad Parameter stype", lambda tmp: gluon.Parameter("w", shape=(2,), stype="foo"),
     AssertionError, "stype"),
    ("missing parameter", _missing_parameter, AssertionError, "missing"),
    ("deferred init", lambda tmp: _deferred(), RuntimeError, "deferred|not been initialized"),
    ("missing params file", lambda tmp: nd.load(str(tmp / "nothing.params")), ValueError,
     "nothing.params"),
    ("damaged params file", _damaged_file, ValueError, "bad.params"),
]


def _dense_wrong_input():
    net = gluon.nn.Dense(4, in_units=5)
    net.initialize()
    net(nd.ones((2, 3)))


@pytest.mark.parametrize("what,call,builtin,message", ERRORS, ids=[e[0] for e in ERRORS])
def test_mxnet_errors_are_mxnet_error_and_their_builtin_type(tmp_path, what, call, builtin,
                                                             message):
    with pytest.raises(mx.base.MXNetError, match=message) as info:
        call(tmp_path)
    assert isinstance(info.value, builtin)


def test_zeros_with_sparse_stype_makes_that_storage():
    assert nd.zeros((3, 2), stype="row_sparse").stype == "row_sparse"
    assert nd.zeros((3, 2), stype="csr").stype == "csr"
    assert nd.zeros((3, 2), stype="default").stype == "default"


@pytest.mark.parametrize("name", ["executor", "mod", "np", "npx", "viz"])
def test_absent_top_level_names_say_so(name):
    module = getattr(mx, name)
    assert name in repr(module) and "docs/porting.md" in repr(module)
    with pytest.raises(mx.base.MXNetError, match=r"trainer_cli\.%s\.anything .*does not "
                                                 r"provide.*docs/compat\.md" % name) as info:
        module.anything
    assert isinstance(info.value, AttributeError)
    with pytest.raises(AttributeError, match="does not provide"):
        module(1)
    assert not hasattr(module, "var")
    with pytest.raises(ModuleNotFoundError, match=r"trainer_cli\.%s is MXNet's .*does not "
                                                  r"provide" % name):
        __import__("trainer_cli." + name)


def test_from_import_of_an_absent_name_fails_at_first_use():
    from trainer_cli import mod
    with pytest.raises(mx.MXNetError, match="Module API"):
        mod.Module("data")


def test_unknown_names_stay_plain_attribute_errors():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'") as info:
        mx.no_such_thing
    assert not isinstance(info.value, mx.MXNetError)
    with pytest.raises(AttributeError, match="has no attribute"):
        gluon.no_such_thing


NUMPY2_SNIPPET = r"""
import numpy, trainer_cli as mx
from trainer_cli import nd, autograd, gluon
net = gluon.nn.Dense(1, in_units=2)
net.initialize(mx.init.Constant(0.5))
x, y = nd.array([[1, 2], [3, 4]]), nd.array([[1], [2]])
with autograd.record():
    loss = gluon.loss.L2Loss()(net(x), y)
loss.backward()
mean = loss.mean()
assert mean.shape == (1,)
print('loss %f' % mean.asnumpy())
print('float', float(mean.asnumpy()), 'int', int(nd.array([7]).sum().asnumpy()))
print('scalar %.4f' % mean.asscalar())
acc = (net(x) > 1).sum().asnumpy() / 2
print('acc %.2f' % acc)
print(numpy.__version__)
"""


def test_mxnet_era_scalar_idioms_run_on_the_installed_numpy():
    # Exact idioms of MXNet-era programs; the default install has NumPy 2.4, which refuses
    # float() of a (1,)-shaped plain ndarray.
    out = subprocess.run([sys.executable, "-c", NUMPY2_SNIPPET], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # predictions 1.5 and 3.5; L2Loss = 0.5 * (p - y)^2 -> 0.125 and 1.125, mean 0.625
    assert lines[0] == "loss 0.625000"
    assert lines[1] == "float 0.625 int 7"
    assert lines[2] == "scalar 0.6250"
    assert lines[3] == "acc 1.00"


def test_one_element_arrays_stay_ndarrays():
    host = nd.array([[2.5]]).asnumpy()
    assert isinstance(host, numpy.ndarray) and host.shape == (1, 1) and host.dtype == numpy.float32
    assert float(host) == 2.5 and repr(host) == "array([[2.5]], dtype=float32)"
    assert type(nd.array([1, 2]).asnumpy()) is numpy.ndarray
    assert type(numpy.asarray(host)) is numpy.ndarray
    # Mixed with plain arrays the result is plain; numbers of more elements refuse as NumPy does.
    assert type(host + numpy.ones((1, 1))) is numpy.ndarray
    with pytest.raises(TypeError):
        float(numpy.concatenate([host, host]).view(type(host)))


def test_absent_gluon_names_say_so():
    import trainer_cli.gluon as g
    for name in list(g._ABSENT):
        assert isinstance(vars(g).get(name), (type(None), mx.base.AbsentModule)), \
            "gluon.%s exists now: remove it from gluon._ABSENT and docs/porting.md" % name
        with pytest.raises(mx.MXNetError, match="does not provide.*docs/porting.md"):
            thing = getattr(g, name)
            thing.anything


def test_base_sits_below_the_array_layer():
    # Every layer raises these errors, so importing them loads nothing above the context (and
    # the few lines that tell OpenBLAS how long to spin, which import nothing of NumPy).
    code = ("import sys, trainer_cli.base as b, trainer_cli as mx; "
            "assert mx.MXNetError is b.MXNetError; "
            "print(sorted(m for m in sys.modules if m.startswith('trainer_cli.') or m == 'numpy'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == \
        "['trainer_cli._openblas_idle', 'trainer_cli.base', 'trainer_cli.context']"


def test_other_value_errors_of_binary_ops_are_not_called_shape_errors():
    with pytest.raises(ValueError, match="negative integer powers") as info:
        # arrays of two integer dtypes compute with NumPy's promotion, which refuses this
        nd.array([2], dtype="int32") ** nd.array([-1], dtype="int64")
    assert not isinstance(info.value, mx.base.ShapeError)


def test_absent_top_level_scopes_say_so():
    for name in ("name", "attribute", "util"):
        with pytest.raises(mx.MXNetError, match="does not provide.*docs/porting.md"):
            getattr(mx, name).anything


def test_absent_kvstore_server_says_so():
    with pytest.raises(mx.MXNetError, match="does not provide.*docs/porting.md"):
        mx.kv.KVStoreServer
