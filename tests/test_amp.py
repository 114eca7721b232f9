"""``contrib.amp`` and ``multi_precision`` against real MXNet 1.9.1 (tests/data/golden/sparse:
``amp_*`` and ``mp_*`` cases), and the places where trainer_cli is safer than MXNet."""
from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest

from trainer_cli import autograd, cpu, gluon, nd, optimizer
from trainer_cli.contrib import amp

DATA = Path(__file__).resolve().parent / "data" / "golden" / "sparse"
ATOL, RTOL = 1e-6, 1e-5


def _load(name):
    return json.loads((DATA / name).read_text())


def _array(values, dtype):
    return numpy.asarray(values, dtype=numpy.float64).astype(dtype) if not _has_text(values) \
        else numpy.asarray(_floats(values), dtype=dtype)


def _has_text(values):
    if isinstance(values, list):
        return any(_has_text(v) for v in values)
    return isinstance(values, str)


def _floats(values):
    if isinstance(values, list):
        return [_floats(v) for v in values]
    return float(values)


def _close(got, expected, what):
    got = numpy.asarray(got, dtype=numpy.float64)
    expected = numpy.asarray(_floats(expected), dtype=numpy.float64)
    assert got.shape == expected.shape, what
    finite = numpy.isfinite(expected)
    assert (numpy.isfinite(got) == finite).all(), "%s: non-finite places differ" % what
    bad = numpy.abs(got[finite] - expected[finite]) > ATOL + RTOL * numpy.abs(expected[finite])
    assert not bad.any(), "%s: got %s expected %s" % (what, got[finite][bad][:4], expected[finite][bad][:4])


def test_amp_dynamic_loss_scaling_matches_mxnet():
    case = _load("amp_sgd_f32_overflows.json")
    spec, records = case["spec"], case["result"]["records"]
    dtype = numpy.dtype(spec["dtype"])
    ctxs = [cpu(i) for i in range(spec["num_ctx"])]
    params = []
    for p in spec["params"]:
        init = _array(p["init"], dtype)
        param = gluon.Parameter(p["name"], shape=init.shape, dtype=dtype)
        param.initialize(ctx=ctxs)
        param.set_data(nd.array(init, dtype=dtype))
        params.append(param)
    amp.init()
    trainer = gluon.Trainer(params, spec["optimizer"], dict(spec["optimizer_params"]),
                            kvstore=spec["trainer"]["kvstore"])
    amp.init_trainer(trainer)
    for record in records:
        step = record["step"]
        x = spec["x_at"].get(str(step), spec["x_default"])
        before = [p.data(ctxs[0]).asnumpy().copy() for p in params]
        used = []
        for j, ctx in enumerate(ctxs):
            with autograd.record():
                y = None
                for k, param in enumerate(params):
                    term = (param.data(ctx) * nd.array(_array(x[k][j], dtype), ctx=ctx, dtype=dtype)).sum()
                    y = term if y is None else y + term
                with amp.scale_loss(y, trainer) as scaled:
                    used.append(trainer._amp_loss_scaler.loss_scale)
            scaled.backward()
        if step in spec["unscale_at"]:
            amp.unscale(trainer)
        for k, param in enumerate(params):
            for j, ctx in enumerate(ctxs):
                _close(param.grad(ctx).asnumpy(), record["grads"][k][j], "step %d grad %d" % (step, k))
        trainer.step(spec["batch_size"])
        assert used == [record["loss_scale"]] * len(ctxs), step
        after = [p.data(ctxs[0]).asnumpy() for p in params]
        unchanged = all(a.tobytes() == b.tobytes() for a, b in zip(before, after))
        assert unchanged == record["skipped"], step
        for k, param in enumerate(params):
            for j, ctx in enumerate(ctxs):
                _close(param.data(ctx).asnumpy(), record["weights"][k][j], "step %d weight %d" % (step, k))
        assert trainer.learning_rate == pytest.approx(record["lr"], rel=1e-5)
    # Skipped steps do not count as updates.
    assert trainer.optimizer.num_update == sum(not r["skipped"] for r in records)


def test_multi_precision_sgd_on_float16_matches_mxnet():
    case = _load("mp_sgd_01.json")
    spec, result = case["spec"], case["result"]
    opt = optimizer.create(spec["optimizer"], **spec["optimizer_params"])
    updater = optimizer.get_updater(opt)
    weights = [nd.array(_array(w, numpy.float16), dtype=numpy.float16) for w in spec["weights"]]
    for step, grads in enumerate(spec["grads"]):
        for k, (w, g) in enumerate(zip(weights, grads)):
            updater(k, nd.array(_array(g, numpy.float16), dtype=numpy.float16), w)
            assert w.dtype == numpy.float16
            _close(w.asnumpy(), result["weights"][step][k], "step %d weight %d" % (step, k))
            state = updater.states[k]
            momentum, master = state  # SGD keeps (state, weight32)
            assert master.dtype == numpy.float32
            _close(master.asnumpy(), result["master"][step][k], "step %d master %d" % (step, k))


