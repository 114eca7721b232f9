"""The dist kvstores over MPI: 2 ranks started with ``mpiexec -n 2`` (see ``dist_cases.py``).

Skipped where the dist extra (mpi4py + the mpich wheel's mpiexec beside this python) is missing.
The pytest process itself never initializes MPI: every MPI program runs in a subprocess.
"""
import os
import subprocess
import sys
import time

import numpy
import pytest

import dist_cases
import required
from trainer_cli import dist_launch

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = os.path.join(HERE, "dist_cases.py")


MPIEXEC = required.mpiexec()
HAS_DIST = MPIEXEC is not None
SKIP_REASON = "dist extra not installed (pip install -e .[dist])"
needs_dist = pytest.mark.skipif(not HAS_DIST, reason=SKIP_REASON)
pytestmark = pytest.mark.dist


def _env(**extra):
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[var] = "1"   # two ranks share two cores; BLAS threads would oversubscribe them
    env.pop("TRAINER_DIST_MONITOR", None)
    env.update(extra)
    return env


def _mpirun(case, out, *args, timeout=120, **env):
    start = time.monotonic()
    proc = subprocess.run([MPIEXEC, "-n", "2", sys.executable, CASES, case, str(out)] + list(args),
                          capture_output=True, text=True, timeout=timeout, env=_env(**env))
    return proc, time.monotonic() - start


def _launch(case, out, *args, timeout=120):
    """``dist_launch.launch`` in a subprocess (it runs mpiexec and reports on stderr)."""
    code = ("import sys; from trainer_cli.dist_launch import launch; "
            "sys.exit(launch(sys.argv[1:], 2))")
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code, sys.executable, CASES, case, str(out)]
                          + list(args), capture_output=True, text=True, timeout=timeout,
                          env=_env())
    return proc, time.monotonic() - start


def _ok(proc):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


# --------------------------------------------------------------------------------------------
# Sync: 2 ranks x 1 device == 1 process x 2 devices


@pytest.fixture(scope="module")
def sync_run(tmp_path_factory):
    if not HAS_DIST:
        pytest.skip(SKIP_REASON)
    out = tmp_path_factory.mktemp("sync")
    proc, _ = _mpirun("sync", out)
    _ok(proc)
    return out


@needs_dist
@pytest.mark.parametrize("name", sorted(dist_cases.SYNC_CONFIGS))
def test_sync_two_ranks_equal_one_process_two_devices(sync_run, name):
    ranks = [numpy.load(sync_run / ("%s-rank%d.npz" % (name, r))) for r in (0, 1)]
    expected = dist_cases.reference_sync(name)
    start = dist_cases.weights(dist_cases.model([dist_cases.cpu(0)]))
    for key, want in expected.items():
        # Every worker applies the same update to the same sum: bitwise equal copies.
        assert numpy.array_equal(ranks[0][key], ranks[1][key]), key
        numpy.testing.assert_allclose(ranks[0][key], want, rtol=1e-6, atol=1e-7, err_msg=key)
        assert not numpy.allclose(want, start[key]), "%s did not train" % key


@needs_dist
def test_sync_store_semantics(sync_run):
    got = [numpy.load(sync_run / ("semantics-rank%d.npz" % r)) for r in (0, 1)]
    for key in got[0]:
        assert numpy.array_equal(got[0][key], got[1][key]), key
    g = got[0]
    numpy.testing.assert_array_equal(g["init"], numpy.full((2, 3), 10.0))      # rank 0's value
    numpy.testing.assert_array_equal(g["broadcast"], numpy.tile(numpy.arange(4.0), (2, 1)))
    # (1 + 0.5) on rank 0 plus (2 + 0.5) on rank 1: every device of every worker, replacing 10
    numpy.testing.assert_array_equal(g["push_sum"], numpy.full((2, 3), 4.0))
    numpy.testing.assert_array_equal(g["pushpull_inplace"], [3.0, 3.0, 3.0])
    ar = numpy.arange(700_001, dtype=numpy.float32)[[0, 1, 262_144, 700_000]] * 3
    numpy.testing.assert_array_equal(g["big"], ar)
    numpy.testing.assert_array_equal(g["str_key"], [3.0, 4.0])
    # 2bit, threshold 0.5: rank 0 pushes 0.3, rank 1 0.6, each with its own residual
    numpy.testing.assert_allclose(g["compressed"], [[0.5] * 5, [1.0] * 5, [0.5] * 5])
    assert int(g["compressed_bytes"][0]) == 3 * 4   # ceil(5/16) words per push
    assert g["fused_equal"].all()
    # states written by rank 0 only, read by both, and the update after loading agrees
    assert g["states"][-1] == 1.0


