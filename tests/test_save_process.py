"""Checkpoints written by a child process (run/save_process.py), the choice of a run that saves
often: the same files as a save in the training process, errors where training is, a child that
ignores stop signals, holds the run lock, exits with its parent, and whose death costs no
checkpoint."""
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from run_helpers import checkpoint_files, latest_dir, only_run_dir, write_config
from trainer_cli.run import layout, session, start_run
from trainer_cli.run.save_process import SaveProcess, WriterGone, can_share

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="Linux only (memfd)")

OVERRIDES = ["checkpoint.keep_last=100", "checkpoint.every_steps=2"]


def _tracked(monkeypatch):
    made = []

    class Tracked(SaveProcess):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(session, "SaveProcess", Tracked)
    return made


def test_a_run_saving_often_writes_from_a_child_the_same_files(tmp_path, monkeypatch):
    config = write_config(tmp_path)
    thread = start_run(config, OVERRIDES, run_root=tmp_path / "thread")
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)
    made = _tracked(monkeypatch)
    child = start_run(config, OVERRIDES, run_root=tmp_path / "child")
    assert len(made) == 1 and made[0]._proc.returncode == 0   # ended with the run
    a, b = (only_run_dir(tmp_path / r) for r in ("thread", "child"))
    files_a, files_b = checkpoint_files(a), checkpoint_files(b)
    assert len(files_b) > 5 and files_a == files_b
    assert child.summary["checkpoint"] == str(latest_dir(b))
    log = (b / "train.log").read_text()
    assert all("checkpoint %s saved" % layout.checkpoint_name(s) in log for s in files_b)
    assert not any(p.name.startswith(".") for p in (b / layout.CHECKPOINTS).iterdir())


def test_a_run_hands_over_a_save_while_the_one_before_is_in_flight(tmp_path, monkeypatch):
    """The training thread does not wait for a save's fsyncs at the next checkpoint: with the
    child held still through its first save, the second is handed over all the same; the run's
    files are those of a run saving on a thread."""
    config = write_config(tmp_path)
    start_run(config, OVERRIDES, run_root=tmp_path / "thread")
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)
    busy_at_start, timers = [], []

    def let_go(pid):
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass

    class Held(SaveProcess):
        def start(self, *args, **kwargs):
            busy_at_start.append(self.busy)
            if len(busy_at_start) == 1:
                # Stopped before the save is handed over: stopped after it, a child that got
                # the core first (a loaded machine) could finish the save before the stop.
                os.kill(self.pid, signal.SIGSTOP)
                # Should the run wait for the held save after all, it is let go in the end
                # (and the assertion below fails) rather than waiting forever.
                timers.append(threading.Timer(20.0, let_go, (self.pid,)))
                timers[-1].daemon = True
                timers[-1].start()
            super().start(*args, **kwargs)
            if len(busy_at_start) == 2:
                os.kill(self.pid, signal.SIGCONT)

    monkeypatch.setattr(session, "SaveProcess", Held)
    try:
        start_run(config, OVERRIDES, run_root=tmp_path / "child")
    finally:
        for timer in timers:
            timer.cancel()
    assert busy_at_start[:2] == [0, 1] and max(busy_at_start) <= 1
    a, b = (only_run_dir(tmp_path / r) for r in ("thread", "child"))
    assert checkpoint_files(a) == checkpoint_files(b)


def test_a_writer_killed_mid_run_costs_no_checkpoint(tmp_path, monkeypatch):
    config = write_config(tmp_path)
    start_run(config, OVERRIDES, run_root=tmp_path / "thread")
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)
    made = _tracked(monkeypatch)

    class Kills(session.Reporter):
        def progress(self, step, *args):
            if step == 3:   # while (or just after) it writes step 2's checkpoint
                os.kill(made[0].pid, signal.SIGKILL)
                made[0]._proc.wait()

    result = start_run(config, OVERRIDES, run_root=tmp_path / "child", reporter=Kills())
    assert result.status == "finished"
    a, b = (only_run_dir(tmp_path / r) for r in ("thread", "child"))
    assert checkpoint_files(a) == checkpoint_files(b)
    log = (b / "train.log").read_text()
    assert "checkpoint writer process" in log and "written by this process from now on" in log


