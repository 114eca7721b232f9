"""The Trainer reproduces MXNet 1.9.1's golden trajectories: scripted flows and every optimizer."""
import numpy
import pytest

import golden


@pytest.mark.parametrize("name", golden.golden_files("trainer_") or ["(missing)"])
def test_trainer_flow_matches_mxnet(name, tmp_path):
    case = golden.load(name)
    got = golden.replay_flow(case, tmp_path)
    golden.compare_records(got, case["result"]["records"])


OPTIMIZER_FILES = [n for n in golden.golden_files() if not n.startswith(("trainer_", "lr_"))]


class _SilentGenerator:
    """Draws zeros, so SGLD's update is its deterministic part alone."""

    def __getattr__(self, name):
        def zeros(*args, size=None, **kwargs):
            shape = size if size is not None else kwargs.get("shape", args[-1] if args else ())
            return numpy.zeros(shape, dtype=kwargs.get("dtype", numpy.float64))
        return zeros


@pytest.mark.parametrize("name", OPTIMIZER_FILES or ["(missing)"])
def test_single_context_trainer_matches_optimizer_golden(name, monkeypatch):
    import trainer_cli.random
    from trainer_cli import autograd, cpu, gluon, nd

    case = golden.load(name)
    spec, result = case["spec"], case["result"]
    params = []
    for pname, init in zip(spec["names"], spec["weights"]):
        init = numpy.asarray(init, dtype=numpy.float32)
        p = gluon.Parameter(pname, shape=init.shape)
        p.initialize(ctx=cpu(0))
        p.set_data(nd.array(init))
        params.append(p)
    optimizer_params = dict(spec["optimizer_params"])
    sched = golden.make_scheduler(spec.get("lr_scheduler"))
    if sched is not None:
        optimizer_params["lr_scheduler"] = sched
    noise = result.get("sgld_noise")
    if noise is not None:
        monkeypatch.setattr(trainer_cli.random, "generator", lambda ctx=None: _SilentGenerator())
    trainer = gluon.Trainer(params, spec["optimizer"], optimizer_params)
    for step in range(spec["steps"]):
        if noise is not None:
            # Start each step from MXNet's weights, whose noise we cannot reproduce.
            previous = spec["weights"] if step == 0 else result["weights"][step - 1]
            for p, w in zip(params, previous):
                p.set_data(nd.array(w))
        for p, g in zip(params, spec["grads"][step]):
            with autograd.record():
                y = (p.data() * nd.array(g)).sum()
            y.backward()
        trainer.step(spec["batch_size"])
        for j, p in enumerate(params):
            expected = numpy.asarray(result["weights"][step][j])
            got = p.data().asnumpy()
            if noise is not None:
                expected = expected - numpy.asarray(noise[step][j])
            golden.assert_close(got, expected, "%s step %d param %d" % (name, step, j))
        assert abs(trainer.learning_rate - result["lr"][step]) <= 1e-5 * abs(result["lr"][step])
        assert trainer.optimizer.num_update == result["num_update"][step]