def test_loss_scaler_rules_and_state():
    scaler = amp.LossScaler()
    assert scaler.loss_scale == 2 ** 16
    # An overflow halves the scale one check late; two in a row halve twice.
    assert scaler.record(True) is True and scaler.loss_scale == 2 ** 16
    scaler.record(True)
    assert scaler.loss_scale == 2 ** 15
    scaler.record(False)  # the first clean check since the overflows
    assert scaler.loss_scale == 2 ** 14
    for _ in range(1998):
        scaler.record(False)
    assert scaler.loss_scale == 2 ** 14
    scaler.record(False)  # the 2000th clean check doubles the next scale
    assert scaler.loss_scale == 2 ** 14
    scaler.record(False)
    assert scaler.loss_scale == 2 ** 15
    state = scaler.get_state()
    other = amp.LossScaler()
    other.set_state(json.loads(json.dumps(state)))
    assert other.get_state() == state
    for bad in ({"loss_scale": float("inf"), "next_loss_scale": 1.0, "unskipped": 0},
                {"loss_scale": 1.0, "next_loss_scale": 1.0, "unskipped": -1},
                {"loss_scale": "x", "next_loss_scale": 1.0, "unskipped": 0}):
        with pytest.raises(ValueError):
            other.set_state(bad)


def test_init_trainer_refuses_what_is_not_a_trainer():
    amp.init()
    with pytest.raises(TypeError, match="only compatible with Gluon Trainer"):
        amp.init_trainer(optimizer.create("sgd"))
    with pytest.raises(TypeError, match="should be a Gluon Trainer"):
        amp.init_trainer("sgd")
    with pytest.raises(ValueError):
        amp.LossScaler().set_state({"loss_scale": 0, "next_loss_scale": 1.0, "unskipped": 0})


def test_every_device_is_checked_for_overflow():
    # MXNet looks at the first device's gradients only; an inf on the second would be applied.
    amp.init()
    ctxs = [cpu(0), cpu(1)]
    param = gluon.Parameter("w", shape=(3,))
    param.initialize(ctx=ctxs)
    param.set_data(nd.array([1.0, 2.0, 3.0]))
    trainer = gluon.Trainer([param], "sgd", {"learning_rate": 0.1}, kvstore=None)
    amp.init_trainer(trainer)
    for j, ctx in enumerate(ctxs):
        with autograd.record():
            y = (param.data(ctx) * nd.array([1.0, float("inf") if j == 1 else 1.0, 1.0], ctx=ctx)).sum()
            with amp.scale_loss(y, trainer) as scaled:
                pass
        scaled.backward()
    trainer.step(1)
    for ctx in ctxs:
        assert param.data(ctx).asnumpy().tolist() == [1.0, 2.0, 3.0]
    assert trainer.optimizer.num_update == 0


# --------------------------------------------------------------------------- the runner


AMP_CONFIG = """\
model: {name: mlp, args: {hidden: [32], classes: 3}}
data:
  train: {type: synthetic, task: classification, num_samples: 240, num_features: 6,
          num_classes: 3, seed: 5}
  split: 0.25
  batch_size: 16
loss: softmax_cross_entropy
metrics: [accuracy]
optimizer: {name: sgd, params: {learning_rate: 0.1, momentum: 0.9}}
precision: float16
seed: 3
epochs: 4
log_every: 5
checkpoint: {every_steps: 5, keep_last: 10}
"""


def test_precision_float16_resolves_to_float16_parameters_with_master_weights(tmp_path):
    from trainer_cli.config import ConfigError, load_config

    path = tmp_path / "amp.yaml"
    path.write_text(AMP_CONFIG)
    config = load_config(path)
    assert config.model.dtype == "float16" and config.optimizer.params["multi_precision"] is True
    path.write_text(AMP_CONFIG.replace("model: {name: mlp,", "model: {dtype: float64, name: mlp,"))
    with pytest.raises(ConfigError, match="model.dtype: precision float16 trains float16"):
        load_config(path)


def test_precision_float16_run_skips_overflows_learns_and_resumes_bitwise(tmp_path, monkeypatch):
    import os

    from run_helpers import StopAt, assert_bitwise_equal, final_arrays, write_config
    from trainer_cli.run import layout, resume_run, start_run

    monkeypatch.setattr(os, "fsync", lambda fd: None)
    cfg = write_config(tmp_path, AMP_CONFIG, "amp.yaml")
    whole = start_run(cfg, run_root=tmp_path / "whole")
    assert whole.status == "finished" and whole.summary["metrics"]["val_accuracy"] > 0.8
    run_dir = Path(whole.summary["run_dir"])
    meta = layout.read_meta(layout.checkpoint_dir(run_dir, whole.summary["steps"]))
    scaler = meta["loop"]["amp"]
    # float16 gradients overflow at 2^16 and 2^15: two skipped steps settle the scale at 2^14
    # (MXNet's rule), and the parameters stay float16 with float32 master weights.
    assert scaler["skipped"] >= 2 and scaler["loss_scale"] <= 2 ** 14
    params, states = final_arrays(run_dir)
    assert all(v.dtype == numpy.float16 for v in params.values())

    stopped = start_run(cfg, run_root=tmp_path / "parts", reporter=StopAt(7))
    assert stopped.status == "interrupted"
    part_dir = Path(stopped.summary["run_dir"])
    assert resume_run(part_dir).status == "finished"
    got_params, got_states = final_arrays(part_dir)
    assert_bitwise_equal(params, got_params)
    assert_bitwise_equal(states, got_states)
    again = layout.read_meta(layout.checkpoint_dir(part_dir, whole.summary["steps"]))["loop"]["amp"]
    assert again == scaler
