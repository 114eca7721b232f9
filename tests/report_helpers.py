"""Helpers for the reporting-command tests: configs, a real Trainer, and hand-built run dirs."""
from __future__ import annotations

import json
import textwrap
import warnings

import numpy as np
from click.testing import CliRunner

from trainer_cli import autograd, cpu, gluon, lr_scheduler, nd, random
from trainer_cli.cli import main
from trainer_cli.gluon import nn
from trainer_cli.run import layout

BASE = """\
model: {name: mlp, args: {hidden: [4], classes: 2}}
data: {train: {type: synthetic, num_samples: 100, num_features: 3}, batch_size: 32}
loss: softmax_cross_entropy
"""


def write_config(folder, body, name="run.yaml"):
    path = folder / name
    path.write_text(BASE + textwrap.dedent(body))
    return path


def invoke(*args):
    """Run the CLI in-process; stdout and stderr apart, so --json output can be parsed."""
    try:
        runner = CliRunner(mix_stderr=False)  # click < 8.2 mixes stderr into stdout by default
    except TypeError:
        runner = CliRunner()
    return runner.invoke(main, [str(a) for a in args], catch_exceptions=False)


def invoke_json(*args):
    result = invoke(*args, "--json")
    return result, json.loads(result.stdout)


def make_trainer(optimizer, optimizer_params=None, scheduler=None, contexts=(cpu(0),),
                 in_units=3):
    """A tiny Dense and its Trainer; ``optimizer`` is a name (with params and a scheduler
    section, built the way Gluon code writes it) or an Optimizer instance."""
    random.seed(0)
    net = nn.Dense(2, in_units=in_units)
    net.initialize(ctx=list(contexts))
    params = None
    if isinstance(optimizer, str):
        params = dict(optimizer_params or {})
        if scheduler is not None:
            params["lr_scheduler"] = lr_scheduler.create(scheduler["type"],
                                                         **scheduler.get("params", {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = gluon.Trainer(net.collect_params(), optimizer, params)
    return net, trainer


def train_steps(net, trainer, steps, contexts=(cpu(0),), in_units=3):
    """``steps`` real updates; yields ``trainer.learning_rate`` after each one."""
    rng = np.random.default_rng(0)
    loss_fn = gluon.loss.L2Loss()
    for _ in range(steps):
        x = rng.standard_normal((4 * len(contexts), in_units)).astype(np.float32)
        y = rng.standard_normal((4 * len(contexts), 2)).astype(np.float32)
        xs = gluon.utils.split_and_load(nd.array(x), list(contexts))
        ys = gluon.utils.split_and_load(nd.array(y), list(contexts))
        with autograd.record():
            losses = [loss_fn(net(a), b) for a, b in zip(xs, ys)]
        for loss in losses:
            loss.backward()
        trainer.step(x.shape[0])
        yield trainer.learning_rate


def _digest(path):
    return {"size": path.stat().st_size, "sha256": layout.file_digest(path)}


def make_run_dir(root, config_path, steps=(3, 6), steps_per_epoch=4, metrics_tail_garbage=True):
    """A run directory as the layout describes it, with real files: params.npz from
    save_parameters, trainer.states from save_states, meta.json with sizes and SHA-256s."""
    from trainer_cli.config import load_config

    run = root / "demo-20240101-000000"
    (run / layout.CHECKPOINTS).mkdir(parents=True)
    (run / layout.CONFIG_FILE).write_text(load_config(config_path).resolved_yaml())
    net, trainer = make_trainer("adam", {"learning_rate": 0.05})
    done, rows = 0, []
    for target in steps:
        for lr in train_steps(net, trainer, target - done):
            done += 1
            rows.append({"step": done, "epoch": done // steps_per_epoch,
                         "train_loss": 1.0 / done, "lr": lr})
        ckpt = layout.checkpoint_dir(run, target)
        ckpt.mkdir()
        net.save_parameters(str(ckpt / layout.PARAMS_FILE))
        trainer.save_states(str(ckpt / layout.STATES_FILE))
        # The keys the run writes that inspect reads (run/session.py, run/checkpoint.py).
        meta = {"format": layout.META_FORMAT, "step": target, "epoch": target // steps_per_epoch,
                "batch_in_epoch": target % steps_per_epoch, "finished": target == steps[-1],
                "num_update": target, "data": {"num_samples": 4 * steps_per_epoch},
                "saved_at": "2024-01-01T00:00:%02dZ" % target,
                "files": {name: _digest(ckpt / name)
                          for name in (layout.PARAMS_FILE, layout.STATES_FILE)}}
        (ckpt / layout.META_FILE).write_text(json.dumps(meta))
        (run / layout.CHECKPOINTS / layout.LATEST).write_text(layout.checkpoint_name(target))
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if metrics_tail_garbage:
        text += '{"step": 7, "train_lo'  # a kill -9 in the middle of a line
    (run / layout.METRICS_FILE).write_text(text)
    return run, net, trainer
