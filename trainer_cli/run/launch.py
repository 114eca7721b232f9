"""How a run's processes start: joining the MPI job a rank was launched into, and launching a
run as several MPI ranks (``trainer run --workers N``). The CLI reaches MPI only through here."""
from __future__ import annotations

__all__ = ["join_mpi_job", "launch_workers", "LaunchError"]


class LaunchError(Exception):
    """The workers cannot be launched (no MPI launcher, a bad worker count, ...)."""


def join_mpi_job() -> None:
    """Under mpiexec, start MPI before anything else can fail, so that a rank failing while it
    loads its config or data aborts the whole job instead of leaving the others in MPI_Init."""
    from ..kvstore import mpi

    if mpi.launched_by_mpiexec():
        mpi.job()


def launch_workers(argv, workers) -> int:
    """Run ``argv`` as ``workers`` MPI ranks and return the launcher's exit code."""
    try:
        from .. import dist_launch
    except ImportError:
        raise LaunchError("--workers needs trainer_cli.dist_launch, which this installation does "
                          "not have") from None
    try:
        return dist_launch.launch(argv, workers)
    except dist_launch.DistLaunchError as exc:
        raise LaunchError(str(exc)) from None
