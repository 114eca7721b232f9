"""Which failures are the user's input, not the program: the CLI tells them apart through here
(and so reaches the config, run-directory, states and parameter-file readers only through
``run/``)."""
from __future__ import annotations

__all__ = ["input_error_types"]


def input_error_types() -> tuple:
    """The exceptions that mean a user's input is wrong (a config, a run directory, a states or
    parameters file, a device that is not there) rather than the program: the CLI exits 2 on
    them."""
    from .._outpath import OutputRefused
    from ..config import ConfigError
    from ..context import GPUUnavailableError
    from ..gluon.param_file import ParamFileError
    from ..optimizer.state_file import StateFileError
    from .layout import RunDirError
    from .memory import MemoryEstimateError
    from .model import ModelFileError
    return (ConfigError, RunDirError, StateFileError, ParamFileError, ModelFileError,
            OutputRefused, MemoryEstimateError, GPUUnavailableError)
