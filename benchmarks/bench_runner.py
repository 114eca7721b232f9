"""The runner benchmark: ``trainer run configs/mlp_synthetic.yaml`` over 5,000 steps against
the bare forward/backward/step loop on the same model, data, loss and optimizer.

    python benchmarks/bench_runner.py              # 5000 steps, 2 interleaved rounds
    python benchmarks/bench_runner.py --steps 2000 --rounds 3 --json
    python benchmarks/bench_runner.py -o 'model.args.hidden=[512,512]' -o data.batch_size=256
    python benchmarks/bench_runner.py --configs cnn_digits mlp_digits char_lm --steps 1000

The runner is a fresh ``trainer run`` process (``-o steps=N -o epochs=1000``: checkpoints,
metrics, logging, validation each epoch and the progress display as configured); its figure is
steps over the summary's ``elapsed_s`` (training time: interpreter start-up, config loading,
numba's start-up and the loading of the run's kernels, which the runner does before its clock
starts, not included). The bare loop runs in a fresh process of its own each round too
(``bare_process``), on the parts the runner builds (``trainer_cli.run.build``): a shuffled pass
over the training arrays in batches, then ``autograd.record()`` / ``backward()`` /
``trainer.step()``, nothing else; timed after 20 warm-up steps. The targets: the runner at 80%
of the bare loop's steps/s or more, and 8 times PyTorch Lightning's, each as the median over
rounds of each round's ratio (the ratio of the medians is printed too). Both sides compute with
the same thread count (``--threads``, applied as the runner applies its ``threads`` setting).
Three more runner figures: without validation (the set is not split; checkpoints, metrics and
logging as configured), with checkpoints, metrics, logging and validation all off, and as
configured with the live progress line a terminal shows (``--json`` turns it off: that variant
calls ``start_run``, as the CLI does, with the terminal's reporter drawing into a pipe).
``-o KEY=VALUE`` changes the config for both sides (a larger model, another batch size).
Beside the target's ratio, ``trainer run`` as configured is also given as a fraction of the bare
loop validating each epoch as the config asks (``bare_validation``, as ``--configs`` judges).
Under the ratios, ``steadiness`` says how far the bare loop's rate moved between the rounds and
the range of the paired ratio over them: a difference smaller than that is not measured.

The runner users would pick instead runs beside it each round (``--no-peers`` leaves it out;
it needs ``pip install torch==2.13.0 pytorch-lightning``): ``_lightning_peer.py``'s bare PyTorch
loop and PyTorch Lightning's ``Trainer.fit`` on the same model, data (the runner's own arrays),
loss, optimizer and schedule of checkpoints, logs and validation, each in a fresh process that
loads nothing of ours and inherits none of this process's thread or tuning variables
(``_calibrate.peer_env``). Every side's machine, builds, environment and one-op calibration
(``_calibrate``) is printed under the ratios and kept in the JSON, so that a slow peer shows.

``--breakdown`` says where the runner's time goes instead: in this process, on one model, the
bare step and the runner's own steps (its ``TrainingLoop`` with a run directory, the checkpoint
writer and the logs) with its parts switched on one after another (plain, + metrics: their
values read at the config's log interval, + rows: the rows written, + checkpoints,
+ validation = as configured), in turns of ``--turn`` steps in rotating order;
medians over ``--rounds`` turns, and each part's cost per step as the difference to the variant
before it. Steady state only: the final checkpoint, which the whole-run figure includes, is
not in it.

``--configs NAME ...`` compares, instead, the bare loop with ``trainer run`` as configured
(checkpoints, metrics, logging and validation included) on each of ``configs/NAME.yaml``, the
configs of steps of 1 ms or more (``cnn_digits mlp_digits char_lm``; target: 95% of the bare
loop); the bare loop does what a user's loop for that config does (a language model's state
carried from batch to batch, detached, afresh each epoch; gradients clipped to ``grad_clip``),
and it validates as the config asks (``validate_every``: the validation split's loss and
metrics, in batches of the training batch size; ``bare_validation``), because a user's loop for
a config that validates each epoch does so too. The target is judged against that bare loop;
the ratio to the bare loop without validation (the figure these configs were judged by before)
and that of ``trainer run`` without the validations during training are printed beside it.
``--clock cpu`` times every side by its process's CPU time instead of the wall clock (the
runner's: its training loop's, all its threads, the checkpoint writer process's own time not
counted): steadier on a busy machine, but blind to waiting (for a save, for the disk).
``--breakdown --configs NAME`` breaks that config down.

``--after-checkpoint`` says what a checkpoint costs the steps around it: the runner's loop as
configured but without validation, in this process, each step timed with the CPU it ran on; it
prints the mean excess over the median step of the checkpoint's own step, the next one and the
23 after them (up to the first log row's), and the share of steps on each CPU. ``--pin CPU`` first pins the training thread
to CPU and the checkpoint writer process to the others (a diagnostic: on this VM the disk's
interrupts go to one CPU, and a training thread there pays for the writer's fsyncs).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIG = os.path.join(ROOT, "configs", "mlp_synthetic.yaml")
PEER = os.path.join(HERE, "_lightning_peer.py")
sys.path.insert(0, HERE)
import _calibrate  # noqa: E402  (benchmarks/ is not a package)


# The runner as configured, and with checkpoints, metrics, logging and validation off (no
# validation set: the whole set trains, which leaves the cost of a step as it is).
VARIANTS = {"as configured": [],
            "no validation": ["data.split=null"],
            "plain": ["checkpoint.every_steps=null", "metrics=[]", "log_every=1000000",
                      "data.split=null"]}
# As configured, with the live progress line a terminal shows (rich, refreshed 8 times a
# second; its output goes to a pipe here, drawn as for a terminal).
LIVE = "as configured, live display"
VARIANTS[LIVE] = []

_LIVE_RUN = """\
import json, sys
from trainer_cli.run.progress import RichReporter
from trainer_cli.run.session import start_run
config_path, overrides, run_root = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
result = start_run(config_path, overrides, run_root=run_root,
                   reporter=RichReporter(sys.stderr, force_terminal=True))
