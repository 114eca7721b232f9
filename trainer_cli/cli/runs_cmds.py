"""The commands that look back at runs: ``runs``, ``report`` and ``plot``.

Each is one call into ``trainer_cli.report`` and one print; with ``--json`` only JSON on stdout.
"""
from __future__ import annotations

import click

from .complete import complete_run_dir
from .errors import EXIT_BAD_INPUT, CLIError, handle_errors
from .report_cmds import _build, _echo_json, json_option

__all__ = ["runs", "report", "plot"]


@click.command()
@click.argument("root", required=False, default="runs", metavar="[ROOT]")
@json_option
@handle_errors
def runs(root, as_json):
    """List the runs under ROOT (default: runs/): status, step, epoch, best metric (at @b<step>
    when checkpoints/best holds the weights of that evaluation), last checkpoint, start time and
    duration.

    A status is running (a process holds the run's lock now), finished, early-stopped,
    stopped (interrupted, resumable), failed, or killed (it ended without a word: kill -9, a
    lost machine; resumable from its last checkpoint).

    \b
    Example:
      trainer runs                 # the runs under ./runs
      trainer runs /data/runs --json
    """
    from ..report.runs_list import list_runs

    found = list_runs(root)
    if as_json:
        _echo_json(found)
        return
    from ..report.render import console, render_runs

    render_runs(console(), root, found)


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...",
                shell_complete=complete_run_dir)
@click.option("-O", "--output", "output", metavar="FILE.html",
              help="Where to write the page: a new path or a regular file, '-' for stdout "
                   "(default: RUN_DIR/report.html for one run, report.html here for several).")
@click.option("-o", "old_output", metavar="FILE.html", hidden=True)
@json_option
@handle_errors
def report(run_dirs, output, old_output, as_json):
    """Write one self-contained HTML page with the curves of one or several runs.

    Loss and every metric against step and epoch, the learning rate, samples/s, checkpoints
    and early stopping marked; several runs overlaid, with where their configs differ and the
    best value each reached. The page loads nothing from the network. A run still in progress
    can be reported; run the command again for newer figures.

    \b
    Example:
      trainer report runs/mlp-20261123-101500
      trainer report runs/a-* runs/b-* --output compare.html
    """
    from ..report.html_report import report_paths

    output = _report_output(output, old_output)
    if as_json and output == "-":
        raise CLIError("--json and --output - both write to stdout: name a file, or leave "
                       "out --json", EXIT_BAD_INPUT)
    result = _build(as_json, lambda: report_paths(run_dirs, output))
    if as_json:
        _echo_json(result)
        return
    if output == "-":
        return
    from .._printable import printable

    click.echo("report: %s" % printable(result["output"]))


def _report_output(output, old_output):
    """``--output``, or the old spelling ``-o FILE`` (with a warning). ``-o`` means a
    ``KEY=VALUE`` override in every other command, so ``-o KEY=VALUE`` here is an error."""
    if old_output is None:
        return output
    if "=" in old_output:
        raise CLIError("-o %s: report takes no config overrides (-o KEY=VALUE is an override "
                       "in the other commands); to name the page's file use --output FILE"
                       % old_output, EXIT_BAD_INPUT)
    if output is not None:
        raise CLIError("give the output file once, with --output", EXIT_BAD_INPUT)
    click.echo("warning: -o FILE is deprecated for report; use --output %s" % old_output, err=True)
    return old_output


@click.command()
@click.argument("run_dir", metavar="RUN_DIR", shell_complete=complete_run_dir)
@click.option("-m", "--metric", "metrics", multiple=True, metavar="NAME",
              help="A logged key to draw (train_loss, val_accuracy, lr, ...); repeatable. "
                   "Default: the losses and the run's headline metric.")
@click.option("--width", type=click.IntRange(min=20, max=400), default=None,
              help="Plot width in characters (default: fits the terminal).")
@json_option
@handle_errors
def plot(run_dir, metrics, width, as_json):
    """Draw a run's curves in the terminal.

    \b
    Example:
      trainer plot runs/mlp-20261123-101500
      trainer plot runs/mlp-20261123-101500 -m val_accuracy -m lr
    """
    from ..report.history import load_history
    from ..report.terminal_plot import plot_report

    history = _build(as_json, lambda: load_history(run_dir))
    try:
        result = plot_report(history, list(metrics))
    except KeyError as exc:
        raise CLIError("%s: %s" % (run_dir, exc.args[0]), EXIT_BAD_INPUT) from None
    if as_json:
        _echo_json(result)
        return
    from ..report.render import console, render_plot

    out = console()
    render_plot(out, result, width or min(120, out.width))
