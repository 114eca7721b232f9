"""Every public ``nd`` op and the Gluon nn layers against MXNet 1.9.1, from the registry in
tests/op_registry.py: values per dtype, gradients under ``autograd.record()`` (each op either
records MXNet's gradient or, where nothing is recorded, backward raises: never a silent zero),
the registry's completeness, and docs/compat.md's generated list of deviations. The reference
data is made by tests/data/mxnet_ops/make_op_reference.py with the real MXNet."""
import inspect
import json
import os

import numpy as np
import pytest

import op_registry as reg
from trainer_cli import autograd, nd
from trainer_cli.gluon import Block, nn
from trainer_cli.gluon.block import reset_name_counters

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "mxnet_ops")
with open(os.path.join(DATA, "reference.json")) as _f:
    _REFERENCE = json.load(_f)
META = _REFERENCE["samples"]
with np.load(os.path.join(DATA, "reference.npz"), allow_pickle=False) as _z:
    REF = reg.unpack({dt: _z[dt] for dt in _z.files}, _REFERENCE["arrays"])

KEYS = [(name, dtype) for name, s in sorted(reg.SAMPLES.items()) for dtype in s.dtypes]
GRAD_KEYS = [(name, dtype) for name, dtype in KEYS
             if reg.SAMPLES[name].wrt and dtype != "float16"]


def _inputs(sample, key):
    raw = [REF["%s/in%d" % (key, i)] for i in range(len(sample.inputs))]
    for want, got in zip(sample.make(key.split("/")[1]), raw):
        np.testing.assert_array_equal(want, got, err_msg="the registry's inputs changed: "
                                      "rerun make_op_reference.py")
    return raw


def _outputs(res):
    return [res] if isinstance(res, nd.NDArray) else list(res)


def _in_graph(a):
    return a._node is not None or a._grad is not None


def _close(got, want, tol, what):
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    rtol, atol = tol
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol,
                               atol=atol, equal_nan=True, err_msg=what)
    if want.dtype.kind == "f":  # zeros keep MXNet's sign (it shows in a later division or sign)
        zeros = (want == 0) & (got == 0)
        np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(want[zeros]),
                                      err_msg=what + ": signs of zeros")


def test_every_public_nd_op_is_in_the_registry_or_excluded_with_a_reason():
    public = {n for n in dir(nd) if not n.startswith("_") and callable(getattr(nd, n))
              and not inspect.isclass(getattr(nd, n)) and not inspect.ismodule(getattr(nd, n))}
    covered = {s.op for s in reg.SAMPLES.values()}
    missing = sorted(public - covered - set(reg.EXCLUDED))
    assert not missing, "public nd ops in neither tests/op_registry.py nor EXCLUDED: %s" % missing
    both = sorted(covered & set(reg.EXCLUDED))
    assert not both, "in the registry and excluded: %s" % both
    stale = sorted(set(reg.EXCLUDED) - public)
    assert not stale, "EXCLUDED names no public nd op: %s" % stale
    assert all(len(why) > 10 for why in reg.EXCLUDED.values())
    unknown = sorted(covered - public - {"NDArray.tostype"})
    assert not unknown, "registry samples of names nd does not have: %s" % unknown


def test_the_reference_data_covers_the_registry():
    assert sorted(META) == sorted("%s/%s" % k for k in KEYS), "rerun make_op_reference.py"
    for dev in reg.DEVIATIONS:
        assert all(s in reg.SAMPLES for s in dev.samples), dev.op
        assert dev.ours_grad is None or dev.samples, dev.op


@pytest.mark.parametrize("name,dtype", KEYS, ids=["%s-%s" % k for k in KEYS])
@np.errstate(divide="ignore", invalid="ignore")  # the edge samples' inf and nan are compared
def test_values_match_mxnet(name, dtype):
    sample = reg.SAMPLES[name]
    key = sample.key(dtype)
    arrays = [nd.array(a, dtype=a.dtype) for a in _inputs(sample, key)]
    with autograd.train_mode() if sample.train else autograd.predict_mode():
        res = _outputs(sample.call(nd, *arrays))
    assert len(res) == META[key]["outputs"]
    tol = sample.tol.get(dtype, reg.TOL[dtype])
    for k, r in enumerate(res):
        _close(r.asnumpy(), REF["%s/out%d" % (key, k)], tol, "%s output %d" % (key, k))