print(json.dumps(result.summary))
"""


# The CPU time of the training loop (TrainingLoop.run: the steps, validations, checkpoints and
# the final one, as elapsed_s counts them) of the process, all its threads; a checkpoint writer
# process's own time is not in it. Printed to stderr for runner() to read.
_CPU_CLOCK = """\
import atexit, sys, time
from trainer_cli.run import loop as _loop
_run, _cpu = _loop.TrainingLoop.run, []
def run(self):
    start = time.process_time()
    try:
        return _run(self)
    finally:
        _cpu.append(time.process_time() - start)
_loop.TrainingLoop.run = run
atexit.register(lambda: sys.stderr.write("\\nloop cpu s: %r\\n" % sum(_cpu)))
"""


def runner(steps, run_root, overrides=(), base=(), live=False, config_path=CONFIG, clock="wall"):
    """steps/s of a fresh ``trainer run`` process: over its summary's training time (``wall``)
    or over the CPU time of its training loop (``cpu``)."""
    items = ["steps=%d" % steps, "epochs=1000"] + list(base) + list(overrides)
    timed = _CPU_CLOCK if clock == "cpu" else ""
    if live:    # the library call the CLI makes, given the reporter a terminal gets
        cmd = [sys.executable, "-c", timed + _LIVE_RUN, config_path, json.dumps(items), run_root]
    else:
        cmd = [sys.executable, "-c", timed + "from trainer_cli.cli import main; main()", "run",
               config_path, "--run-dir", run_root, "--json"]
        for item in items:
            cmd += ["-o", item]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit("trainer run failed: %s" % proc.stderr.strip()[-500:])
    summary = json.loads(proc.stdout)
    if clock == "cpu":
        return steps / float(proc.stderr.rsplit("loop cpu s: ", 1)[1].split()[0])
    return steps / summary["elapsed_s"]


# What the bare loop's check before timing found (check_loop in _worker.py), for the report.
BARE_CHECK = {}


def _check_bare(step, net):
    from _worker import check_loop, gluon_weights
    BARE_CHECK.update(check_loop("bare loop", step, gluon_weights(net)))


def bare_step(parts, validate=False):
    """One step of the bare loop on the runner's parts: the next batch of the runner's order (a
    shuffled pass, or a text's windows in order), ``autograd.record()`` / ``backward()`` /
    ``trainer.step()``; a language model carries its recurrent state from batch to batch
    (detached, afresh each epoch) and gradients are clipped where the config says, as a user's
    loop does it. ``validate``: also the validations the config asks for during training
    (``bare_validation``), where it has a validation split."""
    from trainer_cli import autograd, nd
    from trainer_cli.gluon.utils import clip_global_norm
    from trainer_cli.run.recurrent import CarriedState

    config = parts.config
    net, loss, trainer, train = parts.net, parts.loss, parts.trainer, parts.train
    ctx, dtype, clip = parts.contexts[0], config.model.dtype, config.grad_clip
    params = [p for p in net.collect_params().values() if p.grad_req != "null"]
    carry = CarriedState(net) if train.streams else None
    every = config.validate_every if validate and parts.val is not None else None
    validation = bare_validation(parts) if every is not None else None
    done = [0]

    def batches():
        epoch = 0
        while True:
            if carry is not None:
                carry.reset()
            for idx in parts.order.batches(epoch):
                yield (nd.array(train.features(idx), ctx=ctx, dtype=dtype),
                       nd.array(train.y[idx], ctx=ctx, dtype=dtype))
            epoch += 1
            if every == "epoch":
                validation()

    feed = batches()

    def step():
        xb, yb = next(feed)
        with autograd.record():
            out = carry.forward(0, xb, ctx) if carry is not None else net(xb)
            l = loss(out, yb)
        l.backward()
        n = xb.shape[0]
        if clip is None:
            trainer.step(n)
        else:   # the mean gradient's norm at most grad_clip
            trainer.allreduce_grads()
            clip_global_norm([p.grad(ctx) for p in params], clip * n)
            trainer.update(n)
        done[0] += 1
        if isinstance(every, int) and done[0] % every == 0:
            validation()

    return step


def bare_validation(parts):
    """A validation as a user's loop writes it: the validation split in batches of the training
    batch size (a text's windows of every stream at a time, the state carried from window to
    window, afresh each time), the network's outputs, the loss's mean and the config's metrics
    (fresh for each validation, as the runner's are); returns their values."""
    from trainer_cli import nd
    from trainer_cli.run.recurrent import CarriedState

    config, net, loss, val = parts.config, parts.net, parts.loss, parts.val
    ctx, dtype = parts.contexts[0], config.model.dtype
    metrics = list(parts.val_metrics.values())
    carry = CarriedState(net) if val.streams else None
    size = val.streams if carry is not None else config.data.batch_size

    def validation():
        total, count = 0.0, 0
        for metric in metrics:
            metric.reset()
        if carry is not None:
            carry.reset()
        for start in range(0, len(val), size):
            x = nd.array(val.features(slice(start, start + size)), ctx=ctx, dtype=dtype)
            y = nd.array(val.y[start:start + size], ctx=ctx, dtype=dtype)
            out = carry.forward(0, x, ctx) if carry is not None else net(x)
            losses = loss(out, y)
            total += float(losses.asnumpy().astype("float64").sum())
            count += losses.shape[0]
            for metric in metrics:
                metric.update([y], [out])
        return {"loss": total / max(count, 1),
                **{name: value for metric in metrics for name, value in [metric.get()]}}

    return validation


def bare(steps, base=(), config_path=CONFIG, clock="wall", validate=False):
    """steps/s of the bare loop of ``config_path`` (see the module's docstring); ``validate``:
    with the validations the config asks for (``bare_step``)."""
    from trainer_cli import random as _random
    from trainer_cli.config import load_config
    from trainer_cli.run import threads
    from trainer_cli.run.build import build

    config = load_config(config_path, list(base))
    _random.seed(config.seed)
    parts = build(config, config_path)
    net = parts.net
    restore_threads = threads.apply(threads.plan(   # as the runner does
        config.threads, layer_work=threads.layer_work(net.collect_params().values(),
                                                      config.data.batch_size)))
    step = bare_step(parts, validate)
    try:
        _check_bare(step, net)
        for _ in range(20):
            step()
        timer = time.process_time if clock == "cpu" else time.perf_counter
        start = timer()
        for _ in range(steps):
            step()
        return steps / (timer() - start)
    finally:
        restore_threads()


_BARE_RUN = """\
import json, sys
sys.path.insert(0, sys.argv[1])
import trainer_cli  # noqa: F401  (before NumPy, as the runner's process imports them)
import bench_runner
args = json.loads(sys.argv[2])
rate = bench_runner.bare(args["steps"], args["base"], args["config"], args["clock"],
                         args["validate"])
print(json.dumps({"rate": rate, "check": bench_runner.BARE_CHECK}))
"""


def bare_process(steps, base=(), config_path=CONFIG, clock="wall", validate=False):
    """:func:`bare` in a fresh process of its own, as each ``trainer run`` side is: one process
    running every round of the bare loop carried that process's luck (its memory layout, its
    caches) into every ratio, about 2% here (the rates of five fresh processes 4883-4955 steps/s,
    of five rounds in one 4767-4882)."""
    args = {"steps": steps, "base": list(base), "config": config_path, "clock": clock,
            "validate": validate}
    proc = subprocess.run([sys.executable, "-c", _BARE_RUN, HERE, json.dumps(args)],
                          capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        raise SystemExit("the bare loop failed: %s" % proc.stderr.strip()[-500:])
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    BARE_CHECK.update(found["check"])
    return found["rate"]


# ----------------------------------------------------------------------------- PyTorch peers
def peers_available():
    """Whether PyTorch and PyTorch Lightning are installed (looked up, not imported: this process
    has loaded trainer_cli, and the peers run in processes of their own)."""
    import importlib.util
    return all(importlib.util.find_spec(m) is not None for m in ("torch", "pytorch_lightning"))


def write_peer_data(path, base=()):
    """The runner's own training and validation arrays, for the PyTorch side (an .npz without
    pickled objects), so both sides train on the same samples."""
    import numpy

    from trainer_cli.config import load_config
    from trainer_cli.run.build import build

    config = load_config(CONFIG, list(base))
    parts = build(config, CONFIG)
    val = parts.val if parts.val is not None else parts.train
    numpy.savez(path, x_train=parts.train.x, y_train=parts.train.y, x_val=val.x, y_val=val.y)


def torch_peer(mode, steps, threads, data, workdir, timeout=1800):
    """One run of ``_lightning_peer.py MODE`` in a clean process (``_calibrate.peer_env``: none of
    this process's thread or tuning variables, trainer_cli's OPENBLAS_THREAD_TIMEOUT included;
    the thread variables set to the benchmark's count, as for ours); its JSON answer."""
    os.makedirs(workdir, exist_ok=True)
    count = int(threads) if str(threads).isdigit() else None
    proc = subprocess.run([sys.executable, PEER, mode, data, str(steps), str(count or 0), workdir],
                          env=_calibrate.peer_env(count), capture_output=True, text=True,
                          cwd=workdir, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise SystemExit("PyTorch peer (%s) failed: %s" % (mode, proc.stderr.strip()[-500:]))
    return json.loads(lines[-1])


def ours_checkpoint_cost(base=(), repeats=15, config_path=CONFIG):
    """What one of the runner's checkpoints of this model costs written synchronously here
    (``save_checkpoint``: files, meta.json, rename, ``latest``), median ms, with its fsyncs and
    with them skipped (os.fsync made a no-op for the measurement), and how many fsyncs it makes."""
    from trainer_cli import random as _random
    from trainer_cli.config import load_config
    from trainer_cli.run.build import build
    from trainer_cli.run.checkpoint import save_checkpoint
    from trainer_cli.run.rundir import create_run_dir

    config = load_config(config_path, list(base))
    _random.seed(config.seed)
    parts = build(config, config_path)
    bare_step(parts)()      # the optimizer's states exist
    real_fsync, calls = os.fsync, [0]

    def counted(fd):
        calls[0] += 1
        return real_fsync(fd)

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = create_run_dir(tmp, config.name, config.resolved_yaml())
        step = 0
        for name, fsync in (("ours_ms", counted), ("ours_no_fsync_ms", lambda fd: None)):
            times = []
            os.fsync = fsync
            try:
                for _ in range(repeats):
                    step += 1
                    calls[0] = 0
                    start = time.perf_counter()
                    save_checkpoint(run_dir, step, parts.net, parts.trainer, {}, {})
                    times.append((time.perf_counter() - start) * 1e3)
                    if fsync is counted:
                        out["ours_fsyncs"] = calls[0]
            finally:
                os.fsync = real_fsync
            out[name] = statistics.median(times)
    return out


def checkpoint_costs(threads, base=(), with_peers=True, config_path=CONFIG):
    """Ours and Lightning's (torch.save; on configs/mlp_synthetic.yaml only) checkpoint of this
    model, each with and without fsync."""
    out = ours_checkpoint_cost(base, config_path=config_path)
    if with_peers and config_path == CONFIG and peers_available():
        with tempfile.TemporaryDirectory() as tmp:
            data = os.path.join(tmp, "data.npz")
            write_peer_data(data, base)
            out.update(torch_peer("fsync", 0, threads, data, os.path.join(tmp, "fsync")))
    return out


def print_checkpoint_costs(c):
    print("one checkpoint of this model, written synchronously, median ms: ours %.2f (%d fsyncs; "
          "%.2f with fsync skipped)%s" % (
              c["ours_ms"], c["ours_fsyncs"], c["ours_no_fsync_ms"],
              "" if "torch_save_ms" not in c else
              "; Lightning's torch.save %.2f (no fsync, as Lightning writes it; %.2f with one "
              "fsync), %d bytes" % (c["torch_save_ms"], c["torch_save_fsync_ms"], c["bytes"])))
    for line in _calibrate.summary_lines([r for r in [c.get("side")] if r]):
        print(line)


# The runner's parts, switched on in this order by --breakdown (each variant has those before it).
PARTS = ("plain", "+ metrics", "+ rows", "+ checkpoints", "+ validation")


def breakdown(rounds, turn, base=(), config_path=CONFIG, clock="wall"):
    """Median us per step of the bare step and of each of PARTS, measured in turns (see the
    module's docstring)."""
    from trainer_cli import _jit
    from trainer_cli import random as _random
    from trainer_cli.config import load_config
    from trainer_cli.run import threads
    from trainer_cli.run.build import build
    from trainer_cli.run.loop import TrainingLoop
    from trainer_cli.run.progress import Reporter
    from trainer_cli.run.rundir import create_run_dir
    from trainer_cli.run.session import _Recorder
    from trainer_cli.run.state import LoopState

    config = load_config(config_path, ["epochs=1000000"] + list(base))
    _random.seed(config.seed)
    parts = build(config, config_path)
    _jit.warm_up()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = create_run_dir(tmp, config.name, config.resolved_yaml())
        recorder = _Recorder(run_dir, parts, Reporter())
        recorder.start_writer(expected_saves=1 << 20)
        loop = TrainingLoop(parts, LoopState(), recorder)
        restore_threads = threads.apply(threads.plan(
            config.threads, layer_work=threads.layer_work(loop.params, config.data.batch_size)))
        try:
            return _turns(loop, recorder, parts, config, rounds, turn, clock)
        finally:
            restore_threads()
            recorder.close()


def _turns(loop, recorder, parts, config, rounds, turn, clock="wall"):
    order = parts.order
    every_steps, log_every, val = config.checkpoint.every_steps, config.log_every, parts.val
    every_epoch, saves_best = config.checkpoint.every_epoch, loop._saves_best
    metrics = dict(loop.train_acc.metrics)

    reads = [False]     # "+ metrics": the values a log row would hold, read without the row

    def switch(name):
        on = PARTS.index(name) if name in PARTS else -1
        reads[0] = on == 1
        loop.train_acc.metrics = metrics if on >= 1 else {}
        config.log_every = log_every if on >= 2 else 1 << 40
        object.__setattr__(config.checkpoint, "every_steps", every_steps if on >= 3 else None)
        object.__setattr__(config.checkpoint, "every_epoch", every_epoch if on >= 3 else False)
        loop._saves_best = saves_best if on >= 3 else False
        parts.val = val if on >= 4 else None

    st = loop.state

    def runner_steps(n):   # TrainingLoop._run's body, without its end
        for _ in range(n):
            loop._advance(order, 1)
            if loop._best_due and st.stop_reason is None:
                loop._checkpoint()
            # Without rows the outputs would pile up to the pending limit (8 MB) before the
            # metrics see them, which costs more than any config's log interval does.
            if reads[0] and st.step % log_every == 0:
                loop.train_acc.values("train_")

    one_bare_step = bare_step(parts)

    def bare_steps(n):
        for _ in range(n):
            one_bare_step()

    names = ("bare",) + PARTS
    times = {name: [] for name in names}
    _check_bare(one_bare_step, parts.net)
    timer = time.process_time if clock == "cpu" else time.perf_counter
    for name in names:                      # warm-up: every path's kernels and first calls
        switch(name)
        (bare_steps if name == "bare" else runner_steps)(max(50, turn // 4))
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            switch(name)
            recorder.flush()                # the save before must not land in this turn
            start = timer()
            (bare_steps if name == "bare" else runner_steps)(turn)
            recorder.flush()                # a turn pays for the saves it started
            times[name].append((timer() - start) / turn * 1e6)
    switch("+ validation")
    return {name: statistics.median(v) for name, v in times.items()}


def after_checkpoint(steps, pin=None, base=()):
    """Per-step excess around the checkpoints (see the module's docstring)."""
    import ctypes

    import numpy

    from trainer_cli import _jit
    from trainer_cli import random as _random
    from trainer_cli.config import load_config
    from trainer_cli.run import threads
    from trainer_cli.run.build import build
    from trainer_cli.run.loop import TrainingLoop
    from trainer_cli.run.progress import Reporter
    from trainer_cli.run.rundir import create_run_dir
    from trainer_cli.run.session import _Recorder
    from trainer_cli.run.state import LoopState

    config = load_config(CONFIG, ["epochs=1000000", "data.split=null"] + list(base))
    every = config.checkpoint.every_steps
    if not every:
        raise SystemExit("--after-checkpoint needs checkpoint.every_steps")
    _random.seed(config.seed)
    parts = build(config, CONFIG)
    _jit.warm_up()
    cpu_of = ctypes.CDLL(None).sched_getcpu
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = create_run_dir(tmp, config.name, config.resolved_yaml())
        recorder = _Recorder(run_dir, parts, Reporter())
        recorder.start_writer(expected_saves=1 << 20)
        if pin is not None:
            others = os.sched_getaffinity(0) - {pin}
            os.sched_setaffinity(0, {pin})          # this (the training) thread only
            if recorder._writer is not None and others:
                os.sched_setaffinity(recorder._writer.pid, others)
        loop = TrainingLoop(parts, LoopState(), recorder)
        restore_threads = threads.apply(threads.plan(
            config.threads, layer_work=threads.layer_work(loop.params, config.data.batch_size)))
        try:
            for _ in range(5 * every):
                loop._advance(parts.order, 1)
            took, at, cpus = numpy.zeros(steps), numpy.zeros(steps, int), numpy.zeros(steps, int)
            st, clock = loop.state, time.perf_counter
            for i in range(steps):
                start = clock()
                loop._advance(parts.order, 1)
                took[i], at[i], cpus[i] = clock() - start, st.step, cpu_of()
        finally:
            restore_threads()
            recorder.close()
    offset = at % every
    median = numpy.median(took[(offset > every // 3) & (offset < every - 5)])
    excess = [(took[offset == k].mean() - median) * 1e6 for k in range(every)]
    return {"median_step_us": median * 1e6, "checkpoint_step_us": excess[0],
            "next_step_us": excess[1], "23_after_us": sum(excess[2:25]),
            "cpu_share": {int(c): float((cpus == c).mean()) for c in numpy.unique(cpus)}}


def _nd():
    from trainer_cli import nd
    return nd


def peer_rate(runs, mode, steps, threads, data, workdir, clock="wall"):
    """steps/s of one PyTorch peer run (its whole answer kept in ``runs``), by the wall clock
    or its process's CPU time."""
    runs.append(torch_peer(mode, steps, threads, data, workdir))
    return runs[-1]["cpu_steps_per_s" if clock == "cpu" else "steps_per_s"]


def _paired(rates, a, b):
    return statistics.median(x / y for x, y in zip(rates[a], rates[b]))


def steadiness(rates: dict, side: str, base: str = "bare") -> dict:
    """How far the rounds of one run moved: the ``base`` side's rate (the fastest round over the
    slowest, less 1) and the lowest and highest of ``side``'s ratios to the ``base`` of its own
    round. On a shared machine a ratio moves by more than most changes do: a difference smaller
    than the range is not measured by the run."""
    ratios = [x / b for x, b in zip(rates[side], rates[base])]
    return {"bare_moved": max(rates[base]) / min(rates[base]) - 1,
            "ratio_range": [min(ratios), max(ratios)]}


def steadiness_line(steady: dict, base: str, what: str) -> str:
    low, high = steady["ratio_range"]
    return ("steadiness: %s's rate moved by %.0f%% between rounds; %s ranged %.1f-%.1f%% over "
            "the rounds" % (base, 100 * steady["bare_moved"], what, 100 * low, 100 * high))


# The targets against the runner users would pick instead, on configs/mlp_synthetic.yaml.
TARGET_OF_BARE, TARGET_OF_LIGHTNING = 0.80, 8.0


def peer_report(rates, peer_runs, runner_over_bare):
    """The runner against Lightning and the bare PyTorch loop, each ratio the median over rounds
    of the ratio of figures measured in the same round."""
    over_lightning = _paired(rates, "as configured", "lightning")
    return {"torch_bare_steps_per_s": statistics.median(rates["torch bare"]),
            "lightning_steps_per_s": statistics.median(rates["lightning"]),
            "runner_over_lightning": over_lightning,
            "lightning_over_torch_bare": _paired(rates, "lightning", "torch bare"),
            "bare_over_torch_bare": _paired(rates, "bare", "torch bare"),
            "peer_cpu_steps_per_s": {name: statistics.median(r["cpu_steps_per_s"] for r in runs)
                                     for name, runs in peer_runs.items()},
            "lightning_checkpoints_kept": peer_runs["lightning"][-1].get("checkpoints_kept"),
            "met_against_peers": (runner_over_bare >= TARGET_OF_BARE
                                  and over_lightning >= TARGET_OF_LIGHTNING)}


def print_peers(report):
    if "lightning_steps_per_s" in report:
        print("trainer run as configured: %.0f%% of our bare loop (target >= %.0f%%) and %.2fx "
              "Lightning's steps/s (target >= %gx): %s; Lightning's Trainer.fit %.0f steps/s, "
              "%.0f%% of the bare PyTorch loop's %.0f; our bare loop %.2fx the bare PyTorch loop"
              % (100 * report["runner_over_bare"], 100 * TARGET_OF_BARE,
                 report["runner_over_lightning"], TARGET_OF_LIGHTNING,
                 "met" if report["met_against_peers"] else "NOT met",
                 report["lightning_steps_per_s"], 100 * report["lightning_over_torch_bare"],
                 report["torch_bare_steps_per_s"], report["bare_over_torch_bare"]))
    for line in _calibrate.summary_lines(report["sides"]):
        print(line)


# Steps of 1 ms or more (--configs): trainer run as configured against the bare loop.
TARGET_OF_BARE_LONG_STEPS = 0.95


# The runner sides of --configs: as configured, and without the validations during training
# (the same split and checkpoints; one validation at the end, as the runner always makes).
CONFIG_VARIANTS = {"runner": [], "no epoch validation": ["validate_every=1000000000"]}


def config_path_of(name):
    """configs/NAME.yaml of this checkout, or NAME itself when it is a file."""
    path = name if os.path.isfile(name) else os.path.join(ROOT, "configs", name + ".yaml")
    if not os.path.isfile(path):
        raise SystemExit("--configs: no config %r (a name in configs/ or a file)" % name)
    return path


def compare_configs(names, steps, rounds, overrides, clock="wall"):
    """Per config, the bare loop's and ``trainer run``'s (as configured) steps/s in each round,
    side by side (the order reversed every other round), and the median of the paired ratios."""
    paths = {name: config_path_of(name) for name in names}
    rates = {name: {"bare": [], "bare, validating": [], **{side: [] for side in CONFIG_VARIANTS}}
             for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            for name in (names if r % 2 == 0 else names[::-1]):
                jobs = [("bare", lambda: bare_process(steps, overrides, paths[name], clock)),
                        ("bare, validating", lambda: bare_process(
                            steps, overrides, paths[name], clock, validate=True))]
                jobs += [(side, lambda side=side: runner(
                    steps, os.path.join(tmp, "%s-%d-%s" % (name, r, side)), CONFIG_VARIANTS[side],
                    overrides, config_path=paths[name], clock=clock))
                    for side in CONFIG_VARIANTS]
                for side, job in (jobs if r % 2 == 0 else jobs[::-1]):
                    rates[name][side].append(job())
                    print("round %d: %s %s done" % (r + 1, name, side), file=sys.stderr,
                          flush=True)
    out = {}
    for name, got in rates.items():
        ratio = {side: statistics.median(x / b for x, b in zip(got[side], got["bare"]))
                 for side in CONFIG_VARIANTS}
        validating = statistics.median(x / b for x, b in zip(got["runner"],
                                                             got["bare, validating"]))
        bare_rate = statistics.median(got["bare"])
        out[name] = {"config": os.path.relpath(paths[name], ROOT),
                     "bare_steps_per_s": bare_rate, "bare_step_ms": 1e3 / bare_rate,
                     "validating_bare_steps_per_s": statistics.median(got["bare, validating"]),
                     "runner_steps_per_s": statistics.median(got["runner"]),
                     "runner_over_validating_bare": validating,
                     "runner_over_bare": ratio["runner"],
                     "no_epoch_validation_runner_over_bare": ratio["no epoch validation"],
                     "met": validating >= TARGET_OF_BARE_LONG_STEPS,
                     "steadiness": steadiness(got, "runner", "bare, validating"), "rounds": got}
    return out


def print_configs(found, load_before):
    for name, f in found.items():
        print("%-14s trainer run as configured %6.0f steps/s: %.1f%% of the bare loop validating "
              "as configured (%.0f steps/s; target >= %.0f%%: %s); against the bare loop without "
              "validation (%.0f steps/s, %.2f ms a step) %.1f%%, and without validation during "
              "training %.1f%%" % (
                  name, f["runner_steps_per_s"], 100 * f["runner_over_validating_bare"],
                  f["validating_bare_steps_per_s"], 100 * TARGET_OF_BARE_LONG_STEPS,
                  "met" if f["met"] else "NOT met", f["bare_steps_per_s"], f["bare_step_ms"],
                  100 * f["runner_over_bare"], 100 * f["no_epoch_validation_runner_over_bare"]))
        print("  " + steadiness_line(f["steadiness"], "the validating bare loop",
                                     "trainer run over it"))
    print("(median ratios of paired rounds; load average before %.1f)" % load_before[0])


def print_breakdown(us):
    print("us per step, medians (in-process, steady state):")
    print("  %-16s %7.1f" % ("bare step", us["bare"]))
    before = us["bare"]
    for name in PARTS:
        print("  %-16s %7.1f   %+6.1f us (%+.1f%% of the bare step)   %3.0f%% of the bare step's rate"
              % (name, us[name], us[name] - before, 100 * (us[name] - before) / us["bare"],
                 100 * us["bare"] / us[name]))
        before = us[name]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("-o", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for the bare loop and every runner variant")
    parser.add_argument("--threads", default="1",
                        help="the thread count of both sides (default 1; 'auto' lets each side "
                             "choose from the load average, which the runs themselves raise)")
    parser.add_argument("--breakdown", action="store_true",
                        help="where the runner's time goes, part by part, in this process")
    parser.add_argument("--turn", type=int, default=400,
                        help="steps per turn of --breakdown (default 400)")
    parser.add_argument("--after-checkpoint", action="store_true",
                        help="what a checkpoint costs the steps around it, in this process")
    parser.add_argument("--no-peers", action="store_true",
                        help="without the PyTorch peers (the bare PyTorch loop and Lightning)")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="steps/s by the wall clock (default) or by the CPU time of each "
                             "side's process (steadier on a busy machine; a checkpoint writer "
                             "process's own time not counted)")
    parser.add_argument("--configs", nargs="+", metavar="NAME",
                        help="instead: the bare loop against trainer run as configured on each "
                             "of configs/NAME.yaml (or a config file), target >= 95%% (steps of "
                             "1 ms or more)")
    parser.add_argument("--pin", type=int, default=None, metavar="CPU",
                        help="with --after-checkpoint: the training thread on CPU, the writer "
                             "process on the others")
    args = parser.parse_args(argv)
    args.overrides = ["threads=%s" % args.threads] + args.overrides
    sys.path.insert(0, ROOT)
    # Before NumPy, as the runner's own process imports it (it sets OPENBLAS_THREAD_TIMEOUT
    # then): the bare loop here runs with the runner's settings. The peers get none of it.
    import trainer_cli  # noqa: F401
    if args.after_checkpoint:
        found = after_checkpoint(args.steps * 4, args.pin, args.overrides)
        if args.json:
            json.dump(dict(found, command=" ".join(["python", "benchmarks/bench_runner.py"]
                                                   + sys.argv[1:])), sys.stdout, indent=2)
            print()
        else:
            print("median step %.1f us; excess of the checkpoint's step %.0f us, of the next "
                  "step %.0f us, of the 23 after them %.0f us in all; steps on CPU %s"
                  % (found["median_step_us"], found["checkpoint_step_us"], found["next_step_us"],
                     found["23_after_us"], ", ".join("%d: %.0f%%" % (c, 100 * v)
                                                    for c, v in found["cpu_share"].items())))
        return 0
    if args.breakdown:
        config_of_breakdown = config_path_of(args.configs[0]) if args.configs else CONFIG
        us = breakdown(max(args.rounds, 1), args.turn, args.overrides, config_of_breakdown,
                       args.clock)
        costs = checkpoint_costs(args.threads, args.overrides, not args.no_peers,
                                 config_of_breakdown)
        if args.json:
            json.dump({"command": " ".join(["python", "benchmarks/bench_runner.py"] + sys.argv[1:]),
                       "us_per_step": us, "checkpoint_ms": costs, "bare_check": BARE_CHECK},
                      sys.stdout, indent=2)
            print()
        else:
            print_breakdown(us)
            print_checkpoint_costs(costs)
        return 0
    if args.configs:
        load_before = os.getloadavg()
        found = compare_configs(args.configs, args.steps, max(args.rounds, 1), args.overrides,
                                args.clock)
        if args.json:
            json.dump({"command": " ".join(["python", "benchmarks/bench_runner.py"] + sys.argv[1:]),
                       "load_average_before": [round(v, 2) for v in load_before],
                       "configs": found, "bare_check": BARE_CHECK,
                       "sides": [_calibrate.describe("ours", nd=_nd())]}, sys.stdout, indent=2)
            print()
        else:
            print_configs(found, load_before)
            for line in _calibrate.summary_lines([_calibrate.describe("ours", nd=_nd())]):
                print(line)
        return 0
    load_before = os.getloadavg()
    with_peers = not args.no_peers and peers_available()
    rates = {"bare": [], "bare, validating": [], **{name: [] for name in VARIANTS}}
    peer_runs = {"torch bare": [], "lightning": []}
    if with_peers:
        rates.update({name: [] for name in peer_runs})
    with tempfile.TemporaryDirectory() as tmp:
        if with_peers:
            data = os.path.join(tmp, "data.npz")
            write_peer_data(data, args.overrides)
        for r in range(args.rounds):
            jobs = [("bare", lambda: bare_process(args.steps, args.overrides, clock=args.clock)),
                    ("bare, validating", lambda: bare_process(args.steps, args.overrides,
                                                      clock=args.clock, validate=True))]
            jobs += [(name, lambda name=name: runner(
                args.steps, os.path.join(tmp, "%d-%d" % (r, list(VARIANTS).index(name))),
                VARIANTS[name], args.overrides, live=name == LIVE, clock=args.clock))
                for name in VARIANTS]
            if with_peers:
                jobs += [(name, lambda name=name, mode=mode: peer_rate(
                    peer_runs[name], mode, args.steps, args.threads, data,
                    os.path.join(tmp, "%s-%d" % (mode, r)), args.clock))
                    for name, mode in (("torch bare", "bare"), ("lightning", "lightning"))]
            for name, job in (jobs if r % 2 == 0 else jobs[::-1]):
                rates[name].append(job())
                print("round %d: %s done" % (r + 1, name), file=sys.stderr, flush=True)
    median = {name: statistics.median(v) for name, v in rates.items()}
    # Each variant over the bare loop of its own round (measured next to it), the median of
    # those: the machine's speed drifts between rounds by more than the runner's overhead.
    paired = {name: statistics.median(r / b for r, b in zip(rates[name], rates["bare"]))
              for name in VARIANTS}
    bare_rate, run_rate = median["bare"], median["as configured"]
    report = {"command": " ".join(["python", "benchmarks/bench_runner.py"] + sys.argv[1:]),
              "steps": args.steps, "clock": args.clock, "overrides": args.overrides,
              "load_average_before": [round(v, 2) for v in load_before],
              "bare_steps_per_s": bare_rate, "runner_steps_per_s": run_rate,
              "plain_runner_steps_per_s": median["plain"],
              "no_validation_runner_steps_per_s": median["no validation"],
              "runner_over_bare": paired["as configured"],
              "no_validation_runner_over_bare": paired["no validation"],
              "plain_runner_over_bare": paired["plain"],
              "live_display_runner_over_bare": paired[LIVE],
              "validating_bare_steps_per_s": median["bare, validating"],
              "runner_over_validating_bare": statistics.median(
                  r / b for r, b in zip(rates["as configured"], rates["bare, validating"])),
              "ratio_of_medians": {name: median[name] / bare_rate for name in VARIANTS},
              "met": paired["as configured"] >= TARGET_OF_BARE,
              "steadiness": steadiness(rates, "as configured"), "rounds": rates}
    if with_peers:
        report.update(peer_report(rates, peer_runs, paired["as configured"]))
    report["sides"] = [_calibrate.describe("ours (this process; the bare loop's and trainer "
                                           "run's: same builds and environment)", nd=_nd())]
    report["sides"] += [runs[-1]["side"] for runs in peer_runs.values() if runs]
    report["bare_check"] = BARE_CHECK
    if peer_runs["torch bare"]:     # checked in its own process (_lightning_peer.bare)
        report["torch_bare_check"] = peer_runs["torch bare"][-1].get("check")
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        print("bare loop %.0f steps/s; trainer run %.0f steps/s: %.0f%% (target >= 80%%: %s); "
              "without validation (checkpoints, metrics, logging on) %.0f steps/s: %.0f%%; "
              "with checkpoints, metrics, logging and validation off %.0f steps/s: %.0f%%; "
              "as configured with the live display %.0f steps/s: %.0f%% "
              "(median ratios of paired rounds; ratios of medians %s); load average %.1f"
              % (bare_rate, run_rate, 100 * paired["as configured"],
                 "met" if report["met"] else "NOT met",
                 median["no validation"], 100 * paired["no validation"],
                 median["plain"], 100 * paired["plain"], median[LIVE], 100 * paired[LIVE],
                 " / ".join("%.0f%%" % (100 * v) for v in report["ratio_of_medians"].values()),
                 load_before[0]))
        print(steadiness_line(report["steadiness"], "the bare loop",
                              "trainer run as configured over it"))
        print("against the bare loop validating each epoch as the config asks (%.0f steps/s): "
              "trainer run as configured %.0f%%" % (report["validating_bare_steps_per_s"],
                                                    100 * report["runner_over_validating_bare"]))
        print_peers(report)
        print("bare loop checked before timing (a step changes the weights, keeps them "
              "finite): %s%s" % (json.dumps(BARE_CHECK), "; PyTorch's bare loop: %s"
                                 % json.dumps(report["torch_bare_check"])
                                 if "torch_bare_check" in report else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
