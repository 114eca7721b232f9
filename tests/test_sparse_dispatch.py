"""Every public ``nd`` name, every Python operator and the common methods on a row_sparse and a
csr array: the values of the dense twin, and the storage type MXNet 1.9.1 gives (or an error
where MXNet raises). MXNet's answers: ``tests/data/sparse/mxnet_sweep.json``, written by
``tests/data/sparse/gen_sparse_sweep.py`` with the real library."""
import json
import os

import numpy as np
import pytest

from trainer_cli import nd

import sparse_sweep_cases as cases

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "data", "sparse", "mxnet_sweep.json")) as _f:
    MXNET = json.load(_f)


def swept_names():
    """The public names of ``nd`` (from the module), less the reasoned exclusions, plus the
    extra argument variants of some names."""
    public = sorted(n for n in nd.__all__)
    variants = sorted(n for n in cases.CASES if "|" in n)
    return [n for n in public if n not in cases.EXCLUDED] + variants


def write_names(path):
    with open(path, "w") as f:
        f.write("\n".join(swept_names() + sorted(cases.OPERATORS)) + "\n")


def test_every_public_name_is_swept_or_excluded_with_a_reason():
    public = set(nd.__all__)
    assert set(cases.EXCLUDED) <= public, set(cases.EXCLUDED) - public
    for name in swept_names():
        assert name in MXNET, "%s: regenerate tests/data/sparse/mxnet_sweep.json" % name
    assert all(reason for reason in cases.EXCLUDED.values())


def _cases():
    out = []
    for name in swept_names():
        shape, _ = cases.case(name)
        for stype in ("row_sparse", "csr"):
            if stype == "csr" and len(shape) != 2:
                continue
            out.append((name, stype))
    return out


def _check(label, stype, ours, dense, mxnet):
    mx_out = mxnet.get(stype) if isinstance(mxnet, dict) else None
    mx_dense = mxnet.get("default") if isinstance(mxnet, dict) else None
    if mx_out == "error" and mx_dense != "error":
        assert isinstance(ours, tuple), "%s on %s: MXNet raises, we gave %s" % (label, stype, ours)
        return
    assert not isinstance(ours, tuple), "%s on %s raised: %s" % (label, stype, ours[1])
    assert not isinstance(dense, tuple), "%s on the dense twin raised: %s" % (label, dense[1])
    assert len(ours) == len(dense)
    for (st, got), (_, want) in zip(ours, dense):
        assert got.shape == want.shape, label
        assert got.dtype == want.dtype, label
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7, equal_nan=True,
                                   err_msg="%s on %s" % (label, stype))
    if isinstance(mx_out, list) and mx_dense != "error":
        assert [st for st, _ in ours] == mx_out, "%s on %s: stype %s, MXNet %s" % (
            label, stype, [st for st, _ in ours], mx_out)


@pytest.mark.parametrize("name,stype", _cases())
def test_nd_name_on_sparse_matches_dense_and_mxnet_stype(name, stype):
    shape, call = cases.case(name)
    inputs = cases.make_inputs(nd, shape)
    ours = cases.run(nd, call, inputs[stype])
    dense = cases.run(nd, call, inputs["default"])
    _check(name, stype, ours, dense, MXNET[name])


@pytest.mark.parametrize("name,stype", [(n, s) for n in sorted(cases.OPERATORS)
                                        for s in ("row_sparse", "csr")])
def test_operator_and_method_on_sparse_matches_dense_and_mxnet_stype(name, stype):
    inputs = cases.make_inputs(nd, cases.SHAPE)
    fn = cases.OPERATORS[name]
    ours = cases.run_operator(nd, fn, inputs[stype])
    dense = cases.run_operator(nd, fn, inputs["default"])
    _check(name, stype, ours, dense, MXNET[name])


def test_every_ndarray_method_is_swept():
    # A new method must join the sweep: a method that indexes its array (slice_axis, split)
    # failed on sparse arrays while the nd function of the same name fell back to dense.
    from trainer_cli.ndarray import ops
    swept = {name[2:].split("(")[0] for name in cases.OPERATORS if name.startswith("x.")}
    assert set(ops._METHODS) - swept == set()

