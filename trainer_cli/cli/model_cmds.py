"""The commands that use a trained model: ``evaluate``, ``predict`` and ``export``.

Each is one call into ``trainer_cli.run`` and one print; with ``--json`` only JSON on stdout.
"""
from __future__ import annotations

import click

from .complete import complete_override, complete_run_dir
from .errors import EXIT_BAD_INPUT, CLIError, handle_errors
from .report_cmds import _build, _echo_json, json_option
from .run_cmd import parse_from

__all__ = ["export"]

from_option = click.option(
    "--from", "from_checkpoint", metavar="best|latest|step-N",
    help="Which checkpoint's weights: latest (the default: the run's final parameters), best "
         "(checkpoints/best) or a step.")


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
