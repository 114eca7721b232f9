"""The reporting commands: validate, schema, lr, inspect, list.

Each is one call into ``trainer_cli.report`` and one print: rich tables for people, or with
``--json`` only JSON on stdout, a failure included (``{"error": ...}``, with the exit code).
"""
from __future__ import annotations

import click

from .complete import complete_config, complete_override, complete_run_dir
from .errors import EXIT_BAD_INPUT, CLIError, _bad_input_types, handle_errors
from .override_hint import OverrideHintCommand


def _config_or_run(ctx, param, incomplete):
    return complete_config(ctx, param, incomplete) + complete_run_dir(ctx, param, incomplete)

__all__ = ["validate", "schema", "lr", "inspect", "list_"]

json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print only JSON on stdout, for scripts.")
override_option = click.option("-o", "--override", "overrides", multiple=True, metavar="KEY=VALUE",
                               shell_complete=complete_override,
                               help="Set a config value, e.g. -o optimizer.params.learning_rate=0.1 "
                                    "(repeatable; validated like the file).")


def _build(as_json, make):
    """``make()``, except that under --json a bad input is also reported as JSON on stdout."""
    from ..report.jsonout import dumps, error_dict

    try:
        return make()
    except Exception as exc:
        if as_json and isinstance(exc, _bad_input_types()):
            click.echo(dumps(error_dict(exc)))
        raise


def _echo_json(value):
    from ..report.jsonout import dumps

    click.echo(dumps(value))


@click.command(cls=OverrideHintCommand)
@click.argument("config", metavar="CONFIG", shell_complete=complete_config)
@override_option
@click.option("--explain", "explain", metavar="KEY",
              help="Say where KEY got its value (file and line through includes, an override, "
                   "an ${...} reference, or the default).")
@json_option
@handle_errors
def validate(config, overrides, explain, as_json):
    """Check CONFIG (every problem at once, exit 2) and print it fully resolved as YAML:
    includes merged, ${env:VAR} and ${key} references filled in, defaults written out.

    \b
    Example:
      trainer validate configs/mlp_digits.yaml
      trainer validate my.yaml --explain optimizer.params.learning_rate
    """
    from ..report.validate import explain_report, validate_report

    if explain is not None:
        found = _build(as_json, lambda: explain_report(config, overrides, explain))
        if as_json:
            _echo_json(found)
            return
        from ..config.yamlio import dump_yaml

        shown = dump_yaml(found["value"]).strip()
        shown = shown[:-3].strip() if shown.endswith("\n...") else shown  # a scalar document
        if "\n" in shown:
            shown = "\n" + "\n".join("    " + line for line in shown.splitlines())
        click.echo("%s: %s" % (found["key"], shown))
        click.echo("  from %s" % found["source"])
        for how in found["via"]:
            click.echo("  via %s" % how)
        return

    report = _build(as_json, lambda: validate_report(config, overrides))
    if as_json:
        _echo_json(report["resolved"])
        return
    click.echo(report["yaml"], nl=False)
    click.echo("%s: valid" % config, err=True)  # stderr, so that stdout stays loadable YAML


@click.command()
@json_option
@handle_errors
def schema(as_json):
    """Print the JSON schema of a config file (always JSON; --json is accepted for symmetry).

    \b
    Example:
      trainer schema > trainer-config.schema.json   # for an editor's YAML language server
    """
    from ..config import json_schema

    _echo_json(json_schema())


@click.command(cls=OverrideHintCommand)
@click.argument("source", metavar="CONFIG|RUN_DIR", shell_complete=_config_or_run)
@click.option("--steps", type=click.IntRange(min=1), default=None,
              help="Steps to show (default: the run's steps, or epochs x updates per epoch).")
@override_option
@json_option
@handle_errors
def lr(source, steps, overrides, as_json):
    """Show the learning rate of every step, from the optimizer the run builds.

    For a run directory, the step of its latest checkpoint is marked.

    \b
    Example:
      trainer lr configs/mlp_digits.yaml
      trainer lr runs/mlp_digits-20261121-152038 --json
    """
    from ..report.schedule import lr_report

    report = _build(as_json, lambda: lr_report(source, steps=steps, overrides=overrides))
    if as_json:
        _echo_json(report)
        return
    from ..report.render import console, render_lr

    render_lr(console(), report)


@click.command()
@click.argument("target", metavar="RUN_DIR|STATES_FILE", shell_complete=complete_run_dir)
@json_option
@handle_errors
def inspect(target, as_json):
    """Show optimizer states (name, hyper-parameters, update count, lr, per-parameter state
    shapes and norms); for a run directory also its checkpoints and last metrics.

    Exits 2, naming the file, when any file is damaged, truncated or not ours.

    \b
    Example:
      trainer inspect runs/mlp_digits-20261121-152038
      trainer inspect runs/mlp_digits-20261121-152038/checkpoints/step-450/trainer.states
    """
    from ..report.inspect_run import inspect_path

    report = _build(as_json, lambda: inspect_path(target))
    if as_json:
        _echo_json(report)
    else:
        from ..report.render import console, render_inspect

        render_inspect(console(), report)
    errors = report.get("errors")
    if errors:
        advice = ""
        if report.get("kind") == "run_dir" and report.get("resume_from") is not None \
                and report.get("resume_from") != report.get("latest"):
            advice = "\nnewest intact checkpoint: step-%d (trainer resume %s --from step-%d)" % (
                report["resume_from"], target, report["resume_from"])
        raise CLIError("%s: %d damaged or unreadable file(s):\n%s%s"
                       % (target, len(errors), "\n".join(errors), advice), EXIT_BAD_INPUT)


@click.command("list")
@click.option("--models-dir", type=click.Path(file_okay=False, exists=True), default=None,
              help="Folder of model files (default: models/ here, and the shipped ones).")
@json_option
@handle_errors
def list_(models_dir, as_json):
    """List optimizers, schedulers, models, losses, metrics, datasets, initializers, kvstore and
    compression types.

    \b
    Example:
      trainer list
      trainer list --json | jq '.optimizers'
    """
    from ..report.catalog import catalog

    cat = catalog(models_dir)
    if as_json:
        _echo_json(cat)
        return
    from ..report.render import console, render_list

    render_list(console(), cat)
