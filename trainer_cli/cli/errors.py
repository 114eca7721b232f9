"""Turning failures into one readable paragraph and the CLI's exit codes, never a traceback."""
from __future__ import annotations

import functools
import os
import sys
import traceback

import click

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_BAD_INPUT", "EXIT_INTERRUPTED", "CLIError", "handle_errors"]

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_INTERRUPTED = 0, 1, 2, 130


class CLIError(Exception):
    """A failure with its own message and exit code."""

    def __init__(self, message, exit_code=EXIT_FAILED):
        super().__init__(message)
        self.exit_code = exit_code


def _bad_input_types():
    """Exceptions that mean the user's input (config, run dir, states or params file) is wrong."""
    from ..run.errors import input_error_types
    return input_error_types()


# The last line of every exit-1 error: the one place a user learns how to see more.
DEBUG_HINT = "(set TRAINER_DEBUG=1 to see the whole traceback)"


def handle_errors(fn):
    """Run a command; print failures as a paragraph on stderr and exit with the right code.

    Set ``TRAINER_DEBUG=1`` to get the traceback of a failure (exit 1).
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except CLIError as exc:
            if exc.exit_code == EXIT_FAILED and os.environ.get("TRAINER_DEBUG"):
                traceback.print_exc()
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt as exc:
            # A second stop signal (or one before training began): the other MPI ranks may be
            # anywhere, so the job ends now rather than through MPI_Finalize.
            signame = getattr(exc, "signame", None)
            _fail("interrupted by %s" % signame if signame else "interrupted",
                  getattr(exc, "exit_code", EXIT_INTERRUPTED), end_mpi_job=True)
        except Exception as exc:
            if isinstance(exc, _bad_input_types()):
                _fail(str(exc), EXIT_BAD_INPUT)
            if os.environ.get("TRAINER_DEBUG"):
                raise
            # A message that already names the error's type, block and place is shown as it is.
            text = str(exc) if getattr(exc, "complete_message", False) \
                else "%s: %s" % (type(exc).__name__, exc)
            _fail("error: %s" % text, EXIT_FAILED, end_mpi_job=_mpi_job_broken())
    return wrapper


def _mpi_job_broken() -> bool:
    """Whether a wait of this MPI rank timed out or lost a peer (never true outside MPI)."""
    mpi = sys.modules.get("trainer_cli.kvstore.mpi")
    return mpi is not None and mpi.job_broken()


def _fail(message, code, end_mpi_job=False):
    from .._printable import printable

    if code == EXIT_FAILED and not os.environ.get("TRAINER_DEBUG"):
        message = "%s\n%s" % (message, DEBUG_HINT)
    click.echo(printable(message, keep_newlines=True), err=True)  # a path may hold ESC bytes
    if end_mpi_job:
        # MPI_Finalize would wait for a stuck peer forever: abort the job (does not return).
        mpi = sys.modules.get("trainer_cli.kvstore.mpi")
        if mpi is not None:
            mpi.end_job_after_failure(code)
    sys.exit(code)
