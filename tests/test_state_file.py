"""Optimizer-state files: exact resume for every optimizer, and clear errors for bad files."""
from __future__ import annotations

import io
import json
import os
import pickle
import warnings
import zipfile

import numpy as np
import pytest

from trainer_cli import cpu, lr_scheduler, nd, optimizer, random
from trainer_cli.optimizer import get_updater
from trainer_cli.optimizer.state_file import (StateFileError, dumps_states, load_states_file,
                                              loads_states, save_states_file)

SCHED = {"class": "FactorScheduler", "params": {"step": 2, "factor": 0.5, "base_lr": 0.1}}
CONFIGS = {
    "sgd": dict(momentum=0.9, wd=1e-3, lr_scheduler=SCHED), "ccsgd": dict(momentum=0.5),
    "nag": dict(momentum=0.9, wd=1e-3), "signum": dict(momentum=0.9, wd_lh=1e-3),
    "sgld": dict(wd=1e-3), "dcasgd": dict(momentum=0.0, wd=1e-3),
    "lars": dict(momentum=0.9, wd=1e-3, lr_scheduler=SCHED),
    "lbsgd": dict(momentum=0.9, batch_scale=2, updates_per_epoch=2, warmup_epochs=2),
    "adam": dict(wd=1e-3, clip_gradient=0.5, learning_rate=0.1, lr_scheduler=SCHED),
    "adamw": dict(wd=1e-2), "adagrad": dict(wd=1e-3), "groupadagrad": dict(),
    "rmsprop": dict(centered=True, clip_weights=2.0), "adadelta": dict(wd=1e-3),
    "ftrl": dict(wd=1e-3), "adamax": dict(wd=1e-3), "nadam": dict(wd=1e-3),
    "ftml": dict(wd=1e-3), "lamb": dict(wd=1e-3, lower_bound=0.1), "test": dict(),
}
SHAPES = [(3, 4), (5, 2), (2, 2)]
STEPS, STOP = 6, 3


def _data():
    rng = np.random.default_rng(0)
    w = [rng.standard_normal(s).astype(np.float32) for s in SHAPES]
    g = [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(STEPS)]
    return w, g


