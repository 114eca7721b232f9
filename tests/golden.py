"""Loading the golden MXNet 1.9.1 cases and replaying their scripted Trainer flows."""
from __future__ import annotations

import json
from pathlib import Path

import numpy

# Copied from shared/reference/golden so the suite needs nothing outside the repository.
GOLDEN_DIR = Path(__file__).resolve().parent / "data" / "golden"

ATOL, RTOL = 1e-6, 1e-5


def golden_files(prefix=""):
    files = sorted(p.name for p in GOLDEN_DIR.glob(prefix + "*.json") if p.name != "registry.json")
    assert files, "no golden files %s*.json in %s" % (prefix, GOLDEN_DIR)
    return files


def load(name):
    return json.loads((GOLDEN_DIR / name).read_text())


def assert_close(got, expected, what):
    got = numpy.asarray(got, dtype=numpy.float64)
    expected = numpy.asarray(expected, dtype=numpy.float64)
    assert got.shape == expected.shape, "%s: shape %s != %s" % (what, got.shape, expected.shape)
    bad = numpy.abs(got - expected) > ATOL + RTOL * numpy.abs(expected)
    assert not bad.any(), "%s: got %s expected %s" % (what, got[bad][:5], expected[bad][:5])


def make_scheduler(spec):
    if not spec:
        return None
    from trainer_cli import lr_scheduler
    return getattr(lr_scheduler, spec["class"])(**spec["params"])


def replay_flow(case, tmp_path):
    """Run a ``trainer_*.json`` flow with trainer_cli; return one record per op like the file's."""
    from trainer_cli import autograd, cpu, gluon, nd

    spec = case["spec"]
    ctxs = [cpu(i) for i in range(spec["num_ctx"])]
    params = []
    for p in spec["params"]:
        init = numpy.asarray(p["init"], dtype=numpy.float32)
        param = gluon.Parameter(p["name"], shape=init.shape, grad_req=p.get("grad_req", "write"),
                                lr_mult=p.get("lr_mult", 1.0), wd_mult=p.get("wd_mult", 1.0))
        param.initialize(ctx=ctxs)
        param.set_data(nd.array(init))
        params.append(param)
    states_file = str(tmp_path / "flow.states")
    trainer = None

    def new_trainer():
        optimizer_params = dict(spec["optimizer_params"])
        sched = make_scheduler(spec.get("lr_scheduler"))
        if sched is not None:
            optimizer_params["lr_scheduler"] = sched
        return gluon.Trainer(params, spec["optimizer"], optimizer_params, **spec["trainer"])

    def call(op):
        nonlocal trainer
        kind = op["op"]
        if kind == "new_trainer":
            trainer = new_trainer()
        elif kind == "backward":
            for param, per_ctx in zip(params, op["grads"]):
                if per_ctx is None:
                    continue
                for ctx, g in zip(ctxs, per_ctx):
                    if g is None:
                        continue
                    with autograd.record():
                        y = (param.data(ctx) * nd.array(g, ctx=ctx)).sum()
                    y.backward()
        elif kind in ("step", "update"):
            getattr(trainer, kind)(op["batch_size"], ignore_stale_grad=op.get("ignore_stale_grad", False))
        elif kind == "allreduce_grads":
            trainer.allreduce_grads()
        elif kind == "set_learning_rate":
            trainer.set_learning_rate(op["lr"])
        elif kind == "save_states":
            trainer.save_states(states_file)
        elif kind == "load_states":
            trainer.load_states(states_file)
        elif kind == "check":
            return {"weights": [[d.asnumpy() for d in p.list_data()] for p in params],
                    "lr": trainer.learning_rate}
        elif kind == "check_grads":
            return {"grads": [None if p.grad_req == "null" else [g.asnumpy() for g in p.list_grad()]
                              for p in params]}
        else:
            raise AssertionError("unknown op %s" % kind)
        return None

    records = []
    for op in spec["ops"]:
        if op["op"] == "expect_error":
            raised_at = None
            for j, sub in enumerate(op["calls"]):
                try:
                    call(sub)
                except (AttributeError, ImportError, NameError, NotImplementedError):
                    raise
                except Exception:
                    raised_at = j
                    break
            records.append({"raised": raised_at is not None, "at": raised_at})
        else:
            records.append(call(op))
    return records


def compare_records(got, expected):
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        if e is None:
            continue
        if "raised" in e:
            assert g["raised"] and g["at"] == e["at"], "op %d: expected an error at call %s" % (i, e["at"])
            continue
        if "weights" in e:
            for p, (gp, ep) in enumerate(zip(g["weights"], e["weights"])):
                for c, (gc, ec) in enumerate(zip(gp, ep)):
                    assert_close(gc, ec, "op %d weight %d ctx %d" % (i, p, c))
            assert abs(g["lr"] - e["lr"]) <= RTOL * abs(e["lr"]), "op %d lr %s != %s" % (i, g["lr"], e["lr"])
        if "grads" in e:
            for p, (gp, ep) in enumerate(zip(g["grads"], e["grads"])):
                if ep is None:
                    assert gp is None
                    continue
                for c, (gc, ec) in enumerate(zip(gp, ep)):
                    assert_close(gc, ec, "op %d grad %d ctx %d" % (i, p, c))