def test_a_save_error_in_the_child_is_raised_by_wait(tmp_path):
    writer = SaveProcess()
    try:
        not_a_folder = tmp_path / "file"
        not_a_folder.write_text("x")
        files = {layout.PARAMS_FILE: {"w": np.arange(6, dtype=np.float32).reshape(2, 3)},
                 layout.STATES_FILE: {"0.mean": np.ones(5, np.float64), "0.t": np.int64(3)}}
        writer.start(not_a_folder, 3, files, {"epoch": 0}, keep_last=2)
        with pytest.raises(OSError) as info:
            writer.wait()
        assert info.value.errno is not None and "file" in str(info.value)
        assert writer.wait() is None       # answered once; the child serves the next save
        run_dir = tmp_path / "run"
        (run_dir / layout.CHECKPOINTS).mkdir(parents=True)
        writer.start(run_dir, 4, files, {"epoch": 0}, keep_last=2)
        path = writer.wait()
        assert path == run_dir / layout.CHECKPOINTS / layout.checkpoint_name(4)
        layout.verify_checkpoint(path)
        for name, arrays in files.items():
            with np.load(path / name, allow_pickle=False) as z:
                assert sorted(z.files) == sorted(arrays)
                for member, a in arrays.items():
                    assert z[member].dtype == a.dtype and np.array_equal(z[member], a)
    finally:
        writer.close()


def _two_saves(step):
    return {layout.PARAMS_FILE: {"w": np.arange(6, dtype=np.float32).reshape(2, 3) + step},
            layout.STATES_FILE: {"0.mean": np.full(5, step, np.float64)}}


def test_two_saves_in_flight_are_written_from_copies_of_their_own_in_order(tmp_path):
    """A second save is handed over while the first is in flight: each from its own shared
    copy (the first's arrays are not overwritten by the second's), answered in order, `latest`
    on the second; a third must wait."""
    run_dir = tmp_path / "run"
    (run_dir / layout.CHECKPOINTS).mkdir(parents=True)
    writer = SaveProcess()
    try:
        writer.start(run_dir, 3, _two_saves(3), {"epoch": 0}, keep_last=5)
        writer.start(run_dir, 4, _two_saves(4), {"epoch": 0}, keep_last=5)
        assert writer.busy == 2 and writer.oldest_step == 3
        with pytest.raises(AssertionError):
            writer.start(run_dir, 5, _two_saves(5), {"epoch": 0}, keep_last=5)
        paths = [writer.wait(), writer.wait()]
        assert writer.wait() is None and writer.busy == 0
    finally:
        writer.close()
    assert paths == [layout.checkpoint_dir(run_dir, s) for s in (3, 4)]
    assert layout.read_latest(run_dir) == 4
    for step, path in zip((3, 4), paths):
        layout.verify_checkpoint(path)
        for name, arrays in _two_saves(step).items():
            with np.load(path / name, allow_pickle=False) as z:
                for member, a in arrays.items():
                    assert np.array_equal(z[member], a)


def test_a_writer_lost_with_two_saves_in_flight_hands_both_back_in_order(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / layout.CHECKPOINTS).mkdir(parents=True)
    writer = SaveProcess()
    os.kill(writer.pid, signal.SIGSTOP)     # it answers neither
    try:
        writer.start(run_dir, 3, _two_saves(3), {"epoch": 3}, keep_last=5)
        writer.start(run_dir, 4, _two_saves(4), {"epoch": 4}, keep_last=5)
        os.kill(writer.pid, signal.SIGKILL)
        writer._proc.wait()
        with pytest.raises(WriterGone) as info:
            writer.wait()
    finally:
        writer.close()
    assert [(step, meta) for step, _, meta in info.value.pending] == [(3, {"epoch": 3}),
                                                                      (4, {"epoch": 4})]
    for step, files, _ in info.value.pending:
        for name, arrays in _two_saves(step).items():
            assert all(np.array_equal(files[name][m], a) for m, a in arrays.items())
    assert not (run_dir / layout.CHECKPOINTS / layout.checkpoint_name(3)).exists()