@needs_dist
def test_sync_row_sparse_pushes_move_rows_and_equal_one_process(tmp_path):
    proc, _ = _mpirun("sparse", tmp_path)
    _ok(proc)
    got = [numpy.load(tmp_path / ("sparse-rank%d.npz" % r)) for r in (0, 1)]
    want = dist_cases.reference_sparse()
    for key, expected in want.items():
        # The same bits on every worker, and the local store's sum of two devices.
        assert numpy.array_equal(got[0][key], got[1][key]), key
        numpy.testing.assert_allclose(got[0][key], expected, rtol=1e-6, atol=1e-7, err_msg=key)
    # What a rank hands to MPI is its rows and values (3 rows of 3 float32 + 3 int64 ids on
    # rank 0), not the 50 x 3 table.
    assert int(got[0]["push_bytes"][0]) == 3 * 8 + 3 * 3 * 4
    assert int(got[1]["push_bytes"][0]) == 2 * 8 + 2 * 3 * 4


@needs_dist
def test_sync_wire_residuals_gather_and_restore(sync_run):
    g = numpy.load(sync_run / "gathered.npz")
    # After 0.3 (r + 1) pushed three times through 2bit at 0.5, each rank keeps what it has not
    # sent yet: rank 0 0.9 - 0.5, rank 1 1.8 - 1.5.
    numpy.testing.assert_allclose(g["residual0"], [0.4] * 5, rtol=1e-6)
    numpy.testing.assert_allclose(g["residual1"], [0.3] * 5, rtol=1e-5)
    # A fresh store given those residuals sends 0.5 from each rank on the next push; with
    # residuals at zero rank 0 (0.3 < 0.5) would send nothing.
    numpy.testing.assert_array_equal(g["restored"], [1.0] * 5)
    assert g["errors"].tolist() == ["KeyError", "ValueError"]   # unknown key, wrong size
    # gather_arrays: uneven sizes over several 1 MiB rounds, int and str names, empty arrays
    assert g["kinds"].tolist() == ["'big' 'empty' 7"] * 2
    for r in (0, 1):
        sent = numpy.load(sync_run / ("gather-sent-rank%d.npz" % r))["big"]
        assert sent.nbytes > (1 << 20)
        assert g["rank%d_big" % r].tobytes() == sent.tobytes()
        numpy.testing.assert_array_equal(g["rank%d_7" % r], numpy.arange(r + 2))
        assert g["rank%d_empty" % r].shape == (0, 3)


# --------------------------------------------------------------------------------------------
# Async


@needs_dist
def test_async_trains_like_one_process(tmp_path):
    proc, _ = _mpirun("async", tmp_path)
    _ok(proc)
    got = numpy.load(tmp_path / "async.npz")
    single = dist_cases.reference_async_loss()
    assert int(got["updates"]) == 2 * dist_cases.ASYNC_STEPS   # every push is an update
    assert float(got["after"]) < 0.1 * float(got["before"])
    assert float(got["after"]) < 1.5 * single + 0.01, (float(got["after"]), single)
    # 2bit pushes, threshold 0.5: 0.6 and 1.2 decode to 0.5 each, then 0.7+0.1 and 1.4+0.7 too
    for r in (0, 1):
        seq = numpy.load(tmp_path / ("async-2bit-rank%d.npy" % r))
        numpy.testing.assert_array_equal(seq, [[-1.0] * 5, [-2.0] * 5])
    # what each rank has not sent yet: 1.3 - 1.0 on rank 0, 2.6 - 1.0 on rank 1
    numpy.testing.assert_allclose(numpy.load(tmp_path / "async-residuals.npy"),
                                  [[0.3] * 5, [1.6] * 5], rtol=1e-5)


# --------------------------------------------------------------------------------------------
# One plain process


@needs_dist
def test_every_dist_type_works_in_one_plain_process(tmp_path):
    proc = subprocess.run([sys.executable, CASES, "single", str(tmp_path)], capture_output=True,
                          text=True, timeout=280, env=_env())
    _ok(proc)
    got = numpy.load(tmp_path / "single.npz")
    for name in ("dist_sync", "dist_sync_device", "dist_device_sync", "dist_async",
                 "dist_device_async"):
        numpy.testing.assert_array_equal(got[name], [2.0, 3.0, 4.0])
    assert got["trainer_store"].tolist() == [True, True]
    assert float(got["timeout"][0]) == 300.0


# --------------------------------------------------------------------------------------------
# Failures end the job quickly and name the rank. "Quickly" is against the 300 s default wait a
# hang would sit out, with room for a loaded machine: these bounds tell a hang from an abort, they
# do not time anything.


_ABORTED, _HANG = 150, 280  # seconds; TRAINER_DIST_TIMEOUT's default is 300


@needs_dist
def test_a_rank_raising_aborts_the_job_naming_it(tmp_path):
    proc, took = _mpirun("fail-raise", tmp_path, timeout=_HANG)
    assert proc.returncode != 0
    err = proc.stderr
    assert "rank 1 of 2" in err and "ValueError: boom on purpose" in err, err[-2000:]
    assert "MPI_Abort" in err or "aborting" in err
    assert took < _ABORTED
    assert not (tmp_path / "finished-rank0").exists()


@needs_dist
def test_a_rank_leaving_early_fails_its_peers_at_once(tmp_path):
    proc, took = _mpirun("fail-exit", tmp_path, timeout=_HANG)
    assert proc.returncode != 0
    assert "rank 1 exited before taking part" in proc.stderr, proc.stderr[-2000:]
    assert "allreduce of key" in proc.stderr
    assert took < _ABORTED


