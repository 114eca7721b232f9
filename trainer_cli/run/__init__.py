"""The training runner behind the CLI: building from a config, the loop, run directories.

``start_run(config_path, overrides)`` and ``resume_run(run_dir)`` are the whole of ``trainer
run`` and ``trainer resume``; the modules below each do one job:

=============  ================================================================================
layout         the run-directory contract: file names, meta.json, verifying checkpoints
rundir         creating ``<root>/<name>-<UTC time>/``; the writer's lock
data           datasets from a config (synthetic, npz, npy, csv, scikit-learn), validation split
order          the batches of each epoch, a pure function of (seed, epoch)
model          loading ``models/<name>.py`` or ``file.py:factory`` and building the network
user_code      an error of the user's model code told with its block, shapes and file:line
warm_start     ``model.init_from`` (weights of a run's checkpoint or a file), freeze, lr_mult
scaling        ``data.normalize``: fitted on the training split, saved, applied everywhere
build          everything from a config (metrics from ``trainer_cli.metric``), up to the
               gluon.Trainer, whose ``mode`` says how gradients travel
grads          global norm, NaN/Inf check and clipping between backward and update
loop           steps, epochs, validation, early stopping, when to checkpoint
state          the loop's position and counters, as stored in meta.json
checkpoint     writing, verifying, loading, pruning ``checkpoints/step-N/``
kvstate        gradient-compression residuals, for exact resume
logs           metrics.jsonl, metrics.csv, train.log
progress       the progress bar and log lines
signals        Ctrl-C / SIGTERM: finish the step, checkpoint, exit 130; checkpoint.every_seconds
session        start_run / resume_run
launch         joining the MPI job; launching a run as several MPI ranks (--workers)
errors         which exceptions are the user's input (the CLI exits 2 on them)
trained        a run's model with a checkpoint's weights; ``trainer evaluate``
predict        ``trainer predict``: reading samples, writing outputs batch by batch
export         ``trainer export``: a checkpoint's weights as MXNet .params or .npz
=============  ================================================================================
"""
import importlib

__all__ = ["start_run", "resume_run", "RunResult", "RunFailed"]


def __getattr__(name):
    # Lazy: importing trainer_cli.run.layout must not pull in the training stack.
    if name in __all__:
        return getattr(importlib.import_module(".session", __name__), name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