def test_the_child_ignores_stop_signals_and_holds_the_run_lock(tmp_path):
    from trainer_cli.run.rundir import RunLock

    lock = RunLock(tmp_path).acquire()
    writer = SaveProcess(lock_fd=lock.fileno())
    try:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            os.kill(writer.pid, sig)
        time.sleep(0.2)
        assert writer._proc.poll() is None
        lock.release()       # this process lets go; the child's copy still holds the lock
        with pytest.raises(layout.RunDirError, match="another trainer process"):
            RunLock(tmp_path).acquire()
    finally:
        writer.close()
    assert writer._proc.returncode == 0
    RunLock(tmp_path).acquire().release()   # free once the child ended


def test_the_child_exits_when_its_parent_is_killed(tmp_path):
    script = textwrap.dedent("""
        import os, signal, sys
        from trainer_cli.run.save_process import SaveProcess
        w = SaveProcess()
        print(w.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -signal.SIGKILL
    child = int(proc.stdout.split()[0])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    pytest.fail("the writer process outlived its parent")


def test_only_plain_numeric_arrays_go_to_the_child():
    assert can_share({"a": {"x": np.zeros(3, np.float16), "y": np.zeros((), np.int64)}})
    assert not can_share({"a": {"x": np.zeros(3, dtype=[("f", np.float32)])}})
    assert not can_share({"a": {"x": np.array(["s"])}})


def test_no_shared_memory_at_a_save_writes_it_here(tmp_path, monkeypatch):
    import errno
    config = write_config(tmp_path)
    start_run(config, OVERRIDES, run_root=tmp_path / "thread")
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)

    def no_memory(self, size):
        raise OSError(errno.ENOMEM, "Cannot allocate memory")

    monkeypatch.setattr(SaveProcess, "_reserve", no_memory)
    result = start_run(config, OVERRIDES, run_root=tmp_path / "child")
    assert result.status == "finished"
    a, b = (only_run_dir(tmp_path / r) for r in ("thread", "child"))
    assert checkpoint_files(a) == checkpoint_files(b)
    log = (b / "train.log").read_text()
    assert "checkpoint writer process could not be used (Cannot allocate memory)" in log


def test_a_writer_that_does_not_start_leaves_the_saves_to_a_thread(tmp_path, monkeypatch):
    config = write_config(tmp_path)
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    result = start_run(config, OVERRIDES, run_root=tmp_path / "run")
    assert result.status == "finished"
    run_dir = only_run_dir(tmp_path / "run")
    assert len(checkpoint_files(run_dir)) > 5
    log = (run_dir / "train.log").read_text()
    assert "checkpoint writer process did not start (exit code 1)" in log


def test_sigterm_to_every_process_stops_with_a_checkpoint_and_resumes_exactly(tmp_path):
    """A real ``trainer run`` saving often enough for the writer process (every 20 of 600 steps),
    slow enough (1 ms a forward) for the signal to land while it trains."""
    from run_helpers import (assert_all_gone, assert_bitwise_equal, descendants, final_arrays,
                             logged_step, run_trainer, slow_run_folder, trainer_cmd)
    folder = slow_run_folder(tmp_path)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    often = ["-o", "checkpoint.every_steps=20"]
    reference = run_trainer("run", "run.yaml", "--run-dir", "ref", "-q", *often, cwd=folder,
                            env=env)
    assert reference.returncode == 0, reference.stderr
    proc = subprocess.Popen(trainer_cmd("run", "run.yaml", "--run-dir", "runs", "-q", *often),
                            cwd=folder, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while logged_step(folder / "runs") < 50:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.005)
    writers = descendants(proc.pid)
    assert len(writers) == 1                      # 30 saves in the run: the writer process
    for pid in writers | {proc.pid}:              # a scheduler signals every process of the job
        os.kill(pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert_all_gone(writers, within=10.0)
    run_dir = only_run_dir(folder / "runs")
    step = layout.read_latest(run_dir)
    assert 50 <= step < 600
    assert layout.verify_checkpoint(latest_dir(run_dir))["finished"] is False
    resumed = run_trainer("resume", run_dir, "-q", cwd=folder, env=env)
    assert resumed.returncode == 0, resumed.stderr
    for got, want in zip(final_arrays(run_dir), final_arrays(only_run_dir(folder / "ref"))):
        assert_bitwise_equal(got, want)


def test_a_run_that_fails_before_training_ends_its_writer_and_frees_the_lock(tmp_path,
                                                                               monkeypatch):
    from trainer_cli.run.rundir import RunLock
    config = write_config(tmp_path)
    monkeypatch.setattr(session, "PROCESS_SAVES", 1)
    made = _tracked(monkeypatch)

    def broken_loop(*args, **kwargs):
        raise RuntimeError("the loop cannot be set up")

    monkeypatch.setattr(session, "TrainingLoop", broken_loop)
    with pytest.raises(RuntimeError, match="cannot be set up"):
        start_run(config, OVERRIDES, run_root=tmp_path / "runs")
    assert len(made) == 1 and made[0]._proc.returncode == 0     # ended, not left to exit
    RunLock(only_run_dir(tmp_path / "runs")).acquire().release()


def _strict_json(path):
    import json

    def refuse(name):
        raise AssertionError("%s in %s: not strict JSON" % (name, path))

    return json.loads(path.read_text(), parse_constant=refuse)


def _meta_written_by_the_child_and_here(tmp_path, meta):
    """meta.json of a checkpoint the child wrote with ``meta``, and of one written here."""
    from trainer_cli.run import checkpoint

    files = {layout.PARAMS_FILE: {"w": np.ones(3, np.float32)},
             layout.STATES_FILE: {"0.mean": np.zeros(3, np.float32)}}
    run_dir = tmp_path / "run"
    (run_dir / layout.CHECKPOINTS).mkdir(parents=True)
    writer = SaveProcess()
    try:
        writer.start(run_dir, 1, files, meta, keep_last=5)
        child = _strict_json(writer.wait() / layout.META_FILE)
    finally:
        writer.close()
    here = _strict_json(checkpoint.write_checkpoint(run_dir, 2, files, meta) / layout.META_FILE)
    return child, here


def test_nan_and_inf_in_meta_are_written_as_null_by_the_child_and_here(tmp_path):
    meta = {"metrics": {"val_loss": float("nan"), "train_loss": float("inf"), "acc": 0.5},
            "loop": {"latest": [float("-inf"), 1.0]}}
    child, here = _meta_written_by_the_child_and_here(tmp_path, meta)
    for written in (child, here):
        assert written["metrics"] == {"val_loss": None, "train_loss": None, "acc": 0.5}
        assert written["loop"] == {"latest": [None, 1.0]}
    assert meta["metrics"]["val_loss"] != meta["metrics"]["val_loss"]    # the caller's is kept


def test_arrays_in_meta_travel_with_the_files_and_are_encoded_as_here(tmp_path):
    """A language model's carried state sits in meta as arrays: the child gets them from the
    shared file and writes meta.json as a save in this process does (dtype, shape, base64),
    and they read back bit for bit."""
    from trainer_cli.run.recurrent import CarriedState

    state = [np.arange(6, dtype=np.float32).reshape(2, 3) / 7, np.array([np.nan, -0.0, 1e300])]
    child, here = _meta_written_by_the_child_and_here(
        tmp_path, {"loop": {"carried": {"0": state}, "step": 1}})
    assert child["loop"] == here["loop"]
    entries = child["loop"]["carried"]["0"]
    assert [(e["dtype"], e["shape"]) for e in entries] == [("float32", [2, 3]), ("float64", [3])]
    carried = CarriedState(SimpleNamespace(begin_state=lambda batch_size, ctx=None: []))
    carried.set_state(child["loop"]["carried"])
    for read, a in zip(carried.get_state()["0"], state):
        assert read.dtype == a.dtype and read.tobytes() == a.tobytes()


def test_a_shared_file_used_again_holds_each_saves_own_values(tmp_path):
    """Saves one after another reuse the shared files and their arrays' places: every
    checkpoint holds the values handed over for it, also when a longer request moves the
    arrays further into the file."""
    run_dir = tmp_path / "run"
    (run_dir / layout.CHECKPOINTS).mkdir(parents=True)
    writer = SaveProcess()
    paths = []
    try:
        for step in range(1, 7):
            meta = {"epoch": step, "note": "x" * (6000 if step >= 4 else 10)}
            writer.start(run_dir, step, _two_saves(step), meta, keep_last=10)
            paths.append(writer.wait())
    finally:
        writer.close()
    for step, path in enumerate(paths, 1):
        layout.verify_checkpoint(path)
        assert _strict_json(path / layout.META_FILE)["epoch"] == step
        for name, arrays in _two_saves(step).items():
            with np.load(path / name, allow_pickle=False) as z:
                for member, a in arrays.items():
                    assert np.array_equal(z[member], a)
