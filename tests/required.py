"""What the suite needs from the machine beyond the package and its test extra: MPI (the dist
extra: mpi4py and mpich's mpiexec), a C++ compiler, Debian's Chromium, an NVIDIA GPU with CuPy.

A test that needs one is skipped where it is missing, unless ``TRAINER_REQUIRE_<NAME>`` is set
(``MPI``, ``CXX``, ``CHROMIUM``, ``GPU``): CI sets it for each thing it installs, and then a
missing piece is an error (at collection, or in the test) rather than a quiet skip. The
lookups catch only the error that means "not installed"; anything else propagates.
"""
from __future__ import annotations

import os
import shutil


class RequiredMissing(RuntimeError):
    """A piece CI said it installed (``TRAINER_REQUIRE_<NAME>``) is not there."""


def required(name: str) -> bool:
    return os.environ.get("TRAINER_REQUIRE_" + name, "") not in ("", "0")


def check(name: str, available: bool, missing: str) -> bool:
    """``available``; where it is False and ``TRAINER_REQUIRE_<name>`` is set, RequiredMissing
    saying what is ``missing``."""
    if not available and required(name):
        raise RequiredMissing("%s is required here (TRAINER_REQUIRE_%s is set), but %s"
                              % (name, name, missing))
    return available


def mpiexec() -> str | None:
    """mpich's mpiexec beside this Python, with mpi4py importable, or None (the dist extra is
    not installed)."""
    from trainer_cli import dist_launch

    try:
        dist_launch._check_mpi4py()
        return dist_launch.find_mpiexec()
    except dist_launch.DistLaunchError as exc:
        check("MPI", False, str(exc))
        return None


def have_mpi() -> bool:
    return mpiexec() is not None


def cxx() -> str | None:
    """A C++ compiler on PATH, or None."""
    found = shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    check("CXX", found is not None, "no g++, c++ or clang++ is on PATH")
    return found


def have_gpu() -> bool:
    import trainer_cli

    return check("GPU", trainer_cli.num_gpus() > 0, "CuPy sees no NVIDIA GPU")
