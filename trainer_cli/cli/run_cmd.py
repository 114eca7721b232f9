"""``trainer run`` and ``trainer resume``: argument parsing and output around
:func:`trainer_cli.run.start_run` / :func:`trainer_cli.run.resume_run`."""
from __future__ import annotations

import re
import sys
import time

import click

from .complete import complete_config, complete_override, complete_run_dir
from .errors import EXIT_BAD_INPUT, EXIT_FAILED, CLIError, handle_errors
from .override_hint import OverrideHintCommand

__all__ = ["run", "resume"]

_STEP = re.compile(r"^(?:step-)?(\d+)$", re.ASCII)
# run and resume report through the same _finish, so they take the same output options.
_json_summary_option = click.option("--json", "as_json", is_flag=True,
                                    help="Print only a JSON summary on stdout.")
_quiet_option = click.option("-q", "--quiet", is_flag=True, help="Print nothing but errors.")


def _workers_option(help_text):
    """``--workers N`` of run and resume: both hand N to :func:`_launch`."""
    return click.option("--workers", type=click.IntRange(min=1), metavar="N", help=help_text)


@click.command(cls=OverrideHintCommand)
@click.argument("config", type=click.Path(dir_okay=True), shell_complete=complete_config)
@click.option("-o", "--override", "overrides", multiple=True, metavar="KEY=VALUE",
              shell_complete=complete_override,
              help="Set a config value (YAML), e.g. -o epochs=3 or "
                   "-o optimizer.params.learning_rate=0.1; repeatable.")
@click.option("--name", help="Run name (default: the config's name or file stem); the run "
                              "directory is ROOT/NAME-<UTC time>.")
@click.option("--run-dir", "run_root", metavar="ROOT",
              help="Folder that receives the new run directory (default: the config's run_dir).")
@_json_summary_option
@_quiet_option
@_workers_option("Run as N MPI processes (needs a dist_* kvstore and the dist extra).")
@handle_errors
def run(config, overrides, name, run_root, as_json, quiet, workers):
    """Train from the YAML file CONFIG into a new run directory.

    Exit codes: 0 done; 1 the run failed; 2 bad config or input file; 130 stopped by Ctrl-C
    (SIGINT), 143 by SIGTERM or SIGHUP, after finishing the step and saving a checkpoint (continue
    with `trainer resume RUN_DIR`); a second signal stops at once with the same code.

    \b
    Example:
      trainer run configs/mlp_digits.yaml
      trainer run configs/mlp_synthetic.yaml -o epochs=3 --name quick
      trainer run configs/dist.yaml --workers 2
    """
    if workers is not None:
        from ..config import load_config

        _check_dist(load_config(config, overrides), config)
        argv = ["run", str(config)] + [a for text in overrides for a in ("-o", text)]
        for flag, value in (("--name", name), ("--run-dir", run_root)):
            if value is not None:
                argv += [flag, str(value)]
        sys.exit(_launch(argv, as_json, quiet, workers))
    _join_mpi_job()
    from ..run import start_run

    _finish(lambda reporter: start_run(config, overrides, name=name, run_root=run_root,
                                       reporter=reporter), as_json, quiet)


@click.command(cls=OverrideHintCommand)
@click.argument("run_dir", required=False, type=click.Path(file_okay=True),
                shell_complete=complete_run_dir)
@click.option("--last", is_flag=True,
              help="Resume the newest run under --run-dir (default runs/); refused, not skipped, "
                   "when that run cannot be read.")
@click.option("--run-dir", "run_root", metavar="ROOT", default="runs", show_default=True,
              help="Where --last looks for runs.")
@click.option("--from", "from_checkpoint", metavar="step-N|best",
              help="Resume from this checkpoint instead of the latest one (best: the one "
                   "checkpoints/best names).")
@click.option("-o", "--override", "overrides", multiple=True, metavar="KEY=N",
              help="Extend the run: -o epochs=N or -o steps=N (nothing else may change).")
@click.option("--force", is_flag=True,
              help="Extend even where the result differs from a run configured that long from "
                   "the start (a finished schedule, early stopping).")
@click.option("--trust-model-file", is_flag=True,
              help="Import the model file the run's config names even though it is not the one "
                   "the run recorded (model.json) when it started.")
@_json_summary_option
@_quiet_option
@_workers_option("Resume as N MPI processes (a run with a dist_* kvstore).")
@handle_errors
def resume(run_dir, last, run_root, from_checkpoint, overrides, force, trust_model_file, as_json,
           quiet, workers):
    """Continue the run in RUN_DIR (or the newest one, --last) exactly where its latest
    checkpoint left off.

    The final parameters equal bitwise those of a run that never stopped (with the same number
    of MPI workers; not under dist_async, whose pushes apply in arrival order). With
    -o epochs=N (or steps=N) a finished or stopped run goes on to the new length, bitwise the
    run configured that long from the start.

    \b
    Example:
      trainer resume runs/mlp-20261123-101500
      trainer resume --last -o epochs=40
    """
    from ..run import resume_run

    if last == (run_dir is not None):
        raise CLIError("give either RUN_DIR or --last", EXIT_BAD_INPUT)
    if last:
        from ..report.runs_list import newest_run

        run_dir = str(newest_run(run_root))
    step = parse_from(from_checkpoint)
    if workers is not None:
        from ..run.session import read_run_config

        _check_dist(read_run_config(run_dir, overrides), run_dir)
        named = step if step in (None, "best") else "step-%d" % step
        argv = ["resume", str(run_dir)] + (["--from", named] if named is not None else [])
        argv += [a for text in overrides for a in ("-o", text)] + (["--force"] if force else [])
        argv += ["--trust-model-file"] if trust_model_file else []
        sys.exit(_launch(argv, as_json, quiet, workers))
    _join_mpi_job()
    _finish(lambda reporter: resume_run(run_dir, step, reporter=reporter, overrides=overrides,
                                        force=force, trust_model_file=trust_model_file),
            as_json, quiet)


