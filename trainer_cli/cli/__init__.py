"""The ``trainer`` command: a click group whose subcommands load on first use.

Every command is a thin call into the library; this package only parses arguments, prints and
maps failures to exit codes (see ``errors``).
"""
from __future__ import annotations

import importlib
import time

import click

# When the command started (as near as Python lets us): a run's summary says both its training
# time and the whole command's, start-up included.
STARTED = time.monotonic()

__all__ = ["main"]

# name -> (module, function, one-line help). Importing a command's module pulls in numpy and the
# training stack, so ``trainer --help`` reads only this table.
COMMANDS = {
    "run": ("trainer_cli.cli.run_cmd", "run", "Train from a YAML config into a new run directory."),
    "resume": ("trainer_cli.cli.run_cmd", "resume", "Continue a run exactly from its latest checkpoint."),
    "validate": ("trainer_cli.cli.report_cmds", "validate", "Check a config and print it fully resolved."),
    "lr": ("trainer_cli.cli.report_cmds", "lr", "Show the learning-rate schedule of a config or run."),
    "inspect": ("trainer_cli.cli.report_cmds", "inspect", "Show a run's checkpoints or a trainer states file."),
    "list": ("trainer_cli.cli.report_cmds", "list_", "List optimizers, schedulers, models, losses, datasets, ..."),
    "schema": ("trainer_cli.cli.report_cmds", "schema", "Print the JSON schema of a config file."),
    "runs": ("trainer_cli.cli.runs_cmds", "runs", "List runs: status, progress, best metric, last checkpoint."),
    "report": ("trainer_cli.cli.runs_cmds", "report", "Write an HTML report of one or several runs."),
    "plot": ("trainer_cli.cli.runs_cmds", "plot", "Draw a run's curves in the terminal."),
    "evaluate": ("trainer_cli.cli.model_cmds", "evaluate",
                 "Loss and metrics of a run's checkpoint on its validation set or another."),
    "predict": ("trainer_cli.cli.model_cmds", "predict",
                "Write a run's model outputs (and classes) for the samples of a file."),
    "export": ("trainer_cli.cli.model_cmds", "export",
               "Write a run's weights as MXNet .params (or .npz) for use elsewhere."),
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx):
        return list(COMMANDS)

    def get_command(self, ctx, name):
        entry = COMMANDS.get(name)
        if entry is None:
            return None
        module, attr, _ = entry
        return getattr(importlib.import_module(module), attr)

    def format_commands(self, ctx, formatter):
        rows = [(name, entry[2]) for name, entry in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="trainer-cli", prog_name="trainer")
def main():
    """trainer: YAML-driven training on an exact re-implementation of MXNet Gluon.

    Exit codes: 0 done; 1 the run failed; 2 bad usage, config or input file; 130 stopped by
    Ctrl-C, 143 by SIGTERM or SIGHUP (after saving a checkpoint).
    """
