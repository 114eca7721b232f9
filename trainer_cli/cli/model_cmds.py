"""The commands that use a trained model: ``evaluate``, ``predict`` and ``export``.

Each is one call into ``trainer_cli.run`` and one print; with ``--json`` only JSON on stdout.
"""
from __future__ import annotations

import click

from .complete import complete_override, complete_run_dir
from .errors import handle_errors
from .report_cmds import _build, _echo_json, json_option
from .run_cmd import parse_from

__all__ = ["evaluate", "predict", "export"]

# A progress bar is drawn (on a terminal, without --json) for inputs of more passes than this.
PROGRESS_PASSES = 20

from_option = click.option(
    "--from", "from_checkpoint", metavar="best|latest|step-N",
    help="Which checkpoint's weights: latest (the default: the run's final parameters), best "
         "(checkpoints/best) or a step.")


use_override_option = click.option(
    "-o", "--override", "overrides", multiple=True, metavar="KEY=VALUE",
    shell_complete=complete_override,
    help="Another data set or device: data.* and context keys only, e.g. -o data.val=test.npz "
         "or -o context=cpu (repeatable).")
trust_option = click.option(
    "--trust-model-file", is_flag=True,
    help="Import the model file the run's config names even though it is not the one the run "
         "recorded (model.json) when it started.")


class _Progress:
    """A progress bar on stderr for long inputs (only on a terminal, and not under --json)."""

    def __init__(self, enabled: bool, label: str):
        import sys

        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self.bar = None
        self.done = 0

    def __call__(self, done, total):
        if not self.enabled:
            return
        if self.bar is None:
            if total < done * PROGRESS_PASSES:   # decided at the first pass: a short input
                self.enabled = False
                return
            self.bar = click.progressbar(length=total, label=self.label,
                                         file=click.get_text_stream("stderr"))
            self.bar.__enter__()
        self.bar.update(done - self.done)
        self.done = done

    def close(self):
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _compile_notice(as_json: bool):
    """A block that says once on stderr (not under --json) when the model's first pass waits for
    numba to compile kernels, as ``trainer run`` does: a machine that never ran a kind of layer
    compiles its kernels first, for up to a minute, before the progress bar's first pass."""
    import contextlib

    from .. import _jit

    if as_json:
        return contextlib.nullcontext()
    return _jit.on_first_compile(lambda: click.echo("note: %s" % _jit.COMPILING, err=True))


@click.command()
@click.argument("run_dir", type=click.Path(), shell_complete=complete_run_dir)
@from_option
@click.option("--on", "on", type=click.Choice(["val", "train"]), default="val", show_default=True,
              help="The validation set (data.val, the split the run made, or the set -o "
                   "data.val=FILE names) or the training set (the run's part of it).")
@use_override_option
@trust_option
@json_option
@handle_errors
def evaluate(run_dir, from_checkpoint, on, overrides, trust_model_file, as_json):
    """Compute the config's loss and metrics for a run's checkpoint (the latest: the final
    parameters; --from best; --from step-N) on its validation set, its training set, or another
    data set.

    \b
    Example:
      trainer evaluate runs/mlp_digits-20261121-152038 --from best
      trainer evaluate runs/regression-20261127-083635 -o data.val=test.npz --json
    """
    from ..run.trained import evaluate_run

    which = parse_from(from_checkpoint)
    progress = _Progress(not as_json, "evaluating")
    try:
        with _compile_notice(as_json):
            result = _build(as_json, lambda: evaluate_run(run_dir, which, overrides, on,
                                                          trust_model_file, progress))
    finally:
        progress.close()
    if as_json:
        _echo_json(result)
        return
    for note in result["notes"]:
        click.echo("note: %s" % note, err=True)
    click.echo("%s on %s (%s):" % (result["checkpoint"], result["data"], result["described"]))
    width = max(len(k) for k in result["metrics"])
    for key, value in result["metrics"].items():
        click.echo("  %-*s  %s" % (width, key, "nan" if value is None else "%.6g" % value))


