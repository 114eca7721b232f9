"""Stop signals and stuck ranks, on real processes: ``trainer run`` alone and ``--workers 2``.

SIGINT exits 130, SIGTERM and SIGHUP 143, after every rank stopped at the same step and rank 0
saved a checkpoint from which ``trainer resume`` ends bitwise equal to an uninterrupted run; a
second signal ends at once with the same code; a rank that stops answering (SIGSTOP, or user code
asleep) ends the whole job within ``TRAINER_DIST_TIMEOUT`` and a few seconds, naming the rank and
the wait. Every test checks that no process of the job is left behind.
"""
import json
import os
import signal
import subprocess
import time

import pytest

from run_helpers import (assert_all_gone, assert_bitwise_equal, communicate_or_fail,
                         descendants, final_arrays, have_mpi, latest_dir, logged_step,
                         only_run_dir, run_trainer, slow_run_folder, trainer_cmd)
from trainer_cli.run import layout
from trainer_cli.run.signals import REPEAT_WINDOW_S


needs_mpi = [pytest.mark.dist,
             pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")]


# The run: run_helpers.SLOW_MODEL (a linear classifier whose forward can be slowed or stuck on
# cue) and SLOW_CONFIG, laid out by slow_run_folder.
def _env(**extra):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"
    env.pop("TRAINER_DIST_MONITOR", None)
    env.update(extra)
    return env


def _workers(n):
    return ["--workers", str(n)] if n > 1 else []


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """``get(workers)``: the final arrays of an uninterrupted run (made once per module)."""
    made = {}

    def get(workers):
        if workers not in made:
            folder = slow_run_folder(tmp_path_factory.mktemp("ref%d" % workers),
                                     "dist_sync" if workers > 1 else "local")
            proc = run_trainer("run", "run.yaml", "--run-dir", "runs", "-q", *_workers(workers),
                               cwd=folder, env=_env())
            assert proc.returncode == 0, proc.stderr
            made[workers] = final_arrays(only_run_dir(folder / "runs"))
        return made[workers]
    return get


# --------------------------------------------------------------------------------------------
# The processes of a job (run_helpers.descendants, assert_all_gone)


def _start(folder, args, workers, **env):
    return subprocess.Popen(trainer_cmd(*args, *_workers(workers)), cwd=folder,
                            env=_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def _wait_for(condition, proc, what, timeout=60):
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, "the run ended before %s: %s" % (what, proc.stderr.read())
        assert time.monotonic() < deadline, "no %s within %d s" % (what, timeout)
        time.sleep(0.005)


def _job_pids(proc, workers, launcher=True):
    """The job's processes: the launcher (if any), mpiexec, the proxy and the ranks, once all
    have started."""
    want = 1 + (1 + workers + launcher if workers > 1 else 0)
    _wait_for(lambda: len(descendants(proc.pid)) + 1 >= want, proc, "all processes")
    return {proc.pid} | descendants(proc.pid)


# --------------------------------------------------------------------------------------------
# One signal: finish the step everywhere, checkpoint, exit 130 / 143, resume exactly


# (One process: see test_run_subprocess.py's test_signal_saves_a_checkpoint_...; resuming
# exactly is checked once here, the exit codes for each signal.)
@pytest.mark.parametrize("workers,sig,resume", [
    pytest.param(2, signal.SIGINT, True, marks=needs_mpi),
    pytest.param(2, signal.SIGTERM, False, marks=needs_mpi),
    pytest.param(2, signal.SIGHUP, False, marks=needs_mpi)])
def test_a_signal_checkpoints_at_an_agreed_step_and_resume_is_exact(tmp_path, reference,
                                                                    workers, sig, resume):
    folder = slow_run_folder(tmp_path, "dist_sync" if workers > 1 else "local")
    proc = _start(folder, ["run", "run.yaml", "--run-dir", "runs", "--json"], workers)
    pids = _job_pids(proc, workers)
    _wait_for(lambda: logged_step(folder / "runs") >= 20, proc, "step 20")
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
    assert_all_gone(pids)
    summary = json.loads(out)
    assert summary["status"] == "interrupted"
    run_dir = only_run_dir(folder / "runs")
    step = layout.read_latest(run_dir)
    assert 20 < step < 300 and summary["steps"] == step   # the stop's own checkpoint
    assert layout.verify_checkpoint(latest_dir(run_dir))["finished"] is False
    log = (run_dir / layout.LOG_FILE).read_text()
    # (The launcher passes SIGHUP on to mpiexec as SIGTERM, which mpiexec forwards.)
    name = "SIGTERM" if workers > 1 and sig == signal.SIGHUP else signal.Signals(sig).name
    assert name + ": finishing this step and saving a checkpoint" in log
    assert "interrupted after step %d" % step in log and "second" not in log
    if resume:
        proc = run_trainer("resume", run_dir, "-q", *_workers(workers), cwd=folder, env=_env())
        assert proc.returncode == 0, proc.stderr
        for got, want in zip(final_arrays(run_dir), reference(workers)):
            assert_bitwise_equal(got, want)


def _rank_pids(pids) -> dict:
    """rank -> pid of the job's ranks among ``pids`` (by PMI_RANK in their environment)."""
    ranks = {}
    for pid in pids:
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        for entry in env:
            if entry.startswith(b"PMI_RANK="):
                ranks[int(entry.split(b"=", 1)[1])] = pid
    return ranks


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
def test_a_ranks_own_copy_of_the_stop_arriving_after_its_run_ended_is_ignored(tmp_path):
    """mpiexec's proxy forwards a stop to each rank; on a loaded machine one rank's copy can come
    after the ranks, stopping together on the other's, have ended their runs. Rank 1 alone is
    signalled here, and rank 0's copy sent once its run has logged the stop: the job still
    exits 143 with rank 0's summary (the copy once killed rank 0 while it wrote it)."""
    folder = slow_run_folder(tmp_path, "dist_sync")
    proc = _start(folder, ["run", "run.yaml", "--run-dir", "runs", "--json"], 2)
    pids = _job_pids(proc, 2)
    _wait_for(lambda: logged_step(folder / "runs") >= 20, proc, "step 20")
    ranks = _rank_pids(pids)
    assert sorted(ranks) == [0, 1]
    os.kill(ranks[1], signal.SIGTERM)

    def stop_logged():
        return any("interrupted after step" in p.read_text()
                   for p in (folder / "runs").glob("*/" + layout.LOG_FILE))
    _wait_for(stop_logged, proc, "the stop logged")
    try:
        os.kill(ranks[0], signal.SIGTERM)
    except ProcessLookupError:
        pass    # rank 0 already gone: nothing late to ignore, the checks below still hold
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert_all_gone(pids)
    summary = json.loads(out)
    assert summary["status"] == "interrupted"
    assert layout.read_latest(only_run_dir(folder / "runs")) == summary["steps"]


# --------------------------------------------------------------------------------------------
# A second signal: at once, same code, the previous checkpoint intact


@pytest.mark.parametrize("workers,sig", [(1, signal.SIGINT),
                                         pytest.param(2, signal.SIGTERM, marks=needs_mpi)])
def test_a_second_signal_stops_at_once_with_the_same_code(tmp_path, workers, sig):
    folder = slow_run_folder(tmp_path, "dist_sync" if workers > 1 else "local")
    slow = folder / "slow-now"
    proc = _start(folder, ["run", "run.yaml", "--run-dir", "runs", "-q"], workers,
                  TEST_SLOW_FILE=str(slow))
    pids = _job_pids(proc, workers)
    _wait_for(lambda: logged_step(folder / "runs") >= 10, proc, "step 10")
    slow.touch()                    # from now on a forward holds on (run_helpers.SLOW_MODEL)
    entered = folder / "slow-now.entered"
    _wait_for(entered.exists, proc, "a held forward")
    proc.send_signal(sig)           # inside a step that cannot finish while the test waits
    time.sleep(REPEAT_WINDOW_S + 0.3)
    assert proc.poll() is None      # still finishing the step the first signal let it finish
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), err
    assert_all_gone(pids)
    run_dir = only_run_dir(folder / "runs")
    # At once: the step in progress never ended, so no checkpoint was saved (the run had none
    # yet; its first would come at step 300).
    assert not (run_dir / "checkpoints" / "latest").exists()
    assert "stopped at once by a second %s" % signal.Signals(sig).name \
        in (run_dir / layout.LOG_FILE).read_text()


# --------------------------------------------------------------------------------------------
# A rank that stops answering ends the job within the timeout


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
@pytest.mark.parametrize("how", ["stop", "sleep"])
def test_a_stuck_rank_ends_the_whole_job_within_the_timeout(tmp_path, how):
    folder = slow_run_folder(tmp_path, "dist_sync")
    mark = folder / "stuck"
    timeout = 3
    proc = _start(folder, ["run", "run.yaml", "--run-dir", "runs", "-q"], 2,
                  TEST_STUCK="%s:1:30:%s" % (how, mark), TRAINER_DIST_TIMEOUT=str(timeout))
    pids = _job_pids(proc, 2)
    _wait_for(mark.exists, proc, "the stuck rank")
    # The deadline is a hang guard, not a speed test (room for a machine busy with other tests):
    # without the abort the job never ends (the stuck rank never answers, and MPI_Finalize
    # waits for it).
    out, err = communicate_or_fail(proc, timeout + 40, "a rank getting stuck")
    assert proc.returncode == 1, err
    assert "rank 0 of 2 (pid" in err
    assert "timed out after 3 s waiting for rank 1 in allreduce of key" in err
    assert_all_gone(pids)


# --------------------------------------------------------------------------------------------
# Without the launcher's relay: plain mpiexec, and a launcher that died


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
def test_sigint_to_a_plain_mpiexec_stops_every_rank_at_one_step(tmp_path):
    from trainer_cli import dist_launch

    folder = slow_run_folder(tmp_path, "dist_sync")
    proc = subprocess.Popen([dist_launch.find_mpiexec(), "-n", "2"]
                            + trainer_cmd("run", "run.yaml", "--run-dir", "runs", "-q"),
                            cwd=folder, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    pids = _job_pids(proc, 2, launcher=False)
    _wait_for(lambda: logged_step(folder / "runs") >= 20, proc, "step 20")
    proc.send_signal(signal.SIGINT)     # mpiexec forwards it to each rank, once
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert_all_gone(pids)
    run_dir = only_run_dir(folder / "runs")
    step = layout.read_latest(run_dir)
    assert 20 < step < 300
    assert "interrupted after step %d" % step in (run_dir / layout.LOG_FILE).read_text()


@pytest.mark.dist
@pytest.mark.skipif(not have_mpi(), reason="needs the dist extra (mpi4py + mpich)")
def test_a_killed_launcher_still_stops_the_job_with_a_checkpoint(tmp_path):
    folder = slow_run_folder(tmp_path, "dist_sync")
    proc = _start(folder, ["run", "run.yaml", "--run-dir", "runs", "-q"], 2)
    pids = _job_pids(proc, 2)
    _wait_for(lambda: logged_step(folder / "runs") >= 20, proc, "step 20")
    proc.send_signal(signal.SIGKILL)    # nothing to relay: the kernel tells mpiexec (SIGTERM)
    proc.communicate(timeout=60)
    assert_all_gone(pids, within=30)
    run_dir = only_run_dir(folder / "runs")
    step = layout.read_latest(run_dir)
    assert 20 < step < 300
    assert layout.verify_checkpoint(latest_dir(run_dir))["finished"] is False
    assert "SIGTERM: finishing this step" in (run_dir / layout.LOG_FILE).read_text()