def _new(name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return optimizer.create(name, rescale_grad=0.5, **{**CONFIGS[name], **kw})


def _step(updaters, weights, grads):
    """One Trainer-like step: every device's updater gets all parameters."""
    for upd, ws in zip(updaters, weights):
        ctx = ws[0].context
        upd(list(range(len(ws))), [nd.array(g, ctx=ctx) for g in grads], ws)


def _devices_run(name, w0, grads, resume_at=None, tmp_path=None, dtype="float32", **kw):
    random.seed(7)
    opt = _new(name, **kw)
    ctxs = [cpu(0), cpu(1)]
    updaters = [get_updater(opt) for _ in ctxs]
    weights = [[nd.array(w, ctx=c, dtype=dtype) for w in w0] for c in ctxs]
    for step, gs in enumerate(grads):
        if step == resume_at:
            path = tmp_path / "trainer.states"
            save_states_file(path, {c.device_id: u.states for c, u in zip(ctxs, updaters)},
                             updaters[0].optimizer)
            by_device, opt = load_states_file(path)
            updaters = [get_updater(opt) for _ in ctxs]
            for c, u in zip(ctxs, updaters):
                u.states = by_device[c.device_id]
                u.states_synced = dict.fromkeys(u.states, False)
        _step(updaters, weights, gs)
    return updaters[0].optimizer, [[w.asnumpy() for w in ws] for ws in weights]


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_resume_is_bitwise_identical(name, tmp_path):
    w0, grads = _data()
    opt_a, straight = _devices_run(name, w0, grads)
    opt_b, resumed = _devices_run(name, w0, grads, resume_at=STOP, tmp_path=tmp_path)
    for dev_a, dev_b in zip(straight, resumed):
        for a, b in zip(dev_a, dev_b):
            np.testing.assert_array_equal(a, b)
    assert opt_b is not opt_a
    assert opt_b.num_update == opt_a.num_update
    assert opt_b._all_index_update_counts == opt_a._all_index_update_counts
    assert opt_b.hyperparams() == opt_a.hyperparams()
    assert opt_b.learning_rate == opt_a.learning_rate


@pytest.mark.parametrize("name", ["sgd", "adam", "nag", "lars", "lamb"])
def test_resume_multi_precision(name, tmp_path):
    w0, grads = _data()
    w0 = [w.astype(np.float16) for w in w0]
    _, straight = _devices_run(name, w0, grads, multi_precision=True, dtype="float16")
    _, resumed = _devices_run(name, w0, grads, resume_at=STOP, tmp_path=tmp_path,
                              multi_precision=True, dtype="float16")
    for dev_a, dev_b in zip(straight, resumed):
        for a, b in zip(dev_a, dev_b):
            assert a.dtype == np.float16
            np.testing.assert_array_equal(a, b)


def _saved(tmp_path, name="adam"):
    w0, grads = _data()
    opt = _new(name)
    upd = get_updater(opt)
    ws = [nd.array(w) for w in w0]
    _step([upd], [ws], grads[0])
    path = tmp_path / "trainer.states"
    save_states_file(path, {0: upd.states}, opt)
    return path, upd


def test_file_is_a_plain_npz(tmp_path):
    path, upd = _saved(tmp_path)
    with np.load(path, allow_pickle=False) as npz:
        header = json.loads(npz["__header__"].tobytes().decode("utf-8"))
        assert npz["__header__"].dtype == np.uint8
        assert header["format"] == "trainer-cli/optimizer-states" and header["version"] == 1
        opt = header["optimizer"]
        assert opt["name"] == "adam" and opt["num_update"] == 1
        assert opt["hyperparams"]["learning_rate"] == 0.1
        assert opt["hyperparams"]["lr_scheduler"]["class"] == "FactorScheduler"
        assert opt["update_counts"] == [[0, [[0, 1], [1, 1], [2, 1]]]]
        first = header["devices"][0]["states"][0]
        assert first["index"] == 0
        mean_key = first["state"]["tuple"][0]["array"]
        np.testing.assert_array_equal(npz[mean_key], upd.states[0][0].asnumpy())
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]


def test_layouts_survive(tmp_path):
    w = nd.array([1.0, 2.0])
    states = {0: None, 1: w, 2: (None, w), 3: [w, (w, None)], "key": (w,)}
    by_device, opt = loads_states(dumps_states({3: states}, None))
    assert opt is None and list(by_device) == [3]
    got = by_device[3]
    assert got[0] is None and got[2][0] is None and isinstance(got[2], tuple)
    assert isinstance(got[3], list) and isinstance(got[3][1], tuple) and got[3][1][1] is None
    assert isinstance(got["key"], tuple) and got["key"][0].context == cpu(0)
    np.testing.assert_array_equal(got[1].asnumpy(), [1.0, 2.0])


def test_extra_state_saved(tmp_path):
    path, _ = _saved(tmp_path, "nadam")
    _, opt = load_states_file(path)
    assert opt.m_schedule != 1.0
    with np.load(path, allow_pickle=False) as npz:
        header = json.loads(npz["__header__"].tobytes())
    assert header["optimizer"]["extra"]["m_schedule"] == opt.m_schedule


