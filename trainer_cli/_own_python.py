"""The command line that runs one of this package's modules in a new interpreter (the checkpoint
writer, the ranks of a ``--workers`` job) from this very installation's code.

``python -m`` puts the working directory first on the module path, so a folder named
``trainer_cli`` there (another checkout, or one planted in a run's folder) would be imported
instead of the code that started the child: a writer of another protocol, or someone else's
code run with the user's rights. The child here puts this installation's root first instead.
"""
from __future__ import annotations

import os
import sys

__all__ = ["module_argv"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ``-c`` code starts with the working directory ('') first on the path (unless PYTHONSAFEPATH
# leaves it out); this installation's root takes that place.
_BOOT = ("import runpy, sys\n"
         "if sys.path and sys.path[0] == '':\n"
         "    sys.path[0] = %r\n"
         "else:\n"
         "    sys.path.insert(0, %r)\n"
         "runpy.run_module(%r, run_name='__main__', alter_sys=True)\n")


def module_argv(module: str) -> list[str]:
    """``[python, ...]`` running ``module`` as ``python -m module`` would (its ``__main__``),
    imported from this installation; the module's own arguments follow."""
    return [sys.executable, "-c", _BOOT % (_ROOT, _ROOT, module)]
