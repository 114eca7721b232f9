"""How many threads a run computes with, chosen once when it starts.

OpenBLAS (NumPy's GEMMs) and the optimizer's update split start one thread per core by default.
On a machine whose cores are busy with other work those threads wait for each other (a GEMM's
threads meet at every block), and a small model trains several times slower than on one thread.
``threads: auto`` (the default) therefore takes the cores this process may run on, divides them
among the MPI ranks on this host, and leaves out the cores that other work keeps busy (the
one-minute load average, rounded to whole cores), never going below one thread, and keeps one
thread for a model whose largest layer is small (``SMALL_LAYER_WORK``). ``threads: N`` in
the config (or ``-o threads=N``) fixes the count. The BLAS limit is set through threadpoolctl; the
optimizer's update split follows ``TRAINER_NUM_THREADS``, which the run sets for its duration.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["ThreadPlan", "plan", "apply", "local_ranks", "usable_cores", "layer_work"]

# MPI launchers' count of the ranks on this host: MPICH's Hydra, Open MPI, Slurm.
_LOCAL_RANK_VARS = ("MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE")


@dataclass(frozen=True)
class ThreadPlan:
    count: int
    how: str        # one line for train.log: how the count was chosen


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:          # not on Linux
        return os.cpu_count() or 1


def local_ranks(num_workers: int = 1) -> int:
    """Ranks of this job on this host: the launcher's count where it says, else all of them."""
    for name in _LOCAL_RANK_VARS:
        value = os.environ.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value)
    return max(1, int(num_workers))


def _load_average():
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


# Multiply-adds of the largest layer's GEMM per step (its samples times the size of the largest
# parameter) below which one BLAS thread is used. ``benchmarks/bench_blas_threads.py`` on a quiet
# 2-core machine: a second thread gained nothing at 262K and 1M (1.00 of one thread's time) and
# paid from 4M on (0.85-0.88; 0.58 at 67M). A thread that cannot help can only cost: one run at
# 1M with the other core disturbed took 1.56x as long on two threads, and the load average
# shows such work late. One thread also leaves the other core to the checkpoint writer.
SMALL_LAYER_WORK = 1 << 21


def plan(requested="auto", ranks: int = 1, cores: int | None = None,
         load: float | None = None, layer_work: int | None = None,
         recorded: int | None = None) -> ThreadPlan:
    """The thread count for ``requested`` (``"auto"`` or a count), with ``ranks`` ranks of the
    job on this host, ``cores`` usable cores, a one-minute ``load`` (measured when None) and the
    model's ``layer_work`` (see :func:`layer_work`; None: unknown). ``recorded``: the count
    a checkpoint of the run was made with (see :func:`recorded`), which "auto" keeps."""
    if requested not in (None, "auto"):
        count = int(requested)
        return ThreadPlan(count, "%d (set by the config's threads)" % count)
    if recorded is not None:
        return ThreadPlan(recorded, "%d (auto: as the checkpoint was made)" % recorded)
    cores = usable_cores() if cores is None else int(cores)
    share = max(1, cores // max(1, ranks))
    load = _load_average() if load is None else load
    free = cores if load is None else max(0, int(cores - load + 0.5))
    count = max(1, min(share, free))
    parts = ["%d core(s)" % cores]
    if ranks > 1:
        parts.append("%d rank(s) on this host" % ranks)
    if load is not None:
        parts.append("load average %.2f" % load)
    if layer_work is not None and 0 < layer_work < SMALL_LAYER_WORK and count > 1:
        count = 1
        parts.append("small layers: %d multiply-adds at most, too few to split" % layer_work)
    return ThreadPlan(count, "%d (auto: %s)" % (count, ", ".join(parts)))


def layer_work(params, samples: int) -> int | None:
    """``samples`` times the size of the largest of ``params``: the multiply-adds of the
    largest dense layer's GEMM in a step (a convolution's are more, by its output size). None
    while a shape is not known (deferred until the first batch)."""
    sizes = [_size(p.shape) for p in params]
    if not sizes or min(sizes) == 0:
        return None
    return max(sizes) * max(1, int(samples))


def _size(shape) -> int:
    n = 1
    for d in shape or ():
        n *= int(d)     # 0 for a dimension not known before the first batch
    return n


# Some BLAS kernels give a product's elements other last bits on another thread count
# (OpenBLAS's Haswell kernels, run where there is no AVX-512; docs/compat.md): a resumed run,
# and evaluate and predict, use the count the checkpoint was made with, so that their numbers
# are the run's bits whatever the load average says when they start.
MAX_RECORDED = 4096


def recorded(meta) -> int | None:
    """The thread count a checkpoint's meta records (None: none, or not a sane count)."""
    count = meta.get("threads") if isinstance(meta, dict) else None
    if isinstance(count, int) and not isinstance(count, bool) and 1 <= count <= MAX_RECORDED:
        return count
    return None


def apply(thread_plan: ThreadPlan):
    """Limit BLAS and the update split to ``thread_plan.count``; returns a function undoing it."""
    previous = os.environ.get("TRAINER_NUM_THREADS")
    os.environ["TRAINER_NUM_THREADS"] = str(thread_plan.count)
    limiter = None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:             # declared as a dependency; without it BLAS keeps its own
        threadpool_limits = None
    if threadpool_limits is not None:
        limiter = threadpool_limits(limits=thread_plan.count, user_api="blas")

    def restore():
        if limiter is not None:
            limiter.restore_original_limits()
        if previous is None:
            os.environ.pop("TRAINER_NUM_THREADS", None)
        else:
            os.environ["TRAINER_NUM_THREADS"] = previous
    return restore