@pytest.mark.parametrize("name,dtype", GRAD_KEYS, ids=["%s-%s" % k for k in GRAD_KEYS])
@np.errstate(divide="ignore", invalid="ignore")  # the edge samples' inf and nan are compared
def test_recorded_gradient_is_mxnets_or_backward_raises(name, dtype):
    sample = reg.SAMPLES[name]
    key = sample.key(dtype)
    raw = _inputs(sample, key)
    arrays = [nd.array(a, dtype=a.dtype) for a in raw]
    for i in sample.wrt:
        arrays[i].attach_grad()
    with autograd.record(train_mode=sample.train):
        res = _outputs(sample.call(nd, *arrays))
    heads = [REF["%s/head%d" % (key, k)] for k in range(len(res))]
    dev = reg.deviation_of(name)
    if dev is not None and dev.ours_grad is not None:
        want = dev.ours_grad([raw[i] for i in sample.wrt], heads)
    else:
        assert META[key]["grad"] == "ok", (
            "MXNet cannot differentiate %s (%s): list what we do in DEVIATIONS"
            % (key, META[key]["grad"]))
        want = [REF["%s/grad%d" % (key, i)] for i in sample.wrt]
    recorded = [(r, nd.array(h, dtype=h.dtype)) for r, h in zip(res, heads) if _in_graph(r)]
    if not recorded:
        # nothing recorded: right only where MXNet's gradient is zero, and backward must say so
        for i, w in zip(sample.wrt, want):
            assert not np.any(w), "%s: MXNet has a gradient for input %d; ours is not recorded" % (
                key, i)
        with pytest.raises(ValueError, match="cannot differentiate"):
            autograd.backward([r for r in res], [nd.array(h) for h in heads])
        return
    autograd.backward([r for r, _ in recorded], [h for _, h in recorded],
                      train_mode=sample.train)
    tol = sample.grad_tol.get(dtype, reg.GRAD_TOL[dtype])
    for i, w in zip(sample.wrt, want):
        _close(arrays[i].grad.asnumpy(), w, tol, "%s gradient of input %d" % (key, i))


def test_compat_md_section_is_generated_from_the_registry():
    with open(reg.COMPAT) as f:
        text = f.read()
    assert reg.START in text and reg.END in text, \
        "docs/compat.md lacks the generated section: python tests/op_registry.py --write-compat"
    assert reg.compat_with_deviations(text) == text, \
        "docs/compat.md's op deviations are stale: python tests/op_registry.py --write-compat"
    for dev in reg.DEVIATIONS:
        assert "`%s`" % dev.op in text


# ---- Gluon layers ------------------------------------------------------------------------------
with open(os.path.join(DATA, "..", "mxnet_layers", "cases.json")) as _f:
    LAYER_GOLDEN = json.load(_f)["cases"]  # checked by tests/test_gluon_layers_mxnet.py


def test_every_gluon_nn_layer_is_compared_with_mxnet_or_excluded():
    layers = {n for n in dir(nn) if inspect.isclass(getattr(nn, n))
              and issubclass(getattr(nn, n), Block)}
    covered = {cls for cls, _, _ in reg.LAYERS.values()} | \
        {case["cls"] for case in LAYER_GOLDEN.values()}
    missing = sorted(layers - covered - set(reg.LAYERS_EXCLUDED))
    assert not missing, "gluon.nn layers in neither op_registry.LAYERS, mxnet_layers nor " \
        "LAYERS_EXCLUDED: %s" % missing
    stale = sorted(set(reg.LAYERS_EXCLUDED) - layers)
    assert not stale, stale


@pytest.mark.parametrize("name", sorted(reg.LAYERS))
def test_layer_matches_mxnet(name):
    reset_name_counters()
    cls, kwargs, shape = reg.LAYERS[name]
    pre = "layer/%s/" % name
    layer = getattr(nn, cls)(**kwargs)
    layer.initialize()
    x = nd.array(REF[pre + "x"])
    with autograd.pause():
        layer(x)
    params = layer._collect_params_with_prefix()
    assert sorted(params) == sorted(k[len(pre) + 2:] for k in REF if k.startswith(pre + "p:"))
    for key, param in params.items():
        param.set_data(nd.array(REF[pre + "p:" + key]))
    if shape is not None:
        x.attach_grad()
    train = cls != "Dropout"
    with autograd.record(train_mode=train):
        y = layer(x)
    y.backward(nd.array(REF[pre + "head"]), train_mode=train)
    _close(y.asnumpy(), REF[pre + "y"], reg.TOL["float32"], name + " output")
    if shape is not None:
        _close(x.grad.asnumpy(), REF[pre + "dx"], reg.GRAD_TOL["float32"], name + " dx")
    grads = {key: p for key, p in params.items() if p.grad_req != "null"}
    assert sorted(grads) == sorted(k[len(pre) + 2:] for k in REF if k.startswith(pre + "g:"))
    for key, param in grads.items():
        _close(param.grad().asnumpy(), REF[pre + "g:" + key], reg.GRAD_TOL["float32"],
               "%s gradient of %s" % (name, key))