@needs_dist
def test_a_stuck_rank_times_out_with_the_key_and_rank(tmp_path):
    proc, took = _mpirun("fail-stall", tmp_path, timeout=_HANG, TRAINER_DIST_TIMEOUT="1.5")
    assert proc.returncode != 0
    err = proc.stderr
    assert "DistributedTimeoutError" in err and "timed out after 1.5 s waiting for rank 1" in err, \
        err[-2000:]
    assert "allreduce of key 0" in err and "TRAINER_DIST_TIMEOUT" in err
    assert took < _ABORTED


@needs_dist
def test_killing_a_rank_ends_the_job_and_launch_names_it(tmp_path):
    proc, took = _launch("fail-kill", tmp_path, timeout=_HANG)
    assert proc.returncode != 0
    assert "trainer: rank 1 of 2" in proc.stderr and "died" in proc.stderr, proc.stderr[-2000:]
    assert took < _ABORTED


@needs_dist
def test_killing_a_rank_under_plain_mpiexec_ends_the_job(tmp_path):
    proc, took = _mpirun("fail-kill", tmp_path, timeout=_HANG)
    assert proc.returncode != 0
    assert took < _ABORTED


# --------------------------------------------------------------------------------------------
# launch


@needs_dist
def test_launch_runs_the_command_on_every_rank(tmp_path):
    proc, _ = _launch("hello", tmp_path)
    _ok(proc)
    for r in (0, 1):
        assert (tmp_path / ("hello-rank%d" % r)).read_text().split() == [str(r), "2"]


@needs_dist
def test_launch_forwards_the_exit_code(tmp_path):
    proc, _ = _launch("hello", tmp_path, "3")
    assert proc.returncode == 3
    assert "mpiexec exit code 3" in proc.stderr


def test_launch_without_mpiexec_names_the_extra(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    with pytest.raises(dist_launch.DistLaunchError, match=r"pip install -e \.\[dist\]"):
        dist_launch.launch(["true"], 2)


def test_launch_rejects_bad_worker_counts():
    for bad in (0, -1, 1.5, True):
        with pytest.raises(dist_launch.DistLaunchError, match="positive integer"):
            dist_launch.launch(["true"], bad)


def test_missing_mpi4py_is_a_clear_error(monkeypatch):
    from trainer_cli import kvstore
    from trainer_cli.kvstore import mpi
    monkeypatch.setattr(mpi, "_MPI", None)
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    with pytest.raises(mpi.DistributedError, match=r"pip install -e \.\[dist\]"):
        kvstore.create("dist_sync")


def test_timeout_setting(monkeypatch):
    from trainer_cli.kvstore import mpi
    monkeypatch.delenv(mpi.ENV_TIMEOUT, raising=False)
    assert mpi.timeout() == 300.0
    monkeypatch.setenv(mpi.ENV_TIMEOUT, "2.5")
    assert mpi.timeout() == 2.5
    for bad in ("soon", "0", "-3"):
        monkeypatch.setenv(mpi.ENV_TIMEOUT, bad)
        with pytest.raises(mpi.DistributedError, match=mpi.ENV_TIMEOUT):
            mpi.timeout()


def test_launched_by_mpiexec_reads_the_environment(monkeypatch):
    from trainer_cli.kvstore import mpi
    for var in ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"):
        monkeypatch.delenv(var, raising=False)
    assert not mpi.launched_by_mpiexec()
    monkeypatch.setenv("PMI_RANK", "1")
    assert mpi.launched_by_mpiexec()


@needs_dist
def test_async_row_sparse_pushes_and_pulls_move_rows_and_equal_one_process(tmp_path):
    """dist_async with row_sparse values: replace-on-push, lazy SGD on a dense weight, lazy
    Adam on a row_sparse weight, row_sparse_pull of chosen rows, whole pulls (dense and
    row_sparse); the server applies rank 1's push, then rank 0's, as a local store does."""
    proc, _ = _mpirun("async-sparse", tmp_path)
    _ok(proc)
    got = [numpy.load(tmp_path / ("async-sparse-rank%d.npz" % r)) for r in (0, 1)]
    want = dist_cases.reference_async_sparse()
    assert [int(g["compression_refused"][0]) for g in got] == [1, 1]
    for key, expected in want.items():
        if key == "push_bytes":
            continue
        assert numpy.array_equal(got[0][key], got[1][key]), key
        numpy.testing.assert_allclose(got[0][key], expected, rtol=1e-6, atol=1e-7, err_msg=key)
    assert want["replace_rows"].tolist() == [0, 1, 4, 9]
    assert want["replace_whole_rows"].tolist() == [1, 4, 7]     # rank 0's push replaced rank 1's
    assert want["adam_rows"].tolist() == [0, 1, 2, 4, 9, 49]
    # Rank 1 handed MPI its 2 rows (ids and 2 x 3 float32), not the 50 x 3 table; rank 0's own
    # pushes go to its server without MPI.
    assert int(got[1]["push_bytes"][0]) == 2 * 8 + 2 * 3 * 4
    assert int(got[0]["push_bytes"][0]) == 0