def parse_from(text):
    """``--from``: None (or ``latest``) for the latest checkpoint, ``"best"``, or a step."""
    if text is None or text.strip() == "latest":
        return None
    if text.strip() == "best":
        return "best"
    match = _STEP.match(text.strip())
    if match is None:
        raise CLIError("--from: expected best, latest or a checkpoint name like step-100, got %r"
                       % text, EXIT_BAD_INPUT)
    return int(match.group(1))


def _finish(start, as_json, quiet):
    from ..report.jsonout import dumps
    from ..run.progress import choose_reporter
    from ..run.signals import exit_on_signal

    reporter = choose_reporter(quiet or as_json)
    # The summary below is written under the same handlers: a stop signal's late copy, after
    # the run stopped on it, must not end the process before the summary is out.
    with exit_on_signal():
        result = _started(start, reporter, as_json)
        summary = result.summary
        if summary.get("run_dir") is not None:
            from ..report.run_end import end_of_run
            from . import STARTED

            summary = dict(summary, **end_of_run(summary["run_dir"]))
            summary["command_s"] = round(time.monotonic() - STARTED, 3)
        if summary.get("run_dir") is None:
            pass  # an MPI rank other than 0: rank 0 reports
        elif as_json:
            click.echo(dumps(summary))
        elif not quiet:
            from .._printable import printable

            click.echo(printable(_human(summary), keep_newlines=True))
        if result.exit_code:
            sys.exit(result.exit_code)


def _started(start, reporter, as_json):
    """``start(reporter)``'s result; a failure told on stdout too under ``--json``."""
    from ..report.jsonout import dumps, error_dict
    from ..run import RunFailed

    try:
        return start(reporter)
    except RunFailed as exc:
        if as_json and exc.summary.get("run_dir"):
            click.echo(dumps(dict(exc.summary, error=str(exc))))
        raise CLIError(str(exc), EXIT_FAILED) from None
    except Exception as exc:
        # Under --json stdout stays JSON even for a failure; the message also goes to stderr.
        if as_json:
            click.echo(dumps(error_dict(exc)))
        raise


def _human(summary) -> str:
    status = summary["status"].replace("_", " ")
    lines = ["%s: %d steps, %d epochs, %.1f s training" % (status, summary["steps"],
                                                           summary["epochs"], summary["elapsed_s"])]
    if summary.get("command_s") is not None:
        lines[0] += " (%.1f s in all, start-up included)" % summary["command_s"]
    if summary.get("skipped_steps"):
        lines[0] += ", %d steps skipped (NaN/Inf)" % summary["skipped_steps"]
    if summary.get("step_s"):
        lines.append("data wait:     %.2f s of %.2f s in steps (%.0f%%)" % (
            summary["data_wait_s"], summary["step_s"],
            100.0 * summary["data_wait_s"] / summary["step_s"]))
    lines.append("run directory: %s" % summary["run_dir"])
    lines.append("checkpoint:    %s" % summary["checkpoint"])
    if summary.get("best_checkpoint"):
        restored = " (the final parameters: restore_best)" if summary.get("restored_best") is not None else ""
        lines.append("best:          %s%s" % (summary["best_checkpoint"], restored))
    metrics = "  ".join("%s %.4g" % (k, v) for k, v in summary["metrics"].items()
                        if isinstance(v, (int, float)))
    if metrics:
        lines.append("metrics:       %s" % metrics)
    if summary.get("sparkline"):
        best = summary.get("best")
        tail = "  best %s %.4g (step %d)" % (best["metric"], best["value"], best["step"]) if best else ""
        lines.append("loss:          %s%s" % (summary["sparkline"], tail))
    if summary.get("report"):
        lines.append("report:        %s" % summary["report"])
    elif summary.get("report_error"):
        lines.append("note:          %s" % summary["report_error"])
    if summary["status"] == "interrupted":
        lines.append("continue with: trainer resume %s" % summary["run_dir"])
    return "\n".join(lines)


def _check_dist(config, where):
    kv = config.kvstore.type
    if not kv.startswith("dist"):
        raise CLIError("--workers runs one training process per worker, which needs a dist_* "
                       "kvstore to combine their gradients; %s has kvstore %r (for a new run: "
                       "-o kvstore=dist_sync)" % (where, kv), EXIT_BAD_INPUT)


def _join_mpi_job():
    from ..run.launch import join_mpi_job
    join_mpi_job()


def _launch(argv, as_json, quiet, workers) -> int:
    """The same command, without --workers, as ``workers`` MPI ranks."""
    from .._own_python import module_argv
    from ..run.launch import LaunchError, launch_workers

    argv = module_argv("trainer_cli.cli") + argv
    argv += ["--json"] if as_json else []
    argv += ["--quiet"] if quiet else []
    if not (quiet or as_json) and sys.stderr.isatty():  # rank 0 draws the live line for us
        import os

        from ..run.progress import TERMINAL_ENV

        os.environ[TERMINAL_ENV] = "1"
    try:
        code = launch_workers(argv, workers)
    except LaunchError as exc:
        raise CLIError(str(exc), EXIT_BAD_INPUT) from None
    # mpiexec reports a killed rank as 9 and an abort as its own codes; the CLI's contract is
    # 0/1/2/130/143, and the launcher has already said which rank failed.
    return code if code in (0, EXIT_FAILED, EXIT_BAD_INPUT, 130, 143) else EXIT_FAILED