@click.command()
@click.argument("run_dir", type=click.Path(), shell_complete=complete_run_dir)
@click.option("-i", "--input", "input_path", required=True, metavar="FILE",
              help="Samples: .npy, .npz (dense, or a CSR matrix as SciPy's save_npz writes it) "
                   "or .csv (numbers; every column a feature).")
@click.option("-O", "--output", "output_path", required=True, metavar="FILE",
              help="Where the outputs go; its suffix says the format: .npz (output, and for a "
                   "classifier class and probability), .npy (outputs) or .csv. An existing "
                   "file is replaced; a link, FIFO or device is refused.")
@from_option
@click.option("--key", metavar="NAME", help="The array of a dense .npz input that holds the "
                                              "samples (default: its only array, or x).")
@click.option("--batch-size", type=click.IntRange(min=1), metavar="N",
              help="Samples per forward pass (default: four training batches or more).")
@click.option("-o", "--override", "overrides", multiple=True, metavar="context=DEVICE",
              help="Where the model runs, e.g. -o context=cpu (the only key predict takes).")
@trust_option
@json_option
@handle_errors
def predict(run_dir, input_path, output_path, from_checkpoint, key, batch_size, overrides,
            trust_model_file, as_json):
    """Write a run's model outputs for the samples of a file, batch by batch; for a classifier
    also each sample's class and its probability. Samples are checked like training data
    (numbers, the shape the model trained on, no NaN/Inf).

    \b
    Example:
      trainer predict runs/mlp_digits-20261121-152038 -i new.npy -O predictions.npz
      trainer predict runs/regression-20261127-083635 --from best -i x.csv -O y.csv
    """
    from ..run.predict import predict_file

    which = parse_from(from_checkpoint)
    progress = _Progress(not as_json, "predicting")
    try:
        with _compile_notice(as_json):
            result = _build(as_json, lambda: predict_file(
                run_dir, input_path, output_path, which, key, overrides, trust_model_file,
                batch_size, progress))
    finally:
        progress.close()
    if as_json:
        _echo_json(result)
        return
    for note in result["notes"]:
        click.echo("note: %s" % note, err=True)
    click.echo("wrote %s: outputs of %d samples%s, from %s"
               % (result["output"], result["samples"],
                  " with class and probability" if result["classifier"] else "",
                  result["checkpoint"]))


@click.command()
@click.argument("run_dir", type=click.Path(), shell_complete=complete_run_dir)
@from_option
@click.option("--format", "fmt", type=click.Choice(["mxnet", "npz"]), default="mxnet",
              show_default=True,
              help="mxnet: MXNet's binary .params format (real MXNet's net.load_parameters reads "
                   "it); npz: a NumPy .npz of name -> array.")
@click.option("-O", "--output", "prefix", metavar="PREFIX",
              help="Write PREFIX.params (mxnet) or PREFIX.npz (default: the run directory's name, "
                   "in the working folder). "
                   "An existing file is replaced; a link, FIFO or device is refused. (-o is an "
                   "override everywhere, so the output is -O.)")
@json_option
@handle_errors
def export(run_dir, from_checkpoint, fmt, prefix, as_json):
    """Write the weights of a run's checkpoint (the latest, --from best, or --from step-N) for
    use outside trainer-cli, under the structural names of save_parameters (0.weight, 1.bias).

    Load them back here into the network the model's builder makes, net.load_parameters(FILE);
    in MXNet 1.9, build the same layers in the same order and call net.load_parameters(FILE).

    \b
    Example:
      trainer export runs/mlp_digits-20261121-152038 --from best -O mlp_digits
      trainer export runs/regression-20261127-083635 --format npz -O weights
    """
    from pathlib import Path

    from ..run.export import export_weights

    which = parse_from(from_checkpoint)
    if prefix is None:
        prefix = Path(run_dir).resolve().name    # in the working folder, named after the run
    result = _build(as_json, lambda: export_weights(run_dir, prefix, fmt, which))
    if as_json:
        _echo_json(result)
        return
    click.echo("wrote %s (%s format, %d arrays) from %s"
               % (result["path"], fmt, len(result["parameters"]), result["checkpoint"]))