def test_scheduler_override_survives(tmp_path):
    sched = lr_scheduler.PolyScheduler(max_update=10, base_lr=1.0, warmup_steps=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        opt = optimizer.create("sgd", learning_rate=0.5, lr_scheduler=sched)
    path = tmp_path / "s.states"
    save_states_file(path, {}, opt)
    _, again = load_states_file(path)
    s = again.lr_scheduler
    assert (s.base_lr, s.warmup_final_lr, s.base_lr_orig) == (0.5, 1.0, 1.0)
    assert [s(n) for n in range(12)] == [sched(n) for n in range(12)]


# ---------------------------------------------------------------------- bad files
def _rewrite(path, edit_header=None, drop=None, replace=None):
    with np.load(path, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays["__header__"].tobytes())
    if edit_header:
        edit_header(header)
    arrays["__header__"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    if drop:
        del arrays[drop]
    if replace:
        arrays.update(replace)
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _expect_error(path, match):
    with pytest.raises(StateFileError, match=match) as info:
        load_states_file(path)
    assert str(path) in str(info.value)
    assert isinstance(info.value, ValueError)


def test_truncated(tmp_path):
    path, _ = _saved(tmp_path)
    data = path.read_bytes()
    for cut in (10, len(data) // 2, len(data) - 10):
        path.write_bytes(data[:cut])
        _expect_error(path, "not a readable")


def test_corrupted(tmp_path):
    path, _ = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 3: len(data) // 3 + 40] = b"\xff" * 40
    path.write_bytes(bytes(data))
    _expect_error(path, ".")


def test_foreign_files(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, weights=np.ones(3))
    _expect_error(path, "without a __header__")
    npy = tmp_path / "array.npy"
    np.save(npy, np.ones(3))
    _expect_error(npy, "single array")
    pkl = tmp_path / "mxnet.states"
    pkl.write_bytes(pickle.dumps({0: [1, 2, 3]}))
    _expect_error(pkl, "not a readable")
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    _expect_error(text, "not a readable")
    _expect_error(tmp_path / "missing.states", "cannot read")


def test_object_arrays_are_refused(tmp_path):
    path, _ = _saved(tmp_path)
    buf = io.BytesIO()
    np.save(buf, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("a0_obj.npy", buf.getvalue())
    _expect_error(path, "not a readable")


def test_wrong_version(tmp_path):
    path, _ = _saved(tmp_path)
    _rewrite(path, edit_header=lambda h: h.update(version=99))
    _expect_error(path, "version 99")


def test_wrong_format_name(tmp_path):
    path, _ = _saved(tmp_path)
    _rewrite(path, edit_header=lambda h: h.update(format="something-else"))
    _expect_error(path, "format")


def test_unknown_optimizer(tmp_path):
    path, _ = _saved(tmp_path)
    _rewrite(path, edit_header=lambda h: h["optimizer"].update(name="adagradx"))
    _expect_error(path, "unknown optimizer 'adagradx'.*adam")


def test_bad_hyperparameter(tmp_path):
    path, _ = _saved(tmp_path)
    _rewrite(path, edit_header=lambda h: h["optimizer"]["hyperparams"].update(momentum=0.9))
    _expect_error(path, "cannot rebuild optimizer 'adam'")


def test_missing_array(tmp_path):
    path, _ = _saved(tmp_path)
    _rewrite(path, drop="a1")
    _expect_error(path, "'a1'.*missing")


def test_shape_and_dtype_mismatch(tmp_path):
    path, _ = _saved(tmp_path)
    _rewrite(path, replace={"a0": np.zeros((7,), np.float32)})
    _expect_error(path, "shape")
    path, _ = _saved(tmp_path)
    _rewrite(path, replace={"a0": np.zeros((3, 4), np.float64)})
    _expect_error(path, "dtype")


def test_bad_layout(tmp_path):
    path, _ = _saved(tmp_path)
    _rewrite(path, edit_header=lambda h: h["devices"][0]["states"][0].update(state={"set": []}))
    _expect_error(path, "layout")
    path, _ = _saved(tmp_path)
    _rewrite(path, edit_header=lambda h: h["devices"][0].pop("states"))
    _expect_error(path, "invalid")


def test_bytes_errors_name_the_source():
    with pytest.raises(StateFileError, match="<bytes>"):
        loads_states(b"garbage")
    upd = get_updater(optimizer.create("sgd"))
    with pytest.raises(StateFileError):
        upd.set_states(b"\x80\x04garbage")


def test_atomic_replace(tmp_path):
    path, upd = _saved(tmp_path)
    before = path.read_bytes()
    save_states_file(path, {0: upd.states}, upd.optimizer)
    assert path.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["trainer.states"]
