"""Every optimizer trajectory MXNet 1.9.1 recorded in shared/reference/golden, through the Updater."""
from __future__ import annotations

import json

import numpy as np
import pytest

from trainer_cli import lr_scheduler, nd, optimizer

from golden import GOLDEN_DIR as GOLDEN


def _optimizer_files():
    files = sorted(p.name for p in GOLDEN.glob("*.json")
                   if json.loads(p.read_text()).get("spec", {}).get("mode") == "optimizer")
    assert files, "no optimizer golden files in %s" % GOLDEN
    return files


def close(got, exp):
    got, exp = np.asarray(got, dtype=np.float64), np.asarray(exp, dtype=np.float64)
    assert got.shape == exp.shape
    bad = np.abs(got - exp) > 1e-6 + 1e-5 * np.abs(exp)
    assert not bad.any(), "max error %g at %s" % (np.abs(got - exp).max(), np.argwhere(bad)[:3])


def _build(spec):
    params = dict(spec["optimizer_params"])
    if spec.get("lr_scheduler"):
        params["lr_scheduler"] = lr_scheduler.from_dict(spec["lr_scheduler"])
    opt = optimizer.create(spec["optimizer"], rescale_grad=1.0 / spec["batch_size"], **params)
    return opt, optimizer.get_updater(opt)


def _check_state(got, exp):
    if exp is None:
        assert got is None
    elif isinstance(exp, list) and exp and isinstance(exp[0], (list, type(None))) \
            and isinstance(got, (tuple, list)):
        assert len(got) == len(exp)
        for g, e in zip(got, exp):
            _check_state(g, e)
    else:
        if isinstance(got, (tuple, list)):     # a 1-tuple such as RMSProp's (n,)
            assert len(got) == 1
            got = got[0]
        close(got.asnumpy(), exp)


def test_golden_files_present():
    assert len(_optimizer_files()) == 19


@pytest.mark.parametrize("calls", ["per_param", "grouped"])
@pytest.mark.parametrize("fname", _optimizer_files())
def test_golden_optimizer(fname, calls, ctx, monkeypatch):
    """On cpu(0), and on gpu(0) where one exists (the CuPy path of the same rules)."""
    data = json.loads((GOLDEN / fname).read_text())
    spec, result = data["spec"], data["result"]
    opt, updater = _build(spec)
    weights = [nd.array(w, ctx=ctx) for w in spec["weights"]]
    if spec["optimizer"] == "sgld":
        # MXNet's random stream cannot be reproduced: add the noise it recorded instead.
        noise = iter([nd.array(n, ctx=ctx)._data for step in result["sgld_noise"] for n in step])
        monkeypatch.setattr(type(opt), "_noise", lambda self, w, std: next(noise))
    for step, grads in enumerate(spec["grads"]):
        grads = [nd.array(g, ctx=ctx) for g in grads]
        if calls == "per_param":
            for i, (g, w) in enumerate(zip(grads, weights)):
                updater(i, g, w)
        else:
            updater(list(range(len(weights))), grads, weights)
        for w, exp in zip(weights, result["weights"][step]):
            close(w.asnumpy(), exp)
        assert opt.learning_rate == pytest.approx(result["lr"][step], rel=1e-5)
        assert opt.num_update == result["num_update"][step]
    for i, exp in enumerate(result["states"]):
        _check_state(updater.states[i], exp)


def test_registry_matches_mxnet():
    names = json.loads((GOLDEN / "registry.json").read_text())
    assert set(optimizer.Optimizer.opt_registry) - set(names) == {"adamw"}
    assert set(names) <= set(optimizer.Optimizer.opt_registry)
    for name, mx_path in names.items():
        assert optimizer.Optimizer.opt_registry[name].__name__ == mx_path.rsplit(".", 1)[1]
