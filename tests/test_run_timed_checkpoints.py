"""``checkpoint.every_seconds``: checkpoints by training time, and under MPI at a step every rank
agrees on (the stop-request exchange carries it)."""
import json
import types

import numpy
import pytest

from run_helpers import (have_mpi, only_run_dir, run_trainer, slow_run_folder,
                         write_config)
from trainer_cli.run import layout
from trainer_cli.run.signals import AgreedStop, CheckpointClock, StopOnSignal

# Interval choices that make the tests independent of the machine's speed: a step always takes
# more than a microsecond, and never an hour.
ALWAYS, NEVER = "0.000001", "3600"


def _run_with_interval(tmp_path, seconds, *extra):
    tmp_path.mkdir()
    config = write_config(tmp_path)
    done = run_trainer("run", config, "--run-dir", tmp_path / "runs", "--json",
                       "-o", "checkpoint={every_seconds: %s, every_epoch: false, keep_last: 50}"
                       % seconds, *extra, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_dir = json.loads(done.stdout)["run_dir"]
    return [step for step, _ in layout.list_checkpoints(run_dir)]


def test_every_seconds_saves_after_the_step_its_time_has_come(tmp_path):
    # SMALL: 6 steps an epoch, 3 epochs; neither every_steps nor every_epoch saves.
    assert _run_with_interval(tmp_path / "a", ALWAYS) == list(range(1, 19))
    assert _run_with_interval(tmp_path / "b", NEVER) == [18]


def test_every_seconds_is_validated(tmp_path):
    config = write_config(tmp_path)
    done = run_trainer("validate", config, "-o", "checkpoint.every_seconds=0", cwd=tmp_path)
    assert done.returncode == 2 and "checkpoint.every_seconds" in done.stderr
    shown = run_trainer("validate", config, "-o", "checkpoint.every_seconds=600", cwd=tmp_path)
    assert shown.returncode == 0 and "every_seconds: 600" in shown.stdout


class _TwoRanks:
    """A stand-in for MPI_COMM_WORLD of two ranks that call in turn: an Iallreduce completes once
    both ranks have posted theirs (as the real one would by the next step)."""

    def __init__(self):
        self.posted = []

    def Iallreduce(self, send, recv, op):  # noqa: N802 - MPI's name
        self.posted.append((send.copy(), recv))
        if len(self.posted) == 2:
            total = numpy.maximum(self.posted[0][0], self.posted[1][0])
            for _, out in self.posted:
                out[:] = total
            self.posted = []
        return object()


class _Clock(CheckpointClock):
    def __init__(self, due_at_calls):
        super().__init__(1.0)
        self.calls, self.due_at = 0, set(due_at_calls)

    def due(self):
        self.calls += 1
        return self.calls in self.due_at


def test_ranks_agree_on_the_step_of_a_timed_checkpoint():
    comm = _TwoRanks()
    job = types.SimpleNamespace(MPI=types.SimpleNamespace(MAX="max", COMM_WORLD=None),
                                dup=lambda world, what: comm)
    # Rank 1's clock passes the interval after step 3, rank 0's never does.
    ranks = [AgreedStop(StopOnSignal(), job, _Clock([])), AgreedStop(StopOnSignal(), job,
                                                                      _Clock([3]))]
    for stop in ranks:
        stop._wait = lambda req, what, job=None: None
    seen = {0: [], 1: []}
    for step in range(1, 8):
        for rank, stop in enumerate(ranks):
            assert stop() is False
            seen[rank].append(stop.checkpoint_due())
    # Both save after step 4: the exchange started after step 3 completes after step 4.
    assert seen[0] == seen[1] == [False, False, False, True, False, False, False]


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
def test_two_workers_save_by_time_together(tmp_path):
    # 2-bit compression: every checkpoint gathers the ranks' residuals, a collective that would
    # hang or fail if the ranks did not save at the same steps.
    folder = slow_run_folder(tmp_path, "dist_sync")
    text = (folder / "run.yaml").read_text().replace("steps: 600", "steps: 8")
    text = text.replace("checkpoint: {every_steps: 300, every_epoch: false, keep_last: 3}",
                        "checkpoint: {every_seconds: %s, every_epoch: false, keep_last: 20}\n"
                        "compression: {type: 2bit, threshold: 0.05}" % ALWAYS)
    (folder / "run.yaml").write_text(text)
    done = run_trainer("run", "run.yaml", "--run-dir", "runs", "-q", "--workers", "2",
                       cwd=folder, timeout=180)
    assert done.returncode == 0, done.stderr
    run_dir = only_run_dir(folder / "runs")
    # The first exchange completes after step 2, so timed saves start there.
    assert [s for s, _ in layout.list_checkpoints(run_dir)] == list(range(2, 9))
    meta = layout.verify_checkpoint(layout.checkpoint_dir(run_dir, 5))
    assert layout.KVSTORE_FILE in meta["files"]
