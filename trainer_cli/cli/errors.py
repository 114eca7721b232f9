"""Turning failures into one readable paragraph and the CLI's exit codes, never a traceback."""
from __future__ import annotations

import functools
import os
import sys

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


def handle_errors(fn):
    """Run a command; print failures as a paragraph on stderr and exit with the right code.

    Set ``TRAINER_DEBUG=1`` to get the traceback of an unexpected failure.
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except CLIError as exc:
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)
        except Exception as exc:
            if isinstance(exc, _bad_input_types()):
                _fail(str(exc), EXIT_BAD_INPUT)
            if os.environ.get("TRAINER_DEBUG"):
                raise
            _fail("error: %s: %s" % (type(exc).__name__, exc), EXIT_FAILED)
    return wrapper


def _fail(message, code):
    click.echo(message, err=True)
    sys.exit(code)
